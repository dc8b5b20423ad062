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
``audit_day(spark, settings, day, recorder=audit_recorder(settings))`` (reports.db.repository).

Duplicate over-count: copies of one event_id that the stream processed without flagging them
as duplicates (``event_log.is_duplicate = false``, ``batch_id`` not null) beyond the first in
arrival order. Each such copy was either counted or sent to the late side output, so
``canonical = provisional + late - duplicate`` holds exactly on clean data. The replay records
them in ``uncaught_duplicates`` from the event log version it read for the canonical totals
(spark/replay.py), so both sides of that equation come from one version of the log and the
audit's cost grows with the day's windows, not its events. Late events are read as of the
same cut: late_events at the version holding exactly the stream batches in that log version
(``_late_events_in_replay_view``), since the stream goes on appending stragglers of the day
between the replay and the audit.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from audits.ledger import AuditLedger, AuditRecorder
from audits.records import AttributionRow, AuditRun, BreakRow, CurrencySummary
from audits.stories import StoryInputs, record_break_stories
from reckon.config import Settings
from reckon.errors import ConcurrentAuditError, UsageError
from reckon.reconcile import UNEXPLAINED_STATUSES, Measure, ReconStatus, Tolerance, residual
from reckon.reconcile import within_tolerance as within_tolerance_rule
from reckon.schema import TOTAL_IDENTITY
from reckon.timeutil import day_bounds
from reckon.writer_lock import WriterLock, writer_scope
from spark import commits
from spark import tables as tb
from spark.money import amount_text_col
from spark.observe import observed
from spark.provisional import provisional_versions, read_provisional
from spark.rules import recon_status_col

__all__ = ["AuditResult", "audit_day", "currency_summary_dict"]

_ZERO = Decimal("0.000")
_STORED = Decimal("0.001")


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


def _versioned(spark: SparkSession, settings: Settings, name: str
               ) -> tuple[DataFrame | None, int | None]:
    """The table at its current version (pinned), or (None, None) if it does not exist."""
    wh = settings.warehouse_path
    version = commits.current_version(wh, name) if tb.table_exists(wh, name) else None
    if version is None:
        return None, None
    return tb.read_table(spark, wh, name, version=version), version


def _provisional_of_day(spark: SparkSession, settings: Settings, day: date
                        ) -> tuple[DataFrame | None, dict[str, int]]:
    """The day's provisional_totals, derived from the deltas and watermark progress at their
    current versions (pinned, and returned as what the audit read); None if the stream never
    counted anything here."""
    wh = settings.warehouse_path
    pinned = provisional_versions(wh)
    if pinned.deltas is None:
        return None, {}
    start, end = day_bounds(day)
    df = read_provisional(spark, wh, settings.event_time_rules(), versions=pinned,
                          since_start=start, until_start=end)
    read = {tb.PROVISIONAL_DELTAS: pinned.deltas}
    if pinned.progress is not None:
        read[tb.WATERMARK_PROGRESS] = pinned.progress
    return df, read


def _finished_replay(spark: SparkSession, settings: Settings, day: date,
                     canonical: DataFrame) -> int | None:
    """Check that the day's canonical_totals come from a replay that finished (its
    replay_runs row is written last), and return the event_log version it pinned (None for a
    replay from Kafka). A day never replayed would otherwise show every provisional window
    as MISSING_IN_CANONICAL, and a replay that failed between its writes would pair new totals
    with stale duplicates: both as breaks nothing explains. uncaught_duplicates needs no look
    of its own: a replay writes it only after its canonical_totals commit, so when the totals'
    replay finished, the day's duplicates are that replay's (or a later one's, which would
    have replaced the totals first)."""
    from pyspark.sql import functions as F

    wh = settings.warehouse_path
    rerun = f"run `reckon replay --date {day}`, then audit the day again"
    runs = ({} if not tb.table_exists(wh, tb.REPLAY_RUNS) else {
        r.replay_id: r.event_log_version for r in tb.read_table(spark, wh, tb.REPLAY_RUNS)
        .filter(F.col("window_date") == F.lit(day))
        .select("replay_id", "event_log_version").collect()})
    if not runs:
        raise UsageError(f"--date={day.isoformat()!r}: the day has no finished replay; {rerun}")

    def replay_of(df: DataFrame) -> str | None:
        row = df.filter(F.col("window_date") == F.lit(day)).select("replay_id").first()
        return None if row is None else str(row.replay_id)

    totals_by = replay_of(canonical)
    if totals_by is not None and totals_by not in runs:
        raise UsageError(f"--date={day.isoformat()!r}: the replay {totals_by} that wrote the "
                         f"day's canonical_totals did not finish; {rerun}")
    pinned = runs.get(totals_by) if totals_by is not None else max(
        (v for v in runs.values() if v is not None), default=None)
    return None if pinned is None else int(pinned)


def _late_events_in_replay_view(settings: Settings, pinned: int | None) -> int | None:
    """The late_events version that holds exactly the batches whose events the day's replay
    read (the event_log version it pinned), or None to read the table as it is.

    The stream keeps running through the night, and a straggler of the day that lands
    between the replay and the audit would be in late_events but not in the canonical
    totals: a false break (residual = -late) until the next night's lookback re-run. A batch
    commits to event_log and late_events, then its progress row, and the next batch starts
    after that, so with one stream query at a time the batches missing from the replay's
    event_log version are the newest commits of late_events: the version just before the
    first of them is the cut. -1 means none of late_events' batches were in the replay's
    view. A replay from Kafka pins no version: None."""
    wh = settings.warehouse_path
    if pinned is None:
        return None
    in_view: dict[str, int | None] = {}  # per stream query: newest batch in the pinned log
    oldest: int | None = None  # the oldest late_events commit missing from the replay's view
    for version, (app, _table, batch) in commits.marked_commits(wh, tb.LATE_EVENTS):
        if app not in in_view:
            in_view[app] = commits.last_marked_batch(wh, tb.EVENT_LOG, app,
                                                at_version=pinned)
        newest = in_view[app]
        if newest is not None and batch <= newest:
            return None if oldest is None else version
        oldest = version
    return None if oldest is None else oldest - 1


_KEYS = ("window_start", *TOTAL_IDENTITY)
# every input's measures, side by side (null where the input has no row), typed as the
# reconciliation table declares them
_MEASURES = ("provisional_amount", "provisional_count", "provisional_status",
             "provisional_revision", "canonical_amount", "canonical_count", "late_amount",
             "late_count", "duplicate_amount", "duplicate_count")


def _full_join(frames: list[DataFrame]) -> DataFrame | None:
    """Full outer join on (window_start, key, currency) of frames that hold a grain once each."""
    if not frames:
        return None
    joined = frames[0]
    for frame in frames[1:]:
        joined = joined.join(frame, list(_KEYS), "full")
    return joined


def reconcile_frame(provisional: DataFrame | None, canonical: DataFrame | None,
                    late: DataFrame | None, duplicates: DataFrame | None,
                    tolerance: Tolerance, day: date, run_id: str, width_us: int) -> DataFrame:
    """The reconciliation rows of one day (not yet written). Inputs may be missing (None).

    provisional_totals, canonical_totals and uncaught_duplicates hold a (window, key, currency)
    once a day (the fold of the stream's deltas and the replay's grouping are keyed by it), and the day's
    late events are summed per (window, key, currency) first, so the inputs are full-outer
    joined as they are: the two big sides each hashed once. Grouping a union of the four hashed every row
    twice, in a partial and a final aggregation that Spark keeps even after a shuffle that has
    already brought a key's rows together (same rows, 6 warm full-scale runs each: median
    14.97 -> 12.94 s, JVM CPU 27.1 -> 24.3 s)."""
    keys = list(_KEYS)
    big = _full_join([f for f in (
        None if provisional is None else provisional.select(
            *keys, F.col("total_amount").alias("provisional_amount"),
            F.col("event_count").alias("provisional_count"),
            F.col("status").alias("provisional_status"),
            F.col("revision").alias("provisional_revision")),
        None if canonical is None else canonical.select(
            *keys, F.col("total_amount").alias("canonical_amount"),
            F.col("event_count").alias("canonical_count")),
    ) if f is not None])
    if big is None:
        raise UsageError("nothing to audit: neither provisional_totals nor canonical_totals "
                         "exists in this warehouse (run `reckon stream` and `reckon replay`)")
    small = _full_join([f for f in (
        None if late is None else late.groupBy(*keys).agg(
            F.sum(F.col("amount").cast(tb.TOTAL)).alias("late_amount"),
            F.count(F.lit(1)).alias("late_count")),
        None if duplicates is None else duplicates.select(
            *keys, "duplicate_amount", "duplicate_count"),
    ) if f is not None])
    g = big if small is None else big.join(small, keys, "full")
    declared = {f.name: f.dataType for f in tb.SCHEMAS[tb.RECONCILIATION].fields}
    g = g.withColumns({name: F.lit(None).cast(declared[name])  # an input that does not exist
                       for name in _MEASURES if name not in g.columns})
    g = g.withColumns({
        "late_amount": F.coalesce(F.col("late_amount"), F.lit(_ZERO)),
        "late_count": F.coalesce(F.col("late_count"), F.lit(0)),
        "duplicate_amount": F.coalesce(F.col("duplicate_amount"), F.lit(_ZERO)),
        "duplicate_count": F.coalesce(F.col("duplicate_count"), F.lit(0)),
    })
    p_amt = F.coalesce(F.col("provisional_amount"), F.lit(_ZERO))
    p_cnt = F.coalesce(F.col("provisional_count"), F.lit(0))
    c_amt = F.coalesce(F.col("canonical_amount"), F.lit(_ZERO))
    c_cnt = F.coalesce(F.col("canonical_count"), F.lit(0))
    g = g.withColumns({
        "gap_amount": (c_amt - p_amt).cast(tb.TOTAL),
        "gap_count": c_cnt - p_cnt,
    })
    g = g.withColumns({
        "residual_amount": residual(F.col("gap_amount"), F.col("late_amount"),
                                    F.col("duplicate_amount")).cast(tb.TOTAL),
        "residual_count": residual(F.col("gap_count"), F.col("late_count"),
                                   F.col("duplicate_count")),
    })
    measure = Measure(
        has_provisional=F.col("provisional_count").isNotNull(),
        has_canonical=F.col("canonical_count").isNotNull(),
        gap_amount=F.col("gap_amount"), gap_count=F.col("gap_count"),
        residual_amount=F.col("residual_amount"), residual_count=F.col("residual_count"),
        within=within_tolerance_rule(F.col("residual_amount"), F.col("residual_count"),
                                     c_amt, tolerance))
    return g.withColumns({
        "status": recon_status_col(measure),
        "window_end": F.timestamp_micros(F.unix_micros("window_start") + F.lit(width_us)),
        "audit_run_id": F.lit(run_id),
        "window_date": F.lit(day),
    })


def _count_aggregates() -> list[Column]:
    """Rows per status and event counts over the day's rows: counts, which may be added
    across currencies (amounts are summed per currency only, ``_currency_aggregates``)."""
    return [
        *(F.count_if(F.col("status") == F.lit(status.value)).alias(status.value)
          for status in ReconStatus),
        F.sum(F.coalesce("provisional_count", F.lit(0))).alias("pn"),
        F.sum(F.coalesce("canonical_count", F.lit(0))).alias("cn"),
        F.sum("late_count").alias("ln"),
        F.sum("duplicate_count").alias("dn")]


def _currency_aggregates() -> list[Column]:
    """Per currency (grouped by it): the counts of ``_count_aggregates`` and the exact sums."""
    explained = F.col("status") == F.lit(ReconStatus.EXPLAINED.value)
    return [
        *_count_aggregates(),
        F.sum(F.coalesce("provisional_amount", F.lit(_ZERO))).alias("p"),
        F.sum(F.coalesce("canonical_amount", F.lit(_ZERO))).alias("c"),
        F.sum("gap_amount").alias("gap"), F.sum("late_amount").alias("late"),
        F.sum("duplicate_amount").alias("dup"), F.sum("residual_amount").alias("res"),
        F.sum(F.when(explained, F.col("residual_amount")).otherwise(F.lit(_ZERO)))
        .alias("tolerated")]


def _completeness(counted: int, duplicates: int, canonical: int) -> Decimal | None:
    """Share of the canonical events the stream counted once: (counted - over-counted copies)
    / canonical events, to 6 places; None without canonical events."""
    if canonical == 0:
        return None
    return (Decimal(counted - duplicates) / Decimal(canonical)).quantize(Decimal("0.000001"))


def _currency_summary(row: Any) -> CurrencySummary:
    """One currency's figures from its aggregated row (``_currency_aggregates``)."""
    counts = {status.value: int(row[status.value]) for status in ReconStatus}

    def money(name: str) -> Decimal:  # at the stored scale, 0.000 included
        return Decimal(row[name] if row[name] is not None else 0).quantize(_STORED)

    return CurrencySummary(
        currency=row["currency"], rows=sum(counts.values()), status_counts=counts,
        unexplained=sum(counts[status.value] for status in UNEXPLAINED_STATUSES),
        provisional_total=money("p"), canonical_total=money("c"), gap_total=money("gap"),
        late_total=money("late"), duplicate_total=money("dup"), residual_total=money("res"),
        tolerated_total=money("tolerated"), provisional_events=int(row["pn"] or 0),
        canonical_events=int(row["cn"] or 0), late_events=int(row["ln"] or 0),
        duplicate_events=int(row["dn"] or 0),
        completeness=_completeness(int(row["pn"] or 0), int(row["dn"] or 0),
                                   int(row["cn"] or 0)))


def currency_summary_dict(summary: CurrencySummary) -> dict[str, Any]:
    """A CurrencySummary as JSON-safe values (amounts as exact decimal text)."""
    return {name: (str(value) if isinstance(value, Decimal) else value)
            for name, value in asdict(summary).items()}


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


def audit_day(spark: SparkSession, settings: Settings, day: date, *, kind: str = "nightly",
              recorder: AuditRecorder | None) -> AuditResult:
    """Reconcile ``day``, overwrite its ``reconciliation`` partition, record run and breaks
    with ``recorder`` (None: record nothing, e.g. a benchmark). One audit of a day at a time
    (reckon.writer_lock): a second one is refused before it writes.

    Example:
        >>> audit_day(spark, settings, day, recorder=audit_recorder(settings))  # doctest: +SKIP
    """
    try:
        with WriterLock.take(settings.warehouse_path, writer_scope("audit", day),
                             f"audit of {day}"):
            return _audit_day(spark, settings, day, kind=kind, recorder=recorder)
    except Exception as exc:
        if not tb.is_missing_file_error(exc):
            raise
        # the audit reads event_log and late_events at the versions the day's replay pinned
        raise UsageError(
            f"the audit of {day} reads the table versions its replay read, and files of those "
            "versions are gone (removed by `reckon vacuum` once older than its retention, or "
            f"by hand): replay the day again (`reckon replay --date {day}`) and audit it "
            "then") from exc


def _audit_day(spark: SparkSession, settings: Settings, day: date, *, kind: str,
               recorder: AuditRecorder | None) -> AuditResult:
    from audits.attribution import late_attribution

    started_at, t0 = datetime.now(UTC), time.monotonic()
    wh = settings.warehouse_path
    rules = settings.event_time_rules()
    tolerance = Tolerance(settings.tolerance_abs, settings.tolerance_rel)
    run_id = f"audit-{day.isoformat()}-{uuid.uuid4().hex[:12]}"
    in_day = F.col("window_date") == F.lit(day)
    frames, versions, pinned = _read_inputs(spark, settings, day)

    def day_rows(name: str) -> DataFrame | None:
        df = frames[name]
        return None if df is None else df.filter(in_day)

    rows = reconcile_frame(
        day_rows(tb.PROVISIONAL_TOTALS), day_rows(tb.CANONICAL_TOTALS),
        day_rows(tb.LATE_EVENTS), day_rows(tb.UNCAUGHT_DUPLICATES),
        tolerance, day, run_id, rules.windows.size)
    tb.ensure_table(spark, wh, tb.RECONCILIATION)
    # The run's summary is observed while the rows are written (no second read of them). The
    # observed node follows the final aggregation, in the write's result stage, whose
    # accumulator updates Spark applies once per partition even when a task is retried.
    summary = Observation("audit_summary")
    tb.replace_rows(tb.conform(rows, tb.RECONCILIATION).observe(summary, *_count_aggregates()),
                    wh, tb.RECONCILIATION, tb.window_day(day))
    s = observed(summary, {**{status.value: 0 for status in ReconStatus},
                           "pn": 0, "cn": 0, "ln": 0, "dn": 0})
    counts = {status.value: int(s[status.value]) for status in ReconStatus}
    unexplained = sum(counts[status.value] for status in UNEXPLAINED_STATUSES)
    completeness = _completeness(int(s["pn"] or 0), int(s["dn"] or 0), int(s["cn"] or 0))
    # this run's rows only: another audit of the day may have replaced the partition since
    written = tb.read_table(spark, wh, tb.RECONCILIATION).filter(
        in_day & (F.col("audit_run_id") == F.lit(run_id)))
    # the money, per currency (one row per currency comes back)
    currencies = tuple(_currency_summary(r) for r in written.groupBy("currency")
                       .agg(*_currency_aggregates()).orderBy("currency").collect())
    _check_not_overtaken(run_id, day, sum(counts.values()),
                         sum(c.rows for c in currencies))

    breaks_recorded = 0
    replaced_signed_off: str | None = None
    if recorder is not None:
        # the attribution reads what the reconciliation read: the event log the replay
        # pinned, late_events as of the same cut
        seen = {tb.LATE_EVENTS: versions.get(tb.LATE_EVENTS), tb.EVENT_LOG: pinned}
        attribution = (late_attribution(spark, settings, day, versions=seen)
                       if tb.table_exists(wh, tb.EVENT_LOG) else [])
        run = AuditRun(
            run_id=run_id, day=day, kind=kind, started_at=started_at,
            duration_seconds=round(time.monotonic() - t0, 3),
            # the OS account or DB login role, never a free name
            reconciler=recorder.ledger.principal(),
            params={**tolerance.to_config(), **rules.to_config()},
            status_counts=counts, rows=sum(counts.values()), unexplained=unexplained,
            table_versions=versions, currencies=currencies, completeness=completeness)
        reads = StoryInputs(
            provisional=day_rows(tb.PROVISIONAL_TOTALS), late=day_rows(tb.LATE_EVENTS),
            canonical=day_rows(tb.CANONICAL_TOTALS), event_log_version=pinned,
            deltas_version=versions.get(tb.PROVISIONAL_DELTAS),
            progress_version=versions.get(tb.WATERMARK_PROGRESS))
        breaks_recorded, replaced_signed_off = _record(spark, settings, recorder, run,
                                                       attribution, written, reads)

    return AuditResult(
        run_id=run_id, day=day.isoformat(), kind=kind, rows=sum(counts.values()),
        status_counts=counts, unexplained=unexplained,
        currencies=[currency_summary_dict(c) for c in currencies],
        completeness=None if completeness is None else str(completeness),
        tolerance=tolerance.to_config(), table_versions=versions,
        breaks_recorded=breaks_recorded, duration_seconds=round(time.monotonic() - t0, 3),
        replaced_signed_off_run=replaced_signed_off)


def _read_inputs(spark: SparkSession, settings: Settings, day: date
                 ) -> tuple[dict[str, DataFrame | None], dict[str, int], int | None]:
    """The audit's inputs (table -> frame, None when absent), the Delta versions read, and
    the event log version the day's replay pinned. late_events is read as of the cut that
    replay saw (``_late_events_in_replay_view``), so both sides come from one moment.

    Example:
        >>> frames, versions, pinned = _read_inputs(spark, settings, day)  # doctest: +SKIP
    """
    wh = settings.warehouse_path
    versions: dict[str, int] = {}
    frames: dict[str, DataFrame | None] = {}
    for name in (tb.CANONICAL_TOTALS, tb.LATE_EVENTS, tb.UNCAUGHT_DUPLICATES):
        df, version = _versioned(spark, settings, name)
        frames[name] = df
        if version is not None:
            versions[name] = version
    tb.require_layout(spark, wh, (tb.PROVISIONAL_DELTAS, tb.CANONICAL_TOTALS, tb.LATE_EVENTS,
                                  tb.UNCAUGHT_DUPLICATES, tb.RECONCILIATION))
    frames[tb.PROVISIONAL_TOTALS], read = _provisional_of_day(spark, settings, day)
    versions.update(read)
    for name in (tb.CANONICAL_TOTALS, tb.UNCAUGHT_DUPLICATES):
        if frames[name] is None:
            raise UsageError(f"no {name} in {str(wh)!r}: run `reckon replay --date {day}` "
                             "before auditing the day")
    canonical = frames[tb.CANONICAL_TOTALS]
    assert canonical is not None, "checked just above"  # narrows for mypy
    pinned = _finished_replay(spark, settings, day, canonical)
    if frames[tb.LATE_EVENTS] is not None:
        cut = _late_events_in_replay_view(settings, pinned)
        if cut is not None and cut != versions[tb.LATE_EVENTS]:
            frames[tb.LATE_EVENTS] = (
                None if cut < 0 else tb.read_table(spark, wh, tb.LATE_EVENTS, version=cut))
            versions[tb.LATE_EVENTS] = cut
    return frames, versions, pinned


def _record(spark: SparkSession, settings: Settings, recorder: AuditRecorder, run: AuditRun,
            attribution: list[AttributionRow], written: DataFrame,
            reads: StoryInputs) -> tuple[int, str | None]:
    """Record ``run``: its breaks, their stories, then the run itself; returns the breaks
    recorded and the signed-off run it replaced (``_replaced_signed_off_run``).

    Breaks first, then the run: the run becomes current only once its breaks are all stored,
    so a failed insert leaves the previous run current (with its own breaks) rather than a
    current run that lists no breaks next to its unexplained count.

    Example:
        >>> recorder = audit_recorder(settings)  # doctest: +SKIP
        >>> _record(spark, settings, recorder, run, [], written, reads)  # doctest: +SKIP
        (12, None)
    """
    db, run_id, day = recorder.ledger, run.run_id, run.day
    db.ready()  # the schema, migrated once here, before the executors write
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
    if tb.table_exists(settings.warehouse_path, tb.EVENT_LOG) and expected:
        _record_stories(spark, settings, day, written, reads, recorder, run_id, expected)
    db.record_audit_run(run, attribution)
    return breaks_recorded, _replaced_signed_off_run(db, day, run.kind, run_id)


def _record_stories(spark: SparkSession, settings: Settings, day: date, written: DataFrame,
                    reads: StoryInputs, recorder: AuditRecorder, run_id: str,
                    expected: int) -> None:
    """Each break's ``reckon explain`` story and contributing inputs, in the report database
    before the run becomes current (audits/stories.py): the workbench reads them."""
    told = record_break_stories(spark, settings, day, written, reads, recorder, run_id)
    if told != expected:
        raise ConcurrentAuditError(
            f"audit {run_id} of {day} recorded {expected} break(s) but told the story of "
            f"{told}: another audit of {day} replaced its reconciliation rows meanwhile. Audit "
            f"a day one run at a time; run `reckon audit --date {day}` again (this run was not "
            "recorded, the previous one stays current)")


def _check_not_overtaken(run_id: str, day: date, written: int, found: int) -> None:
    """Another audit of the day replaced this run's rows between its write and its read."""
    if found != written:
        raise ConcurrentAuditError(
            f"audit {run_id} of {day} wrote {written} reconciliation row(s) but finds {found}: "
            f"another audit of {day} replaced them meanwhile. Audit a day one run at a time; "
            f"run `reckon audit --date {day}` again (this run was not recorded, the previous "
            "one stays current)")


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
    SQLite takes one writer at a time, so its inserts run in one partition."""
    url, insert_breaks = recorder.ledger.url, recorder.write_breaks

    breaks = written.filter(F.col("status") != F.lit(ReconStatus.MATCHED.value)).select(
        "window_start", "window_end", "key", "currency", "status", "provisional_amount",
        "canonical_amount",
        "gap_amount", "gap_count", "late_amount", "late_count", "duplicate_amount",
        "duplicate_count", "residual_amount", "residual_count",
        _explanation().alias("explanation"))
    if url.startswith("sqlite"):
        breaks = breaks.coalesce(1)

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
