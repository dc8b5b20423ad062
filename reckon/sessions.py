"""Session windows: all events of one (key, currency) with no gap longer than ``g`` between
consecutive event times, the unit of engagement ("a visit", not a clock minute).

Why a rule of its own: a tumbling window is known before its first event, a session only from
its data. One event at ``t`` spans ``[t, t + g)``; a session is the union of touching spans,
``[first event, last event + g)``, so an event exactly ``g`` after the previous one still
belongs to it (Spark's ``session_window`` merges the same way). Its lifecycle follows the
windows' (reckon.eventtime): a session is open while ``end > WM``, closed once ``end <= WM``,
and final once ``end + allowed_lateness <= WM``. In a stream (batches judged against the
watermark before them, as for windows) an event is:

* **late** when its span touches a final session (it would reopen what was published as
  final), or when it touches no open session and the session it alone would form is already
  final; it goes to the late side output with the span of the session it would have joined;
* otherwise **counted**: it extends an open or closed session, starts a new one, or bridges
  several of them, which merge into one (a revision: the merged session replaces them).

Late events never bridge: a late event between two final sessions leaves the stream with two
sessions, while the nightly replay (``sessions_of`` over the whole de-duplicated log) sees one;
the audit maps each canonical session to the provisional ones it covers and the late event
explains the gap (reckon/session_reference.py).

Example (gap 10 s; three events, the third 15 s after the second):

>>> s = sessions_of([(0, Decimal("1.00")), (10_000_000, Decimal("2.00")),
...                  (25_000_000, Decimal("4.00"))], 10_000_000)
>>> [(x.start, x.end, x.total) for x in s]
[(0, 20000000, Decimal('3.00')), (25000000, 35000000, Decimal('4.00'))]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal

from reckon.eventtime import WindowStatus, window_status
from reckon.money import money_sum

__all__ = ["Session", "SessionMerge", "absorb", "sessions_of", "spans_touch"]


@dataclass(frozen=True, order=True)
class Session:
    """One session of one (key, currency): ``[start, end)`` in microseconds, ``end`` being
    its last event's time plus the gap, and what it holds."""

    start: int
    end: int
    total: Decimal = Decimal("0.00")
    count: int = 0

    def status(self, watermark: int | None, allowed_lateness: int) -> WindowStatus:
        """OPEN, CLOSED or FINAL under ``watermark``, by the windows' own rule.

        >>> Session(0, 10).status(10, 5), Session(0, 10).status(15, 5)
        (<WindowStatus.CLOSED: 'CLOSED'>, <WindowStatus.FINAL: 'FINAL'>)
        """
        return window_status(self.end, watermark, allowed_lateness)


def spans_touch(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    """Whether two session spans merge: they overlap or one ends where the other starts
    (an event exactly ``g`` after the last one still belongs to the session).

    >>> spans_touch(0, 10, 10, 20), spans_touch(0, 10, 11, 21)
    (True, False)
    """
    return a_start <= b_end and b_start <= a_end


def sessions_of(events: Iterable[tuple[int, Decimal]], gap: int) -> list[Session]:
    """The sessions of one (key, currency)'s events ``(event_time, amount)``, oldest first:
    what the replay computes from the whole log, whatever order the events came in."""
    out: list[Session] = []
    for t, amount in sorted(events, key=lambda e: e[0]):
        last = out[-1] if out else None
        if last is not None and t <= last.end:
            out[-1] = Session(last.start, max(last.end, t + gap),
                              money_sum((amount,), last.total), last.count + 1)
        else:
            out.append(Session(t, t + gap, money_sum((amount,), Decimal("0.00")), 1))
    return out


@dataclass(frozen=True)
class SessionMerge:
    """What one batch did to one (key, currency): the sessions after it, the late events
    (their index in the batch's events and the span of the session each would have joined),
    and the sessions it replaced (merged or extended: the stream publishes a revision)."""

    sessions: tuple[Session, ...]
    late: tuple[tuple[int, int, int], ...]
    replaced: tuple[Session, ...]


def absorb(stored: Sequence[Session], events: Sequence[tuple[int, Decimal]], gap: int,
           watermark: int | None, allowed_lateness: int) -> SessionMerge:
    """One micro-batch of one (key, currency) against the sessions stored before it, judged
    by the watermark left by the previous batch (``None``: nothing has closed yet).

    >>> final = Session(0, 10, Decimal("1.00"), 1)
    >>> absorb([final], [(5, Decimal("2.00")), (100, Decimal("3.00"))], 10, 50, 0).late
    ((0, 0, 15),)
    """
    finals = [s for s in stored if s.status(watermark, allowed_lateness) is WindowStatus.FINAL]
    late: list[tuple[int, int, int]] = []
    kept: list[tuple[int, tuple[int, Decimal]]] = []
    for i, (t, amount) in enumerate(events):
        touched = [f for f in finals if spans_touch(f.start, f.end, t, t + gap)]
        if touched:
            late.append((i, min([t, *(f.start for f in touched)]),
                         max([t + gap, *(f.end for f in touched)])))
        else:
            kept.append((i, (t, amount)))
    live = [s for s in stored if s not in finals]
    merged, replaced, alone_late = _merge(live, kept, gap, watermark, allowed_lateness)
    late += alone_late
    return SessionMerge(sessions=tuple(sorted([*finals, *merged])), late=tuple(sorted(late)),
                        replaced=tuple(sorted(replaced)))


def _merge(live: Sequence[Session], kept: Sequence[tuple[int, tuple[int, Decimal]]], gap: int,
           watermark: int | None, allowed_lateness: int
           ) -> tuple[list[Session], list[Session], list[tuple[int, int, int]]]:
    """Connected components of the open sessions and the batch's kept events: a component
    that holds a stored session is counted (it replaces the stored ones it changed); one of
    new events only is counted unless its session would already be final (then late)."""
    items: list[tuple[int, int, Session | None, tuple[int, tuple[int, Decimal]] | None]] = [
        *((s.start, s.end, s, None) for s in live),
        *((t, t + gap, None, (i, (t, a))) for i, (t, a) in kept)]
    items.sort(key=lambda item: (item[0], item[1]))
    components: list[list[tuple[int, int, Session | None, tuple[int, tuple[int, Decimal]] | None]]]
    components = []
    for item in items:
        if components and item[0] <= max(x[1] for x in components[-1]):
            components[-1].append(item)
        else:
            components.append([item])
    sessions: list[Session] = []
    replaced: list[Session] = []
    late: list[tuple[int, int, int]] = []
    for component in components:
        stored = [x[2] for x in component if x[2] is not None]
        new = [x[3] for x in component if x[3] is not None]
        start, end = min(x[0] for x in component), max(x[1] for x in component)
        whole = _combined(stored, [e for _, e in new], start, end)
        if not stored and whole.status(watermark, allowed_lateness) is WindowStatus.FINAL:
            late += [(i, start, end) for i, _ in new]
            continue
        sessions.append(whole)
        if new and stored:
            replaced += stored
    return sessions, replaced, late


def _combined(stored: Sequence[Session], new: Sequence[tuple[int, Decimal]], start: int,
              end: int) -> Session:
    base = Session(start, end, Decimal("0.00"), 0)
    total = money_sum([s.total for s in stored] + [a for _, a in new], base.total)
    return replace(base, total=total, count=sum(s.count for s in stored) + len(new))
