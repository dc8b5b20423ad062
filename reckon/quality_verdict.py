"""A day's data-quality verdict, per (day, suite) and per day: decided here, once.

Why one owner: Great Expectations calls a suite failed when any expectation fails, warnings
included, while reckon's gate fails a day only on a *blocking* failure; and a day with no
events (a quiet lookback day) once showed red in Data Docs while its report and the gate said
passed. Now ``audits.quality`` asks this module for each suite's verdict when it runs the
checks, stores the words with the check run, and writes ``passed`` into the GX validation
result (so the Data Docs index colours it the same); the report, ``reckon check`` and the
nightly quality gate show the stored words and never decide again.

Rules (plain values, no GX, no Spark):

- A suite *passed* when none of its blocking expectations failed; warnings never fail it.
- On a day with events, a table the nightly steps fill must have rows
  (``min_rows(True) == 1``); on a day with no events that expectation is vacuously true
  (``min_rows(False) == 0``): an empty day is a real, correct day, not a step that did not run.
- Every other expectation is a row rule (GX map expectations): on an empty table it is
  vacuously true, so a quiet day's suites pass unless a table is missing.
- The words: ``FAILED (2 blocking)``, ``passed with 1 warning``, ``passed (no events)`` for an
  empty suite on a day with no events, ``passed (no rows)`` for an empty suite on a day with
  events (no late events is normal), else ``passed``. The day: ``FAILED``, ``passed (no events
  on the day)`` or ``passed``.

Example:
    >>> v = suite_verdict(rows=0, day_has_events=False, results=[("warning", True)])
    >>> v.passed, v.text
    (True, 'passed (no events)')
    >>> suite_verdict(rows=3, day_has_events=True,
    ...               results=[("blocking", False), ("warning", False)]).text
    'FAILED (1 blocking)'
    >>> day_verdict([v], day_has_events=False).text
    'passed (no events on the day)'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["BLOCKING", "DayVerdict", "SuiteVerdict", "day_verdict", "min_rows", "suite_verdict"]

BLOCKING = "blocking"


def min_rows(day_has_events: bool) -> int:
    """The fewest rows a table the nightly steps fill must have on the day: 1 on a day with
    events, 0 (vacuously true) on a day without.

    >>> min_rows(True), min_rows(False)
    (1, 0)
    """
    return 1 if day_has_events else 0


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class SuiteVerdict:
    """One suite's verdict on one day. ``passed``: no blocking expectation failed (what GX's
    ``success`` is set to); ``text``: the words every view shows."""

    rows: int
    blocking_failures: int
    warnings: int
    day_has_events: bool
    passed: bool = field(init=False)
    text: str = field(init=False)

    def __post_init__(self) -> None:
        passed = self.blocking_failures == 0
        if not passed:
            text = f"FAILED ({self.blocking_failures} blocking)"
        elif self.warnings:
            text = f"passed with {_plural(self.warnings, 'warning')}"
        elif self.rows == 0:
            text = "passed (no rows)" if self.day_has_events else "passed (no events)"
        else:
            text = "passed"
        object.__setattr__(self, "passed", passed)
        object.__setattr__(self, "text", text)


def suite_verdict(*, rows: int, day_has_events: bool,
                  results: Iterable[tuple[str, bool]]) -> SuiteVerdict:
    """The verdict of a suite from its results as ``(severity, success)`` pairs (``severity``
    ``"blocking"`` or ``"warning"``) and the rows it checked."""
    outcomes = list(results)
    blocking = sum(1 for severity, ok in outcomes if not ok and severity == BLOCKING)
    warnings = sum(1 for severity, ok in outcomes if not ok and severity != BLOCKING)
    return SuiteVerdict(rows=rows, blocking_failures=blocking, warnings=warnings,
                        day_has_events=day_has_events)


@dataclass(frozen=True)
class DayVerdict:
    """Every suite of one day's check run: ``passed`` when each suite passed."""

    passed: bool
    text: str


def day_verdict(suites: Sequence[SuiteVerdict], *, day_has_events: bool) -> DayVerdict:
    """The day's verdict from its suites' verdicts (the words the report, ``reckon check`` and
    the gate show)."""
    passed = all(s.passed for s in suites)
    if not passed:
        return DayVerdict(passed=False, text="FAILED")
    return DayVerdict(passed=True, text="passed" if day_has_events
                      else "passed (no events on the day)")
