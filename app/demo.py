"""``reckon demo``: the whole flow on the embedded defaults, from raw events to a signed-off-ready
report, in a few minutes on a laptop.

1. generate a landing directory for one UTC day D (app.generate: 4 partitions, a slow one,
   an idle one, heavy-tailed delays, duplicates, malformed lines, future-dated events);
2. stream it (spark.stream.run_stream, available-now, default window/lateness/allowed_lateness, the
   manifest's partitions as the expected ones): provisional totals, late side output,
   quarantine, watermark progress;
3. run the nightly DAG on a real Airflow (app.airflow_local: scheduler, dag-processor,
   triggerer and api-server on loopback, LocalExecutor, Airflow's default settings): D is
   yesterday, the last complete UTC day, so unpausing the DAG makes the scheduler start D's
   run by itself, as on the first night of a deployment; with the default lookback it also
   processes the day before, which has no events. Wait for the watermark, compact, replay,
   audit, check, report;
4. print a summary whose every figure is read back from the warehouse tables and the report
   database (small aggregates), then write it as JSON beside the report. Money is per
   currency: one headline line per currency, amounts in the currency's own digits, never
   added across currencies (event counts are, on a line of their own).

How the timeline is chosen. The nightly run may only start once the stream's watermark
passed the end of D (+ allowed_lateness): the events must therefore run a little past midnight. The
demo places the events in the last minutes of D and a short tail on D+1 (at least 60 s,
10 % of the span): every partition then carries the watermark well past ``end(D) + L + G``,
while keeping the number of windows (and the run time) small. The span is
``max(600 s, events / 200 per s)``: 200 events per second of event time is the generator's
default rate, and a floor of 10 minutes keeps small demos meaningful (the idle partition's
silence of 15 % of the span is then longer than the 60 s idle timeout, so the idle rule is
exercised). Micro-batches: late events only exist when the watermark moves between batches,
so the landing is cut into 6 to 8 files read one per trigger (one per 15,000 events); at
the default 120,000 events each batch then covers about 75 s of event time and the heavy
delay tail produces late events in every batch after the first, which the audit must explain
exactly. A micro-batch costs seconds on 2 cores, much of it the fixed cost of its Delta
commits; fewer, larger batches would be faster but would hide lateness. Most of the demo's
time is the nightly DAG run by a real Airflow scheduler (the README has measured figures).
"""

from __future__ import annotations

import csv
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.generate import GeneratorConfig, GeneratorManifest, generate_landing
from reckon.config import Settings
from reckon.errors import ReckonError, UsageError, invalid
from reckon.money import format_money, quantize_to_currency
from reckon.timeutil import MICROS_PER_SECOND, day_bounds, format_duration, format_micros
from storage.landing import MANIFEST_NAME

__all__ = ["DEMO_DAY", "CurrencyFigures", "DemoSummary", "demo_generator_config",
           "last_complete_day", "read_summary", "run_demo", "save_summary"]

DEMO_DAY = date(2026, 1, 1)
MIN_EVENTS = 1_000
_RATE = 200.0                  # events per second of event time (the generator's default)
_MIN_SPAN_S = 600
_MIN_TAIL_S = 60
_TAIL_SHARE = 0.10
_MIN_BATCHES, _MAX_BATCHES, _EVENTS_PER_BATCH = 6, 8, 15_000
_DEMO = "_demo"  # <warehouse>/_demo/landing (only event files) and _demo/manifest.json
_FILE_TIME_BASE = 1_800_000_000  # seconds; file mtimes only fix the arrival order of files


def last_complete_day(now: datetime | None = None) -> date:
    """The demo's day: yesterday in UTC, the day the scheduler's first run processes."""
    return ((now or datetime.now(UTC)).astimezone(UTC) - timedelta(days=1)).date()


def demo_generator_config(events: int, day: date = DEMO_DAY, seed: int = 7) -> GeneratorConfig:
    """The generator settings of the demo day (see the module docstring for why)."""
    if events < MIN_EVENTS:
        raise invalid("--events", events, f"at least {MIN_EVENTS} events")
    span_s = max(_MIN_SPAN_S, events / _RATE)
    tail_s = max(_MIN_TAIL_S, span_s * _TAIL_SHARE)
    _, end = day_bounds(day)
    start = end - round((span_s - tail_s) * MICROS_PER_SECOND)
    batches = min(_MAX_BATCHES, max(_MIN_BATCHES, events // _EVENTS_PER_BATCH))
    lines_per_file = max(1, math.ceil(events * 1.02 / batches))  # + ~1 % duplicates
    return GeneratorConfig(events=events, rate=events / span_s, start=format_micros(start),
                           lines_per_file=lines_per_file, seed=seed)


_MEASURES = ("provisional", "canonical", "gap", "late", "duplicate", "residual")


@dataclass(frozen=True)
class CurrencyFigures:
    """One currency's figures of the demo day. Amounts are exact decimal text with the
    currency's own digits; ``gap = canonical - provisional``, ``residual = gap - late +
    duplicate`` (zero on this data)."""

    currency: str
    provisional_amount: str
    provisional_count: int
    canonical_amount: str
    canonical_count: int
    gap_amount: str
    gap_count: int
    late_amount: str
    late_count: int
    duplicate_amount: str
    duplicate_count: int
    residual_amount: str
    residual_count: int

    @property
    def late_share_of_gap(self) -> str:
        gap = Decimal(self.gap_amount)
        if gap == 0:
            return "no gap"
        return f"{Decimal(self.late_amount) / gap * 100:.1f}% of the gap"

    def line(self) -> str:
        """The currency's headline, every amount in it."""
        def money(name: str) -> str:
            return format_money(Decimal(getattr(self, f"{name}_amount")), self.currency)

        return (f"  {self.currency}  provisional {money('provisional')}, canonical "
                f"{money('canonical')}, gap {money('gap')} = late {money('late')} "
                f"({self.late_share_of_gap}) - duplicates {money('duplicate')} + residual "
                f"{money('residual')}")


@dataclass(frozen=True)
class DemoSummary:
    """What the demo shows, every figure read from the warehouse or the report DB.

    Money is per currency (``currencies``: one CurrencyFigures each, by code); the ``*_count``
    fields are event counts over every currency (counts may be added, amounts never).
    ``unexplained`` counts UNEXPLAINED and MISSING_* rows of the reconciliation.
    """

    day: str
    events_generated: int
    stream_batches: int
    stream_watermark: str
    provisional_count: int
    canonical_count: int
    gap_count: int
    late_count: int
    duplicate_count: int
    residual_count: int
    currencies: list[CurrencyFigures]
    status_counts: dict[str, int]
    unexplained: int
    late_events_table: int
    configured_bound: str
    recommended_bound: str | None
    target_completeness: str
    quarantined: int
    quarantined_expected: int
    audit_run_id: str
    check_success: bool | None
    report_html: str
    report_pdf: str
    data_docs: str
    dag_state: str
    task_states: dict[str, str]
    stage_seconds: dict[str, float] = field(default_factory=dict)
    check_verdict: str = ""  # as recorded with the check run (reckon.quality_verdict)
    # the nightly run on Airflow: each task's seconds as Airflow recorded them (its last try,
    # reschedules of the sensor included) and the run's, from its start to its end
    task_seconds: dict[str, float] = field(default_factory=dict)
    run_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(self.status_counts.items()))
        quality = self.check_verdict or ("-" if self.check_success is None
                                         else "passed" if self.check_success else "FAILED")
        lines = [
            f"reckon demo: UTC day {self.day}, {self.events_generated:,} events generated, "
            f"{self.stream_batches} stream batches, watermark {self.stream_watermark}",
            f"  events (all currencies) provisional {self.provisional_count:,}, canonical "
            f"{self.canonical_count:,}, gap {self.gap_count:,} = late {self.late_count:,} "
            f"({self.late_events_table:,} rows in late_events) - duplicate over-count "
            f"{self.duplicate_count:,} + residual {self.residual_count:,}",
            *(c.line() for c in self.currencies),
            f"  unexplained breaks    {self.unexplained:>10,}   ({statuses})",
            f"  watermark bound       configured {self.configured_bound}, recommended "
            f"{self.recommended_bound or 'none reaches the target'} for "
            f"{Decimal(self.target_completeness) * 100:g}% completeness",
            f"  quarantined lines     {self.quarantined:>10,}   (injected by the generator: "
            f"{self.quarantined_expected})",
            f"  data quality          {quality}",
            f"  report                HTML {self.report_html or '-'}",
            f"                        PDF  {self.report_pdf or '-'}",
            f"  Data Docs             {self.data_docs or '-'}",
            f"  audit run             {self.audit_run_id or '-'}",
            *([f"  nightly run           {self.run_seconds:.0f} s on Airflow ("
               + ", ".join(f"{t} {v:.0f} s" for t, v in self.task_seconds.items()) + ")"]
              if self.run_seconds is not None else []),
        ]
        return "\n".join(lines)


class _Clock:
    """Progress lines: each stage with the seconds since the demo started."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.stages: dict[str, float] = {}
        self._stage: tuple[str, float] | None = None

    def say(self, text: str) -> None:
        print(f"[demo {time.monotonic() - self.t0:6.1f}s] {text}", flush=True)

    def start(self, stage: str, text: str) -> None:
        self.stop()
        self._stage = (stage, time.monotonic())
        self.say(text)

    def stop(self) -> None:
        if self._stage is not None:
            name, began = self._stage
            self.stages[name] = round(time.monotonic() - began, 1)
            self._stage = None


def _landing_dir(settings: Settings) -> Path:
    return settings.warehouse_path / _DEMO / "landing"


def _landing(settings: Settings, cfg: GeneratorConfig, clock: _Clock) -> GeneratorManifest:
    """Generate the landing (or reuse the one a previous demo wrote with the same settings).

    The manifest is moved out of the landing folder: the stream reads every file there, and
    the manifest is not an event file. File times are set in file-name order, because the
    file source takes files in modification-time order (arrival order = file order)."""
    folder = _landing_dir(settings)
    manifest_file = folder.parent / "manifest.json"
    wanted = GeneratorManifest(config=asdict(cfg)).config
    if manifest_file.is_file():
        stored = json.loads(manifest_file.read_text())
        if json.loads(json.dumps(wanted)) != stored.get("config"):
            raise UsageError(f"--warehouse {settings.warehouse_path} holds a demo generated with "
                             f"other settings ({manifest_file}); use a new --warehouse for "
                             f"--events {cfg.events}")
        clock.say(f"reusing the landing generated earlier in {folder}")
        return GeneratorManifest(**stored)
    manifest = generate_landing(folder, cfg)
    for i, name in enumerate(manifest.files):
        os.utime(folder / name, (_FILE_TIME_BASE + i, _FILE_TIME_BASE + i))
    (folder / MANIFEST_NAME).replace(manifest_file)
    return manifest


def _amount(value: Any, code: str) -> str:
    """Exact decimal text with ``code``'s own digits (0 for a missing sum)."""
    return str(quantize_to_currency(Decimal(0 if value is None else value), code))


def _currency_figures(code: str, totals: dict[str, dict[str, tuple[Any, Any]]],
                      sums: dict[str, dict[str, Any]]) -> CurrencyFigures:
    """One currency's figures from the per-currency table sums and reconciliation sums."""
    values: dict[str, Any] = {}
    for name in _MEASURES[:2]:
        amount, count = totals[name].get(code, (None, None))
        values[f"{name}_amount"], values[f"{name}_count"] = _amount(amount, code), int(count or 0)
    recon = sums.get(code, {})
    for name in _MEASURES[2:]:
        values[f"{name}_amount"] = _amount(recon.get(f"{name}_amount"), code)
        values[f"{name}_count"] = int(recon.get(f"{name}_count") or 0)
    return CurrencyFigures(currency=code, **values)


def read_summary(spark: Any, settings: Settings, day: date, manifest: GeneratorManifest,
                 dag_state: str = "", task_states: dict[str, str] | None = None,
                 stage_seconds: dict[str, float] | None = None,
                 recommended_bound: str | None = None) -> DemoSummary:
    """Every figure of the summary from the tables and the report DB (small aggregates)."""
    from pyspark.sql import functions as F

    from reckon.reconcile import UNEXPLAINED_STATUSES
    from reports.db.repository import ReportDB
    from spark import tables as tb
    from spark.progress import latest_watermark
    from spark.provisional import read_day, table_version

    wh = settings.warehouse_path
    in_day = F.col("window_date") == F.lit(day)

    def totals(name: str) -> dict[str, tuple[Any, Any]]:
        """currency -> (amount, events) of a totals table's day: sums per currency only."""
        if table_version(wh, name) is None:
            return {}
        return {r["currency"]: (r["a"], r["n"]) for r in (
            read_day(spark, wh, name, settings.event_time_rules(), day).filter(in_day)
            .groupBy("currency")
            .agg(F.sum("total_amount").alias("a"), F.sum("event_count").alias("n")).collect())}

    with ReportDB.from_settings(settings) as db:
        audit = db.current_audit_run(day)
        check = db.current_check_run(day)
        report = db.current_report(day)
    run_id = audit.run_id if audit else ""
    recon = (tb.read_table(spark, wh, tb.RECONCILIATION).filter(in_day)
             .filter(F.col("audit_run_id") == F.lit(run_id))
             if tb.table_exists(wh, tb.RECONCILIATION) else None)
    sums: dict[str, dict[str, Any]] = {}
    status_counts: dict[str, int] = {}
    if recon is not None:
        measures = [f"{name}_{kind}" for name in _MEASURES[2:] for kind in ("amount", "count")]
        sums = {r["currency"]: r.asDict() for r in recon.groupBy("currency")
                .agg(*[F.sum(m).alias(m) for m in measures]).collect()}
        status_counts = {r["status"]: int(r["n"]) for r in
                         recon.groupBy("status").agg(F.count(F.lit(1)).alias("n")).collect()}
    unexplained = sum(status_counts.get(str(s), 0) for s in UNEXPLAINED_STATUSES)
    late_rows = (tb.read_table(spark, wh, tb.LATE_EVENTS).filter(in_day).count()
                 if tb.table_exists(wh, tb.LATE_EVENTS) else 0)
    quarantined = (tb.read_table(spark, wh, tb.QUARANTINE)
                   .filter(F.col("origin") == F.lit("stream")).count()
                   if tb.table_exists(wh, tb.QUARANTINE) else 0)
    batches = (tb.read_table(spark, wh, tb.WATERMARK_PROGRESS).count()
               if tb.table_exists(wh, tb.WATERMARK_PROGRESS) else 0)
    money = {"provisional": totals(tb.PROVISIONAL_TOTALS),
             "canonical": totals(tb.CANONICAL_TOTALS)}
    codes = sorted(set(money["provisional"]) | set(money["canonical"]) | set(sums))
    figures = [_currency_figures(code, money, sums) for code in codes]
    counts = {name: sum(getattr(f, f"{name}_count") for f in figures) for name in _MEASURES}
    rules = settings.event_time_rules()
    return DemoSummary(
        day=day.isoformat(), events_generated=int(str(manifest.config.get("events", 0))),
        stream_batches=batches,
        stream_watermark=format_micros(latest_watermark(spark, wh)),
        **{f"{name}_count": n for name, n in counts.items()}, currencies=figures,
        status_counts=status_counts, unexplained=unexplained, late_events_table=late_rows,
        configured_bound=format_duration(rules.watermark.watermark_bound),
        recommended_bound=recommended_bound,
        target_completeness=str(settings.target_completeness),
        quarantined=quarantined, quarantined_expected=manifest.quarantined,
        audit_run_id=run_id, check_success=None if check is None else bool(check.success),
        report_html=report.html_path if report else "",
        report_pdf=report.pdf_path if report else "",
        data_docs=check.data_docs_path if check else "",
        check_verdict=check.verdict if check else "",
        dag_state=dag_state, task_states=dict(task_states or {}),
        stage_seconds=dict(stage_seconds or {}))


def _recommended_lateness(spark: Any, settings: Settings, day: date) -> str | None:
    """The smallest lateness bound reaching the target completeness for ``day``: the one the
    DAG's report recorded (its lateness_curve.csv), or, without a report, the analysis run
    here on the day's event log (the same function the report uses)."""
    from audits.bound_whatif import analyze_day
    from reports.db.repository import ReportDB

    with ReportDB.from_settings(settings) as db:
        report = db.current_report(day)
    curve = next((Path(p) for p in (report.csv_paths if report else [])
                  if Path(p).name == "lateness_curve.csv" and Path(p).is_file()), None)
    if curve is not None:
        with curve.open(newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["recommended"] == "true"]
        return (format_duration(int(Decimal(rows[0]["bound_seconds"]) * MICROS_PER_SECOND))
                if rows else None)
    analysis = analyze_day(spark, settings.whatif_config(), day)
    return None if analysis.recommended is None else format_duration(analysis.recommended.bound)


def run_demo(settings: Settings, *, events: int, out: str | None = None,
             day: date | None = None) -> DemoSummary:
    """Generate, stream, run the nightly DAG on a real Airflow for ``day`` (default: the last
    complete UTC day, which the scheduler runs by itself), and read the summary back."""
    from spark.batch_metrics import BatchMetrics
    from spark.session import get_spark
    from spark.sources import StreamSource
    from spark.stream import run_stream

    clock = _Clock()
    day = day or last_complete_day()
    cfg = demo_generator_config(events, day)
    clock.start("generate", f"generating {events:,} events for UTC day {day} into "
                            f"{_landing_dir(settings)}")
    settings.warehouse_path.mkdir(parents=True, exist_ok=True)
    manifest = _landing(settings, cfg, clock)
    clock.say(f"  {manifest.lines:,} lines in {len(manifest.files)} files: "
              f"{manifest.duplicates} duplicates, {manifest.future_dated} future-dated, "
              f"{sum(manifest.malformed.values())} malformed; partition "
              f"{manifest.slow_partition} slow, partition {manifest.idle_partition} idle for "
              "a stretch; events from "
              f"{manifest.event_time_min} to {manifest.event_time_max}")
    settings = settings.with_overrides(
        expected_partitions=tuple(manifest.expected_partitions), max_files_per_trigger=1)

    clock.start("stream", "starting Spark and streaming the landing (available-now, one file "
                          "per micro-batch)")
    spark = get_spark(settings, app_name="reckon-demo")

    def on_batch(m: BatchMetrics) -> None:
        clock.say(f"  stream batch {m.batch_id + 1}/{len(manifest.files)}: {m.rows_in} rows, "
                  f"{m.late} late, {m.duplicates} duplicates, {m.quarantined} quarantined; "
                  f"watermark {format_micros(m.watermark)} ({m.duration_seconds:.1f}s)")
        if os.environ.get("RECKON_PROFILE"):
            clock.say("    steps: " + ", ".join(f"{k} {v:.2f}s" for k, v in m.step_seconds.items()))

    run_stream(spark, settings, StreamSource(landing=str(_landing_dir(settings))),
               available_now=True, on_batch=on_batch)

    clock.start("airflow", "starting Airflow (scheduler, dag-processor, triggerer, api-server "
                           "on 127.0.0.1) with its default settings")
    state, task_states, timings = _nightly_on_airflow(settings, day, out, clock)

    clock.start("summary", "reading the summary back from the warehouse and the report DB")
    recommended = _recommended_lateness(spark, settings, day)
    summary = read_summary(spark, settings, day, manifest, state, task_states,
                           recommended_bound=recommended)
    clock.stop()
    clock.say("done")
    return replace(summary, stage_seconds=dict(clock.stages), task_seconds=timings.tasks,
                   run_seconds=timings.run)


_RUN_TIMEOUT_S = 3_600.0


@dataclass(frozen=True)
class RunTimings:
    """How long a nightly run took on Airflow, as Airflow recorded it: each task's seconds,
    in the DAG's order, and the run's from its start to its end."""

    tasks: dict[str, float]
    run: float | None


def run_timings(af: Any, dag_id: str, run_id: str) -> RunTimings:
    """The run's timings from Airflow's REST API (task instances' ``duration``, the run's
    ``start_date`` and ``end_date``): what the demo prints and the nightly benchmark records."""
    order = {task: i for i, task in enumerate(STEP_ORDER)}
    tasks = sorted(af.task_instances(dag_id, run_id),
                   key=lambda ti: (order.get(ti["task_id"], len(order)), ti["task_id"]))
    run = af.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")
    start, end = run.get("start_date"), run.get("end_date")
    seconds = None if not (start and end) else (
        datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    return RunTimings(tasks={ti["task_id"]: round(float(ti.get("duration") or 0.0), 1)
                             for ti in tasks}, run=None if seconds is None else round(seconds, 1))


#: the nightly DAG's tasks in the order they run (what the timings are listed in)
STEP_ORDER = ("wait_for_watermark", "compact", "replay", "audit", "check", "report",
              "quality_gate")


def _nightly_on_airflow(settings: Settings, day: date, out: str | None,
                        clock: _Clock) -> tuple[str, dict[str, str], RunTimings]:
    """The nightly run of ``day`` on a real local Airflow, in a fresh home under the warehouse
    (``_airflow``; its process and task logs stay there). Yesterday's run is the one the
    scheduler starts when the DAG is unpaused; another day (or a run with ``out``) is
    triggered with that day. Returns the run's state, its task states and its timings; raises
    ReckonError with the failed tasks' log tails when it does not succeed."""
    import shutil

    from app.airflow_env import DAG_ID, logical_date_for_day, settings_env
    from app.airflow_local import start_local_airflow

    home = settings.warehouse_path / "_airflow"
    shutil.rmtree(home, ignore_errors=True)  # a new deployment: the scheduler starts D's run
    with start_local_airflow(home, settings_env(settings)) as af:
        clock.say(f"  Airflow is up at {af.base_url} (user {af.username}, password in "
                  f"{home / 'passwords.json'}); the DAG is unpaused")
        run_id = _scheduled_run(af, DAG_ID, day) if day == last_complete_day() and not out \
            else af.trigger(DAG_ID, logical_date_for_day(day),
                            conf={"report_out": str(Path(out).resolve())} if out else {})
        clock.say(f"  run {run_id} processes {day} and, with the default lookback, the day "
                  "before")
        state = _follow(af, DAG_ID, run_id, clock)
        task_states = af.task_states(DAG_ID, run_id)
        timings = run_timings(af, DAG_ID, run_id)
        if state != "success":
            tails = "\n".join(f"--- {task}:\n{af.task_log(DAG_ID, run_id, task)[-2000:]}"
                              for task, s in task_states.items() if s == "failed")
            raise ReckonError(f"the nightly run {run_id} of {day} ended {state} ({task_states})"
                              f"; logs in {home / 'logs'}\n{tails}")
    return state, task_states, timings


def _scheduled_run(af: Any, dag_id: str, day: date, timeout: float = 120.0) -> str:
    """The run the scheduler created for ``day`` after the unpause (its logical date)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run in af.runs(dag_id, "scheduled"):
            if str(run.get("logical_date") or "")[:10] == day.isoformat():
                return str(run["dag_run_id"])
        af.check_alive()
        time.sleep(2)
    raise ReckonError(f"the scheduler started no run of {dag_id} for {day} within "
                      f"{timeout:.0f}s of the unpause; see {af.home / 'process-logs'}")


_HEARTBEAT_S = 60.0


def _follow(af: Any, dag_id: str, run_id: str, clock: _Clock) -> str:
    """Poll the run until it ends, saying when each task starts, and every minute which tasks
    are still running (a replay of minutes on a busy machine must not look like a hang);
    return its state."""
    deadline, said = time.monotonic() + _RUN_TIMEOUT_S, set()
    quiet_since = time.monotonic()
    while True:
        state = af.run_state(dag_id, run_id)
        states = af.task_states(dag_id, run_id)
        for task, task_state in states.items():
            if task_state not in ("none", "scheduled", "queued") and task not in said:
                said.add(task)
                clock.say(f"  task {task} started")
                quiet_since = time.monotonic()
        if state in ("success", "failed"):
            return str(state)
        running = sorted(t for t, s in states.items() if s in ("running", "up_for_retry",
                                                                "up_for_reschedule"))
        if running and time.monotonic() - quiet_since >= _HEARTBEAT_S:
            clock.say(f"  still running: {', '.join(running)}")
            quiet_since = time.monotonic()
        af.check_alive()
        if time.monotonic() > deadline:
            raise ReckonError(f"the nightly run {run_id} is still {state} after "
                              f"{_RUN_TIMEOUT_S:.0f}s: {af.task_states(dag_id, run_id)}")
        time.sleep(2)


def save_summary(summary: DemoSummary, folder: Path) -> Path:
    """Write ``summary`` as ``demo-summary-<day>.json`` in ``folder`` (made if missing), beside
    the day's report, and return its path: the figures a later run is compared against."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"demo-summary-{summary.day}.json"
    path.write_text(json.dumps(summary.to_dict(), indent=2, sort_keys=True) + "\n")
    return path
