"""The reconciliation rows of a day and their summary, as Spark columns.

``reconcile_frame`` full-outer joins the four inputs on (window_start, key, currency) and
applies reckon.reconcile's arithmetic and status rules; the aggregates observe the run's counts
while the rows are written, and sum its money per currency (amounts of two currencies are never
added). Kept apart from ``audits.audit`` (which orders the steps) so the arithmetic reads alone.

Example:
    >>> rows = reconcile_frame(prov, canon, late, dups, Tolerance(), day, "audit-1", 60_000_000)  # doctest: +SKIP
    >>> rows.select("status").distinct().collect()  # doctest: +SKIP
    [Row(status='MATCHED'), Row(status='EXPLAINED')]
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import date
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from audits.records import CurrencySummary
from reckon.errors import UsageError
from reckon.money import money_context
from reckon.reconcile import UNEXPLAINED_STATUSES, Measure, ReconStatus, Tolerance, residual
from reckon.reconcile import within_tolerance as within_tolerance_rule
from reckon.schema import TOTAL_IDENTITY
from spark import tables as tb
from spark.rules import recon_status_col

__all__ = ["count_aggregates", "currency_aggregates", "currency_summary",
           "currency_summary_dict", "event_completeness", "reconcile_frame"]

_ZERO = Decimal("0.000")
_STORED = Decimal("0.001")
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
    joined as they are: the two big sides each hashed once. Grouping a union of the four
    hashes every row twice, in a partial and a final aggregation that Spark keeps even after a
    shuffle that has already brought a key's rows together (bench/CHANGELOG.md has the
    measurements)."""
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
    return reconciled(g, tolerance, day, run_id, width_us)


def reconciled(g: DataFrame, tolerance: Tolerance, day: date, run_id: str,
               width_us: int) -> DataFrame:
    """The reconciliation rows from the inputs' measures side by side (one row per grain,
    null where an input has no row): reckon.reconcile's arithmetic and status rules."""
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


def count_aggregates() -> list[Column]:
    """Rows per status and event counts over the day's rows: counts, which may be added
    across currencies (amounts are summed per currency only, ``currency_aggregates``)."""
    return [
        *(F.count_if(F.col("status") == F.lit(status.value)).alias(status.value)
          for status in ReconStatus),
        F.sum(F.coalesce("provisional_count", F.lit(0))).alias("pn"),
        F.sum(F.coalesce("canonical_count", F.lit(0))).alias("cn"),
        F.sum("late_count").alias("ln"),
        F.sum("duplicate_count").alias("dn")]


def currency_aggregates() -> list[Column]:
    """Per currency (grouped by it): the counts of ``count_aggregates`` and the exact sums."""
    explained = F.col("status") == F.lit(ReconStatus.EXPLAINED.value)
    return [
        *count_aggregates(),
        F.sum(F.coalesce("provisional_amount", F.lit(_ZERO))).alias("p"),
        F.sum(F.coalesce("canonical_amount", F.lit(_ZERO))).alias("c"),
        F.sum("gap_amount").alias("gap"), F.sum("late_amount").alias("late"),
        F.sum("duplicate_amount").alias("dup"), F.sum("residual_amount").alias("res"),
        F.sum(F.when(explained, F.col("residual_amount")).otherwise(F.lit(_ZERO)))
        .alias("tolerated")]


def event_completeness(counted: int, duplicates: int, canonical: int) -> Decimal | None:
    """Share of the canonical events the stream counted once: (counted - over-counted copies)
    / canonical events, to 6 places; None without canonical events."""
    if canonical == 0:
        return None
    return (Decimal(counted - duplicates) / Decimal(canonical)).quantize(Decimal("0.000001"))


def currency_summary(row: Any) -> CurrencySummary:
    """One currency's figures from its aggregated row (``currency_aggregates``)."""
    counts = {status.value: int(row[status.value]) for status in ReconStatus}

    def money(name: str) -> Decimal:  # at the stored scale, 0.000 included
        with money_context():  # DECIMAL(38,3) has more digits than the default context
            return Decimal(row[name] if row[name] is not None else 0).quantize(_STORED)

    return CurrencySummary(
        currency=row["currency"], rows=sum(counts.values()), status_counts=counts,
        unexplained=sum(counts[status.value] for status in UNEXPLAINED_STATUSES),
        provisional_total=money("p"), canonical_total=money("c"), gap_total=money("gap"),
        late_total=money("late"), duplicate_total=money("dup"), residual_total=money("res"),
        tolerated_total=money("tolerated"), provisional_events=int(row["pn"] or 0),
        canonical_events=int(row["cn"] or 0), late_events=int(row["ln"] or 0),
        duplicate_events=int(row["dn"] or 0),
        completeness=event_completeness(int(row["pn"] or 0), int(row["dn"] or 0),
                                        int(row["cn"] or 0)))


def currency_summary_dict(summary: CurrencySummary) -> dict[str, Any]:
    """A CurrencySummary as JSON-safe values (amounts as exact decimal text)."""
    return {name: (str(value) if isinstance(value, Decimal) else value)
            for name, value in asdict(summary).items()}
