"""The nightly steps as plain functions: the CLI commands and the Airflow DAG call these and
nothing else, so a step behaves the same from a terminal, a backfill or the scheduler.

Each step takes the settings and a UTC day, does its Spark work inside one call, and returns
a small frozen result whose ``to_dict()`` is JSON-safe (what an Airflow task passes on:
dates, ids and table versions, never data); its ``detail`` is the engine's typed result, which
the CLI prints from (app.commands). Every step is idempotent per day. ``stream`` is the one
step no DAG runs: ``reckon stream``'s aggregator, until drained or stopped.

Example: ``run_replay(settings, date(2026, 1, 1)).summary["windows"]``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from reckon.config import Settings
from reckon.errors import ConfigError, UsageError
from reckon.timeutil import parse_date

if TYPE_CHECKING:  # the engines' result types; the steps import the engines when they run
    from audits.audit import AuditResult
    from audits.quality import CheckResult
    from reports.render import ReportResult
    from spark.batch_metrics import BatchMetrics
    from spark.compaction import CompactionResult
    from spark.replay import ReplayResult
    from spark.retention import VacuumResult
    from spark.sources import StreamSource

    BatchCallback = Callable[[BatchMetrics], None]

__all__ = [
    "StepResult",
    "check_watermark",
    "nightly_days",
    "quality_gate",
    "quiet_libraries",
    "run_audit",
    "run_check",
    "run_compact",
    "run_replay",
    "run_report",
    "run_vacuum",
    "stream",
    "task_retries",
    "wait_for_watermark",
    "watermark_not_ready",
]


#: The engine's own result a step carries (ReplayResult, AuditResult ...), or None.
Detail = TypeVar("Detail")


@dataclass(frozen=True)
class StepResult(Generic[Detail]):
    """What a step reports upward: its name, the day, and a JSON-safe summary; ``detail`` is
    the engine's typed result, which the CLI prints from and which never goes to XCom.

    >>> StepResult(step="replay", day="2026-01-01", summary={"windows": 3},
    ...            detail=None).to_dict()
    {'step': 'replay', 'day': '2026-01-01', 'summary': {'windows': 3}}
    """

    step: str
    day: str
    summary: dict[str, Any]
    detail: Detail = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "day": self.day, "summary": self.summary}

    def describe(self) -> str:
        """The step in one sentence a person reads (what day, how many rows, which table
        versions, how long): what ``reckon replay`` and its siblings print, and what the
        nightly DAG's task logs say. The wait and the gate, which have no typed result, say
        theirs from the summary.

        >>> StepResult(step="quality_gate", day="2026-01-01", detail=None,
        ...            summary={"verdicts": {"2026-01-01": "passed"},
        ...                     "check_runs": {"2026-01-01": "c1"}}).describe()
        'quality gate passed: 2026-01-01 passed (check run c1)'
        """
        if self.step in _SUMMARY_SENTENCES:
            return _SUMMARY_SENTENCES[self.step](self.day, self.summary)
        words = _SENTENCES.get(self.step)
        if words is None or self.detail is None:
            return f"{self.step} {self.day}: {self.summary}"
        return words(self.detail)


# Libraries that log every step at INFO: a task log a person reads keeps their warnings only
_CHATTY_LOGGERS = ("great_expectations", "fontTools", "matplotlib", "py4j",
                   "alembic.runtime.migration")


def quiet_libraries() -> None:
    """Raise the chatty libraries' loggers to WARNING (GX's ~200 INFO lines per check run,
    fontTools' ~75 per PDF): something wrong still shows. pyspark logs every failed SQL
    statement at ERROR with its whole Java stack (~8 KB for a misspelled table) before the
    exception reaches reckon, which turns the failures it expects into one line (and lets an
    unexpected one keep its traceback): that logger is silenced."""
    for name in _CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)


def _spark(settings: Settings, app: str) -> Any:
    from spark.session import get_spark

    quiet_libraries()
    return get_spark(settings, app_name=app)


@contextlib.contextmanager
def _spark_for_day(settings: Settings, app: str, day: date) -> Iterator[Any]:
    """The session for one day of a nightly step, interpreting Spark's expressions when the
    day is small (spark.execution_mode, setting ``interpreted_max_rows``), and as it was after.
    Example: ``with _spark_for_day(settings, "reckon-audit", day) as spark: ...``."""
    from spark.execution_mode import execution_for_days

    spark = _spark(settings, app)
    with execution_for_days(spark, settings.warehouse_path, [day],
                            max_rows=settings.interpreted_max_rows):
        yield spark


def _with_spec(settings: Settings, step: str) -> Settings:
    """The settings with the warehouse's event-time spec (reckon.spec): a nightly step never
    windows a day differently from the stream that wrote it."""
    from storage.spec_log import settings_for

    return settings_for(settings, step)


def _unseen_bounds(spark: Any, settings: Settings) -> str | None:
    """The warning line for a bound of an input the warehouse never saw (reckon.spec
    ``unseen_bounds``): the partitions and sources its stream's watermark state holds, and
    the expected partitions. Nothing is read without bounds per input."""
    from reckon.spec import unseen_bounds
    from spark.progress import inputs_seen

    policy = settings.event_time_rules().watermark
    if not (policy.partition_bounds or policy.source_bounds):
        return None
    partitions, sources = inputs_seen(spark, settings.warehouse_path)
    return unseen_bounds(policy, {*partitions, *settings.expected_partitions}, sources,
                         "in this warehouse")


def nightly_days(*, day: str | None, logical_date: datetime | None, run_after: datetime,
                 lookback_days: int) -> tuple[date, list[date]]:
    """Which day a nightly run processes, however it was started, and its lookback days.

    D is, first that applies: the run's ``day`` param (``--conf '{"day": "2026-01-01"}'`` or
    the trigger form); else the UTC date of its logical date (a scheduled run of the
    data-interval timetable for ``[D, D+1)``, a backfill, ``airflow dags trigger
    --logical-date D``, the REST API's ``logical_date``, ``dag.test(logical_date=D)``); else,
    for a run triggered without a logical date, the last complete UTC day before it was
    triggered. Returns (D, the days ``[D - lookback_days, D]`` oldest first).

    >>> nightly_days(day=None, logical_date=datetime(2026, 1, 1, tzinfo=UTC),
    ...              run_after=datetime(2026, 1, 2, 0, 5, tzinfo=UTC), lookback_days=1)
    (datetime.date(2026, 1, 1), [datetime.date(2025, 12, 31), datetime.date(2026, 1, 1)])
    """
    if lookback_days < 0:
        raise ConfigError(f"lookback_days={lookback_days} is not valid: a number of days >= 0")
    if day and day.strip():
        newest = parse_date(day, "day")
    elif logical_date is not None:
        newest = logical_date.astimezone(UTC).date()
    else:
        newest = run_after.astimezone(UTC).date() - timedelta(days=1)
    return newest, [newest - timedelta(days=k) for k in range(lookback_days, -1, -1)]


def check_watermark(settings: Settings, day: date) -> StepResult | None:
    """One look at whether the stream's watermark passed the end of ``day`` plus the allowed lateness: the
    step's result when it has, else None. Reads the Delta log's statistics (no Spark); only
    when they cannot settle it does it start Spark for one aggregate. For a sensor that frees
    its worker slot between looks (the nightly DAG's wait_for_watermark)."""
    from spark.progress import day_closed, logged_watermark

    settings = _with_spec(settings, "wait_for_watermark")
    known, _ = logged_watermark(settings.warehouse_path)
    spark = None if known else _spark(settings, "reckon-wait")
    closed = day_closed(spark, settings.progress_config(), day)
    return None if closed is None else StepResult(step="wait_for_watermark",
                                                  day=day.isoformat(), summary=closed,
                                                  detail=None)


def watermark_not_ready(settings: Settings, day: date, waited_seconds: float) -> str:
    """The one-line reason a wait for ``day`` gave up after ``waited_seconds``: the watermark
    needed and the one seen (from the Delta log, or Spark when it cannot tell), in words."""
    from spark.progress import latest_watermark, logged_watermark, not_ready_message

    settings = _with_spec(settings, "wait_for_watermark")
    known, seen = logged_watermark(settings.warehouse_path)
    if not known:
        seen = latest_watermark(_spark(settings, "reckon-wait"), settings.warehouse_path)
    return not_ready_message(settings.progress_config(), day, seen,
                             settings.watermark_wait_timeout,
                             waited_seconds)


def wait_for_watermark(settings: Settings, day: date, *, timeout: str | None = None,
                       poll: str = "30s") -> StepResult[None]:
    """Block until the stream's global watermark passed the end of ``day`` plus the allowed lateness.
    Raises WatermarkNotReadyError (with the watermark it saw) when the timeout runs out."""
    from spark.progress import wait_for_day_closed

    settings = _with_spec(settings, "wait_for_watermark")
    result = wait_for_day_closed(_spark(settings, "reckon-wait"), settings.progress_config(), day,
                                 timeout=timeout or settings.watermark_wait_timeout, poll=poll)
    return StepResult(step="wait_for_watermark", day=day.isoformat(), summary=result,
                      detail=None)


def run_compact(settings: Settings, day: date) -> StepResult[CompactionResult]:
    """The day's small files of the stream tables rewritten into a few large ones (OPTIMIZE of
    that day's partitions only), so the replay and every later reader open few files."""
    from spark.compaction import compact_day

    settings = _with_spec(settings, "compact")
    with _spark_for_day(settings, "reckon-compact", day) as spark:
        result = compact_day(spark, settings.compaction_config(), day)
    return StepResult(step="compact", day=day.isoformat(), summary=result.to_dict(),
                      detail=result)


def run_replay(settings: Settings, day: date, *,
               from_kafka: bool = False) -> StepResult[ReplayResult]:
    """Canonical totals for ``day`` from the full event log (replaceWhere of that day only);
    ``from_kafka``: from the Kafka topic, earliest to latest, instead (``reckon replay
    --kafka``)."""
    from spark.replay import replay_day
    from storage.writer_lock import replay_lock

    settings = _with_spec(settings, "replay")
    # the lock first: a replay another one already runs, or a mistyped warehouse, is one
    # line before Spark starts
    with replay_lock(settings.warehouse_path, day, from_kafka=from_kafka) as held, \
            _spark_for_day(settings, "reckon-replay", day) as spark:
        result = replay_day(spark, settings.replay_config(), day, from_kafka=from_kafka,
                            held=held)
    return StepResult(step="replay", day=day.isoformat(), summary=result.to_dict(),
                      detail=result)


#: Told (seen, required) when the stream's watermark has not yet passed the day's end + allowed_lateness.
OpenDayNote = Callable[[int, int], None]


def run_audit(settings: Settings, day: date, *, kind: str = "nightly",
              on_open_day: OpenDayNote | None = None) -> StepResult[AuditResult]:
    """Reconcile provisional against canonical totals for ``day``; record it in the report DB.

    The nightly DAG waits for the watermark first; a person may not, so with ``on_open_day``
    the step first looks at the watermark and calls it (seen, required, in microseconds) when
    the day's provisional totals can still change. Example: ``run_audit(settings, day,
    on_open_day=lambda seen, required: print("not final yet"))``.
    """
    from audits.audit import audit_day
    from reports.db.repository import audit_recorder

    settings = _with_spec(settings, "audit")
    with _spark_for_day(settings, "reckon-audit", day) as spark:
        if on_open_day is not None:
            from spark.progress import latest_watermark

            rules = settings.event_time_rules()
            seen = latest_watermark(spark, settings.warehouse_path)
            if seen is not None and not rules.is_day_final(day, seen):
                on_open_day(seen, rules.day_final_at(day))
        result = audit_day(spark, settings.audit_config(), day, kind=kind,
                           recorder=audit_recorder(settings))
    summary = result.to_dict()
    if result.replaced_signed_off_run:  # a re-audit leaves that run's state as it was
        summary["replaced_run_state"] = replaced_run_state(settings,
                                                           result.replaced_signed_off_run)
    return StepResult(step="audit", day=day.isoformat(), summary=summary, detail=result)


def replaced_run_state(settings: Settings, run_id: str) -> str:
    """The review state of a run a re-audit replaced, in the words every view shows
    (reckon.signoff.review_words): what the CLI and the DAG say of it."""
    from reckon.signoff import review_words
    from reports.db.repository import ReportDB
    from reports.review_state import review_states

    with ReportDB.from_settings(settings) as db:
        state = review_states(db, [run_id], settings.required_approvers).get(run_id)
    return "unknown run" if state is None else review_words(state)


def run_check(settings: Settings, day: date, *,
              fail_on_blocking: bool = True) -> StepResult[CheckResult]:
    """The Great Expectations suites for ``day``, recorded in the report DB; raises
    DataQualityError on a blocking failure unless ``fail_on_blocking`` is False (the nightly
    DAG renders the report first, then ``quality_gate`` fails the run)."""
    from audits.check_reads import DeltaDayReads
    from audits.quality import run_checks
    from audits.quality_local import fits_without_jvm, run_checks_without_jvm
    from reports.db.repository import ReportDB

    settings = _with_spec(settings, "check")
    config, reads = settings.check_run_config(), DeltaDayReads(settings.warehouse_path)
    with ReportDB.from_settings(settings) as db:
        if fits_without_jvm(reads, config, day, max_rows=settings.check_without_jvm_max_rows):
            quiet_libraries()  # a small day: no JVM (audits/quality_local.py)
            result = run_checks_without_jvm(config, day, ledger=db, reads=reads)
        else:
            with _spark_for_day(settings, "reckon-check", day) as spark:
                result = run_checks(spark, config, day, ledger=db)
    if fail_on_blocking:
        result.raise_for_failures()
    return StepResult(step="check", day=day.isoformat(), summary=result.to_dict(),
                      detail=result)


def quality_gate(settings: Settings, days: Sequence[date]) -> StepResult[None]:
    """Raise one DataQualityError naming every day of ``days`` whose current check run (the
    report database's, as its report shows it) has a blocking failure, or that has none."""
    from reckon.errors import DataQualityError
    from reports.db.repository import ReportDB

    failed: list[str] = []
    checked: dict[str, str] = {}
    verdicts: dict[str, str] = {}  # as recorded (reckon.quality_verdict), as the report shows
    with ReportDB.from_settings(settings) as db:
        runs = {day: db.current_check_run(day) for day in days}
    for day in days:
        run = runs[day]
        if run is None:
            failed.append(f"{day}: no check run recorded (run `reckon check --date {day}`)")
        elif not run.success:
            failed.append(f"{day}: {run.blocking_failures} blocking expectation(s) failed in "
                          f"check run {run.run_id} (the day's report lists them; Data Docs "
                          f"{run.data_docs_path})")
        else:
            checked[day.isoformat()] = run.run_id
            verdicts[day.isoformat()] = run.verdict or "passed"
    if failed:
        raise DataQualityError("data-quality gate: " + "; ".join(failed))
    newest = max(days).isoformat() if days else ""
    return StepResult(step="quality_gate", day=newest,
                      summary={"check_runs": checked, "verdicts": verdicts}, detail=None)


def run_vacuum(settings: Settings, day: date, *, dry_run: bool = False,
               retain: str | None = None, progress: bool = False) -> StepResult[VacuumResult]:
    """Delete the files no table version within ``retain`` (default ``vacuum_retain``) uses
    (spark.retention); ``day`` only labels the run; ``progress`` prints each table as it is
    done. Idempotent: a second run finds nothing left to delete."""
    from spark.retention import vacuum_warehouse

    result = vacuum_warehouse(_spark(settings, "reckon-vacuum"), settings.warehouse_path,
                              retain=retain or settings.vacuum_retain, dry_run=dry_run,
                              progress=progress)
    return StepResult(step="vacuum", day=day.isoformat(), summary=result.to_dict(),
                      detail=result)


def replay_sentence(r: ReplayResult) -> str:
    """A replayed day in one line, its totals in each currency's own digits (never added
    across currencies). Example: ``2026-11-27: 1951 windows, 4511 events, totals EUR
    72,492.27 | 0 duplicate copies, 0 conflicts, 3 quarantined, 12 arrived after the day |
    event_log v7 | 19.7s``."""
    from reckon.money import format_money

    tail = f" | event_log v{r.event_log_version} | {r.duration_seconds:.1f}s"
    if r.rows_read == 0:
        return f"{r.day}: no events; the day's canonical totals are written empty{tail}"
    totals = ", ".join(format_money(Decimal(amount), code)
                       for code, amount in r.total_amounts.items())
    return (f"{r.day}: {r.windows} windows, {r.valid_events} events, totals {totals}"
            f" | {r.duplicate_copies} duplicate copies, {r.conflicts} conflicts, "
            f"{r.quarantined} quarantined, {r.arrived_after_day} arrived after the day{tail}")


def audit_sentence(r: AuditResult) -> str:
    """An audit run in one line: its rows, breaks and completeness, the table versions it
    read, how long. Example: ``audit 3f2a for 2026-11-27: 1951 (window, key, currency) rows;
    completeness 0.998; unexplained breaks: 0; breaks recorded: 4 | canonical_totals v3,
    event_log v7 | 2.1s``."""
    versions = ", ".join(f"{table} v{v}" for table, v in sorted(r.table_versions.items()))
    return (f"audit {r.run_id} for {r.day}: {r.rows} (window, key, currency) rows; "
            f"{audit_closing(r)} | {versions} | {r.duration_seconds:.1f}s")


def audit_closing(r: AuditResult) -> str:
    """The audit's verdict words, the last line of ``reckon audit`` and part of its sentence."""
    return (f"completeness {r.completeness}; unexplained breaks: {r.unexplained}; "
            f"breaks recorded: {r.breaks_recorded}")


def check_sentence(r: CheckResult) -> str:
    """A check run in one line: the first line of ``reckon check`` (verdict, failures, how
    long, the run), then each suite's table version."""
    versions = ", ".join(f"{s.table} v{s.table_version}" for s in r.suites
                         if s.table_version is not None)
    return r.summary().splitlines()[0] + (f" | {versions}" if versions else "")


def report_sentence(r: ReportResult) -> str:
    """A rendered report in one line: where its files are and the HTML's SHA-256."""
    return (f"report for {r.day}: {r.html_path} (sha256 {r.sha256}), {r.pdf_path}, "
            f"{len(r.csv_paths)} CSV files in {r.out_dir}")


def _compact_sentence(r: CompactionResult) -> str:
    return r.describe()


def _vacuum_sentence(r: VacuumResult) -> str:
    return r.describe()


def _watermark_sentence(day: str, summary: Mapping[str, Any]) -> str:
    return (f"{day}: the stream's watermark {summary['watermark_iso']} has passed "
            f"{summary['required_watermark_iso']}, the end of the day's last window + allowed "
            "lateness")


def _gate_sentence(day: str, summary: Mapping[str, Any]) -> str:
    verdicts = "; ".join(f"{d} {v} (check run {summary['check_runs'][d]})"
                         for d, v in summary["verdicts"].items())
    return f"quality gate passed: {verdicts or 'no days'}"


_SUMMARY_SENTENCES: dict[str, Callable[[str, Mapping[str, Any]], str]] = {
    "wait_for_watermark": _watermark_sentence, "quality_gate": _gate_sentence}

#: Each step's one sentence, by step name (StepResult.describe).
_SENTENCES: dict[str, Callable[[Any], str]] = {
    "compact": _compact_sentence, "replay": replay_sentence, "audit": audit_sentence,
    "check": check_sentence, "report": report_sentence, "vacuum": _vacuum_sentence}


def task_retries(env: Mapping[str, str]) -> int:
    """The retries of a DAG's tasks, from ``RECKON_AIRFLOW_RETRIES`` (default 2)."""
    text = env.get("RECKON_AIRFLOW_RETRIES", "2")
    try:
        retries = int(text)
    except ValueError:
        raise ConfigError(f"RECKON_AIRFLOW_RETRIES={text!r} is not valid: a whole number of "
                          "retries >= 0") from None
    if retries < 0:
        raise ConfigError(f"RECKON_AIRFLOW_RETRIES={retries} is not valid: a number >= 0")
    return retries


def run_report(settings: Settings, day: date,
               out: str | None = None) -> StepResult[ReportResult]:
    """Render the day's report (HTML, PDF, CSV) and record its SHA-256 in the report DB.
    Starts no Spark: the report reads small aggregates through DuckDB (reports/context.py). A
    warehouse of an earlier layout (totals that added currencies) is refused, not shown: each
    table's schema is read from its Delta log (no JVM)."""
    from reports.db.repository import ReportDB
    from reports.render import render_day
    from storage.layout import require_logged_layout

    settings = _with_spec(settings, "report")
    require_logged_layout(settings.warehouse_path)
    with ReportDB.from_settings(settings) as db:  # said before any table is read
        if db.current_audit_run(day) is None:
            raise UsageError(f"--date={day.isoformat()!r} is not valid: no audit run of that "
                             "day in the report database (run `reckon audit --date "
                             f"{day}` first)")
    quiet_libraries()  # fontTools logs ~75 INFO lines a PDF (Spark's start did this before)
    result = render_day(settings.report_config(), day, out=out)  # no JVM: DuckDB reads
    return StepResult(step="report", day=day.isoformat(), summary=result.to_dict(),
                      detail=result)


def stream(settings: Settings, source: StreamSource, *, trigger: str | None = None,
           change_spec: bool = False, note: Callable[[str], None],
           on_start: Callable[[Settings], BatchCallback]) -> str:
    """Run the streaming aggregator on ``source`` (``reckon stream``): the warehouse's spec
    (refused before Spark starts when a given value disagrees, unless ``change_spec``), its
    one-writer lock, then the stream until drained (no ``trigger``) or stopped. A Kafka
    topic's partitions are the expected ones when none are configured. ``on_start(settings)``
    sees the settings the stream runs with and returns the per-batch callback; ``note`` gets
    each line worth telling. Returns the checkpoint location.

    Example: ``stream(settings, StreamSource(landing="landing"), note=print,
    on_start=lambda s: print_progress)``.
    """
    from spark.sources import kafka_partitions
    from spark.stream import run_stream, stream_lock
    from storage.spec_log import settings_for

    # a disagreeing value, or a change that would be refused, is refused before Spark starts
    changed = settings_for(settings, "stream", change=change_spec)
    if not change_spec:
        settings = changed
    with stream_lock(settings.warehouse_path, source) as lock:  # a second stream is refused before Spark
        spark = _spark(settings, "reckon-stream")
        if source.kafka_bootstrap and not settings.expected_partitions:
            expected = kafka_partitions(spark, source.kafka_bootstrap, str(source.topic))
            settings = settings.with_values({"expected_partitions": f"topic {source.topic}"},
                                            expected_partitions=expected)
            note(f"expected partitions of topic {source.topic}: {expected}")
        # with --change-spec the stream runs with the recorded spec changed by the given
        # values (recorded when it starts): the start-up line shows that, not the defaults
        running = settings_for(settings, "stream", change=True) if change_spec else settings
        on_batch = on_start(running)
        warning = _unseen_bounds(spark, running)
        if warning:
            note(warning)
        return run_stream(spark, settings, source, available_now=not trigger,
                          trigger=trigger, change_spec=change_spec, on_batch=on_batch,
                          writer_lock=lock)
