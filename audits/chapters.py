"""The one story builder: what the tables hold for a window of a key (``WindowReads``)
becomes the chapter ``reckon explain`` prints for each currency (``chapter_of``). Pure: no
Spark, no database, so the same lines are told by three readers that must agree:

* ``reckon explain`` reads one window: through DuckDB by default (reports/explain_duck.py),
  with small Spark queries on ``--engine spark`` (audits/explain_spark.py);
* the audit (audits/stories.py) reads every break of a run at once and records each story
  for the workbench (audits/break_story.py);
* the workbench's sample day (workbench/sample.py) builds its reads by hand.

Each event gets a fate in its window (``on_time``, ``revised``, ``late``, ``duplicate``,
``untracked``), judged by the rule the stream applied (``reckon.eventtime.classify`` against
the watermark its batch saw). Amounts are written in the chapter's currency's own digits.

Example:
    >>> reads = WindowReads(events=[], late={}, before={}, current={}, history={},
    ...                     canonical={}, recon={}, quarantined=[])
    >>> rules = EventTimeRules.parse(window="5m")
    >>> chapter_of(reads, "m1", 0, 300_000_000, "EUR", rules).lines[0]
    'window [1970-01-01T00:00:00Z, 1970-01-01T00:05:00Z) key m1, currency EUR: 0 events: no events'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from reckon.eventtime import Disposition, EventTimeRules, classify
from reckon.money import currency_problem, format_money, money_context, quantize_to_currency
from reckon.timeutil import format_micros

__all__ = [
    "DUPLICATE",
    "LATE",
    "ON_TIME",
    "REVISED",
    "UNTRACKED",
    "EventFate",
    "ProvisionalVersion",
    "QuarantinedRow",
    "WindowChapter",
    "WindowReads",
    "chapter_of",
    "exact_amounts",
    "history_of",
    "seconds_text",
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


def history_of(deltas: list[Any], after: dict[tuple[str, int], int | None],
               row: dict[str, Any] | None, window_end: int, allowed_lateness: int
               ) -> list[ProvisionalVersion]:
    """The row after each of its deltas (cumulative, with the status the batch's watermark
    gave it), and after the batches that closed it and made it final when no delta of theirs
    already tells it."""
    from reckon.eventtime import window_status

    told: list[ProvisionalVersion] = []
    total, count, revision = Decimal(0), 0, 0
    for d in deltas:
        with money_context():
            total = total + d.total_amount
        count, revision = count + d.event_count, revision + d.revised
        status = window_status(window_end, after.get((d.query_id, d.batch_id)), allowed_lateness).value
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


def exact_amounts(row: dict[str, Any], code: str) -> dict[str, Any]:
    """``row`` with every amount (``*_amount``) in ``code``'s own decimal places."""
    return {k: (quantize_to_currency(v, code) if k.endswith("_amount")
                and isinstance(v, Decimal) else v) for k, v in row.items()}


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
           window_end: int, allowed_lateness: int, before: dict[int, int | None]) -> list[EventFate]:
    """Each event's fate. A counted event revised the window when its batch found the window
    closed (reckon.eventtime.classify against the batch's watermark_before, the rule the
    stream applied); a batch without a progress row falls back to "after the batch that
    closed the window". Each batch with revising events is one revision, in batch order."""
    closed = provisional.get("closed_batch_id") if provisional else None

    def revised(batch_id: int) -> bool:
        if batch_id in before:
            return classify(window_end, before[batch_id], allowed_lateness) is Disposition.REVISION
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


def chapter_of(reads: WindowReads, key: str, start: int, end: int, code: str,
               rules: EventTimeRules) -> WindowChapter:
    """The chapter of one currency: only its events, rows and quarantined lines, with the
    lines ``reckon explain`` prints for it. Pure: every input is in ``reads``."""
    prov = None if code not in reads.current else exact_amounts(reads.current[code], code)
    fates = _fates([r for r in reads.events if r.currency == code], reads.late, prov, end,
                   rules.allowed_lateness, reads.before)
    fates = [replace(e, amount=quantize_to_currency(e.amount, code)) for e in fates]
    counts: dict[str, int] = {}
    for e in fates:
        counts[e.fate] = counts.get(e.fate, 0) + 1
    ch = WindowChapter(start, end, key, code, tuple(fates),
                       tuple(q for q in reads.quarantined if q.currency == code),
                       tuple(reads.history.get(code, ())), prov, reads.canonical.get(code),
                       reads.recon.get(code), counts)
    return replace(ch, lines=_chapter_lines(ch, rules))
