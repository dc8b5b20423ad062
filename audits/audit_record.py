"""Recording an audit run in the report database, through the caller's recorder.

Order matters: the breaks (from Spark's executors), then each break's story, then the run,
which becomes current only once everything it lists is stored; the run's late attribution
and its lateness what-ifs (audits/day_whatif.py, on DuckDB) are computed meanwhile, each in a
thread of its own, and stored with the run in its transaction. A run that finds its rows
replaced by another audit of the day meanwhile records nothing and says to run again
(``ConcurrentAuditError``); the previous run stays current.

Example:
    >>> record_run(spark, config, audit_recorder(settings), run, lambda: [], written,
    ...            reads)  # doctest: +SKIP
    (12, None)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from audits.day_whatif import DayWhatIf, day_whatif
from audits.ledger import AuditLedger, AuditRecorder
from audits.records import AttributionRow, AuditRun, BreakRow
from audits.stories import StoryInputs, record_break_stories
from reckon.engine_config import AuditConfig, WhatIfConfig
from reckon.errors import ConcurrentAuditError
from reckon.reconcile import ReconStatus
from spark import tables as tb
from spark.concurrent_writes import side_by_side
from spark.money import amount_text_col

__all__ = ["record_run"]


def record_run(spark: SparkSession, config: AuditConfig, recorder: AuditRecorder, run: AuditRun,
               attribution: Callable[[], list[AttributionRow]], written: DataFrame,
               reads: StoryInputs) -> tuple[int, str | None]:
    """Record ``run``: its breaks, their stories, then the run itself with its late
    ``attribution`` (computed while the breaks and stories are written: independent Spark
    work, side by side); returns the breaks recorded and the signed-off run it replaced
    (``_replaced_signed_off_run``).

    Breaks first, then the run: the run becomes current only once its breaks are all stored,
    so a failed insert leaves the previous run current (with its own breaks) rather than a
    current run that lists no breaks next to its unexplained count.

    Example:
        >>> recorder = audit_recorder(settings)  # doctest: +SKIP
        >>> record_run(spark, config, recorder, run, lambda: [], written, reads)  # doctest: +SKIP
        (12, None)
    """
    db = recorder.ledger
    db.ready()  # the schema, migrated once here, before the executors write
    done = side_by_side({
        "breaks": lambda: _record_breaks_and_stories(spark, config, recorder, run, written,
                                                     reads),
        "attribution": attribution,
        "whatif": lambda: _whatif(config, run.day, reads)})
    db.record_audit_run(run, done["attribution"], done["whatif"])
    return done["breaks"], _replaced_signed_off_run(db, run.day, run.kind, run.run_id)


def _whatif(config: AuditConfig, day: date, reads: StoryInputs) -> DayWhatIf | None:
    """The day's lateness what-ifs (audits/day_whatif.py: DuckDB in this thread, no Spark
    job) at the versions the audit read: the event log its replay pinned, the watermark
    progress its provisional totals were folded from. None when ``config`` asks for none.

    Example: ``_whatif(config, day, reads).configured_policy`` -> "3s per partition"."""
    if config.whatif_target is None:
        return None
    whatif = WhatIfConfig(warehouse=config.warehouse, rules=config.rules,
                          target=config.whatif_target)
    return day_whatif(whatif, day, {tb.EVENT_LOG: reads.event_log_version,
                                    tb.WATERMARK_PROGRESS: reads.progress_version})


def _record_breaks_and_stories(spark: SparkSession, config: AuditConfig,
                               recorder: AuditRecorder, run: AuditRun, written: DataFrame,
                               reads: StoryInputs) -> int:
    """The run's breaks, then their stories; how many breaks were recorded. A run whose rows
    another audit of the day replaced meanwhile records nothing more (ConcurrentAuditError)."""
    run_id, day = run.run_id, run.day
    breaks_recorded = _record_breaks(written, recorder, run_id, day)
    expected = run.rows - run.status_counts[ReconStatus.MATCHED.value]
    # a day without breaks is overtaken too when none of the run's rows is left (a
    # limit(1) probe, only then: the break count above settles every other day)
    gone = expected == 0 and run.rows > 0 and not written.limit(1).count()
    if breaks_recorded != expected or gone:
        raise ConcurrentAuditError(
            f"audit {run_id} of {day} found {expected} break(s) but could record only "
            f"{breaks_recorded}: another audit of {day} replaced its reconciliation rows "
            f"meanwhile. Audit a day one run at a time; run `reckon audit --date {day}` "
            "again (this run was not recorded, the previous one stays current)")
    if tb.table_exists(config.warehouse, tb.EVENT_LOG) and expected:
        _record_stories(spark, config, day, written, reads, recorder, run_id, expected)
    return breaks_recorded


def _record_stories(spark: SparkSession, config: AuditConfig, day: date, written: DataFrame,
                    reads: StoryInputs, recorder: AuditRecorder, run_id: str,
                    expected: int) -> None:
    """Each break's ``reckon explain`` story and contributing inputs, in the report database
    before the run becomes current (audits/stories.py): the workbench reads them."""
    told = record_break_stories(spark, config.warehouse, config.rules, day, written, reads,
                                recorder, run_id)
    if told != expected:
        raise ConcurrentAuditError(
            f"audit {run_id} of {day} recorded {expected} break(s) but told the story of "
            f"{told}: another audit of {day} replaced its reconciliation rows meanwhile. Audit "
            f"a day one run at a time; run `reckon audit --date {day}` again (this run was not "
            "recorded, the previous one stays current)")


def _replaced_signed_off_run(db: AuditLedger, day: date, kind: str, run_id: str) -> str | None:
    """The newest other run of the day that was signed off, when ``run_id`` is now current
    and has no sign-off of its own (it replaced a signed-off run); else None. The rule is
    reckon.signoff.replaced_signoff, the one the report's sign-off sentence uses."""
    from reckon.signoff import replaced_signoff

    current = db.current_audit_run(day, kind)
    if current is None or current.run_id != run_id:
        return None
    raw = db.signoffs_of_day(day, kind)
    started = {e["run_id"]: e["started_at"] for e in raw} | {run_id: current.started_at}
    entries = [_Decision(run_id=e["run_id"], decision=e["decision"]) for e in raw]
    replaced = replaced_signoff(entries, run_id, started)
    return None if replaced is None else replaced.run_id


@dataclass(frozen=True)
class _Decision:
    """A sign-off log entry as reckon.signoff reads it."""

    run_id: str
    decision: str


def _record_breaks(written: DataFrame, recorder: AuditRecorder, run_id: str, day: date) -> int:
    """Insert every non-MATCHED row into the report DB from the executors (never the driver),
    with the recorder's module-level writer (a DB object cannot travel to an executor).
    SQLite takes one writer at a time, so its inserts run in one partition (after a shuffle:
    the day's rows are still read and filtered in parallel)."""
    url, insert_breaks = recorder.ledger.url, recorder.write_breaks

    breaks = written.filter(F.col("status") != F.lit(ReconStatus.MATCHED.value)).select(
        "window_start", "window_end", "key", "currency", "status", "provisional_amount",
        "canonical_amount",
        "gap_amount", "gap_count", "late_amount", "late_count", "duplicate_amount",
        "duplicate_count", "residual_amount", "residual_count",
        _explanation().alias("explanation"))
    if url.startswith("sqlite"):  # one writer: the rows are read in parallel, then gathered
        breaks = breaks.repartition(1)

    def write_partition(rows: Any) -> Any:
        n = insert_breaks(url, run_id, (BreakRow(
            run_id=run_id, day=day, window_start=r["window_start"], window_end=r["window_end"],
            key=r["key"], currency=r["currency"], status=r["status"],
            provisional_amount=r["provisional_amount"],
            canonical_amount=r["canonical_amount"], gap_amount=r["gap_amount"],
            gap_count=int(r["gap_count"]), late_amount=r["late_amount"],
            late_count=int(r["late_count"]), duplicate_amount=r["duplicate_amount"],
            duplicate_count=int(r["duplicate_count"]), residual_amount=r["residual_amount"],
            residual_count=int(r["residual_count"]), explanation=r["explanation"])
            for r in rows))
        yield n

    return int(sum(breaks.rdd.mapPartitions(write_partition).collect()))


def _plural(count: str, one: str, many: str) -> Column:
    return F.when(F.col(count) == 1, F.lit(one)).otherwise(F.lit(many))


def _money_text(amount: str) -> Column:
    """The row's amount with its currency: 'EUR 1,234.50' (the currency's own digits)."""
    return F.concat_ws(" ", F.col("currency"), amount_text_col(F.col(amount), F.col("currency")))


def _explanation() -> Column:
    """A reviewer's sentence for a break, from the row's own figures."""
    return F.concat_ws(
        "; ",
        F.when(F.col("provisional_count").isNull(), F.lit("no provisional row")),
        F.when(F.col("canonical_count").isNull(), F.lit("no canonical row")),
        F.when(F.col("late_count") > 0, F.format_string(
            "late side output explains %d %s (%s)", F.col("late_count"),
            _plural("late_count", "event", "events"), _money_text("late_amount"))),
        F.when(F.col("duplicate_count") > 0, F.format_string(
            "stream counted %d duplicate %s (%s)", F.col("duplicate_count"),
            _plural("duplicate_count", "copy", "copies"),
            _money_text("duplicate_amount"))),
        F.when((F.col("residual_count") != 0) | (F.col("residual_amount") != 0),
               F.format_string("UNEXPLAINED residual %s over %d events",
                               _money_text("residual_amount"),
                               F.col("residual_count"))),
    )
