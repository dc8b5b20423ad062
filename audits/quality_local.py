"""``reckon check`` of a small day without a JVM: the same suites, records and Data Docs.

Why: a check on Spark starts a JVM (20-25 CPU seconds) and runs Spark jobs even when the day
holds 9 events. When every table's day has at most ``max_rows`` rows (the setting
``check_without_jvm_max_rows``, by the tables' Delta statistics; 0: always Spark), the day's
rows are read through delta-rs (partition filters: that day's files only, so nothing read
scales past the bound), the suites' derived columns computed by their JVM-free twins
(``audits.suites_local``), and GX's pandas engine validates them with the same expectations:
``audits.quality.run_suites`` records the run and builds Data Docs exactly as on Spark.
tests/test_quality_local.py compares both engines expectation by expectation.

What it reads is handed in as ``DayReads`` (``audits.check_reads.DeltaDayReads``: delta-rs and
DuckDB, which folds provisional_totals by ``reports.duck.provisional_sql``)::

    reads = DeltaDayReads(settings.warehouse_path)
    if fits_without_jvm(reads, config, day, max_rows=200_000):
        result = run_checks_without_jvm(config, day, ledger=db, reads=reads)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

from audits.driver_frame import stable_order
from audits.ledger import CheckLedger
from audits.quality import (
    CheckResult,
    SuiteOutcome,
    gx_validate,
    run_suites,
    suite_outcome,
    with_audit_tolerance,
)
from audits.suite_model import TableSuite
from audits.suites import smallest_allowed_lateness
from audits.suites_local import LocalContext, Row, added_twice, local_derive, log_sums
from reckon.engine_config import CheckConfig, CheckRunConfig, ReplayConfig
from reckon.eventtime import EventTimeRules
from reckon.timeutil import day_bounds

__all__ = ["DayReads", "UnreadableVersion", "fits_without_jvm", "run_checks_without_jvm"]


class UnreadableVersion(Exception):
    """A pinned table version whose commits or files are gone (vacuumed, log cleaned up)."""


class DayReads(Protocol):
    """The day-scoped reads the JVM-free check needs. Rows are dicts, timestamps as integer
    microseconds (UTC), money as Decimal; every read is of named partitions at a version."""

    def partition_rows(self, table: str, column: str, days: Sequence[date],
                       version: int) -> int | None:
        """Rows of ``days``' partitions by the Delta statistics (None: unknown)."""

    def rows(self, table: str, column: str, days: Sequence[date], version: int) -> list[Row]:
        """The rows of ``days``' partitions at ``version`` (``UnreadableVersion``)."""

    def provisional_day(self, rules: EventTimeRules, day: date, version: int) -> list[Row]:
        """provisional_totals of ``day``'s windows, folded from the deltas at ``version``."""

    def replay_versions(self, day: date, replay_ids: Sequence[str]) -> dict[str, int | None]:
        """replay_id -> the event_log version it pinned (None: none, or no record)."""

    def version(self, table: str) -> int | None:
        """The table's newest version (None: no table)."""


#: The tables a check reads, with the partition column of the day's rows.
_DAY_TABLES = (("event_log", "event_date"), ("quarantine", "arrival_date"),
               ("provisional_deltas", "window_date"), ("late_events", "window_date"),
               ("canonical_totals", "window_date"), ("uncaught_duplicates", "window_date"),
               ("reconciliation", "window_date"))


def _log_days(replay: ReplayConfig, day: date) -> list[date]:
    """The event_date partitions the replay of ``day`` reads (``spark.replay.day_log_rows``)."""
    _lo, hi = _read_range(replay, day)
    last = max(datetime.fromtimestamp((hi - 1) / 1e6, UTC).date(), day)
    return [day + timedelta(days=i) for i in range((last - day).days + 1)]


def _read_range(replay: ReplayConfig, day: date) -> tuple[int, int]:
    lo, hi = replay.rules.windows.day_event_times(day)
    d0, d1 = day_bounds(day)
    return min(lo, d0), max(hi, d1)


def fits_without_jvm(reads: DayReads, config: CheckRunConfig, day: date, *,
                     max_rows: int) -> bool:
    """Whether every table's day (and the event log's days the replay read) holds at most
    ``max_rows`` rows by the Delta statistics, so the check may run without a JVM. A count the
    log cannot tell, or ``max_rows`` 0, keeps Spark. E.g. the 9-event day of a test: True."""
    if max_rows <= 0:
        return False
    wanted = [(t, c, [day]) for t, c in _DAY_TABLES]
    wanted.append(("event_log", "event_date", _log_days(config.replay, day)))
    for table, column, days in wanted:
        version = reads.version(table)
        if version is None:
            continue
        rows = reads.partition_rows(table, column, days, version)
        if rows is None or rows > max_rows:
            return False
    return True


def run_checks_without_jvm(config: CheckRunConfig, day: date, *, ledger: CheckLedger,
                           reads: DayReads, record: bool = True) -> CheckResult:
    """``audits.quality.run_checks`` without Spark: call it when ``fits_without_jvm``. Same
    run, records, Data Docs and verdict; every suite's engine is ``pandas``."""
    checks = with_audit_tolerance(config.checks, ledger, day)

    def validate(ctx: Any, suite: TableSuite, version: int | None, run_id: str,
                 started_at: datetime, day_has_events: bool | None) -> SuiteOutcome:
        frame = _day_frame(reads, config, checks, suite, day, version)
        rows = len(frame)
        has_events = rows > 0 if day_has_events is None else day_has_events
        gx_result = gx_validate(ctx, suite, stable_order(frame, suite.index_columns),
                                in_memory=True, has_events=has_events, run_id=run_id,
                                run_time=started_at)
        return suite_outcome(config, suite, gx_result, run_id=run_id, rows=rows,
                             version=version, has_events=has_events, engine="pandas")

    return run_suites(config, day, ledger=ledger, record=record, validate=validate)


def _day_frame(reads: DayReads, config: CheckRunConfig, checks: CheckConfig,
               suite: TableSuite, day: date, version: int | None) -> Any:
    """The suite's table's day (empty when the table is missing) with its derived columns,
    as the pandas frame the Spark path hands GX (``audits.driver_frame``)."""
    from spark.tables import SCHEMAS

    derive = local_derive(suite.table)
    ctx = LocalContext(config=checks)
    rows: list[Row] = []
    if version is not None:
        rows = _table_rows(reads, checks, suite, day, version)
        ctx = _context(reads, config, checks, suite, day, rows)
    derived = [{**row, **derive.derive(row, ctx)} for row in rows]
    return _frame(derived, SCHEMAS[suite.table], derive.columns)


def _table_rows(reads: DayReads, checks: CheckConfig, suite: TableSuite, day: date,
                version: int) -> list[Row]:
    if suite.table == "provisional_totals":
        return [r for r in reads.provisional_day(checks.rules, day, version)
                if r["window_date"] == day]
    return reads.rows(suite.table, suite.partition_column, [day], version)


def _context(reads: DayReads, config: CheckRunConfig, checks: CheckConfig, suite: TableSuite,
             day: date, rows: list[Row]) -> LocalContext:
    """What the suite's derive reads besides its rows (``audits.suites``' ``DayScope`` reads)."""
    if suite.table == "provisional_totals":
        version = reads.version("provisional_deltas")
        deltas = ([] if version is None
                  else reads.rows("provisional_deltas", "window_date", [day], version))
        return LocalContext(config=checks, added_twice=added_twice(deltas))
    if suite.table == "late_events":
        return LocalContext(config=checks, allowed_lateness=smallest_allowed_lateness(checks))
    if suite.table == "canonical_totals":
        return _log_context(reads, config.replay, checks, day, rows)
    return LocalContext(config=checks)


def _log_context(reads: DayReads, replay: ReplayConfig, checks: CheckConfig, day: date,
                 rows: list[Row]) -> LocalContext:
    """``audits.event_log_match._log_sums``: the event log's sums at each replay's pinned
    version, and which replays' versions could be read (None: none could)."""
    ids = sorted({r["replay_id"] for r in rows if r["replay_id"] is not None})
    pinned = reads.replay_versions(day, ids) if ids else {}
    lo, hi = _read_range(replay, day)
    d0, d1 = day_bounds(day)
    sums: dict[Any, Any] = {}
    read: set[str] = set()
    for replay_id, version in sorted(pinned.items()):
        if version is None or reads.version("event_log") is None:
            continue
        try:
            log = reads.rows("event_log", "event_date", _log_days(replay, day), version)
        except UnreadableVersion:
            continue
        in_range = [r for r in log if r["event_time"] is not None and lo <= r["event_time"] < hi]
        for grain, figures in log_sums(in_range, replay.parse, replay.rules.windows,
                                       d0, d1).items():
            sums[(replay_id, grain)] = figures
        read.add(replay_id)
    return LocalContext(config=checks, sums=sums, read=frozenset(read) if read else None)


def _frame(rows: list[Row], schema: Any, added: tuple[str, ...]) -> Any:
    """Object columns of what ``collect`` gives (timestamps as naive datetimes from
    microseconds, as PySpark's ``TimestampType.fromInternal`` makes them), then ``added``."""
    import pandas as pd
    from pyspark.sql import types as T

    columns: dict[str, Any] = {}
    for f in schema.fields:
        values = [r.get(f.name) for r in rows]
        if isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType)):
            values = [None if v is None else f.dataType.fromInternal(v) for v in values]
        columns[f.name] = pd.Series(values, dtype=object)
    for name in added:
        columns[name] = pd.Series([r.get(name) for r in rows], dtype=object)
    return pd.DataFrame(columns, columns=[*(f.name for f in schema.fields), *added])
