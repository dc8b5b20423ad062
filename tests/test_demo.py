"""``reckon demo``: the timeline it generates, its headline figures at the default scale pinned
through the pure reference (fast tier: the README's table), and the whole flow at a small
scale with every figure of its summary checked against the tables. It is also the default
tier's real run of the nightly DAG: its canonical totals are checked against the pure
reference."""

from __future__ import annotations

import json
import math
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.demo import DEMO_DAY, CurrencyFigures, DemoSummary, demo_generator_config
from app.generate import generate_landing
from reckon.errors import UsageError
from reckon.money import minor_unit, quantize_to_currency
from reckon.timeutil import MICROS_PER_SECOND, day_bounds, parse_duration, parse_timestamp


def test_the_demo_day_ends_inside_the_events_so_the_watermark_can_close_it(tmp_path):
    manifest = generate_landing(tmp_path / "landing", demo_generator_config(5_000))
    d0, d1 = day_bounds(DEMO_DAY)
    first = parse_timestamp(manifest.event_time_min)
    last = parse_timestamp(manifest.event_time_max)
    assert d0 <= first < d1
    # the tail on the next day is far longer than lateness + allowed_lateness + the slow skew
    assert last - d1 > 50 * MICROS_PER_SECOND
    assert (last - first) >= 590 * MICROS_PER_SECOND
    assert 6 <= len(manifest.files) <= 8
    assert manifest.quarantined > 0 and manifest.duplicates > 0
    assert manifest.slow_partition is not None and manifest.idle_partition is not None


def test_default_scale_stays_within_the_batch_budget():
    from app.cli import build_parser

    events = build_parser().parse_args(["demo"]).events
    cfg = demo_generator_config(events)
    span_s = cfg.events / cfg.rate
    assert span_s == pytest.approx(600)  # the floor: ten minutes of event time
    assert math.ceil(cfg.events * 1.02 / cfg.lines_per_file) == 8
    start = parse_timestamp(cfg.start)
    assert day_bounds(DEMO_DAY)[1] - start == 540 * MICROS_PER_SECOND  # 60 s on the next day


def test_too_few_events_is_rejected_with_the_argument_named():
    with pytest.raises(UsageError, match="--events=10 is not valid: at least 1000 events"):
        demo_generator_config(10)


def manifest_currencies(wh: Path) -> list[str]:
    return json.loads((wh / "_demo" / "manifest.json").read_text())["config"]["currencies"]


def _figures(code: str, amounts: str, counts: tuple[int, ...]) -> CurrencyFigures:
    names = ("provisional", "canonical", "gap", "late", "duplicate", "residual")
    values: dict[str, Any] = {f"{n}_amount": a
                              for n, a in zip(names, amounts.split(), strict=True)}
    values |= {f"{n}_count": c for n, c in zip(names, counts, strict=True)}
    return CurrencyFigures(currency=code, **values)


def test_the_summary_prints_one_headline_line_per_currency_and_never_adds_them():
    summary = DemoSummary(
        day="2026-01-01", events_generated=5000, stream_batches=6,
        stream_watermark="2026-01-02T00:01:00Z", provisional_count=4900, canonical_count=4960,
        gap_count=60, late_count=61, duplicate_count=1, residual_count=0,
        currencies=[_figures("EUR", "1234.50 1247.00 12.50 13.00 0.50 0.00", (2000, 2020, 20,
                                                                             21, 1, 0)),
                    _figures("JPY", "321000 322200 1200 1200 0 0", (1500, 1520, 20, 20, 0, 0)),
                    _figures("KWD", "10.500 10.625 0.125 0.125 0.000 0.000",
                             (1400, 1420, 20, 20, 0, 0))],
        status_counts={"EXPLAINED": 30, "MATCHED": 300}, unexplained=0, late_events_table=61,
        configured_bound="3s", recommended_bound="5s", target_completeness="0.999",
        quarantined=10, quarantined_expected=10, audit_run_id="audit-1", check_success=True,
        report_html="", report_pdf="", data_docs="", dag_state="success", task_states={})
    text = summary.render()
    lines = text.splitlines()
    assert lines[1] == ("  events (all currencies) provisional 4,900, canonical 4,960, gap 60 = "
                        "late 61 (61 rows in late_events) - duplicate over-count 1 + residual 0")
    assert lines[2:5] == [
        "  EUR  provisional EUR 1,234.50, canonical EUR 1,247.00, gap EUR 12.50 = late "
        "EUR 13.00 (104.0% of the gap) - duplicates EUR 0.50 + residual EUR 0.00",
        "  JPY  provisional JPY 321,000, canonical JPY 322,200, gap JPY 1,200 = late JPY 1,200 "
        "(100.0% of the gap) - duplicates JPY 0 + residual JPY 0",
        "  KWD  provisional KWD 10.500, canonical KWD 10.625, gap KWD 0.125 = late KWD 0.125 "
        "(100.0% of the gap) - duplicates KWD 0.000 + residual KWD 0.000"]
    for total in ("322,244.5", "322244.5", "1,212.625", "1212.625", "332,245"):
        assert total not in text  # no sum of two currencies
    assert json.loads(json.dumps(summary.to_dict()))["currencies"][1]["gap_amount"] == "1200"


#: The demo's headline figures at its default 120,000 events, as the README prints them:
#: currency -> (provisional, canonical, gap = late events); 121 late events, 108 EXPLAINED
#: and 3,562 MATCHED rows, 8 micro-batches, 289 quarantined lines.
README_FIGURES = {
    "EUR": ("1831754.33", "1833957.56", "2203.23"),
    "GBP": ("383228.94", "383632.77", "403.83"),
    "JPY": ("77863835", "77967051", "103216"),
    "KWD": ("52815.265", "52869.189", "53.924"),
    "USD": ("1299572.70", "1301200.21", "1627.51"),
}


def _landing_batches(folder: Path, files: list[str]) -> tuple[list[list[Any]], int]:
    """The demo's micro-batches (one landing file each, as ``max_files_per_trigger=1`` reads
    them) as reference events, and how many lines no event could be read from (broken JSON,
    a missing field, an amount or a time that does not parse or is out of range)."""
    from app.settings import load_settings
    from reckon.reference import Event

    settings, unreadable, batches = load_settings(env={}), 0, []
    for name in files:
        batch = []
        for offset, line in enumerate((folder / name).read_text().splitlines()):
            try:
                d = json.loads(line)
                amount = Decimal(d["amount"])
                if not (amount.is_finite()
                        and settings.amount_min <= amount <= settings.amount_max):
                    raise ValueError(amount)
                batch.append(Event(d["event_id"], d["key"], amount,
                                   parse_timestamp(d["event_time"]),
                                   parse_timestamp(d["arrival_time"]), int(d["partition"]),
                                   offset, d["source"], d["currency"], name))
            except (ValueError, KeyError, TypeError, ArithmeticError, UsageError):
                unreadable += 1
        batches.append(batch)
    return batches, unreadable


def test_the_demos_figures_are_the_ones_the_readme_prints(tmp_path):
    """The demo's data comes from a fixed seed, so its figures are known: the README prints
    them. This runs the demo's landing through the pure reference (the stream's and the
    nightly audit's rules on Python lists, which the Spark tier holds the engines to), one
    file per micro-batch as the demo streams it, and pins every headline figure: a change to
    the generator or to a rule that moves one fails here, in the fast tier, not after a
    six-minute `make demo`."""
    from collections import Counter

    from app.settings import load_settings
    from reckon.reconcile import ReconStatus
    from reckon.reference import reconcile_outcome, stream_outcome

    manifest = generate_landing(tmp_path / "landing", demo_generator_config(120_000))
    batches, unreadable = _landing_batches(tmp_path / "landing", manifest.files)
    rules = load_settings(env={}, expected_partitions=tuple(manifest.expected_partitions)
                          ).event_time_rules()
    out = stream_outcome(batches, rules)
    # every injected fault is quarantined, and nothing else
    assert unreadable + len(out.quarantined) == manifest.quarantined == 289
    assert len(batches) == len(out.watermarks) == 8
    d0, d1 = day_bounds(DEMO_DAY)
    rows = {k: r for k, r in reconcile_outcome(out, [e for b in batches for e in b],
                                               rules).items() if d0 <= k[0].start < d1}
    sums: dict[str, dict[str, Decimal]] = {}
    for (_window, _key, code), r in rows.items():
        cell = sums.setdefault(code, dict.fromkeys(("provisional", "canonical", "gap", "late",
                                                    "duplicate", "residual"), Decimal(0)))
        for name in cell:
            side = getattr(r, name)
            cell[name] += side[0] if side else 0
    assert {code: tuple(str(quantize_to_currency(c[n], code))
                        for n in ("provisional", "canonical", "gap"))
            for code, c in sums.items()} == README_FIGURES
    assert all(c["gap"] == c["late"] and c["duplicate"] == c["residual"] == 0
               for c in sums.values())
    assert sum(1 for r in out.late if d0 <= r.window.start < d1) == 121
    assert Counter(r.status for r in rows.values()) == {ReconStatus.EXPLAINED: 108,
                                                        ReconStatus.MATCHED: 3562}
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    for code, figures in README_FIGURES.items():
        cells = " | ".join(f"{Decimal(f):,}" for f in figures)
        assert f"| {code} | {cells} |" in readme, code


class _SlowRun:
    """A nightly run whose replay runs three minutes of a fake clock, polled every 2 s."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock

    def run_state(self, _dag: str, _run: str) -> str:
        return "success" if self.clock[0] >= 180 else "running"

    def task_states(self, _dag: str, _run: str) -> dict[str, str]:
        done = self.clock[0] >= 180
        return {"compact": "success", "replay": "success" if done else "running",
                "audit": "success" if done else "none"}

    def check_alive(self) -> None:
        pass


def test_a_long_task_prints_a_line_every_minute_so_the_demo_never_looks_hung(monkeypatch,
                                                                            capsys):
    import app.demo as demo

    now = [0.0]
    monkeypatch.setattr(demo.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(demo.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    assert demo._follow(_SlowRun(now), "reckon_nightly", "run-1", demo._Clock()) == "success"
    lines = capsys.readouterr().out.splitlines()
    assert sum("still running: replay" in line for line in lines) == 2  # at 60 s and 120 s
    assert any("task replay started" in line for line in lines)


@pytest.mark.airflow
@pytest.mark.slow
def test_demo_end_to_end_summary_matches_the_tables(spark, tmp_path, capsys):
    from pyspark.sql import functions as F

    from app.cli import main
    from app.settings import load_settings
    from audits.bound_whatif import analyze_day
    from spark import tables as tb
    from tests.streamkit import canonical_rows, landing_reference_canonical
    from tests.test_dag import EXPECTED_UPSTREAM

    wh = tmp_path / "wh"
    assert main(["demo", "--warehouse", str(wh), "--events", "5000"]) == 0
    printed = capsys.readouterr().out
    for stage in ("generating", "stream batch 1/", "Airflow is up at http://127.0.0.1:",
                  "task wait_for_watermark started", "task compact started",
                  "task report started", "reading the summary back", "unexplained breaks"):
        assert stage in printed
    [summary_file] = (wh / "reports").glob("demo-summary-*.json")
    summary = json.loads(summary_file.read_text())
    DEMO_DAY = date.fromisoformat(summary["day"])  # yesterday, when the demo ran
    # the scheduler started the run itself on the unpause (its id names the interval's end)
    assert f"run scheduled__{DEMO_DAY + timedelta(days=1)}T00:00:00+00:00 processes " \
           f"{DEMO_DAY}" in printed
    # the default lookback took the day before too: no events, and every step said so
    quiet = DEMO_DAY - timedelta(days=1)
    [replay] = tb.read_table(spark, wh, tb.REPLAY_RUNS).filter(
        F.col("window_date") == quiet).collect()
    assert (replay.rows_read, replay.windows, replay.total_amounts) == (0, 0, {})
    from reports.db.repository import ReportDB
    with ReportDB(f"sqlite:///{wh / 'reports' / 'reckon.db'}") as db:
        quiet_run = db.current_audit_run(quiet)
        assert quiet_run is not None and (quiet_run.rows, quiet_run.currencies) == (0, ())
        assert db.current_check_run(quiet).success
        assert db.current_report(quiet) is not None
        # the audit the DAG ran told every break's story for the workbench: the late events
        # of each, by the partitions they came from, are the break's late count
        import sqlalchemy as sa

        from reports.db.models import BREAK_INPUTS, BREAK_STORIES
        demo_run = db.current_audit_run(DEMO_DAY)
        assert demo_run is not None
        breaks = {(b.window_start, b.key, b.currency): b for b in db.breaks(demo_run.run_id)}
        with db.engine.connect() as conn:
            stories = conn.execute(sa.select(BREAK_STORIES).where(
                BREAK_STORIES.c.run_id == demo_run.run_id)).mappings().all()
            inputs = conn.execute(sa.select(BREAK_INPUTS).where(
                BREAK_INPUTS.c.run_id == demo_run.run_id,
                BREAK_INPUTS.c.dimension == "partition")).mappings().all()
        assert breaks and {(s["window_start"], s["key"], s["currency"]) for s in stories} \
            == set(breaks)
        late_by_cell: dict = {}
        for i in inputs:
            cell = (i["window_start"], i["key"], i["currency"])
            late_by_cell[cell] = late_by_cell.get(cell, 0) + i["late_count"]
        assert {c: b.late_count for c, b in breaks.items() if b.late_count} == late_by_cell
        for s in stories:
            assert sum(e["fate"] == "late" for e in s["evidence"]) == \
                breaks[s["window_start"], s["key"], s["currency"]].late_count
    # task logs a person can read: nothing filed as an error (the JVM launcher's line about
    # incubator modules is on stdout), each step's one sentence, and no INFO chatter from
    # Great Expectations or font subsetting
    events = [json.loads(line) for log in (wh / "_airflow" / "logs").glob("dag_id=*/**/*.log")
              for line in log.read_text().splitlines() if line.startswith("{")]
    assert events
    errors = {e["event"] for e in events if e.get("level") == "error"}
    assert errors == set(), errors
    replayed = [str(e["event"]) for e in events
                if str(e.get("event", "")).startswith(f"reckon replay {DEMO_DAY}: ")]
    assert replayed and all(" events, totals " in line and " | event_log v" in line
                            for line in replayed), replayed
    chatty = [e for e in events if str(e.get("logger", "")).startswith(
        ("great_expectations", "fontTools")) and e.get("level") == "info"]
    assert chatty == []
    # every process the demo's Airflow started (components, workers, Spark JVMs) is gone
    from tests.test_airflow_scheduler import _processes_of_home
    assert _processes_of_home(wh / "_airflow") == []

    from spark.provisional import read_day
    from storage.spec_log import rules_in_force

    in_day = F.col("window_date") == F.lit(DEMO_DAY)

    def sums(name: str, amount: str = "total_amount", count: str = "event_count"):
        """currency -> (amount, events): summed per currency, never across them."""
        return {r["currency"]: (Decimal(r["a"] or 0), int(r["n"] or 0)) for r in (
            read_day(spark, wh, name, rules_in_force(wh), DEMO_DAY).filter(in_day)
            .groupBy("currency")
            .agg(F.sum(amount).alias("a"), F.sum(count).alias("n")).collect())}

    figures = {c["currency"]: c for c in summary["currencies"]}
    assert len(figures) > 1 and set(figures) <= set(manifest_currencies(wh))
    assert sums(tb.PROVISIONAL_TOTALS) == {
        code: (Decimal(c["provisional_amount"]), c["provisional_count"])
        for code, c in figures.items()}
    assert sums(tb.CANONICAL_TOTALS) == {
        code: (Decimal(c["canonical_amount"]), c["canonical_count"])
        for code, c in figures.items()}
    # the late side output, read straight from late_events, is what explains each gap
    late = (tb.read_table(spark, wh, tb.LATE_EVENTS).filter(in_day).groupBy("currency")
            .agg(F.sum("amount").alias("a"), F.count(F.lit(1)).alias("n")).collect())
    late_by = {r["currency"]: (Decimal(r["a"]), r["n"]) for r in late}
    for code, c in figures.items():
        places = minor_unit(code)  # every amount with exactly its currency's digits
        for name in ("provisional", "canonical", "gap", "late", "duplicate", "residual"):
            text = c[f"{name}_amount"]
            assert len(text.split(".")[1]) == places if places else "." not in text, text
        gap = Decimal(c["canonical_amount"]) - Decimal(c["provisional_amount"])
        assert Decimal(c["gap_amount"]) == gap
        assert c["gap_count"] == c["canonical_count"] - c["provisional_count"]
        assert (Decimal(c["late_amount"]), c["late_count"]) == late_by.get(code, (0, 0))
        assert Decimal(c["residual_amount"]) == 0 and c["residual_count"] == 0
        assert gap == Decimal(c["late_amount"]) - Decimal(c["duplicate_amount"])
        assert f"  {code}  provisional {code} " in printed  # one headline line per currency
    assert summary["late_events_table"] == sum(n for _, n in late_by.values()) \
        == summary["late_count"]
    assert summary["provisional_count"] == sum(c["provisional_count"] for c in figures.values())
    assert summary["residual_count"] == 0
    assert summary["unexplained"] == 0
    recon = tb.read_table(spark, wh, tb.RECONCILIATION).filter(in_day).filter(
        F.col("audit_run_id") == summary["audit_run_id"])
    assert {r["status"]: r["n"] for r in recon.groupBy("status").agg(
        F.count(F.lit(1)).alias("n")).collect()} == summary["status_counts"]
    stream_quarantine = tb.read_table(spark, wh, tb.QUARANTINE).filter(
        F.col("origin") == "stream").count()
    assert summary["quarantined"] == stream_quarantine == summary["quarantined_expected"]
    # the recommendation the report recorded is the lateness analysis of the day's event log
    manifest = json.loads((wh / "_demo" / "manifest.json").read_text())
    settings = load_settings(env={}, warehouse=str(wh),
                             expected_partitions=tuple(manifest["expected_partitions"]))
    analysis = analyze_day(spark, settings.whatif_config(), DEMO_DAY)
    assert analysis.recommended is not None
    assert parse_duration(summary["recommended_bound"]) == analysis.recommended.bound
    for path in (summary["report_html"], summary["report_pdf"], summary["data_docs"]):
        assert path and Path(path).is_file(), path
    assert summary["dag_state"] == "success"
    assert set(summary["task_states"].values()) == {"success"}
    assert set(summary["task_states"]) == set(EXPECTED_UPSTREAM)
    # the nightly run compacted the day the stream wrote in one or more files per batch
    day_log = tb.read_table(spark, wh, tb.EVENT_LOG).filter(F.col("event_date") == DEMO_DAY)
    assert len(day_log.inputFiles()) == 1
    # the nightly replay's canonical totals are the pure reference's over every landing line
    # the stream did not quarantine
    expected = landing_reference_canonical(spark, wh / "_demo" / "landing", settings, DEMO_DAY)
    assert len(expected) > 100  # the day has many windows
    assert canonical_rows(spark, settings, DEMO_DAY) == expected
    assert summary["stream_batches"] >= 6
    assert set(summary["stage_seconds"]) == {"generate", "stream", "airflow", "summary"}
    assert sum(summary["stage_seconds"].values()) < timedelta(minutes=30).total_seconds()
    # the nightly run's times as Airflow recorded them: every task, the run, the printed line
    assert set(summary["task_seconds"]) == set(EXPECTED_UPSTREAM)
    assert all(seconds > 0 for seconds in summary["task_seconds"].values())
    assert summary["run_seconds"] >= max(summary["task_seconds"].values())
    assert f"nightly run           {summary['run_seconds']:.0f} s on Airflow (wait_for_watermark " \
        in printed
