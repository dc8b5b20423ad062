"""Session windows on plain Python lists: the stream, the replay and the audit of a session day.

The reference the Spark session stream is to be checked against, as reckon/reference.py is for
tumbling and hopping windows: the same validation, duplicates and per-input watermark, with
``reckon.sessions`` in place of fixed windows. Every total is kept per (session, key,
currency); a session is named by its span.

The audit of sessions cannot join on a window: a canonical session (the replay's, from the
whole de-duplicated log) may cover several provisional ones, when a late event bridged
sessions the stream had already published as final. ``reconcile_sessions`` maps each canonical
session to the provisional sessions inside it and attributes its gap to the late events and
uncaught duplicates in it, by the same row rule as windows (reckon.reconcile).

Example: a late event bridging two final sessions explains the whole gap (the worked example
of docs/semantics.md, "Session windows").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from reckon.eventtime import (
    EventTimeRules,
    WatermarkState,
    Window,
    advance_watermark,
)
from reckon.money import money_sum
from reckon.reconcile import ReconRow, Tolerance, reconcile
from reckon.reference import (
    Event,
    _observations,
    arrival_order,
    caught_duplicate,
    typed_problem,
)
from reckon.sessions import Session, absorb, sessions_of

__all__ = ["SessionLate", "SessionOutcome", "canonical_sessions", "reconcile_sessions",
           "session_stream_outcome"]

#: (key, currency): the grain sessions are kept per
Grain = tuple[str, str]
Measure = tuple[Decimal, int]


@dataclass(frozen=True)
class SessionLate:
    """A late event, the span of the session it would have joined, the watermark it was
    judged by and its batch."""

    event: Event
    span: Window
    watermark: int | None
    batch_id: int


@dataclass
class SessionOutcome:
    """What the session stream did: the sessions as last published per (key, currency), the
    late side output, the duplicates caught, the quarantined lines, the watermark after
    each batch, the events admitted (not caught as duplicates), and how many batches revised
    a session (merged or extended one already published)."""

    sessions: dict[Grain, list[Session]] = field(default_factory=dict)
    late: list[SessionLate] = field(default_factory=list)
    duplicates: list[tuple[Event, int]] = field(default_factory=list)
    quarantined: list[tuple[Event, str, int]] = field(default_factory=list)
    watermarks: list[int | None] = field(default_factory=list)
    admitted: list[tuple[Event, int]] = field(default_factory=list)
    revisions: int = 0

    @property
    def counted(self) -> int:
        """Events in a session: every admitted event that was not late."""
        return sum(s.count for sessions in self.sessions.values() for s in sessions)


def session_stream_outcome(batches: Sequence[Sequence[Event]], rules: EventTimeRules,
                           gap: int) -> SessionOutcome:
    """The micro-batches as the session stream processes them: each judged against the
    watermark after the previous one; then the watermark absorbs the batch (late events and
    duplicates included), as for windows (reckon.reference.stream_outcome)."""
    out = SessionOutcome()
    state = WatermarkState()
    latest_arrival: dict[str, int] = {}
    for batch_id, batch in enumerate(batches):
        valid = _validate(out, batch, rules, batch_id)
        admitted = _deduplicate(out, valid, rules, latest_arrival, batch_id)
        by_grain: dict[Grain, list[Event]] = {}
        for event in admitted:
            by_grain.setdefault((event.key, event.currency), []).append(event)
        for grain, events in sorted(by_grain.items()):
            merge = absorb(out.sessions.get(grain, []), [(e.event_time, e.amount) for e in events],
                           gap, state.watermark, rules.allowed_lateness)
            out.sessions[grain] = list(merge.sessions)
            out.late += [SessionLate(events[i], Window(start, end), state.watermark, batch_id)
                         for i, start, end in merge.late]
            out.revisions += bool(merge.replaced)
        state = advance_watermark(state, _observations(valid), rules.watermark)
        out.watermarks.append(state.watermark)
    return out


def _validate(out: SessionOutcome, batch: Sequence[Event], rules: EventTimeRules,
              batch_id: int) -> list[Event]:
    valid: list[Event] = []
    for event in sorted(batch, key=arrival_order):
        problem = typed_problem(event, rules.max_clock_skew)
        if problem is None:
            valid.append(event)
        else:
            out.quarantined.append((event, problem, batch_id))
    return valid


def _deduplicate(out: SessionOutcome, valid: Sequence[Event], rules: EventTimeRules,
                 latest_arrival: dict[str, int], batch_id: int) -> list[Event]:
    admitted: list[Event] = []
    for event in valid:
        if caught_duplicate(latest_arrival, event, rules.dedup_horizon):
            out.duplicates.append((event, batch_id))
            continue
        out.admitted.append((event, batch_id))
        admitted.append(event)
    return admitted


def canonical_sessions(events: Iterable[Event], rules: EventTimeRules, gap: int
                       ) -> dict[Grain, list[Session]]:
    """The nightly replay of sessions: every valid event, de-duplicated by event_id over the
    whole log (the first copy in arrival order wins), sessionized per (key, currency)."""
    first: dict[str, Event] = {}
    for e in sorted(events, key=arrival_order):
        if typed_problem(e, rules.max_clock_skew) is None and e.event_id not in first:
            first[e.event_id] = e
    by_grain: dict[Grain, list[tuple[int, Decimal]]] = {}
    for e in first.values():
        by_grain.setdefault((e.key, e.currency), []).append((e.event_time, e.amount))
    return {grain: sessions_of(points, gap) for grain, points in sorted(by_grain.items())}


def _add(measures: dict[tuple[Window, str, str], Measure], grain: tuple[Window, str, str],
         amount: Decimal, count: int = 1) -> None:
    total, n = measures.get(grain, (Decimal("0.00"), 0))
    measures[grain] = (money_sum((amount,), total), n + count)


def _home(canonical: Sequence[Session], start: int, end: int) -> Window:
    """The canonical session a provisional span or event lies in (the replay's sessions
    cover every event the stream counted); a span in none is its own row."""
    for c in canonical:
        if c.start <= start and end <= c.end:
            return Window(c.start, c.end)
    return Window(start, end)


def reconcile_sessions(out: SessionOutcome, events: Iterable[Event], rules: EventTimeRules,
                       gap: int, tolerance: Tolerance | None = None
                       ) -> dict[tuple[Window, str, str], ReconRow]:
    """The audit of a session day: per canonical (session, key, currency), its total against
    the provisional sessions it covers, the gap attributed to the late events in it and the
    uncaught duplicates (every admitted copy of an event_id after its first)."""
    events = list(events)
    canonical = canonical_sessions(events, rules, gap)
    provisional: dict[tuple[Window, str, str], Measure] = {}
    for (key, currency), sessions in out.sessions.items():
        home = canonical.get((key, currency), [])
        for s in sessions:
            _add(provisional, (_home(home, s.start, s.end), key, currency), s.total, s.count)
    late: dict[tuple[Window, str, str], Measure] = {}
    for row in out.late:
        e = row.event
        home = canonical.get((e.key, e.currency), [])
        _add(late, (_home(home, e.event_time, e.event_time + gap), e.key, e.currency), e.amount)
    duplicate: dict[tuple[Window, str, str], Measure] = {}
    seen: set[str] = set()
    for e, _batch in out.admitted:
        if e.event_id in seen:
            home = canonical.get((e.key, e.currency), [])
            _add(duplicate, (_home(home, e.event_time, e.event_time + gap), e.key, e.currency),
                 e.amount)
        seen.add(e.event_id)
    whole = {(Window(c.start, c.end), key, cur): (c.total, c.count)
             for (key, cur), sessions in canonical.items() for c in sessions}
    return reconcile(provisional, whole, late, duplicate, tolerance or Tolerance())
