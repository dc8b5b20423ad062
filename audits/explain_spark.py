"""`reckon explain`: the postmortem story of one key's window(s), event by event.

This is the Spark reader (``reckon explain --engine spark``); reports/explain_duck.py reads the
same rows through DuckDB, the command's default, and both hand them to the same story builder.

For every window containing the instant T (one for tumbling windows, size/slide for hopping
ones) it reads, with small filtered Spark queries only:

- each event of that key and window from ``event_log`` (event and arrival time, partition,
  offset, the batch that saw it, whether the stream flagged it as a duplicate) and its fate
  in that window: *counted on time*, *revised* the closed window (its batch is after the
  window's ``closed_batch_id`` and it is not in ``late_events``), *late* (in ``late_events``
  for that window: the watermark it met and how far past the close), or *duplicate*; a copy
  the stream admitted after an earlier admitted copy of its event_id (past the dedup horizon)
  is marked an *uncaught duplicate*, the replay's rule for what the audit calls duplicates;
- quarantined rows whose readable ``event_time`` falls in the window and whose payload names
  the key;
- the provisional row over time, from the deltas the stream appended (``provisional_deltas``:
  each batch that added to the row, with the total, count, status and revision it left) and
  the batches whose watermark closed it and made it final. Deltas are rows, never rewritten,
  so a ``reckon vacuum`` takes none of the story away;
- the canonical total and the reconciliation status, when the replay and audit have run.

The rules are the ones the stream ran with, the warehouse's recorded spec with its bounds per
input (``storage.spec_log.rules_in_force``), so the story matches what happened even when today's
configuration differs.

Money is per currency (docs/decisions/0001-money-per-currency.md): a window of a key holds one
total per currency, so the story has one chapter per (window, currency), each with its own
totals, events, late events and duplicates, its amounts written in that currency's own digits
(``EUR 12.50``, ``JPY 1,200``, ``KWD 0.125``; in ``--json`` exact text with the same digits).
Nothing adds two currencies. ``--currency`` narrows the story to one currency.

This module only reads: each window's rows become an ``audits.chapters.WindowReads``, and the
one story builder, ``audits.chapters.chapter_of``, tells it. The audit records the same
builder's story of every break for the workbench (audits/stories.py), so the two agree.
"""


from __future__ import annotations

from pathlib import Path
from typing import Any

from audits.chapters import (
    ProvisionalVersion,
    QuarantinedRow,
    WindowChapter,
    WindowReads,
    chapter_of,
    exact_amounts,
    history_of,
    watermarks_before_of,
)
from audits.window_story import WindowStory, no_events_error, untold
from reckon.errors import UsageError
from reckon.eventtime import EventTimeRules
from reckon.timeutil import from_micros

__all__ = ["explain_window"]


def _ts(micros: int) -> Any:
    from pyspark.sql import functions as F

    return F.timestamp_micros(F.lit(micros))


def _day(micros: int) -> Any:
    return from_micros(micros).date()


def _us(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.unix_micros(F.col(name)).alias(name)


def _in_currency(currency: str | None) -> Any:
    """A filter on the ``currency`` column: everything when ``currency`` is None."""
    from pyspark.sql import functions as F

    return F.lit(True) if currency is None else F.col("currency") == F.lit(currency)


def _events(spark: Any, wh: Path, key: str, start: int, end: int,
            currency: str | None) -> list[Any]:
    from pyspark.sql import functions as F

    from spark import tables as tb
    from spark.rules import arrival_order

    if not tb.table_exists(wh, tb.EVENT_LOG):
        return []
    return (tb.read_table(spark, wh, tb.EVENT_LOG)
            .filter((F.col("event_date") >= F.lit(_day(start)))
                    & (F.col("event_date") <= F.lit(_day(end - 1)))
                    & (F.col("key") == key) & _in_currency(currency)
                    & (F.col("event_time") >= _ts(start)) & (F.col("event_time") < _ts(end)))
            .select("event_id", _us("event_time"), _us("arrival_time"), "partition", "offset",
                    "input_file", "batch_id", "amount", "currency", "source", "is_duplicate")
            .orderBy(*arrival_order(), "event_id")
            .limit(100_000).collect())


def _late(spark: Any, wh: Path, key: str, start: int) -> dict[tuple[Any, ...], Any]:
    from pyspark.sql import functions as F

    from spark import tables as tb

    if not tb.table_exists(wh, tb.LATE_EVENTS):
        return {}
    rows = (tb.read_table(spark, wh, tb.LATE_EVENTS)
            .filter((F.col("window_date") == F.lit(_day(start))) & (F.col("key") == key)
                    & (F.col("window_start") == _ts(start)))
            .select("event_id", _us("watermark"), "lateness_seconds", "batch_id",
                    _us("arrival_time"), "partition", "offset", "input_file")
            .limit(100_000).collect())
    return {(r.event_id, r.batch_id, r.partition, r.offset, r.input_file): r for r in rows}


def _quarantined(spark: Any, wh: Path, key: str, start: int, end: int,
                 currency: str | None) -> list[QuarantinedRow]:
    from pyspark.sql import functions as F

    from spark import tables as tb

    if not tb.table_exists(wh, tb.QUARANTINE):
        return []
    named = F.coalesce(F.get_json_object("payload", "$.currency"), F.lit(""))
    rows = (tb.read_table(spark, wh, tb.QUARANTINE)
            .filter(F.col("event_time").isNotNull() & (F.col("event_time") >= _ts(start))
                    & (F.col("event_time") < _ts(end))
                    & (F.get_json_object("payload", "$.key") == key)
                    & (F.lit(True) if currency is None else named == F.lit(currency)))
            .select("reason", "detail", "event_id", _us("event_time"), _us("arrival_time"),
                    "partition", "offset", "batch_id", "origin", named.alias("currency"))
            .orderBy("arrival_time", "partition", "offset").limit(1000).collect())
    return [QuarantinedRow(r.reason, r.detail, r.event_id, r.event_time, r.arrival_time,
                           r.partition, r.offset, r.batch_id, r.origin, r.currency)
            for r in rows]


_PROV_COLS = ("total_amount", "event_count", "status", "revision", "last_batch_id",
              "closed_batch_id", "finalized_batch_id")


_Provisional = tuple[dict[str, dict[str, Any]], dict[str, list[ProvisionalVersion]]]


def _provisional(spark: Any, wh: Path, key: str, start: int, rules: EventTimeRules,
                 currency: str | None) -> _Provisional:
    """Per currency: the current provisional row (spark.provisional) and its history, told
    from the row's deltas and the watermark each of their batches left."""
    from pyspark.sql import functions as F

    from spark import tables as tb
    from spark.provisional import provisional_versions, read_provisional

    if not tb.table_exists(wh, tb.PROVISIONAL_DELTAS):
        return {}, {}
    versions = provisional_versions(wh)
    mine = (F.col("key") == key) & _in_currency(currency)
    now = (read_provisional(spark, wh, rules, versions=versions, since_start=start,
                            until_start=start + 1).filter(mine)
           .select("currency", *_PROV_COLS, _us("closed_at"), _us("watermark_at_close"),
                   _us("finalized_at")).limit(1000).collect())
    current = {r.currency: {k: v for k, v in r.asDict().items() if k != "currency"}
               for r in now}
    deltas = (tb.read_table(spark, wh, tb.PROVISIONAL_DELTAS, version=versions.deltas)
              .filter((F.col("window_date") == F.lit(_day(start)))
                      & (F.col("window_start") == _ts(start)) & mine)
              .select("currency", "batch_id", "query_id", _us("processed_at"), "total_amount",
                      "event_count", "revised")
              .orderBy("processed_at").limit(10_000).collect())
    after = _watermarks_after(spark, wh, {(d.query_id, d.batch_id) for d in deltas})
    history: dict[str, list[ProvisionalVersion]] = {}
    for code in sorted({d.currency for d in deltas}):
        history[code] = history_of([d for d in deltas if d.currency == code], after,
                                   current.get(code), start + rules.windows.size, rules.allowed_lateness)
    return current, history


def _watermarks_after(spark: Any, wh: Path, batches: set[tuple[str, int]]
                      ) -> dict[tuple[str, int], int | None]:
    """The watermark each of ``batches`` (query, batch) left, from watermark_progress."""
    from pyspark.sql import functions as F

    from spark import tables as tb

    if not batches or not tb.table_exists(wh, tb.WATERMARK_PROGRESS):
        return {}
    rows = (tb.read_table(spark, wh, tb.WATERMARK_PROGRESS)
            .filter(F.col("batch_id").isin(sorted({b for _q, b in batches})))
            .select("query_id", "batch_id", _us("watermark")).collect())
    return {(r.query_id, r.batch_id): r.watermark for r in rows
            if (r.query_id, r.batch_id) in batches}


def _per_currency(spark: Any, wh: Path, table: str, key: str, start: int, cols: list[str],
                  currency: str | None, order: str | None = None) -> dict[str, dict[str, Any]]:
    """The row of each currency of the key's window in ``table`` (the greatest ``order``
    first when a currency had several), its amounts in the currency's own digits."""
    from pyspark.sql import functions as F

    from spark import tables as tb

    if not tb.table_exists(wh, table):
        return {}
    df = (tb.read_table(spark, wh, table)
          .filter((F.col("window_date") == F.lit(_day(start))) & (F.col("key") == key)
                  & (F.col("window_start") == _ts(start)) & _in_currency(currency))
          .select("currency", *cols))
    if order:
        df = df.orderBy(F.col(order).desc())
    out: dict[str, dict[str, Any]] = {}
    for r in df.limit(1000).collect():
        out.setdefault(r.currency, exact_amounts({k: v for k, v in r.asDict().items()
                                           if k != "currency"}, r.currency))
    return out


def _watermarks_before(spark: Any, wh: Path, batch_ids: set[int]) -> dict[int, int | None]:
    """The watermark each batch judged its events against (``watermark_before`` of its
    watermark_progress row), for the given batches. A batch id that two stream queries both
    recorded with different watermarks is left out: its events cannot be told apart."""
    from pyspark.sql import functions as F

    from spark import tables as tb

    if not batch_ids or not tb.table_exists(wh, tb.WATERMARK_PROGRESS):
        return {}
    rows = (tb.read_table(spark, wh, tb.WATERMARK_PROGRESS)
            .filter(F.col("batch_id").isin(sorted(batch_ids)))
            .select("batch_id", _us("watermark_before")).distinct().collect())
    return watermarks_before_of((r.batch_id, r.watermark_before) for r in rows)


def _read_window(spark: Any, wh: Path, key: str, start: int, end: int, rules: EventTimeRules,
                 currency: str | None) -> WindowReads:
    from spark import tables as tb

    current, history = _provisional(spark, wh, key, start, rules, currency)
    events = _events(spark, wh, key, start, end, currency)
    before = _watermarks_before(spark, wh, {r.batch_id for r in events
                                            if r.batch_id is not None})
    canonical = _per_currency(spark, wh, tb.CANONICAL_TOTALS, key, start,
                              ["total_amount", "event_count", "replay_id"], currency)
    recon = _per_currency(spark, wh, tb.RECONCILIATION, key, start,
                          ["status", "gap_amount", "gap_count", "late_amount", "late_count",
                           "duplicate_amount", "duplicate_count", "residual_amount",
                           "residual_count", "audit_run_id"], currency, order="audit_run_id")
    return WindowReads(events, _late(spark, wh, key, start), before, current, history,
                       canonical, recon, _quarantined(spark, wh, key, start, end, currency))


def _chapters(spark: Any, wh: Path, key: str, start: int, end: int, rules: EventTimeRules,
              currency: str | None) -> list[WindowChapter]:
    """One chapter per currency of the key's window (only ``currency`` when given; one
    chapter without a currency when the window holds nothing of the key)."""
    reads = _read_window(spark, wh, key, start, end, rules, currency)
    return [chapter_of(reads, key, start, end, code, rules)
            for code in sorted(reads.currencies() or {currency or ""})]


def explain_window(spark: Any, wh: Path, configured: EventTimeRules, key: str, instant: int,
                   currency: str | None = None) -> WindowStory:
    """The story of every window containing ``instant`` (microseconds) for ``key``: one
    chapter per (window, currency), or only ``currency``'s when given. Told by the rules the
    stream ran with, bounds per input included, ``configured`` when it recorded none
    (``storage.spec_log.rules_in_force``),
    e.g. ``explain_window(spark, wh, settings.event_time_rules(), "merchant-x", t)``."""
    from spark import tables as tb
    from storage.spec_log import rules_in_force

    if not tb.table_exists(wh, tb.EVENT_LOG):
        raise UsageError(f"--warehouse={str(wh)!r} is not valid: it has no event_log table "
                         "(run `reckon stream` first)")
    rules = rules_in_force(wh, configured)
    chapters = [ch for window in rules.windows.assign(instant)
                for ch in _chapters(spark, wh, key, window.start, window.end, rules, currency)]
    if all(untold(ch) for ch in chapters):
        _refuse_unknown_key(spark, wh, key, instant, currency)
    return WindowStory(key, instant, rules.to_config(), tuple(chapters), currency)


def _refuse_unknown_key(spark: Any, wh: Path, key: str, instant: int,
                        currency: str | None) -> None:
    """When the windows hold nothing of ``key``: a key (or currency) without a single event on
    the window's day is a mistake, said as one; a key busy that day at other times is not,
    and its empty story says so. One day of event_log is read, its key column only."""
    from pyspark.sql import functions as F

    from spark import tables as tb

    day = from_micros(instant).date()
    rows = tb.read_table(spark, wh, tb.EVENT_LOG).filter(
        (F.col("event_date") == F.lit(day)) & (F.col("key") == F.lit(key)))
    if currency is not None:
        rows = rows.filter(F.col("currency") == F.lit(currency))
    if rows.limit(1).count() == 0:
        raise no_events_error(key, instant, currency)


