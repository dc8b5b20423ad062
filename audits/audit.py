"""The reconciliation audit of one UTC day: provisional against canonical totals, with every
gap attributed to the late side output and to what the stream counted more than once.

One pass over totals only: the four inputs (provisional_totals, canonical_totals, late_events
and uncaught_duplicates of the day, late events summed per window, key and currency) are
full-outer joined on (window_start, key, currency), each holding a grain once; then
reckon.reconcile's arithmetic and STATUS_RULES are applied as Columns. Every figure is per
currency: a window can be MATCHED in EUR and UNEXPLAINED in GBP, and the run's summary keeps
one line per currency (event counts may be added across currencies, amounts never). The day's ``reconciliation`` partition is
overwritten (replaceWhere), the run and its breaks go to the report database (history kept,
newest current), each break's ``reckon explain`` story and the partitions and sources that
contributed to it are recorded beside it for the workbench (audits/stories.py), and the result
names the Delta versions it read. The database is the caller's ``recorder``
(audits/ledger.py): the audit never opens it itself, e.g.
``audit_day(spark, settings.audit_config(), day, recorder=audit_recorder(settings))``
(reports.db.repository; the config is reckon/engine_config.py's ``AuditConfig``).

Duplicate over-count: copies of one event_id that the stream processed without flagging them
as duplicates (``event_log.is_duplicate = false``, ``batch_id`` not null) beyond the first in
arrival order. Each such copy was either counted or sent to the late side output, so
``canonical = provisional + late - duplicate`` holds exactly on clean data. The replay records
them in ``uncaught_duplicates`` from the event log version it read for the canonical totals
(spark/replay.py), so both sides of that equation come from one version of the log and the
audit's cost grows with the day's windows, not its events. Late events are read as of the
same cut: late_events at the version holding exactly the stream batches in that log version
(``audits.audit_inputs``), since the stream goes on appending stragglers of the day
between the replay and the audit.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from audits.audit_inputs import read_inputs
from audits.audit_record import record_run
from audits.ledger import AuditRecorder
from audits.reconcile_rows import (
    count_aggregates,
    currency_aggregates,
    currency_summary,
    currency_summary_dict,
    event_completeness,
    reconcile_frame,
)
from audits.records import AttributionRow, AuditRun, CurrencySummary
from audits.stories import StoryInputs
from reckon.engine_config import AuditConfig
from reckon.errors import ConcurrentAuditError, UsageError
from reckon.reconcile import UNEXPLAINED_STATUSES, ReconStatus
from spark import tables as tb
from spark.observe import observed
from storage.writer_lock import WriterLock, writer_scope

__all__ = ["AuditResult", "audit_day"]


@dataclass(frozen=True)
class AuditResult:
    """The summary of one audit run: counts over all currencies (observed once, on the rows as
    they are written) and, per currency, the exact sums (``currencies``: one dict per
    currency, amounts as decimal text)."""

    run_id: str
    day: str
    kind: str
    rows: int
    status_counts: dict[str, int]
    unexplained: int
    currencies: list[dict[str, Any]]
    completeness: str | None
    tolerance: dict[str, str]
    table_versions: dict[str, int]
    breaks_recorded: int
    duration_seconds: float
    # a run of the day that someone signed off, which this run replaced as current: the day
    # needs a new sign-off (the report says what changed)
    replaced_signed_off_run: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def audit_day(spark: SparkSession, config: AuditConfig, day: date, *, kind: str = "nightly",
              recorder: AuditRecorder | None) -> AuditResult:
    """Reconcile ``day``, overwrite its ``reconciliation`` partition, record run and breaks
    with ``recorder`` (None: record nothing, e.g. a benchmark). One audit of a day at a time
    (storage.writer_lock): a second one is refused before it writes. ``config`` is all it
    reads of the settings: the warehouse, the event-time rules and the tolerance.

    Example:
        >>> audit_day(spark, settings.audit_config(), day,
        ...           recorder=audit_recorder(settings))  # doctest: +SKIP
    """
    try:
        with WriterLock.take(config.warehouse, writer_scope("audit", day), f"audit of {day}"):
            return _audit_day(spark, config, day, kind=kind, recorder=recorder)
    except Exception as exc:
        if not tb.is_missing_file_error(exc):
            raise
        # the audit reads event_log and late_events at the versions the day's replay pinned
        raise UsageError(
            f"the audit of {day} reads the table versions its replay read, and files of those "
            "versions are gone (removed by `reckon vacuum` once older than its retention, or "
            f"by hand): replay the day again (`reckon replay --date {day}`) and audit it "
            "then") from exc


def _audit_day(spark: SparkSession, config: AuditConfig, day: date, *, kind: str,
               recorder: AuditRecorder | None) -> AuditResult:
    from audits.attribution import late_attribution

    started_at, t0 = datetime.now(UTC), time.monotonic()
    wh, rules, tolerance = config.warehouse, config.rules, config.tolerance
    run_id = f"audit-{day.isoformat()}-{uuid.uuid4().hex[:12]}"
    in_day = F.col("window_date") == F.lit(day)
    frames, versions, pinned = read_inputs(spark, wh, rules, day)

    def day_rows(name: str) -> DataFrame | None:
        df = frames[name]
        return None if df is None else df.filter(in_day)

    rows = reconcile_frame(
        day_rows(tb.PROVISIONAL_TOTALS), day_rows(tb.CANONICAL_TOTALS),
        day_rows(tb.LATE_EVENTS), day_rows(tb.UNCAUGHT_DUPLICATES),
        tolerance, day, run_id, rules.windows.size)
    tb.ensure_table(spark, wh, tb.RECONCILIATION)
    counts, completeness = _write(wh, day, tb.conform(rows, tb.RECONCILIATION))
    unexplained = sum(counts[status.value] for status in UNEXPLAINED_STATUSES)
    # this run's rows only: another audit of the day may have replaced the partition since
    written = tb.read_table(spark, wh, tb.RECONCILIATION).filter(
        in_day & (F.col("audit_run_id") == F.lit(run_id)))
    currencies, found = _sum_per_currency(written)
    _check_not_overtaken(run_id, day, sum(counts.values()), found)

    breaks_recorded = 0
    replaced_signed_off: str | None = None
    if recorder is not None:
        # the attribution reads what the reconciliation read: the event log the replay
        # pinned, late_events as of the same cut
        seen = {tb.LATE_EVENTS: versions.get(tb.LATE_EVENTS), tb.EVENT_LOG: pinned}

        def attribution() -> list[AttributionRow]:
            return (late_attribution(spark, wh, rules, day, versions=seen)
                    if tb.table_exists(wh, tb.EVENT_LOG) else [])

        run = AuditRun(
            run_id=run_id, day=day, kind=kind, started_at=started_at,
            duration_seconds=round(time.monotonic() - t0, 3),
            # the OS account or DB login role, never a free name
            reconciler=recorder.ledger.principal(),
            params={**tolerance.to_config(), **rules.to_record()},
            status_counts=counts, rows=sum(counts.values()), unexplained=unexplained,
            table_versions=versions, currencies=currencies, completeness=completeness,
            material_gap={code: str(amount) for code, amount in config.material_gap})
        reads = StoryInputs(
            provisional=day_rows(tb.PROVISIONAL_TOTALS), late=day_rows(tb.LATE_EVENTS),
            canonical=day_rows(tb.CANONICAL_TOTALS), event_log_version=pinned,
            deltas_version=versions.get(tb.PROVISIONAL_DELTAS),
            progress_version=versions.get(tb.WATERMARK_PROGRESS))
        breaks_recorded, replaced_signed_off = record_run(spark, config, recorder, run,
                                                          attribution, written, reads)

    return AuditResult(
        run_id=run_id, day=day.isoformat(), kind=kind, rows=sum(counts.values()),
        status_counts=counts, unexplained=unexplained,
        currencies=[currency_summary_dict(c) for c in currencies],
        completeness=None if completeness is None else str(completeness),
        tolerance=tolerance.to_config(), table_versions=versions,
        breaks_recorded=breaks_recorded, duration_seconds=round(time.monotonic() - t0, 3),
        replaced_signed_off_run=replaced_signed_off)


def _write(wh: Path, day: date, rows: DataFrame) -> tuple[dict[str, int], Decimal | None]:
    """Write the day's reconciliation (replaceWhere); return the counts per status and the
    completeness over all currencies, observed while the rows are written. The observed node
    follows the final aggregation, in the write's result stage, whose accumulator updates
    Spark applies once per partition even when a task is retried."""
    summary = Observation("audit_summary")
    tb.replace_rows(rows.observe(summary, *count_aggregates()), wh, tb.RECONCILIATION,
                    tb.window_day(day))
    s = observed(summary, {**{status.value: 0 for status in ReconStatus},
                           "pn": 0, "cn": 0, "ln": 0, "dn": 0})
    counts = {status.value: int(s[status.value]) for status in ReconStatus}
    completeness = event_completeness(int(s["pn"] or 0), int(s["dn"] or 0), int(s["cn"] or 0))
    return counts, completeness


def _sum_per_currency(written: DataFrame) -> tuple[tuple[CurrencySummary, ...], int]:
    """The money per currency of the run's rows as written (one row per currency comes back),
    and how many rows there are. Read back from the table rather than kept while written:
    summing a currency in the write's own pass grows the write's work per currency, and a
    copy of every row kept for it costs more than reading the columns summed."""
    found = (written.groupBy("currency")
             .agg(*currency_aggregates(), F.count(F.lit(1)).alias("_rows"))
             .orderBy("currency").collect())
    return tuple(currency_summary(r) for r in found), sum(int(r["_rows"]) for r in found)


def _check_not_overtaken(run_id: str, day: date, written: int, found: int) -> None:
    """Another audit of the day replaced this run's rows between its write and its read."""
    if found != written:
        raise ConcurrentAuditError(
            f"audit {run_id} of {day} wrote {written} reconciliation row(s) but finds {found}: "
            f"another audit of {day} replaced them meanwhile. Audit a day one run at a time; "
            f"run `reckon audit --date {day}` again (this run was not recorded, the previous "
            "one stays current)")
