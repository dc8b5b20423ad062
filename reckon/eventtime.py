"""The event-time contract, in one module: windows, watermark, lateness, duplicates, clock skew.

Every other part of reckon (the stream, the replay, the reference, the what-if analysis, the
audit) imports these rules; none re-implements them. See docs/semantics.md.

Units: every time and duration is an integer number of microseconds since the Unix epoch (UTC).
Intervals are half-open: a window ``[start, end)`` contains ``start`` and not ``end``.

The arithmetic helpers (``window_starts``, ``is_open``, ``is_beyond_grace``,
``is_future_dated``, ``is_duplicate_of_recent``) use only ``+ - % < <= >``, so the very same
function applies to Python ints, numpy int64 arrays and Spark long Columns. ``t % step`` is a
floor remainder for Python and numpy and a truncated one in Spark; they agree for ``t >= 0``,
which validation guarantees (event times before 1970 are quarantined).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum
from typing import Any, TypeVar

from reckon.errors import ConfigError
from reckon.timeutil import day_bounds, format_duration, format_micros, parse_duration

__all__ = [
    "Disposition",
    "EventTimeRules",
    "PartitionObservation",
    "PartitionProgress",
    "WatermarkPolicy",
    "WatermarkState",
    "Window",
    "WindowSpec",
    "WindowStatus",
    "advance_watermark",
    "classify",
    "ends_passed",
    "is_beyond_grace",
    "is_duplicate_of_recent",
    "is_future_dated",
    "is_open",
    "shift_watermark_series",
    "watermark_series",
    "window_status",
]

T = TypeVar("T")


# --------------------------------------------------------------------------- windows


@dataclass(frozen=True, order=True)
class Window:
    """The half-open interval ``[start, end)`` in microseconds."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ConfigError(f"Window end {self.end} must be after start {self.start}")

    def __repr__(self) -> str:
        return f"Window[{format_micros(self.start)}, {format_micros(self.end)})"

    def contains(self, t: int) -> bool:
        return self.start <= t < self.end

    def intersects(self, other: Window) -> bool:
        """True when the two half-open intervals share at least one instant."""
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class WindowSpec:
    """Tumbling (``slide`` None) or hopping windows aligned to the Unix epoch.

    Tumbling, width W: ``start = floor(t / W) * W``, ``end = start + W``.
    Hopping, size W and slide S (W a multiple of S): every window whose start is a multiple of
    S with ``start <= t < start + W``; an event belongs to exactly W / S windows.
    """

    size: int
    slide: int | None = None

    def __post_init__(self) -> None:
        if self.size <= 0:
            raise ConfigError(f"window={self.size}us is not valid: the window width must be > 0")
        if self.slide is not None:
            if self.slide <= 0 or self.slide > self.size or self.size % self.slide:
                raise ConfigError(
                    f"slide={format_duration(self.slide)} is not valid for window="
                    f"{format_duration(self.size)}: the slide must be > 0 and divide the window"
                )
            if self.slide == self.size:
                object.__setattr__(self, "slide", None)

    @classmethod
    def parse(cls, window: str | int, slide: str | int | None = None) -> WindowSpec:
        return cls(parse_duration(window, "window"),
                   None if slide in (None, "", 0) else parse_duration(slide, "slide"))

    @property
    def step(self) -> int:
        """Distance between consecutive window starts (the slide, or the width if tumbling)."""
        return self.slide or self.size

    @property
    def windows_per_event(self) -> int:
        return self.size // self.step

    def window_starts(self, t: T) -> list[T]:
        """Starts of every window containing ``t`` (int, numpy array or Spark Column), newest first."""
        # T has no arithmetic bound (int, ndarray and Column share no protocol): Any, not int.
        base: Any = t - t % self.step  # type: ignore[operator]
        return [base - k * self.step for k in range(self.windows_per_event)]

    def covered_event_times(self, first_start: int, end_start: int) -> tuple[int, int]:
        """``[lo, hi)``: every event time held by the windows whose start is in
        ``[first_start, end_start)`` (empty, ``lo == hi``, if no window starts there).

        Windows are aligned to the epoch, not to the range: the first one starts at the first
        multiple of the step at or after ``first_start`` and the last one ends ``size`` after
        the last multiple before ``end_start``. A day's last windows therefore reach into the
        next day -- with hopping windows, or when the step does not divide 24 hours (a 7-minute
        window starting 23:55 ends at 00:02) -- so a day's replay, audit, duplicate count and
        the nightly wait must reach that far, and no earlier than the day's first window."""
        step = self.step
        first = -(-first_start // step) * step
        last = -(-end_start // step) * step - step
        if last < first:
            return first, first
        return first, last + self.size

    def day_event_times(self, day: date) -> tuple[int, int]:
        """``[lo, hi)``: every event time held by the windows of a UTC day (those starting in
        it), what each day-scoped read takes (covered_event_times of the day)."""
        return self.covered_event_times(*day_bounds(day))

    def assign(self, t: int) -> tuple[Window, ...]:
        """Windows containing event time ``t``, oldest first."""
        return tuple(Window(s, s + self.size) for s in reversed(self.window_starts(t)))

    def describe(self) -> str:
        if self.slide is None:
            return f"tumbling {format_duration(self.size)}"
        return f"hopping {format_duration(self.size)} every {format_duration(self.slide)}"

    def to_config(self) -> dict[str, str | None]:
        return {"window": format_duration(self.size),
                "slide": None if self.slide is None else format_duration(self.slide)}


# --------------------------------------------------------------------------- classification


class Disposition(StrEnum):
    """What became of one input row (per window, for valid events). Every row gets exactly one."""

    ON_TIME = "on_time"        # window open: counted in the provisional total
    REVISION = "revision"      # window closed but within grace: counted, revision += 1
    LATE = "late"              # window final: side output, not counted
    DUPLICATE = "duplicate"    # same event_id seen within the dedup horizon: counted once
    QUARANTINED = "quarantined"  # failed parsing or validation: quarantine table with reason


class WindowStatus(StrEnum):
    OPEN = "OPEN"      # end > WM
    CLOSED = "CLOSED"  # end <= WM < end + grace: emitted, may still be revised
    FINAL = "FINAL"    # end + grace <= WM


def is_open(window_end: T, watermark: Any) -> T:
    """``end > WM``: the window still accepts events as on time."""
    return window_end > watermark  # type: ignore[operator, return-value]


def is_beyond_grace(window_end: T, watermark: Any, grace: int) -> T:
    """``end + G <= WM``: the window is final; an event for it goes to the late side output."""
    return window_end + grace <= watermark  # type: ignore[operator, return-value]


def ends_passed(before: T, after: T, step: int) -> tuple[T, T]:
    """``(first, last)``: the window ends a watermark moving from ``before`` to ``after``
    passes, i.e. every multiple of ``step`` (windows align to the epoch, so every end is one)
    with ``before < end <= after``; none when ``first > last``. Works on ints and Spark
    Columns alike, so the derived provisional_totals finds the batch
    that closed a window by equality instead of a range join.

    >>> ends_passed(25, 47, 10)
    (30, 40)
    """
    # (x % s + s) % s: the floor remainder on ints and on Spark's truncating % alike
    first: Any = before - (before % step + step) % step + step  # type: ignore[operator]
    last: Any = after - (after % step + step) % step  # type: ignore[operator]
    return first, last


def classify(window_end: int, watermark: int | None, grace: int) -> Disposition:
    """Classify one (event, window) pair against the watermark left by the previous batch.

    No watermark yet (None) means no window has closed: everything is on time.
    """
    if watermark is None or is_open(window_end, watermark):
        return Disposition.ON_TIME
    if is_beyond_grace(window_end, watermark, grace):
        return Disposition.LATE
    return Disposition.REVISION


def window_status(window_end: int, watermark: int | None, grace: int) -> WindowStatus:
    """Lifecycle of a window under watermark ``WM``: OPEN -> CLOSED -> FINAL."""
    if watermark is None or is_open(window_end, watermark):
        return WindowStatus.OPEN
    if is_beyond_grace(window_end, watermark, grace):
        return WindowStatus.FINAL
    return WindowStatus.CLOSED


def is_future_dated(event_time: T, arrival_time: Any, max_clock_skew: int) -> T:
    """``event_time > arrival_time + skew``: a bad clock; quarantined, never moves the watermark."""
    return event_time > arrival_time + max_clock_skew  # type: ignore[operator, return-value]


def is_duplicate_of_recent(latest_prior_arrival: T, arrival_time: Any, horizon: int) -> T:
    """The stream's dedup rule: a copy is a duplicate when an earlier copy of the same event_id
    (earlier in arrival order) arrived no more than ``horizon`` before it. Pass the latest
    arrival time among the earlier copies; callers handle 'no earlier copy' (None/null)."""
    return latest_prior_arrival >= arrival_time - horizon  # type: ignore[operator, return-value]


# --------------------------------------------------------------------------- watermark


@dataclass(frozen=True)
class WatermarkPolicy:
    """Bounded out-of-orderness per partition, combined with the min rule.

    ``WM_p = max_p - lateness``; ``WM = max(WM_prev, min(WM_p for p not idle))``. A partition is
    idle when ``clock - last_arrival_p >= idle_timeout`` where ``clock`` is the latest arrival
    time seen on any partition. WM stays undefined until every expected partition has
    delivered once or timed out idle (a never-seen partition is timed from the first arrival).
    """

    lateness: int
    idle_timeout: int
    expected_partitions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.lateness < 0:
            raise ConfigError(f"lateness={self.lateness}us is not valid: it must be >= 0")
        if self.idle_timeout <= 0:
            raise ConfigError(
                f"idle_timeout={self.idle_timeout}us is not valid: it must be > 0 "
                "(0 would let every partition be idle and close windows under live data)"
            )
        object.__setattr__(self, "expected_partitions",
                           tuple(sorted(set(self.expected_partitions))))


@dataclass(frozen=True)
class PartitionProgress:
    max_event_time: int
    last_arrival: int


@dataclass(frozen=True)
class PartitionObservation:
    """What one batch saw on one partition (valid events only, late and duplicates included).
    ``min_arrival_time`` (None: the same as ``max_arrival_time``) is the batch's earliest
    arrival there: the stream's first arrival, from which an expected partition that never
    delivers is timed out, is the earliest arrival of all, not the earliest batch maximum."""

    partition: int
    max_event_time: int
    max_arrival_time: int
    min_arrival_time: int | None = None


@dataclass(frozen=True)
class WatermarkState:
    """Per-partition progress and the global watermark after some batch. Persisted as JSON."""

    partitions: Mapping[int, PartitionProgress] = field(default_factory=dict)
    first_arrival: int | None = None
    clock: int | None = None
    watermark: int | None = None

    def idle_partitions(self, policy: WatermarkPolicy) -> tuple[int, ...]:
        if self.clock is None:
            return ()
        known = set(self.partitions) | set(policy.expected_partitions)
        idle = []
        for p in sorted(known):
            progress = self.partitions.get(p)
            since = progress.last_arrival if progress else self.first_arrival
            if since is not None and self.clock - since >= policy.idle_timeout:
                idle.append(p)
        return tuple(idle)

    def partition_watermarks(self, policy: WatermarkPolicy) -> dict[int, int]:
        return {p: pr.max_event_time - policy.lateness for p, pr in self.partitions.items()}

    def to_json(self) -> str:
        return json.dumps({
            "partitions": {str(p): [pr.max_event_time, pr.last_arrival]
                           for p, pr in sorted(self.partitions.items())},
            "first_arrival": self.first_arrival, "clock": self.clock,
            "watermark": self.watermark,
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> WatermarkState:
        if not text:
            return cls()
        raw = json.loads(text)
        return cls(
            partitions={int(p): PartitionProgress(int(v[0]), int(v[1]))
                        for p, v in raw["partitions"].items()},
            first_arrival=raw["first_arrival"], clock=raw["clock"], watermark=raw["watermark"],
        )


def advance_watermark(state: WatermarkState, observations: Iterable[PartitionObservation],
                      policy: WatermarkPolicy) -> WatermarkState:
    """Absorb one batch's per-partition maxima and recompute the global watermark (min rule).

    Never moves backwards: the result is ``max(previous, min over active partitions)``.
    """
    partitions = dict(state.partitions)
    first_arrival, clock = state.first_arrival, state.clock
    for obs in observations:
        old = partitions.get(obs.partition)
        partitions[obs.partition] = PartitionProgress(
            obs.max_event_time if old is None else max(old.max_event_time, obs.max_event_time),
            obs.max_arrival_time if old is None else max(old.last_arrival, obs.max_arrival_time),
        )
        earliest = obs.max_arrival_time if obs.min_arrival_time is None else min(
            obs.min_arrival_time, obs.max_arrival_time)
        first_arrival = earliest if first_arrival is None else min(first_arrival, earliest)
        clock = obs.max_arrival_time if clock is None else max(clock, obs.max_arrival_time)
    draft = WatermarkState(partitions, first_arrival, clock, state.watermark)
    idle = set(draft.idle_partitions(policy))
    known = set(partitions) | set(policy.expected_partitions)
    waiting = [p for p in known if p not in partitions and p not in idle]
    active = [p for p in partitions if p not in idle]
    if waiting or not active:
        return draft
    candidate = min(partitions[p].max_event_time for p in active) - policy.lateness
    watermark = candidate if state.watermark is None else max(state.watermark, candidate)
    return WatermarkState(partitions, first_arrival, clock, watermark)


def watermark_series(event_us: Any, arrival_us: Any, partition: Any, policy: WatermarkPolicy,
                     state: WatermarkState | None = None, *, max_cells: int = 1 << 20
                     ) -> tuple[Any, WatermarkState]:
    """The per-event form of ``advance_watermark``: the watermark each event is judged against.

    Exactly what calling ``advance_watermark`` once per event (one event per batch, in the
    given order) starting from ``state`` gives, computed with numpy instead of a Python loop:
    the same per-partition maxima, idle rule (``clock - last_arrival_p >= idle_timeout``,
    never-seen expected partitions timed from the first arrival), waiting for expected
    partitions, min rule and monotonicity (``WM = max(WM_prev, min over active WM_p)``).

    Arguments are 1-D int64-compatible arrays of equal length (microseconds; ``partition``
    may be None for a single partition 0). Returns ``(before, final)``: ``before[i]`` is the
    global watermark left by events ``0..i-1`` (``state.watermark`` for ``i = 0``), the one
    event i is classified against; ``final`` is the state after the last event. An undefined
    watermark is ``numpy.iinfo(int64).min``: every window end exceeds it, so ``is_open`` and
    ``is_beyond_grace`` treat it exactly as they treat "no watermark yet". Memory stays below
    about ``max_cells`` partition x event cells per step (the log is walked in chunks).
    """
    import numpy as np

    none = np.iinfo(np.int64).min
    t = np.asarray(event_us, dtype=np.int64).ravel()
    a = np.asarray(arrival_us, dtype=np.int64).ravel()
    p = (np.zeros(len(t), dtype=np.int64) if partition is None
         else np.asarray(partition, dtype=np.int64).ravel())
    if not len(t) == len(a) == len(p):
        raise ConfigError(f"event_us, arrival_us and partition must have the same length, "
                          f"got {len(t)}, {len(a)} and {len(p)}")
    state = state or WatermarkState()
    known = sorted(set(state.partitions) | set(policy.expected_partitions))
    labels = np.unique(np.concatenate([p, np.asarray(known, dtype=np.int64)]))
    width = len(labels)
    index = np.searchsorted(labels, p)
    max_t = np.full(width, none, dtype=np.int64)
    last_a = np.full(width, none, dtype=np.int64)  # none <=> partition not seen yet
    for k, label in enumerate(labels.tolist()):
        if label in state.partitions:
            max_t[k] = state.partitions[label].max_event_time
            last_a[k] = state.partitions[label].last_arrival
    expected = np.isin(labels, np.asarray(policy.expected_partitions, dtype=np.int64))[:, None]
    first, clock = state.first_arrival, state.clock
    wm = none if state.watermark is None else state.watermark
    before = np.empty(len(t), dtype=np.int64)
    chunk = max(1, max_cells // max(width, 1))
    for lo in range(0, len(t), chunk):
        tc, ac, ic = t[lo:lo + chunk], a[lo:lo + chunk], index[lo:lo + chunk]
        cols = np.arange(len(tc))
        clock_c = np.maximum.accumulate(ac)
        first_c = np.minimum.accumulate(ac)
        if clock is not None and first is not None:
            np.maximum(clock_c, clock, out=clock_c)
            np.minimum(first_c, first, out=first_c)
        maxima = np.full((width, len(tc)), none, dtype=np.int64)
        maxima[ic, cols] = tc
        maxima[:, 0] = np.maximum(maxima[:, 0], max_t)
        np.maximum.accumulate(maxima, axis=1, out=maxima)
        arrivals = np.full((width, len(tc)), none, dtype=np.int64)
        arrivals[ic, cols] = ac
        arrivals[:, 0] = np.maximum(arrivals[:, 0], last_a)
        np.maximum.accumulate(arrivals, axis=1, out=arrivals)
        seen = arrivals != none
        since = np.where(seen, arrivals, first_c[None, :])
        idle = (clock_c[None, :] - since) >= policy.idle_timeout
        active = seen & ~idle
        waiting = (expected & ~seen & ~idle).any(axis=0)
        candidate = np.where(active, maxima, np.iinfo(np.int64).max).min(axis=0)
        moves = ~waiting & active.any(axis=0)
        after = np.where(moves, candidate - policy.lateness, none)  # max - L cannot overflow
        np.maximum.accumulate(after, out=after)
        np.maximum(after, wm, out=after)
        before[lo] = wm
        before[lo + 1:lo + len(tc)] = after[:-1]
        wm = int(after[-1])
        max_t, last_a = maxima[:, -1].copy(), arrivals[:, -1].copy()
        clock, first = int(clock_c[-1]), int(first_c[-1])
    partitions = {int(label): PartitionProgress(int(max_t[k]), int(last_a[k]))
                  for k, label in enumerate(labels.tolist()) if last_a[k] != none}
    return before, WatermarkState(partitions, first, clock, None if wm == none else int(wm))


def shift_watermark_series(before: Any, lateness: int) -> Any:
    """``watermark_series`` under bound ``lateness`` from the series under bound 0, for the
    same events, idle timeout and expected partitions, started from an empty state.

    Each partition's watermark is its maximum event time minus L, and the min rule, the idle
    rule and the running maximum all commute with subtracting one constant, so every defined
    watermark is the bound-0 one minus L and an undefined one stays undefined. (A state
    carried over from earlier events holds a watermark of its own bound: not shifted here.)
    What-if analyses over many bounds walk the log once instead of once per bound."""
    import numpy as np

    none = np.iinfo(np.int64).min
    series = np.asarray(before, dtype=np.int64)
    return np.where(series == none, none, series - np.int64(lateness))


# --------------------------------------------------------------------------- all rules together


@dataclass(frozen=True)
class EventTimeRules:
    """Everything that decides what happens to an event, as one frozen value.

    ``grace`` (allowed lateness G) keeps a closed window revisable until ``WM >= end + G``;
    ``dedup_horizon`` bounds how far back (in arrival time) the stream looks for an earlier
    copy of an event_id; ``max_clock_skew`` bounds how far an event_time may run ahead of its
    arrival before it is quarantined as future-dated.
    """

    windows: WindowSpec
    watermark: WatermarkPolicy
    grace: int = 0
    max_clock_skew: int = 5 * 60 * 1_000_000
    dedup_horizon: int = 3600 * 1_000_000

    def __post_init__(self) -> None:
        for name in ("grace", "max_clock_skew", "dedup_horizon"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)}us is not valid: it must be >= 0")

    @classmethod
    def parse(cls, *, window: str | int = "10s", slide: str | int | None = None,
              lateness: str | int = "3s", grace: str | int = "0s",
              idle_timeout: str | int = "60s", max_clock_skew: str | int = "5m",
              dedup_horizon: str | int = "1h",
              expected_partitions: Iterable[int] = ()) -> EventTimeRules:
        return cls(
            WindowSpec.parse(window, slide),
            WatermarkPolicy(parse_duration(lateness, "lateness"),
                            parse_duration(idle_timeout, "idle_timeout"),
                            tuple(expected_partitions)),
            grace=parse_duration(grace, "grace"),
            max_clock_skew=parse_duration(max_clock_skew, "max_clock_skew"),
            dedup_horizon=parse_duration(dedup_horizon, "dedup_horizon"),
        )

    def day_final_at(self, day: date) -> int:
        """The watermark at which UTC day ``day`` is final: every window of the day (every
        window starting in it) is FINAL, so no event of the day can change a provisional
        total. That is the end of its last window plus grace: ``end of the day + grace`` for
        tumbling windows; hopping windows (and a step that does not divide 24 hours) reach
        into the next day. The nightly run waits for it; an audit before it may see
        transient breaks.

        >>> rules = EventTimeRules.parse(window="10s", grace="2s")
        >>> format_micros(rules.day_final_at(date(2026, 1, 1)))
        '2026-01-02T00:00:02Z'
        """
        _, last_window_end = self.windows.day_event_times(day)
        return last_window_end + self.grace

    def is_day_final(self, day: date, watermark: int | None) -> bool:
        """Whether ``watermark`` (None: none yet) has made day ``day`` final
        (``day_final_at(day) <= watermark``, the FINAL rule of ``is_beyond_grace``)."""
        if watermark is None:
            return False
        _, last_window_end = self.windows.day_event_times(day)
        return bool(is_beyond_grace(last_window_end, watermark, self.grace))

    def to_config(self) -> dict[str, Any]:
        return {**self.windows.to_config(),
                "lateness": format_duration(self.watermark.lateness),
                "grace": format_duration(self.grace),
                "idle_timeout": format_duration(self.watermark.idle_timeout),
                "max_clock_skew": format_duration(self.max_clock_skew),
                "dedup_horizon": format_duration(self.dedup_horizon),
                "expected_partitions": list(self.watermark.expected_partitions)}
