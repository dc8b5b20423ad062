"""The bound what-if, pure: completeness, drops and emit latency per watermark bound L, on
an event log held in plain arrays (``audits.bound_whatif`` runs it on real data, in Spark).

For each candidate bound L the event log is replayed in arrival order at per-event granularity
(one event per batch; the stream's own batches: reckon.whatif_batches, docs/semantics.md
"Lateness analysis"): every event is judged against the
watermark left by the events before it, with the rules of ``reckon.eventtime`` (imported, never
restated). The answer to "how large must L be" is the smallest bound whose completeness
reaches a target (``recommend``).

Two implementations that must agree exactly (property-tested):
- ``lateness_curve_reference``: plain Python, ``advance_watermark`` and ``classify`` per event;
  small and obviously right, for tests.
- ``lateness_curve``: numpy, no Python loop over events (``eventtime.watermark_series`` gives
  the watermark before every event); the one the CLI and the warehouse analysis run.

Counting unit: an (event, window) pair. For tumbling windows that is one pair per event; for
hopping windows (W / S windows per event) an event can be counted in its newer windows and
dropped from its older ones, so admitted and dropped count pairs and completeness is
``admitted / (admitted + dropped)`` over pairs. An empty log has completeness 1.0.

Emit latency (event-time seconds): for every window holding at least one event of the log, at
the first moment the watermark after an event reaches its end (``WM >= end``), the largest
event_time seen so far on any partition minus the end; averaged over the windows whose end the
watermark reached; None if it reached none.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from reckon.config import Settings
from reckon.errors import invalid
from reckon.eventtime import (
    Disposition,
    PartitionObservation,
    WatermarkPolicy,
    WatermarkState,
    WindowSpec,
    advance_watermark,
    classify,
    is_beyond_allowed_lateness,
    is_open,
    shift_watermark_series,
    watermark_series,
)
from reckon.timeutil import MICROS_PER_SECOND, parse_duration

__all__ = [
    "DEFAULT_BOUNDS",
    "DEFAULT_IDLE_TIMEOUT",
    "CurvePoint",
    "candidate_bounds",
    "default_bounds",
    "lateness_curve",
    "lateness_curve_reference",
    "normalize_bounds",
    "recommend",
]

#: The configuration's default idle timeout (``Settings.idle_timeout``), in microseconds.
DEFAULT_IDLE_TIMEOUT = parse_duration(Settings.idle_timeout, "idle_timeout")

_NO_WATERMARK = np.iinfo(np.int64).min  # watermark_series' "undefined"


@dataclass(frozen=True)
class CurvePoint:
    """The outcome of one candidate bound.

    ``bound`` is L in microseconds; ``admitted``/``dropped`` count (event, window) pairs that
    would be counted / go to the late side output; ``completeness`` is
    ``admitted / (admitted + dropped)`` as a float: it is a ratio for choosing a bound, never an
    amount of money, so binary rounding is harmless (``recommend`` compares exactly on the
    counts). ``avg_emit_latency`` is in seconds of event time (None if no window closed).
    """

    bound: int
    completeness: float
    admitted: int
    dropped: int
    avg_emit_latency: float | None

    @classmethod
    def from_counts(cls, bound: int, admitted: int, dropped: int, latency_sum_us: int,
                    windows_passed: int) -> CurvePoint:
        """Build a point from exact integer counts; every implementation goes through here so
        their floats agree to the last bit."""
        total = admitted + dropped
        return cls(
            bound=int(bound),
            completeness=1.0 if total == 0 else admitted / total,
            admitted=int(admitted),
            dropped=int(dropped),
            avg_emit_latency=(None if windows_passed == 0
                              else int(latency_sum_us) / windows_passed / MICROS_PER_SECOND),
        )

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "bound_seconds": self.bound / MICROS_PER_SECOND,
            "completeness": self.completeness,
            "admitted": self.admitted,
            "dropped": self.dropped,
            "avg_emit_latency_seconds": self.avg_emit_latency,
        }


def normalize_bounds(bounds: Iterable[int | str]) -> list[int]:
    """Candidate bounds (microseconds, or duration strings like '5s') sorted, without repeats."""
    given = list(bounds)
    out = sorted({parse_duration(b, "bounds") if isinstance(b, str) else _non_negative(b)
                  for b in given})
    if not out:
        raise invalid("bounds", given, "give at least one watermark bound, e.g. 0s,2s,5s")
    return out


#: The standard ladder of candidate bounds; the configured lateness is always added to it.
#: 15 s and 20 s: from 10 s straight to 30 s, a source that needs 12 s was given 30 s, and a
#: recommendation per source settled for the global cap that a 30 s bound on the fastest
#: source gives (bench/per_source_day.py, 2026-11-27).
DEFAULT_BOUNDS = ("0s", "1s", "2s", "3s", "5s", "10s", "15s", "20s", "30s", "1m", "5m")


def default_bounds(settings: Settings) -> list[int]:
    """The standard ladder plus the configured lateness, sorted: both what-if curves (per event
    and per micro-batch) are drawn over the same bounds, so their rows line up.

    >>> default_bounds(Settings(watermark_bound="4s"))[:5]
    [0, 1000000, 2000000, 3000000, 4000000]
    """
    return candidate_bounds(None, settings.watermark_bound)


def candidate_bounds(given: Iterable[int | str] | None, configured: int | str) -> list[int]:
    """The bounds a what-if tries: ``given`` normalised, or when None the standard ladder plus
    the ``configured`` bound (``default_bounds`` of the settings), sorted.

    >>> candidate_bounds(None, "4s")[:5], candidate_bounds(["2s", 0], "4s")
    ([0, 1000000, 2000000, 3000000, 4000000], [0, 2000000])
    """
    return normalize_bounds([*DEFAULT_BOUNDS, configured] if given is None else given)


def _non_negative(b: object) -> int:
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 0:
        raise invalid("bounds", b, "each bound is a duration >= 0 (microseconds or e.g. '5s')")
    return int(b)


# --------------------------------------------------------------------------- reference


def lateness_curve_reference(events: Sequence[tuple[int, int, int]], windows: WindowSpec,
                             bounds: Iterable[int], *, allowed_lateness: int = 0,
                             idle_timeout: int = DEFAULT_IDLE_TIMEOUT,
                             expected_partitions: Iterable[int] = ()) -> list[CurvePoint]:
    """The curve by the book: ``events`` are ``(event_us, arrival_us, partition)`` in arrival
    order; for each bound, ``classify`` every (event, window) pair against the watermark left
    by the previous event, then ``advance_watermark`` with this one event. Points come sorted
    by bound. Counting unit and emit latency as in the module docstring."""
    expected = tuple(expected_partitions)
    all_ends = sorted({w.end for t, _, _ in events for w in windows.assign(t)})
    points = []
    for bound in normalize_bounds(bounds):
        policy = WatermarkPolicy(bound, idle_timeout, expected)
        state = WatermarkState()
        admitted = dropped = latency_sum = passed = 0
        pending = deque(all_ends)
        max_seen: int | None = None
        for t, a, p in events:
            for window in windows.assign(t):
                if classify(window.end, state.watermark, allowed_lateness) is Disposition.LATE:
                    dropped += 1
                else:
                    admitted += 1
            state = advance_watermark(state, [PartitionObservation(p, t, a)], policy)
            max_seen = t if max_seen is None else max(max_seen, t)
            while (pending and state.watermark is not None
                   and not is_open(pending[0], state.watermark)):
                latency_sum += max_seen - pending.popleft()
                passed += 1
        points.append(CurvePoint.from_counts(bound, admitted, dropped, latency_sum, passed))
    return points


# --------------------------------------------------------------------------- vectorised


def lateness_curve(event_us: np.ndarray, arrival_us: np.ndarray, partition: np.ndarray | None,
                   windows: WindowSpec, bounds: Iterable[int], *, allowed_lateness: int = 0,
                   idle_timeout: int = DEFAULT_IDLE_TIMEOUT,
                   expected_partitions: Iterable[int] = (), source: Any = None,
                   by_source: bool = False, state: WatermarkState | None = None
                   ) -> list[CurvePoint]:
    """The same curve as ``lateness_curve_reference``, vectorised (int64, no loop over events).

    The arrays are in arrival order (microseconds; ``partition`` None means one partition 0).
    ``watermark_series`` gives the watermark before each event once, with bound 0, and
    ``shift_watermark_series`` the one of each bound; per bound, ``is_beyond_allowed_lateness`` on whole
    arrays counts the dropped pairs, and a binary search on the (monotone) watermark after
    each event finds the moment each window's end is reached. With ``by_source`` the
    watermark inputs are (partition, source) pairs (``source``: one string per event), each
    bound applying to every input. ``state`` (without a watermark) starts the walk with
    inputs already known.
    """
    t = np.ascontiguousarray(event_us, dtype=np.int64).ravel()
    a = np.ascontiguousarray(arrival_us, dtype=np.int64).ravel()
    p = None if partition is None else np.ascontiguousarray(partition, dtype=np.int64).ravel()
    if len(a) != len(t) or (p is not None and len(p) != len(t)):
        raise invalid("arrival_us/partition", (len(t), len(a), None if p is None else len(p)),
                      "event_us, arrival_us and partition must have the same length")
    expected = tuple(expected_partitions)
    n = len(t)
    pair_ends = [start + windows.size for start in windows.window_starts(t)]
    window_ends = np.unique(np.concatenate(pair_ends)) if n else np.empty(0, dtype=np.int64)
    max_seen = np.maximum.accumulate(t) if n else t
    pairs = n * windows.windows_per_event
    # One walk of the log with bound 0; every other bound's watermarks are those minus L.
    at_zero, final = watermark_series(
        t, a, p, WatermarkPolicy(0, idle_timeout, expected, by_source=by_source), state,
        source=source)
    after_zero = np.empty_like(at_zero)
    after_zero[:-1] = at_zero[1:]
    if n:
        after_zero[-1] = _NO_WATERMARK if final.watermark is None else final.watermark
    points = []
    for bound in normalize_bounds(bounds):
        before = shift_watermark_series(at_zero, bound)
        dropped = sum(int(np.count_nonzero(is_beyond_allowed_lateness(ends, before, allowed_lateness)))
                      for ends in pair_ends)
        after = shift_watermark_series(after_zero, bound)
        first_reach = np.searchsorted(after, window_ends, side="left")  # first WM >= end
        passed = first_reach < n
        latency = max_seen[first_reach[passed]] - window_ends[passed]
        points.append(CurvePoint.from_counts(bound, pairs - dropped, dropped,
                                             int(latency.sum()), int(passed.sum())))
    return points


# --------------------------------------------------------------------------- choosing a bound


def recommend(points: Iterable[CurvePoint], target: float | Decimal | str) -> CurvePoint | None:
    """The point with the smallest bound whose completeness reaches ``target`` (0 < target <= 1),
    compared exactly on the counts (``admitted >= target * total``); None if no bound does."""
    goal = _target(target)
    reaching = [pt for pt in points
                if pt.admitted + pt.dropped == 0
                or Fraction(pt.admitted, pt.admitted + pt.dropped) >= goal]
    return min(reaching, key=lambda pt: pt.bound, default=None)


def _target(target: float | Decimal | str) -> Fraction:
    try:
        goal = Fraction(str(target)) if isinstance(target, (float, str)) else Fraction(target)
    except (ValueError, TypeError, ArithmeticError):
        raise invalid("target", target, "a completeness between 0 and 1, e.g. 0.999") from None
    if not 0 < goal <= 1:
        raise invalid("target", target, "a completeness > 0 and <= 1, e.g. 0.999")
    return goal
