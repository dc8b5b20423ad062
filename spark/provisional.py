"""provisional_totals, derived: the stream's appended deltas folded, statuses from the watermark.

The stream never rewrites a total. Each micro-batch appends what it adds to each
(window, key, currency) as one row of ``provisional_deltas`` (its sum, count, whether it
revised a closed window, and which batch), and records its watermark in
``watermark_progress``. Everything ``provisional_totals`` shows is a function of those two
append-only tables, computed on read and bounded to the windows asked for:

* the figures: the deltas' sums and counts; ``revision`` counts the batches that revised the
  window; ``first_batch_id``/``last_batch_id`` the first and last batch that added to it;
* ``status``: OPEN / CLOSED / FINAL under the newest recorded watermark (reckon.eventtime);
* when it closed: the first batch, at or after the window's first delta, whose watermark
  reached the window's end (``closed_batch_id``, ``watermark_at_close``, ``closed_at``); when
  it became final: the same with ``end + allowed_lateness``. A window's end can only be passed once, since
  the watermark never goes back, so "the batch that passed it" is found by an equi-join: each
  progress row names the window ends its advance passed (the step's multiples in
  ``(watermark_before, watermark]``).

These are the rules the pure reference applies batch by batch (reckon.reference.stream_outcome);
the Spark tier compares the two on every streamed scenario. ``reports.duck.provisional_sql`` is
the same fold in DuckDB SQL, for the JVM-free read path: a change here is made there too
(tests/test_duck_spark.py compares the two on streamed warehouses).

    >>> totals = read_provisional(spark, "warehouse", since_start=day_start)  # doctest: +SKIP
    >>> totals.filter("status = 'OPEN'").show()                               # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from reckon.eventtime import EventTimeRules, ends_passed
from reckon.timeutil import day_bounds
from spark import tables as tb
from spark.rules import status_col
from storage import commits

__all__ = ["ProvisionalVersions", "provisional_versions", "read_day", "read_provisional",
           "table_version"]


@dataclass(frozen=True)
class ProvisionalVersions:
    """The versions of the two tables provisional_totals is derived from: what an audit pins
    so that it reads one consistent view, and records as what it read."""

    deltas: int | None
    progress: int | None


def provisional_versions(warehouse: str | Path) -> ProvisionalVersions:
    """The newest committed versions (None: the table has no commit)."""
    return ProvisionalVersions(deltas=commits.current_version(warehouse, tb.PROVISIONAL_DELTAS),
                               progress=commits.current_version(warehouse, tb.WATERMARK_PROGRESS))


def table_version(warehouse: str | Path, name: str) -> int | None:
    """The version a reader pins of table ``name``; for provisional_totals, the version of
    the deltas it folds (None: nothing to read)."""
    source = tb.PROVISIONAL_DELTAS if name == tb.PROVISIONAL_TOTALS else name
    return commits.current_version(warehouse, source)


def read_day(spark: SparkSession, warehouse: str | Path, name: str, rules: EventTimeRules,
             day: date, version: int | None = None) -> DataFrame:
    """Table ``name``'s rows of the windows (or partition) of ``day``, at ``version``
    (table_version's number); provisional_totals derived from its deltas at that version.

    >>> read_day(spark, "wh", tb.PROVISIONAL_TOTALS, rules, date(2026, 3, 1))  # doctest: +SKIP
    """
    if name != tb.PROVISIONAL_TOTALS:
        return tb.read_table(spark, warehouse, name, version=version)
    start, end = day_bounds(day)
    versions = ProvisionalVersions(deltas=version if version is not None
                                   else commits.current_version(warehouse, tb.PROVISIONAL_DELTAS),
                                   progress=commits.current_version(warehouse, tb.WATERMARK_PROGRESS))
    return read_provisional(spark, warehouse, rules, versions=versions, since_start=start,
                            until_start=end)


def _us(column: str) -> Column:
    return F.unix_micros(F.col(column))


def read_provisional(spark: SparkSession, warehouse: str | Path, rules: EventTimeRules, *,
                     versions: ProvisionalVersions | None = None,
                     since_start: int | None = None,
                     until_start: int | None = None) -> DataFrame:
    """provisional_totals (the table's schema, tb.SCHEMAS) of the windows starting in
    ``[since_start, until_start)`` (microseconds; either bound may be open), as of
    ``versions`` (default: now). The bounds prune the deltas' files and the progress rows read,
    so the dashboard's "open and recent windows" costs what those windows hold."""
    versions = versions or provisional_versions(warehouse)
    deltas = _deltas(spark, warehouse, versions.deltas, since_start, until_start)
    progress = _progress(spark, warehouse, versions.progress)
    if since_start is not None:
        # only advances that can pass an end in the range: watermark > the lowest end
        progress = progress.filter(F.col("wm") > F.lit(since_start))
    folded = _folded(deltas)
    newest = progress.agg(F.max("wm").alias("wm")).first()
    watermark = None if newest is None or newest.wm is None else int(newest.wm)
    size, step, allowed_lateness = rules.windows.size, rules.windows.step, rules.allowed_lateness
    lowest = None if since_start is None else since_start + size
    highest = None if until_start is None else until_start - 1 + size
    if lowest is None or highest is None:
        # an open bound: the read's own window ends bound the ends a batch can have passed
        # (a query's first batch, with no watermark before it, would pass every end since
        # the epoch)
        found = folded.agg(F.min("end_us").alias("lo"), F.max("end_us").alias("hi")).first()
        if found is None or found.lo is None:  # no deltas: no row to derive
            return tb.empty_frame(spark, tb.SCHEMAS[tb.PROVISIONAL_TOTALS])
        lowest = int(found.lo) if lowest is None else lowest
        highest = int(found.hi) if highest is None else highest
    closes = _passing(progress, step, lowest, highest, shift=0).alias("c")
    finals = _passing(progress, step, lowest, highest, shift=allowed_lateness).alias("f")
    at_first = progress.select("query_id", "batch_id", F.struct(
        "pt", "batch_id", "wm").alias("first_row")).alias("fp")
    end_us = _us("window_end")
    joined = (folded.alias("r")
              .join(at_first, ["query_id", "batch_id"], "left")
              .join(closes, F.col("r.end_us") == F.col("c.end_us"), "left")
              .join(finals, F.col("r.end_us") == F.col("f.end_us"), "left"))
    closed = _when_passed(F.col("c.passed"), F.col("first_pt"), F.col("first_row"))
    final = _when_passed(F.col("f.passed"), F.col("first_pt"), F.col("first_row"))
    return tb.conform(joined.select(
        "window_start", "window_end", "key", "currency", "total_amount", "event_count",
        status_col(end_us, watermark, allowed_lateness).alias("status"),
        F.col("revision").cast("int").alias("revision"),
        "first_batch_id", "last_batch_id",
        closed["pt"].alias("closed_at"), closed["batch_id"].alias("closed_batch_id"),
        F.timestamp_micros(closed["wm"]).alias("watermark_at_close"),
        final["pt"].alias("finalized_at"), final["batch_id"].alias("finalized_batch_id"),
        "window_date"), tb.PROVISIONAL_TOTALS)


def _deltas(spark: SparkSession, warehouse: str | Path, version: int | None,
            since_start: int | None, until_start: int | None) -> DataFrame:
    if version is None:
        return tb.empty_frame(spark, tb.SCHEMAS[tb.PROVISIONAL_DELTAS])
    df = tb.read_table(spark, warehouse, tb.PROVISIONAL_DELTAS, version=version)
    if since_start is not None:
        lo = F.timestamp_micros(F.lit(since_start))
        df = df.filter((F.col("window_start") >= lo) & (F.col("window_date") >= F.to_date(lo)))
    if until_start is not None:
        # the last partition a window starting before ``until_start`` can be in: the fold
        # keys on (window_start, key, currency), so a row of the next day's partition must
        # not reach it
        last = F.to_date(F.timestamp_micros(F.lit(until_start - 1)))
        df = df.filter((F.col("window_start") < F.timestamp_micros(F.lit(until_start)))
                       & (F.col("window_date") <= last))
    return df


def _progress(spark: SparkSession, warehouse: str | Path, version: int | None) -> DataFrame:
    """One row per recorded batch: its time, batch, watermark before and after (micros)."""
    if version is None:
        df = tb.empty_frame(spark, tb.SCHEMAS[tb.WATERMARK_PROGRESS])
    else:
        df = tb.read_table(spark, warehouse, tb.WATERMARK_PROGRESS, version=version)
    return df.select("query_id", "batch_id", F.col("processed_at").alias("pt"),
                     _us("watermark_before").alias("wmb"), _us("watermark").alias("wm"))


def _folded(deltas: DataFrame) -> DataFrame:
    """One row per (window, key, currency): the sum of its deltas, and the batch of its first
    delta (by processing time, so batch numbers of several queries never mix).

    Grouped by exactly (window_start, key, currency), the grain every reader joins on
    (window_end and window_date follow from window_start): the fold's rows then come out
    partitioned and sorted as a join on that grain needs, so the audit's join with the
    canonical totals moves and sorts no provisional row again."""
    first = F.min(F.struct("processed_at", "query_id", "batch_id"))
    last = F.max(F.struct("processed_at", "query_id", "batch_id"))
    return (deltas.groupBy("window_start", "key", "currency")
            .agg(F.max("window_end").alias("window_end"),
                 F.max("window_date").alias("window_date"),
                 F.sum("total_amount").cast(tb.TOTAL).alias("total_amount"),
                 F.sum("event_count").alias("event_count"),
                 F.sum("revised").alias("revision"),
                 first.alias("first"), last["batch_id"].alias("last_batch_id"))
            .select("*", F.col("first.batch_id").alias("first_batch_id"),
                    F.col("first.batch_id").alias("batch_id"),
                    F.col("first.query_id").alias("query_id"),
                    F.col("first.processed_at").alias("first_pt"),
                    _us("window_end").alias("end_us"))
            .drop("first"))


def _passing(progress: DataFrame, step: int, lowest_end: int, highest_end: int, *,
             shift: int) -> DataFrame:
    """For each window end E in ``[lowest_end, highest_end]``: the first recorded batch whose
    watermark reached ``E + shift`` (``passed``: processing time, batch, watermark). A batch
    passes the window ends (all multiples of the step, since windows align to the epoch) in
    ``(watermark_before - shift, watermark - shift]``; a query's first batch (no watermark
    before) every end up to its watermark."""
    first, top = ends_passed(F.col("wmb") - F.lit(shift), F.col("wm") - F.lit(shift), step)
    top = F.least(top, F.lit(highest_end))
    # a query's first batch has no watermark before it: null, and greatest() skips nulls
    bottom = F.greatest(first, F.lit(-(-lowest_end // step) * step))
    ends = F.when(bottom <= top, F.sequence(bottom.cast("long"), top.cast("long"),
                                            F.lit(step).cast("long")))
    return (progress.filter(F.col("wm").isNotNull())
            .select(F.explode(ends).alias("end_us"), F.struct("pt", "batch_id", "wm")
                    .alias("row"))
            .groupBy("end_us").agg(F.min("row").alias("passed")))


def _when_passed(passed: Column, first_pt: Column, first_row: Column) -> Column:
    """The batch that moved a window on: the one whose watermark passed its end, or -- when
    that happened before the window had any events (its first events revised it) -- the batch
    of its first events."""
    return F.when(passed.isNull(), F.lit(None)).when(
        passed["pt"] >= first_pt, passed).otherwise(first_row)
