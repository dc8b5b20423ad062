"""The reference implementation: the whole contract on plain Python lists, no Spark.

Small and obviously correct rather than fast. The Spark stream and replay are checked
against it row for row on many random streams (tests/test_stream_properties.py); scenario
files run through both. All rules come from ``reckon.eventtime``.

Batches are lists of already-parsed events; parsing and validation of raw lines is the
parser's job (spark/parse.py), except the rules on a line's bytes (``landing_file_lines``:
where a landing file's lines are; ``line_problem``: a line that is not valid UTF-8), and the typed rules that need the event's fields together:
an amount that is not a whole number of its currency's minor units, a currency reckon does
not book (reckon.money), and future-dated events (which would move the watermark) are
quarantined here too, in the parser's order.

Every total is kept per (window, key, currency): ``TotalKey``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from reckon.eventtime import (
    Disposition,
    EventTimeRules,
    PartitionObservation,
    WatermarkState,
    Window,
    WindowStatus,
    advance_watermark,
    classify,
    is_duplicate_of_recent,
    is_future_dated,
    window_status,
)
from reckon.money import currency_problem, minor_unit_violation, money_sum
from reckon.reconcile import ReconRow, Tolerance, reconcile

__all__ = [
    "CanonicalRow",
    "Event",
    "LateRow",
    "StreamOutcome",
    "TotalKey",
    "TotalRow",
    "arrival_order",
    "canonical_totals",
    "caught_duplicate",
    "duplicate_overcount",
    "landing_file_lines",
    "line_problem",
    "reconcile_outcome",
    "stream_outcome",
    "typed_problem",
]


@dataclass(frozen=True)
class Event:
    event_id: str
    key: str
    amount: Decimal
    event_time: int
    arrival_time: int
    partition: int = 0
    offset: int = 0
    source: str = "test"
    currency: str = "USD"
    input_file: str | None = None  # a landing file (offset is then a line in it); Kafka: None

    @property
    def fingerprint(self) -> tuple[object, ...]:
        """The payload as far as totals are concerned; differing copies are a conflict."""
        return (self.key, self.amount, self.currency, self.event_time, self.source)


def arrival_order(event: Event) -> tuple[int, int, tuple[bool, str], int]:
    """The order of copies by arrival: arrival time, then partition, then input file (none
    first, as Spark sorts nulls), then offset (spark/rules.py ``arrival_order``)."""
    file = (event.input_file is not None, event.input_file or "")
    return (event.arrival_time, event.partition, file, event.offset)


_BOM = b"\xef\xbb\xbf"


def landing_file_lines(content: bytes) -> list[bytes]:
    """The lines of a landing file, byte for byte, as the landing source cuts them
    (spark.sources.landing_lines): a UTF-8 byte order mark opening the file dropped, split on
    ``\\n``, one final ``\\r`` of each line dropped, no line after a final newline. Bytes that
    are not UTF-8 stay what they are (``line_problem`` judges them).

    >>> landing_file_lines(b'\\xef\\xbb\\xbf{"a":1}\\r\\nmerchant-\\xff\\n')
    [b'{"a":1}', b'merchant-\\xff']
    """
    lines = content.removeprefix(_BOM).split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [ln.removesuffix(b"\r") for ln in lines]


def line_problem(raw: bytes) -> str | None:
    """The rules on a line's text (spark/parse.py), or None: ``invalid_utf8`` when its bytes
    are not valid UTF-8 (the first rule), ``lone_surrogate`` when it is one JSON object
    (duplicate keys are the parser's ``invalid_json``) with a string, key or value, holding
    half a UTF-16 surrogate pair (a ``\\ud800`` escape: no character). Never decoded with
    replacement: ``merchant-\\xff`` and ``merchant-\\xfe`` read so would both be
    ``merchant-\\ufffd``, one key, and ``merchant-\\ud800`` would be ``merchant-?``; a real
    U+FFFD (bytes ``ef bf bd``) is valid text. The other shape rules are the parser's.

    >>> line_problem(b"merchant-\\xff"), line_problem("merchant-\\ufffd".encode())
    ('invalid_utf8', None)
    >>> line_problem(b'{"key":"merchant-\\\\ud800"}'), line_problem(b'{"key":"\\\\ud83d\\\\ude00"}')
    ('lone_surrogate', None)
    """
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return "invalid_utf8"
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except ValueError:
        return None  # not one JSON object: the parser's shape rules
    return "lone_surrogate" if isinstance(value, dict) and _has_surrogate(value) else None


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    if len({k for k, _ in pairs}) != len(pairs):
        raise ValueError("duplicate keys")
    return dict(pairs)


def _has_surrogate(value: object) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= c <= "\udfff" for c in value)
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


#: The grain of every total: (window, key, currency). Amounts of two currencies never meet.
TotalKey = tuple[Window, str, str]


def typed_problem(event: Event, max_clock_skew: int) -> str | None:
    """The quarantine reason of a parsed event under the typed rules that the reference
    shares with the parser (spark/parse.py ``typed_checks``, same order), or None."""
    if currency_problem(event.currency) is not None:
        return "unknown_currency"
    if minor_unit_violation(event.amount, event.currency) is not None:
        return "exceeds_minor_unit"
    if is_future_dated(event.event_time, event.arrival_time, max_clock_skew):
        return "future_dated"
    return None


@dataclass
class TotalRow:
    window: Window
    key: str
    currency: str
    total: Decimal = Decimal("0.00")
    count: int = 0
    status: WindowStatus = WindowStatus.OPEN
    revision: int = 0
    closed_batch: int | None = None
    watermark_at_close: int | None = None
    final_batch: int | None = None
    first_batch: int | None = None  # the batches whose events the total holds, first and last
    last_batch: int | None = None


@dataclass(frozen=True)
class LateRow:
    event: Event
    window: Window
    watermark: int
    batch_id: int

    @property
    def lateness(self) -> int:
        """How far past the window's close the event was: ``WM - end`` (microseconds)."""
        return self.watermark - self.window.end


@dataclass
class StreamOutcome:
    totals: dict[TotalKey, TotalRow] = field(default_factory=dict)
    late: list[LateRow] = field(default_factory=list)
    duplicates: list[tuple[Event, int]] = field(default_factory=list)
    quarantined: list[tuple[Event, str, int]] = field(default_factory=list)
    watermarks: list[int | None] = field(default_factory=list)
    admitted: list[tuple[Event, int]] = field(default_factory=list)  # not caught as duplicates
    counted: int = 0     # (event, window) pairs added to a provisional total
    revised: int = 0     # of which arrived within the allowed lateness after the window closed
    valid: int = 0       # events that passed validation (duplicates included)


def stream_outcome(batches: Sequence[Sequence[Event]], rules: EventTimeRules) -> StreamOutcome:
    """What the stream does with ``batches``: the micro-batches processed exactly as the
    streaming aggregator (spark.stream.run_stream) does, on Python lists.

    Batch n is judged against the watermark after batch n-1; then the per-partition maxima
    absorb batch n (every valid event, late and duplicates included) and the window states
    move with the new watermark. Revision counts batches that revised a closed window.
    """
    out = StreamOutcome()
    state = WatermarkState()
    latest_arrival: dict[str, int] = {}   # event_id -> latest arrival among copies seen
    for batch_id, batch in enumerate(batches):
        previous = state.watermark
        valid: list[Event] = []
        for event in sorted(batch, key=arrival_order):
            problem = typed_problem(event, rules.max_clock_skew)
            if problem is not None:
                out.quarantined.append((event, problem, batch_id))
            else:
                valid.append(event)
        revised_keys: set[TotalKey] = set()
        for event in valid:
            if caught_duplicate(latest_arrival, event, rules.dedup_horizon):
                out.duplicates.append((event, batch_id))
                continue
            out.admitted.append((event, batch_id))
            for window in rules.windows.assign(event.event_time):
                verdict = classify(window.end, previous, rules.allowed_lateness)
                if verdict is Disposition.LATE:
                    assert previous is not None
                    out.late.append(LateRow(event, window, previous, batch_id))
                    continue
                grain = (window, event.key, event.currency)
                row = out.totals.setdefault(grain, TotalRow(window, event.key, event.currency))
                row.total = money_sum((event.amount,), row.total)
                row.count += 1
                if row.first_batch is None:
                    row.first_batch = batch_id
                row.last_batch = batch_id
                out.counted += 1
                if verdict is Disposition.REVISION:
                    out.revised += 1
                    revised_keys.add(grain)
        for key in revised_keys:
            out.totals[key].revision += 1
        out.valid += len(valid)
        state = advance_watermark(state, _observations(valid), rules.watermark)
        out.watermarks.append(state.watermark)
        for row in out.totals.values():
            status = window_status(row.window.end, state.watermark, rules.allowed_lateness)
            if status is not WindowStatus.OPEN and row.closed_batch is None:
                row.closed_batch, row.watermark_at_close = batch_id, state.watermark
            if status is WindowStatus.FINAL and row.final_batch is None:
                row.final_batch = batch_id
            row.status = status
    return out


def caught_duplicate(latest_arrival: dict[str, int], event: Event, horizon: int) -> bool:
    """Whether the stream catches ``event`` as a duplicate: an earlier copy of its event_id
    arrived within ``horizon`` of it. ``latest_arrival`` (event_id -> latest arrival among
    the copies seen) is updated with this copy, as the stream's dedup state is.

    >>> seen = {}
    >>> first = caught_duplicate(seen, Event("e", "k", Decimal(1), 0, 10), 5)
    >>> first, caught_duplicate(seen, Event("e", "k", Decimal(1), 0, 13), 5)
    (False, True)
    """
    prior = latest_arrival.get(event.event_id)
    latest_arrival[event.event_id] = event.arrival_time if prior is None else max(
        prior, event.arrival_time)
    return prior is not None and bool(is_duplicate_of_recent(prior, event.arrival_time,
                                                             horizon))


def _observations(events: Iterable[Event]) -> list[PartitionObservation]:
    """One observation per (partition, source) of the batch; ``advance_watermark`` merges
    those of one input when its inputs are partitions."""
    seen: dict[tuple[int, str], tuple[int, int, int]] = {}
    for e in events:
        t, a, first = seen.get((e.partition, e.source),
                               (e.event_time, e.arrival_time, e.arrival_time))
        seen[(e.partition, e.source)] = (max(t, e.event_time), max(a, e.arrival_time),
                                         min(first, e.arrival_time))
    return [PartitionObservation(p, t, a, first, source)
            for (p, source), (t, a, first) in sorted(seen.items())]


@dataclass(frozen=True)
class CanonicalRow:
    window: Window
    key: str
    currency: str
    total: Decimal
    count: int


def canonical_totals(events: Iterable[Event], rules: EventTimeRules
                     ) -> tuple[dict[TotalKey, CanonicalRow], list[str]]:
    """The nightly replay: every valid event, de-duplicated by event_id over the whole log
    (first copy in arrival order wins), summed per window, key and currency. Returns the
    totals and the event_ids whose copies disagree (conflicts, reported, never silently
    merged)."""
    first: dict[str, Event] = {}
    conflicts: set[str] = set()
    ordered = sorted(events, key=arrival_order)
    for e in ordered:
        if typed_problem(e, rules.max_clock_skew) is not None:
            continue
        if e.event_id in first:
            if first[e.event_id].fingerprint != e.fingerprint:
                conflicts.add(e.event_id)
            continue
        first[e.event_id] = e
    sums: dict[TotalKey, tuple[Decimal, int]] = {}
    for e in first.values():
        for w in rules.windows.assign(e.event_time):
            total, count = sums.get((w, e.key, e.currency), (Decimal("0.00"), 0))
            sums[(w, e.key, e.currency)] = (money_sum((e.amount,), total), count + 1)
    rows = {k: CanonicalRow(k[0], k[1], k[2], t, c) for k, (t, c) in sums.items()}
    return rows, sorted(conflicts)


Measure = tuple[Decimal, int]


def duplicate_overcount(out: StreamOutcome, rules: EventTimeRules) -> dict[TotalKey, Measure]:
    """What the stream counted more than once, per (window, key, currency): every copy of an
    event_id that was not caught as a duplicate, beyond the first in arrival order (each such
    copy was either counted or sent to the late side output), in its own currency."""
    seen: set[str] = set()
    over: dict[TotalKey, Measure] = {}
    for event, _batch in out.admitted:
        if event.event_id not in seen:
            seen.add(event.event_id)
            continue
        for w in rules.windows.assign(event.event_time):
            grain = (w, event.key, event.currency)
            amount, count = over.get(grain, (Decimal("0.00"), 0))
            over[grain] = (money_sum((event.amount,), amount), count + 1)
    return over


def reconcile_outcome(out: StreamOutcome, events: Iterable[Event], rules: EventTimeRules,
                      tolerance: Tolerance | None = None) -> dict[TotalKey, ReconRow]:
    """The audit on plain lists: the stream's outcome against the replay of ``events``, per
    (window, key, currency)."""
    canonical, _ = canonical_totals(events, rules)
    late: dict[TotalKey, Measure] = {}
    for row in out.late:
        grain = (row.window, row.event.key, row.event.currency)
        amount, count = late.get(grain, (Decimal("0.00"), 0))
        late[grain] = (money_sum((row.event.amount,), amount), count + 1)
    return reconcile(
        {k: (r.total, r.count) for k, r in out.totals.items()},
        {k: (r.total, r.count) for k, r in canonical.items()},
        late, duplicate_overcount(out, rules), tolerance or Tolerance())
