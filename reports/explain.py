"""`reckon explain`: the postmortem story of one key's window(s), event by event.

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

The windowing rules are the ones the stream ran with (``watermark_progress.rules_json``), so
the story matches what happened even when today's configuration differs.

Money is per currency (docs/decisions/0001-money-per-currency.md): a window of a key holds one
total per currency, so the story has one chapter per (window, currency), each with its own
totals, events, late events and duplicates, its amounts written in that currency's own digits
(``EUR 12.50``, ``JPY 1,200``, ``KWD 0.125``; in ``--json`` exact text with the same digits).
Nothing adds two currencies. ``--currency`` narrows the story to one currency.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from reckon.config import Settings
from reckon.errors import UsageError
from reckon.eventtime import Disposition, EventTimeRules, classify
from reckon.money import currency_problem, format_money, quantize_to_currency
from reckon.timeutil import format_micros, from_micros

__all__ = [
    "EventFate",
    "ProvisionalVersion",
    "QuarantinedRow",
    "WindowChapter",
    "WindowReads",
    "WindowStory",
    "chapter_of",
    "exact_amounts",
    "explain_window",
    "history_of",
    "seconds_text",
    "stream_rules",
    "watermarks_before_of",
]

ON_TIME, REVISED, LATE, DUPLICATE, UNTRACKED = ("on_time", "revised", "late", "duplicate",
                                                "untracked")


@dataclass(frozen=True)
class EventFate:
    """One event of the key and window and what became of it in that window. Times are
    microseconds since the epoch (UTC); ``lateness_seconds`` is ``watermark - window_end``."""

    event_id: str
    event_time: int
    arrival_time: int
    partition: int
    offset: int | None
    input_file: str | None
    batch_id: int | None
    amount: Decimal                          # in the chapter's currency, its own digits
    source: str
    is_duplicate: bool
    fate: str                                # on_time / revised / late / duplicate / untracked
    revision: int | None = None              # for 'revised': the revision it produced
    watermark: int | None = None             # for 'late': the watermark it met
    lateness_seconds: Decimal | None = None  # for 'late'
    # admitted by the stream although an earlier copy was admitted too (it arrived past the
    # dedup horizon): counted (or sent late) twice, what the audit's duplicates explain
    uncaught_duplicate: bool = False


@dataclass(frozen=True)
class QuarantinedRow:
    """A quarantined line of the key and window; ``currency`` is what its payload says (not
    necessarily a currency reckon books), '' when it names none."""

    reason: str
    detail: str | None
    event_id: str | None
    event_time: int | None
    arrival_time: int
    partition: int
    offset: int | None
    batch_id: int | None
    origin: str
    currency: str = ""


@dataclass(frozen=True)
class ProvisionalVersion:
    """The provisional row as one batch left it: the batch added events to it (``counted``)
    or its watermark moved it on (``closed``, ``final``)."""

    batch_id: int
    processed_at: int
    change: str                              # 'counted', 'closed' or 'final'
    last_batch_id: int
    total_amount: Decimal
    event_count: int
    status: str
    revision: int


@dataclass(frozen=True)
class WindowChapter:
    """The story of one (window, key, currency): its amounts are all in ``currency`` ('' only
    for a window where the key has nothing, or quarantined lines naming no currency)."""

    window_start: int
    window_end: int
    key: str
    currency: str
    events: tuple[EventFate, ...]
    quarantined: tuple[QuarantinedRow, ...]
    history: tuple[ProvisionalVersion, ...]
    provisional: dict[str, Any] | None       # the current row (total, count, status, ...)
    canonical: dict[str, Any] | None         # total_amount, event_count, replay_id
    reconciliation: dict[str, Any] | None    # status, gap, late, duplicate, residual
    counts: dict[str, int] = field(default_factory=dict)  # fate -> events
    lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class WindowStory:
    key: str
    instant: int
    rules: dict[str, Any]
    chapters: tuple[WindowChapter, ...]      # per window, then per currency
    currency: str | None = None              # the --currency it was narrowed to

    @property
    def lines(self) -> tuple[str, ...]:
        out: list[str] = []
        for i, ch in enumerate(self.chapters):
            if i:
                out.append("")
            out.extend(ch.lines)
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: Decimal as text, times as ISO-8601 ``Z``."""
        from reports.terminal import json_safe

        def times(d: dict[str, Any]) -> Any:
            return {k: (format_micros(v) if k in _TIME_FIELDS and isinstance(v, int) else
                        times(v) if isinstance(v, dict) else
                        [times(x) if isinstance(x, dict) else x for x in v]
                        if isinstance(v, list) else v)
                    for k, v in d.items()}

        raw: dict[str, Any] = {"key": self.key, "currency": self.currency,
                               "instant": self.instant, "rules": self.rules,
                               "windows": [asdict(ch) for ch in self.chapters],
                               "lines": list(self.lines)}
        for ch in raw["windows"]:
            ch["lines"] = list(ch["lines"])
        return json_safe(times(raw))  # type: ignore[no-any-return]


_TIME_FIELDS = {"instant", "window_start", "window_end", "event_time", "arrival_time",
                "watermark", "processed_at", "closed_at", "watermark_at_close",
                "finalized_at"}


# ----------------------------------------------------------------------------- reading


def stream_rules(spark: Any, warehouse: Path, settings: Settings) -> EventTimeRules:
    """The rules the stream ran with (newest watermark_progress row), else the settings'."""
    from pyspark.sql import functions as F

    from spark import tables as tb

    if tb.table_exists(warehouse, tb.WATERMARK_PROGRESS):
        rows = (tb.read_table(spark, warehouse, tb.WATERMARK_PROGRESS)
                .orderBy(F.col("processed_at").desc(), F.col("batch_id").desc())
                .select("rules_json").limit(1).collect())
        if rows:
            cfg = json.loads(rows[0].rules_json)
            return EventTimeRules.parse(
                window=cfg["window"], slide=cfg.get("slide"), lateness=cfg["lateness"],
                grace=cfg["grace"], idle_timeout=cfg["idle_timeout"],
                max_clock_skew=cfg["max_clock_skew"], dedup_horizon=cfg["dedup_horizon"],
                expected_partitions=cfg.get("expected_partitions") or ())
    return settings.event_time_rules()


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
                                   current.get(code), start + rules.windows.size, rules.grace)
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


def history_of(deltas: list[Any], after: dict[tuple[str, int], int | None],
               row: dict[str, Any] | None, window_end: int, grace: int
               ) -> list[ProvisionalVersion]:
    """The row after each of its deltas (cumulative, with the status the batch's watermark
    gave it), and after the batches that closed it and made it final when no delta of theirs
    already tells it."""
    from reckon.eventtime import window_status

    told: list[ProvisionalVersion] = []
    total, count, revision = Decimal(0), 0, 0
    for d in deltas:
        total, count, revision = total + d.total_amount, count + d.event_count, \
            revision + d.revised
        status = window_status(window_end, after.get((d.query_id, d.batch_id)), grace).value
        told.append(ProvisionalVersion(d.batch_id, d.processed_at, "counted", d.batch_id,
                                       quantize_to_currency(total, d.currency), count, status,
                                       revision))
    for change, batch, at in (("closed", "closed_batch_id", "closed_at"),
                              ("final", "finalized_batch_id", "finalized_at")):
        if row is None or row.get(batch) is None or any(
                h.batch_id == row[batch] and h.change == "counted" for h in told):
            continue
        before = [h for h in told if h.processed_at <= row[at]] or told[:1]
        last = max(before, key=lambda h: h.processed_at)
        told.append(replace(last, batch_id=row[batch], processed_at=row[at], change=change,
                            status="FINAL" if change == "final" else "CLOSED"))
    return sorted(told, key=lambda h: (h.processed_at, h.change != "counted"))


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


def exact_amounts(row: dict[str, Any], code: str) -> dict[str, Any]:
    """``row`` with every amount (``*_amount``) in ``code``'s own decimal places."""
    return {k: (quantize_to_currency(v, code) if k.endswith("_amount")
                and isinstance(v, Decimal) else v) for k, v in row.items()}


# ----------------------------------------------------------------------------- the story


def seconds_text(value: Decimal) -> str:
    """Seconds as the story writes them: ``13.0``, ``0.25``."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0")
        text = text + "0" if text.endswith(".") else text
    return text


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _money(amount: Decimal, code: str) -> str:
    """``EUR 12.50``; an amount of a code reckon does not book (a quarantined line) as is."""
    return format_money(amount, code) if currency_problem(code) is None else \
        f"{code or '-'} {amount}"


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


def watermarks_before_of(rows: Iterable[tuple[int, int | None]]) -> dict[int, int | None]:
    """``batch_id -> watermark_before`` from distinct (batch_id, watermark_before) pairs of
    watermark_progress; a batch id recorded with two watermarks (two stream queries) is left
    out, its events cannot be told apart.

    Example:
        >>> watermarks_before_of([(1, 10), (2, 20), (2, 30), (2, 20)])
        {1: 10}
    """
    seen: dict[int, set[int | None]] = {}
    for batch_id, mark in rows:
        seen.setdefault(batch_id, set()).add(mark)
    return {b: next(iter(marks)) for b, marks in seen.items() if len(marks) == 1}


def _fates(rows: list[Any], late: dict[tuple[Any, ...], Any], provisional: dict[str, Any] | None,
           window_end: int, grace: int, before: dict[int, int | None]) -> list[EventFate]:
    """Each event's fate. A counted event revised the window when its batch found the window
    closed (reckon.eventtime.classify against the batch's watermark_before, the rule the
    stream applied); a batch without a progress row falls back to "after the batch that
    closed the window". Each batch with revising events is one revision, in batch order."""
    closed = provisional.get("closed_batch_id") if provisional else None

    def revised(batch_id: int) -> bool:
        if batch_id in before:
            return classify(window_end, before[batch_id], grace) is Disposition.REVISION
        return closed is not None and batch_id > closed

    revising = sorted({r.batch_id for r in rows
                       if not r.is_duplicate and r.batch_id is not None
                       and (r.event_id, r.batch_id, r.partition, r.offset, r.input_file)
                       not in late and revised(r.batch_id)})
    revision_of = {b: i + 1 for i, b in enumerate(revising)}
    out = []
    admitted: set[str] = set()  # rows come in arrival order: the replay's first-copy rule
    for r in rows:
        again = False
        if r.batch_id is not None and not r.is_duplicate:
            again = r.event_id in admitted
            admitted.add(r.event_id)
        base = dict(event_id=r.event_id, event_time=r.event_time, arrival_time=r.arrival_time,
                    partition=r.partition, offset=r.offset, input_file=r.input_file,
                    batch_id=r.batch_id, amount=r.amount, source=r.source,
                    is_duplicate=bool(r.is_duplicate), uncaught_duplicate=again)
        hit = late.get((r.event_id, r.batch_id, r.partition, r.offset, r.input_file))
        if r.is_duplicate:
            out.append(EventFate(**base, fate=DUPLICATE))
        elif hit is not None:
            out.append(EventFate(**base, fate=LATE, watermark=hit.watermark,
                                 lateness_seconds=hit.lateness_seconds))
        elif r.batch_id is None:
            out.append(EventFate(**base, fate=UNTRACKED))
        elif r.batch_id in revision_of:
            out.append(EventFate(**base, fate=REVISED, revision=revision_of[r.batch_id]))
        else:
            out.append(EventFate(**base, fate=ON_TIME))
    return out


def _event_line(e: EventFate, code: str) -> str:
    line = _fate_text(e, code)
    if e.uncaught_duplicate:
        line += ("; an uncaught duplicate: an earlier copy was admitted too (this one arrived "
                 "past the dedup horizon), so the audit counts it under duplicates")
    return line


def _fate_text(e: EventFate, code: str) -> str:
    where = f"partition {e.partition} offset {e.offset if e.offset is not None else '-'}"
    head = (f"  {e.event_id}: {_money(e.amount, code)} at {format_micros(e.event_time)}, arrived "
            f"{format_micros(e.arrival_time)} ({where}, batch "
            f"{e.batch_id if e.batch_id is not None else '-'}): ")
    if e.fate == ON_TIME:
        return head + "counted on time"
    if e.fate == REVISED:
        return head + f"revised the closed window (revision {e.revision})"
    if e.fate == LATE:
        assert e.lateness_seconds is not None
        return head + (f"late by {seconds_text(e.lateness_seconds)} s (watermark "
                       f"{format_micros(e.watermark)}): in late_events, not in the total")
    if e.fate == DUPLICATE:
        return head + "duplicate of an earlier copy: counted once"
    return head + "archived outside the stream (no batch): no stream fate recorded"


def _summary(events: list[EventFate]) -> str:
    parts = []
    on_time = [e for e in events if e.fate == ON_TIME]
    if on_time:
        parts.append(f"{len(on_time)} counted on time")
    for e in (e for e in events if e.fate == REVISED):
        parts.append(f"1 revised the window in batch {e.batch_id} (revision {e.revision})")
    for e in (e for e in events if e.fate == LATE):
        assert e.lateness_seconds is not None
        parts.append(f"1 late by {seconds_text(e.lateness_seconds)} s (watermark "
                     f"{format_micros(e.watermark)})")
    dups = sum(1 for e in events if e.fate == DUPLICATE)
    if dups:
        parts.append(f"{dups} duplicate{'s' if dups != 1 else ''} counted once")
    again = sum(1 for e in events if e.uncaught_duplicate)
    if again:
        parts.append(f"{again} uncaught duplicate{'s' if again != 1 else ''} (admitted again)")
    untracked = sum(1 for e in events if e.fate == UNTRACKED)
    if untracked:
        parts.append(f"{untracked} archived outside the stream")
    return ", ".join(parts) if parts else "no events"


def _chapter_lines(ch: WindowChapter, rules: EventTimeRules) -> tuple[str, ...]:
    events, code = list(ch.events), ch.currency
    head = (f"window [{format_micros(ch.window_start)}, {format_micros(ch.window_end)}) "
            f"key {ch.key}{f', currency {code}' if code else ''}: "
            f"{_plural(len(events), 'event')}: {_summary(events)}")
    if ch.quarantined:
        head += f"; {len(ch.quarantined)} quarantined"
    lines = [head]
    p = ch.provisional
    if p is None:
        lines.append("  provisional: the stream has no row for this window and key"
                     + (f" in {code}" if code else ""))
    else:
        text = (f"  provisional: {_money(p['total_amount'], code)} over "
                f"{_plural(p['event_count'], 'event')}, {p['status']}, revision {p['revision']}")
        if p.get("closed_batch_id") is not None:
            text += (f"; closed in batch {p['closed_batch_id']} at watermark "
                     f"{format_micros(p.get('watermark_at_close'))}")
        if p.get("finalized_batch_id") is not None:
            text += f"; final in batch {p['finalized_batch_id']}"
        lines.append(text)
    c = ch.canonical
    lines.append("  canonical: not replayed yet" if c is None else
                 f"  canonical: {_money(c['total_amount'], code)} over "
                 f"{_plural(c['event_count'], 'event')} (replay {c['replay_id']})")
    r = ch.reconciliation
    if r is not None:
        lines.append(f"  reconciliation: {r['status']} (gap {_money(r['gap_amount'], code)} / "
                     f"{r['gap_count']}, late {_money(r['late_amount'], code)} / "
                     f"{r['late_count']}, duplicates {_money(r['duplicate_amount'], code)} / "
                     f"{r['duplicate_count']}, residual {_money(r['residual_amount'], code)} / "
                     f"{r['residual_count']})")
    if events:
        lines.append("  events in arrival order:")
        lines.extend(_event_line(e, code) for e in events)
    if ch.quarantined:
        lines.append("  quarantined:")
        lines.extend(f"  {q.event_id or '-'}: {q.reason}"
                     f"{' (' + q.detail + ')' if q.detail else ''}, arrived "
                     f"{format_micros(q.arrival_time)} (partition {q.partition} offset "
                     f"{q.offset if q.offset is not None else '-'}, {q.origin})"
                     for q in ch.quarantined)
    if ch.history:
        lines.append("  provisional row over time:")
        lines.extend(f"  batch {h.batch_id} ({h.change}): "
                     f"{_money(h.total_amount, code)} over {_plural(h.event_count, 'event')}, "
                     f"{h.status}, revision {h.revision}" for h in ch.history)
    return tuple(lines)


@dataclass(frozen=True)
class WindowReads:
    """What the tables hold for one window of the key, every currency (or the one asked): the
    whole input of the story, so that :func:`chapter_of` needs no Spark. ``reckon explain``
    reads it with small queries per window (``_read_window``); the audit reads it for every
    break of a run at once and records the story (audits/stories.py). Event and late rows
    are anything with the attributes of the columns ``_events`` and ``_late`` select."""

    events: list[Any]
    late: dict[tuple[Any, ...], Any]
    before: dict[int, int | None]
    current: dict[str, dict[str, Any]]
    history: dict[str, list[ProvisionalVersion]]
    canonical: dict[str, dict[str, Any]]
    recon: dict[str, dict[str, Any]]
    quarantined: list[QuarantinedRow]

    def currencies(self) -> set[str]:
        return ({r.currency for r in self.events} | set(self.current) | set(self.history)
                | set(self.canonical) | set(self.recon) | {q.currency for q in self.quarantined})


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


def chapter_of(reads: WindowReads, key: str, start: int, end: int, code: str,
               rules: EventTimeRules) -> WindowChapter:
    """The chapter of one currency: only its events, rows and quarantined lines, with the
    lines ``reckon explain`` prints for it. Pure: every input is in ``reads``."""
    prov = None if code not in reads.current else exact_amounts(reads.current[code], code)
    fates = _fates([r for r in reads.events if r.currency == code], reads.late, prov, end,
                   rules.grace, reads.before)
    fates = [replace(e, amount=quantize_to_currency(e.amount, code)) for e in fates]
    counts: dict[str, int] = {}
    for e in fates:
        counts[e.fate] = counts.get(e.fate, 0) + 1
    ch = WindowChapter(start, end, key, code, tuple(fates),
                       tuple(q for q in reads.quarantined if q.currency == code),
                       tuple(reads.history.get(code, ())), prov, reads.canonical.get(code),
                       reads.recon.get(code), counts)
    return replace(ch, lines=_chapter_lines(ch, rules))


def _chapters(spark: Any, wh: Path, key: str, start: int, end: int, rules: EventTimeRules,
              currency: str | None) -> list[WindowChapter]:
    """One chapter per currency of the key's window (only ``currency`` when given; one
    chapter without a currency when the window holds nothing of the key)."""
    reads = _read_window(spark, wh, key, start, end, rules, currency)
    return [chapter_of(reads, key, start, end, code, rules)
            for code in sorted(reads.currencies() or {currency or ""})]


def explain_window(spark: Any, settings: Settings, key: str, instant: int,
                   currency: str | None = None) -> WindowStory:
    """The story of every window containing ``instant`` (microseconds) for ``key``: one
    chapter per (window, currency), or only ``currency``'s when given."""
    from spark import tables as tb

    wh = settings.warehouse_path
    if not tb.table_exists(wh, tb.EVENT_LOG):
        raise UsageError(f"--warehouse={str(wh)!r} is not valid: it has no event_log table "
                         "(run `reckon stream` first)")
    rules = stream_rules(spark, wh, settings)
    chapters = [ch for window in rules.windows.assign(instant)
                for ch in _chapters(spark, wh, key, window.start, window.end, rules, currency)]
    if all(_untold(ch) for ch in chapters):
        _refuse_unknown_key(spark, wh, key, instant, currency)
    return WindowStory(key, instant, rules.to_config(), tuple(chapters), currency)


def _untold(ch: WindowChapter) -> bool:
    """Nothing at all to tell: no event, quarantined line, row or history."""
    return not (ch.events or ch.quarantined or ch.history or ch.provisional or ch.canonical
                or ch.reconciliation)


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
        what = f"--key={key!r}" + (f" in {currency}" if currency else "")
        raise UsageError(f"{what} has no events on {day} (the day of --window): check the key "
                         "(keys are case-sensitive), the currency and the day, e.g. with "
                         "`reckon sql \"SELECT DISTINCT key FROM event_log WHERE event_date = "
                         f"'{day}'\"`")
