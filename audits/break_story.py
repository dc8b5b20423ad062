"""A break's story, as the audit records it for the workbench: the lines ``reckon explain``
prints for the break's (window, key, currency), the events that explain its gap, and the
inputs (partitions and sources) that contributed to it. Pure: it takes the chapter
``audits.chapters.chapter_of`` built (the one story builder, which ``reckon explain`` prints
too), so the workbench shows the same story the terminal prints, without Spark.

Which inputs contributed to a break (what the workbench's partition and source filters
match): the question a break raises is "why was the 09:42 total for merchant X short (or
long)?", so an input contributed when

* it sent a **late event** of the cell (the watermark had closed the window: the event is
  not in the provisional total, which is why the total is short), or an **uncaught
  duplicate** (a copy the stream counted twice, which is why the total is long): these are
  the events the audit's late and duplicate figures explain the gap with; or
* the break has a **residual nothing explains** (an UNEXPLAINED or MISSING_* status) and the
  input had any event in the cell: then nothing tells which event the stream lost or added,
  and every input of the cell is a suspect the story lists event by event.

An input whose events were all counted on time in an explained break did not contribute:
filtering the breaks by partition 3 lists the breaks partition 3 caused, not every window it
had traffic in (which, on a busy day, is every window). A break can have several inputs.

Example:
    >>> from audits.chapters import WindowChapter
    >>> ch = WindowChapter(0, 10, "m1", "EUR", (), (), (), None, None, None)
    >>> inputs_of(ch)
    ()
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from audits.chapters import LATE, EventFate, WindowChapter, seconds_text
from audits.records import BreakInput, BreakStory
from reckon.money import format_amount
from reckon.reconcile import UNEXPLAINED_STATUSES
from reckon.timeutil import format_micros, from_micros

__all__ = ["STORY_LINE_CAP", "explains", "inputs_of", "story_of"]

#: The lines a recorded story keeps: a cell of a day when the stream stood still can hold
#: thousands of events, one line each; ``reckon explain`` prints them all.
STORY_LINE_CAP = 1000
_UNEXPLAINED = frozenset(s.value for s in UNEXPLAINED_STATUSES)


def explains(e: EventFate) -> bool:
    """Whether the event is part of the gap's explanation: late (not in the provisional
    total) or an uncaught duplicate (in it twice)."""
    return e.fate == LATE or e.uncaught_duplicate


def _unexplained(ch: WindowChapter) -> bool:
    return ch.reconciliation is not None and str(ch.reconciliation.get("status")) in _UNEXPLAINED


def inputs_of(ch: WindowChapter) -> tuple[BreakInput, ...]:
    """The partitions and sources that contributed to the chapter's break (module docstring),
    partitions first, each dimension's values in order (partitions numerically)."""
    suspects = _unexplained(ch)
    tally: dict[tuple[str, str], list[int]] = {}
    for e in ch.events:
        for dim, value in (("partition", str(e.partition)), ("source", e.source)):
            late, dup, seen = tally.setdefault((dim, value), [0, 0, 0])
            tally[dim, value] = [late + (e.fate == LATE), dup + e.uncaught_duplicate, seen + 1]
    out = [BreakInput(dimension=dim, value=value, late_count=late, duplicate_count=dup,
                      event_count=seen)
           for (dim, value), (late, dup, seen) in tally.items() if late or dup or suspects]

    def order(i: BreakInput) -> tuple[int, int, str]:
        number = int(i.value) if i.dimension == "partition" and i.value.lstrip("-").isdigit() \
            else 0
        return (i.dimension != "partition", number, i.value)

    return tuple(sorted(out, key=order))


def _evidence(e: EventFate, code: str) -> dict[str, Any]:
    """One explaining event, JSON-safe, for the break page's table and its row links."""
    return {"event_id": e.event_id, "fate": "late" if e.fate == LATE else "uncaught duplicate",
            "amount": format_amount(e.amount, code), "partition": e.partition,
            "offset": e.offset, "input_file": e.input_file, "source": e.source,
            "batch_id": e.batch_id, "event_time": format_micros(e.event_time),
            "arrival_time": format_micros(e.arrival_time),
            "watermark": None if e.watermark is None else format_micros(e.watermark),
            "lateness_seconds": None if e.lateness_seconds is None else
            seconds_text(e.lateness_seconds)}


def story_of(run_id: str, day: date, ch: WindowChapter) -> BreakStory:
    """The record of one break's chapter: its lines (at most :data:`STORY_LINE_CAP`, then a
    line saying how many more and the command that prints them), the explaining events and
    the contributing inputs."""
    lines = list(ch.lines)
    if len(lines) > STORY_LINE_CAP:
        more = len(lines) - STORY_LINE_CAP + 1
        lines = [*lines[:STORY_LINE_CAP - 1],
                 f"  ... {more} more lines: `reckon explain --key {ch.key} --window "
                 f"{format_micros(ch.window_start)} --currency {ch.currency}` prints them all"]
    return BreakStory(run_id=run_id, day=day, window_start=_moment(ch.window_start), key=ch.key,
                      currency=ch.currency, lines=tuple(lines),
                      evidence=tuple(_evidence(e, ch.currency) for e in ch.events
                                     if explains(e)),
                      inputs=inputs_of(ch), events=len(ch.events))


def _moment(micros: int) -> datetime:
    return from_micros(micros)
