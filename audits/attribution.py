"""Who is late: late events of a day against all events of the day, per dimension.

Lateness is rarely random; dropping it biases totals against exactly the sources that are late.
For each value of a dimension: ``late_share = late events with the value / all late events``,
``event_share = events with the value / all events`` and ``lift = late_share / event_share``
(1 = late as often as its volume predicts; a partition that carries every late event has
``lift = 1 / event_share``).

Money: a value's late amounts are kept per currency (``late_amounts``: currency -> exact sum),
never added across currencies; ``currency`` is a dimension of its own, so a currency whose
events run late stands out like a partition does.

Counting: each late EVENT counts once (distinct ``event_id`` of ``late_events`` with
``window_date == day``; with hopping windows one event can be late for several windows). All
events: valid events of ``event_log`` with ``event_date == day``, without the copies the stream
flagged as duplicates, one per ``event_id`` (the first in arrival order). Dimensions:
``partition``, ``source``, ``currency``, ``arrival_hour`` (UTC hour of arrival, 'HH') and
``lateness_bucket`` (late events only, by ``lateness_seconds``; an event late for several
windows takes its largest lateness; there ``event_share`` is the bucket's share of late
events, so its lift is 1).

Shares are exact ratios rounded half-even to 6 places; lift is computed from the exact counts
(not the rounded shares) and rounded half-even to 4 places; None when event_share is 0.
Amounts are exact Decimals. Everything is aggregated in Spark; only one row per value is
collected.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audits.records import AttributionRow
from reckon.eventtime import EventTimeRules
from reckon.timeutil import MICROS_PER_DAY, from_micros

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["DIMENSIONS", "LATENESS_BUCKETS", "attribution_of_rows", "late_attribution"]

DIMENSIONS = ("partition", "source", "currency", "lateness_bucket", "arrival_hour")

#: (label, upper bound in seconds, inclusive); the last bucket has no upper bound.
LATENESS_BUCKETS: tuple[tuple[str, int | None], ...] = (
    ("<=1s", 1), ("1-5s", 5), ("5-30s", 30), ("30s-5m", 300), (">5m", None))

_HOUR_MICROS = 3_600_000_000


def _arrival_hour(column: str = "arrival_time") -> Column:
    """UTC hour of a timestamp as 'HH', from epoch microseconds: independent of the session's
    time zone."""
    from pyspark.sql import functions as F

    return F.lpad(F.expr(f"(unix_micros({column}) % {MICROS_PER_DAY}) div {_HOUR_MICROS}")
                  .cast("string"), 2, "0")


def _bucket(column: str = "lateness_seconds") -> Column:
    from pyspark.sql import functions as F

    expr = None
    for label, upper in LATENESS_BUCKETS:
        if upper is None:
            return expr.otherwise(F.lit(label)) if expr is not None else F.lit(label)
        cond = F.col(column) <= F.lit(upper)
        expr = F.when(cond, F.lit(label)) if expr is None else expr.when(cond, F.lit(label))
    raise AssertionError("LATENESS_BUCKETS must end with an open bucket")  # pragma: no cover


def _long(frame: DataFrame, dims: dict[str, Column]) -> DataFrame:
    """One row per (event, dimension): columns dimension, value, currency, amount. One pass over
    ``frame`` (an explode, not a union of one select per dimension: each branch of a union
    would evaluate ``frame`` again, here the first-copy window over the day's event log)."""
    from pyspark.sql import functions as F

    pairs = F.array(*[F.struct(F.lit(name).alias("dimension"),
                               value.cast("string").alias("value"))
                      for name, value in dims.items()])
    return (frame.select(F.explode(pairs).alias("_d"), F.col("currency"), F.col("amount"))
            .select("_d.dimension", "_d.value", "currency", "amount"))


def _ratio(num: int, den: int, places: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        return (Decimal(num) / Decimal(den)).quantize(Decimal(1).scaleb(-places),
                                                      rounding=ROUND_HALF_EVEN)


def late_attribution(spark: SparkSession, wh: Path, rules: EventTimeRules, day: date, *,
                     versions: Mapping[str, int | None] | None = None) -> list[AttributionRow]:
    """Attribution rows of ``day``, ordered by dimension (as in ``DIMENSIONS``) then value
    (partitions numerically, buckets from least to most late, others as text). Values with no
    late events are included (late_share 0, lift 0). ``versions`` pins event_log and
    late_events (the audit passes the versions its reconciliation read); None: as they are."""
    from pyspark.sql import functions as F

    from spark import tables

    pinned = versions or {}
    events = _day_events(spark, wh, rules, day, pinned)
    late = _late_of_day(spark, wh, day, pinned)
    dims = {"partition": F.col("partition"), "source": F.col("source"),
            "currency": F.col("currency")}
    late_long = _long(late, {**dims, "lateness_bucket": _bucket(),
                             "arrival_hour": _arrival_hour()})
    event_long = _long(events, {**dims, "arrival_hour": _arrival_hour()})
    # late events and amounts per (dimension, value, currency): one row per currency of a
    # value comes back, so amounts are summed per currency and counts added in Python
    late_agg = late_long.groupBy("dimension", "value", "currency").agg(
        F.count(F.lit(1)).alias("late_events"),
        F.sum(F.col("amount").cast(tables.TOTAL)).alias("late_amount"))
    event_agg = event_long.groupBy("dimension", "value", "currency").agg(
        F.count(F.lit(1)).alias("all_events"))
    rows = late_agg.join(event_agg, ["dimension", "value", "currency"], "full_outer").collect()
    return attribution_of_rows(rows)


def attribution_of_rows(rows: Iterable[Any]) -> list[AttributionRow]:
    """The attribution rows from per (dimension, value, currency) counts, whichever engine
    aggregated them (Spark here, DuckDB in ``audits.bound_whatif_duck``): each row has
    ``late_events``, ``late_amount`` (exact, that currency's only) and ``all_events``, any of
    them null. Counts are added per (dimension, value); amounts stay per currency.

    Example: ``attribution_of_rows([{"dimension": "partition", "value": "0", "currency":
    "EUR", "late_events": 1, "late_amount": Decimal("2.500"), "all_events": 4}])``.
    """
    counts: dict[tuple[str, str], tuple[int, dict[str, Decimal], int]] = {}
    for r in rows:
        n_late, amounts, n_all = counts.get((r["dimension"], r["value"]), (0, {}, 0))
        if r["late_events"]:
            amounts = {**amounts, r["currency"]: Decimal(r["late_amount"])}
        counts[(r["dimension"], r["value"])] = (n_late + int(r["late_events"] or 0), amounts,
                                                n_all + int(r["all_events"] or 0))
    return _attribution_rows(counts)


def _day_events(spark: SparkSession, wh: Path, rules: EventTimeRules, the_day: date,
                pinned: Mapping[str, int | None]) -> DataFrame:
    """The events the day's windows hold, the population its late events come from: with
    hopping windows (or a step that does not divide 24 hours) the last windows reach past
    midnight, and an event of the next day can be late for one of them. The first copy of
    each event, duplicates left out."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from spark import tables
    from spark.rules import arrival_order

    lo, hi = rules.windows.day_event_times(the_day)
    first_copy = Window.partitionBy("event_id").orderBy(*arrival_order())
    return (tables.read_table(spark, wh, tables.EVENT_LOG,
                              version=pinned.get(tables.EVENT_LOG))
            .filter((F.col("event_date") >= F.lit(the_day))
                    & (F.col("event_date") <= F.lit(from_micros(hi - 1).date()))
                    & (F.col("event_time") >= F.timestamp_micros(F.lit(lo)))
                    & (F.col("event_time") < F.timestamp_micros(F.lit(hi)))
                    & ~F.coalesce(F.col("is_duplicate"), F.lit(False)))
            .withColumn("_copy", F.row_number().over(first_copy))
            .filter(F.col("_copy") == 1))


def _late_of_day(spark: SparkSession, wh: Path, the_day: date,
                 pinned: Mapping[str, int | None]) -> DataFrame:
    """The day's late events, one row per event (an event late for several hopping windows
    counts once, at its largest lateness)."""
    from pyspark.sql import functions as F

    from spark import tables

    if tables.table_exists(wh, tables.LATE_EVENTS):
        late_rows = tables.read_table(spark, wh, tables.LATE_EVENTS,
                                      version=pinned.get(tables.LATE_EVENTS))
    else:
        late_rows = spark.createDataFrame([], tables.SCHEMAS[tables.LATE_EVENTS])
    return (late_rows.filter(F.col("window_date") == F.lit(the_day))
            .groupBy("event_id")
            .agg(F.max("partition").alias("partition"), F.max("source").alias("source"),
                 F.max("currency").alias("currency"), F.max("amount").alias("amount"),
                 F.max("arrival_time").alias("arrival_time"),
                 F.max("lateness_seconds").alias("lateness_seconds")))


def _attribution_rows(counts: Mapping[tuple[str, str], tuple[int, dict[str, Decimal], int]]
                      ) -> list[AttributionRow]:
    """(dimension, value) -> (late events, late amounts per currency, all events) as rows:
    shares of the late events and of all events, and their ratio (lift), exact, rounded once.
    Lateness buckets hold late events only: their share is of the late events."""
    total_late = sum(c[0] for (dim, _), c in counts.items() if dim == "partition")
    total_events = sum(c[2] for (dim, _), c in counts.items() if dim == "partition")
    out = []
    for (dim, value), (n_late, amounts, n_all) in sorted(counts.items(), key=_order):
        if dim == "lateness_bucket":
            n_all, total = n_late, total_late  # late only: its share of late events
        else:
            total = total_events
        late_share = _ratio(n_late, total_late, 6) if total_late else Decimal("0.000000")
        event_share = _ratio(n_all, total, 6) if total and n_all else Decimal("0.000000")
        if n_all == 0 or total == 0:
            lift = None
        elif total_late == 0:
            lift = Decimal("0.0000")
        else:  # (n_late / total_late) / (n_all / total), exactly, then rounded once
            lift = _ratio(n_late * total, total_late * n_all, 4)
        out.append(AttributionRow(
            dimension=dim, value=value, late_events=n_late,
            late_amounts=dict(sorted(amounts.items())), all_events=n_all,
            late_share=late_share, event_share=event_share, lift=lift))
    return out


def _order(item: tuple[tuple[str, str], tuple[int, dict[str, Decimal], int]]
           ) -> tuple[int, int, str]:
    dim, value = item[0]
    rank = DIMENSIONS.index(dim)
    if dim == "partition":
        return rank, int(value), value
    if dim == "lateness_bucket":
        labels = [label for label, _ in LATENESS_BUCKETS]
        return rank, labels.index(value), value
    return rank, 0, value
