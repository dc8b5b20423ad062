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
    "Hold",
    "InputKey",
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
    "input_label",
    "input_partition",
    "is_beyond_grace",
    "is_duplicate_of_recent",
    "is_future_dated",
    "is_open",
    "shift_watermark_series",
    "watermark_hold",
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

#: What has its own maximum event time and bound: a partition, or with
#: ``WatermarkPolicy.by_source`` a (partition, source) pair.
InputKey = int | tuple[int, str]


def input_partition(key: InputKey) -> int:
    """The partition an input reads (the input itself, or the first of its pair)."""
    return key if isinstance(key, int) else key[0]


def input_label(key: InputKey) -> str:
    """How a message or ``watermark_progress.held_by`` names an input.

    >>> input_label(3), input_label((3, "radar"))
    ('partition 3', 'partition 3 source radar')
    """
    if isinstance(key, int):
        return f"partition {key}"
    return f"partition {key[0]} source {key[1]}"


def _input_order(key: InputKey) -> tuple[int, str]:
    return (key, "") if isinstance(key, int) else key


@dataclass(frozen=True)
class WatermarkPolicy:
    """Bounded out-of-orderness per watermark input, combined with the min rule.

    An input is a partition, or with ``by_source`` a (partition, source) pair. ``WM_i =
    max_i - L_i`` with ``L_i = bound(i)``; ``WM = max(WM_prev, min(WM_i for i not idle))``.
    An input is idle when ``clock - last_arrival_i >= idle_timeout`` where ``clock`` is the
    latest arrival time seen on any input. WM stays undefined until every expected partition
    has delivered once or timed out idle (a never-seen partition is timed from the first
    arrival).

    ``L_i``: the source's override (``source_bounds``, by-source inputs only), else the
    partition's (``partition_bounds``), else ``lateness``. With no override, every input has
    the bound ``lateness``: exactly one bound for all.

    >>> policy = WatermarkPolicy(3, 60, by_source=True, source_bounds=(("sat", 10),))
    >>> policy.bound((0, "sat")), policy.bound((0, "radar"))
    (10, 3)
    """

    lateness: int
    idle_timeout: int
    expected_partitions: tuple[int, ...] = ()
    by_source: bool = False
    partition_bounds: tuple[tuple[int, int], ...] = ()
    source_bounds: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if self.lateness < 0:
            raise ConfigError(f"lateness={self.lateness}us is not valid: it must be >= 0")
        if self.idle_timeout <= 0:
            raise ConfigError(
                f"idle_timeout={self.idle_timeout}us is not valid: it must be > 0 "
                "(0 would let every partition be idle and close windows under live data)"
            )
        for what, pairs in (("partition", self.partition_bounds),
                            ("source", self.source_bounds)):
            for name, bound in pairs:
                if bound < 0:
                    raise ConfigError(f"the watermark bound of {what} {name} is {bound}us: "
                                      "it must be >= 0")
        if self.source_bounds and not self.by_source:
            raise ConfigError("watermark bounds by source need watermark_inputs = \"source\" "
                              "(each (partition, source) pair its own input)")
        object.__setattr__(self, "expected_partitions",
                           tuple(sorted(set(self.expected_partitions))))
        object.__setattr__(self, "partition_bounds", tuple(sorted(dict(self.partition_bounds)
                                                                  .items())))
        object.__setattr__(self, "source_bounds", tuple(sorted(dict(self.source_bounds)
                                                               .items())))

    @property
    def uniform(self) -> bool:
        """One bound for every input (no override differs from ``lateness``)."""
        return all(b == self.lateness for _, b in (*self.partition_bounds, *self.source_bounds))

    def input_of(self, partition: int, source: str | None) -> InputKey:
        """The input an event of ``partition`` and ``source`` belongs to."""
        return (partition, source or "") if self.by_source else partition

    def describe(self) -> str:
        """The bounds in words, for the stream's start-up line and logs: the default, then
        each override, and what an input is.

        >>> WatermarkPolicy(3_000_000, 60_000_000).describe()
        'watermark bound 3s per partition'
        >>> WatermarkPolicy(3_000_000, 60_000_000, by_source=True,
        ...                 source_bounds=(("sat", 10_000_000),)).describe()
        'watermark bound 3s per (partition, source), source sat 10s'
        """
        unit = "(partition, source)" if self.by_source else "partition"
        overrides = [f"partition {p} {format_duration(b)}" for p, b in self.partition_bounds]
        overrides += [f"source {name} {format_duration(b)}" for name, b in self.source_bounds]
        return ", ".join([f"watermark bound {format_duration(self.lateness)} per {unit}",
                          *overrides])

    def bound(self, key: InputKey) -> int:
        """``L_i``: the source's override, else the partition's, else ``lateness``."""
        if not isinstance(key, int):
            for source, bound in self.source_bounds:
                if source == key[1]:
                    return bound
        partition = input_partition(key)
        for p, bound in self.partition_bounds:
            if p == partition:
                return bound
        return self.lateness


@dataclass(frozen=True)
class PartitionProgress:
    max_event_time: int
    last_arrival: int


@dataclass(frozen=True)
class PartitionObservation:
    """What one batch saw on one partition (valid events only, late and duplicates included),
    or on one (partition, source) pair when ``source`` is given (several observations of one
    input are merged: max of maxima, min of first arrivals). ``min_arrival_time`` (None: the
    same as ``max_arrival_time``) is the batch's earliest arrival there: the stream's first
    arrival, from which an expected partition that never delivers is timed out, is the
    earliest arrival of all, not the earliest batch maximum."""

    partition: int
    max_event_time: int
    max_arrival_time: int
    min_arrival_time: int | None = None
    source: str | None = None


@dataclass(frozen=True)
class Hold:
    """Which input held the watermark back after a batch (``watermark_hold``): the active
    input with the lowest watermark (``input_watermark``), and ``held_back``, how much further
    the watermark would be without it (the next-lowest active input's watermark minus its own;
    None when it is the only active input). While an expected partition has not delivered,
    that partition holds it (``input_watermark`` None)."""

    input: InputKey
    input_watermark: int | None
    held_back: int | None


@dataclass(frozen=True)
class WatermarkState:
    """Per-input progress and the global watermark after some batch. Persisted as JSON.

    ``partitions`` is keyed by input: a partition number, or a (partition, source) pair when
    the policy's inputs are by source."""

    partitions: Mapping[InputKey, PartitionProgress] = field(default_factory=dict)
    first_arrival: int | None = None
    clock: int | None = None
    watermark: int | None = None

    def idle_inputs(self, policy: WatermarkPolicy) -> tuple[InputKey, ...]:
        """Seen inputs silent for ``idle_timeout``, and expected partitions that have never
        delivered, timed from the first arrival."""
        if self.clock is None:
            return ()
        seen = {input_partition(k) for k in self.partitions}
        known: set[InputKey] = set(self.partitions)
        known |= {p for p in policy.expected_partitions if p not in seen}
        idle = []
        for key in sorted(known, key=_input_order):
            progress = self.partitions.get(key)
            since = progress.last_arrival if progress else self.first_arrival
            if since is not None and self.clock - since >= policy.idle_timeout:
                idle.append(key)
        return tuple(idle)

    def idle_partitions(self, policy: WatermarkPolicy) -> tuple[int, ...]:
        """Partitions every input of which is idle (with inputs by partition: the idle ones)."""
        idle = self.idle_inputs(policy)
        live = {input_partition(k) for k in self.partitions if k not in idle}
        return tuple(sorted({input_partition(k) for k in idle} - live))

    def partition_watermarks(self, policy: WatermarkPolicy) -> dict[InputKey, int]:
        return {k: pr.max_event_time - policy.bound(k) for k, pr in self.partitions.items()}

    def to_json(self) -> str:
        plain = {str(k): [pr.max_event_time, pr.last_arrival]
                 for k, pr in sorted(self.partitions.items(), key=lambda kv: _input_order(kv[0]))
                 if isinstance(k, int)}
        raw: dict[str, Any] = {"partitions": plain, "first_arrival": self.first_arrival,
                               "clock": self.clock, "watermark": self.watermark}
        pairs = [[k[0], k[1], pr.max_event_time, pr.last_arrival]
                 for k, pr in sorted(self.partitions.items(), key=lambda kv: _input_order(kv[0]))
                 if not isinstance(k, int)]
        if pairs:  # inputs by source; a state by partition writes exactly what it always did
            raw["sources"] = pairs
        return json.dumps(raw, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> WatermarkState:
        if not text:
            return cls()
        raw = json.loads(text)
        inputs: dict[InputKey, PartitionProgress] = {
            int(p): PartitionProgress(int(v[0]), int(v[1])) for p, v in raw["partitions"].items()}
        for p, source, t, a in raw.get("sources", ()):
            inputs[(int(p), str(source))] = PartitionProgress(int(t), int(a))
        return cls(partitions=inputs, first_arrival=raw["first_arrival"], clock=raw["clock"],
                   watermark=raw["watermark"])


def advance_watermark(state: WatermarkState, observations: Iterable[PartitionObservation],
                      policy: WatermarkPolicy) -> WatermarkState:
    """Absorb one batch's per-input maxima and recompute the global watermark (min rule).

    Never moves backwards: the result is ``max(previous, min over active inputs of
    max_i - L_i)``.
    """
    inputs = dict(state.partitions)
    first_arrival, clock = state.first_arrival, state.clock
    for obs in observations:
        key = policy.input_of(obs.partition, obs.source)
        old = inputs.get(key)
        inputs[key] = PartitionProgress(
            obs.max_event_time if old is None else max(old.max_event_time, obs.max_event_time),
            obs.max_arrival_time if old is None else max(old.last_arrival, obs.max_arrival_time),
        )
        earliest = obs.max_arrival_time if obs.min_arrival_time is None else min(
            obs.min_arrival_time, obs.max_arrival_time)
        first_arrival = earliest if first_arrival is None else min(first_arrival, earliest)
        clock = obs.max_arrival_time if clock is None else max(clock, obs.max_arrival_time)
    draft = WatermarkState(inputs, first_arrival, clock, state.watermark)
    if _waiting_for(draft, policy) is not None:
        return draft
    idle = set(draft.idle_inputs(policy))
    active = [k for k in inputs if k not in idle]
    if not active:
        return draft
    candidate = min(inputs[k].max_event_time - policy.bound(k) for k in active)
    watermark = candidate if state.watermark is None else max(state.watermark, candidate)
    return WatermarkState(inputs, first_arrival, clock, watermark)


def _waiting_for(state: WatermarkState, policy: WatermarkPolicy) -> int | None:
    """The first expected partition that has neither delivered nor timed out idle, or None."""
    seen = {input_partition(k) for k in state.partitions}
    idle = set(state.idle_inputs(policy))
    return next((p for p in policy.expected_partitions if p not in seen and p not in idle),
                None)


def watermark_hold(state: WatermarkState, policy: WatermarkPolicy) -> Hold | None:
    """Which input holds the watermark of ``state`` back, and by how much (``Hold``); None
    before any arrival or when every input is idle.

    >>> s = WatermarkState({0: PartitionProgress(100, 5), 1: PartitionProgress(90, 5)}, 5, 5)
    >>> watermark_hold(s, WatermarkPolicy(3, 60))
    Hold(input=1, input_watermark=87, held_back=10)
    """
    waiting = _waiting_for(state, policy)
    if waiting is not None and state.clock is not None:
        return Hold(waiting, None, None)
    idle = set(state.idle_inputs(policy))
    marks = sorted((pr.max_event_time - policy.bound(k), _input_order(k), k)
                   for k, pr in state.partitions.items() if k not in idle)
    if not marks:
        return None
    lowest, _, key = marks[0]
    return Hold(key, lowest, marks[1][0] - lowest if len(marks) > 1 else None)


def watermark_series(event_us: Any, arrival_us: Any, partition: Any, policy: WatermarkPolicy,
                     state: WatermarkState | None = None, *, source: Any = None,
                     max_cells: int = 1 << 20) -> tuple[Any, WatermarkState]:
    """The per-event form of ``advance_watermark``: the watermark each event is judged against.

    Exactly what calling ``advance_watermark`` once per event (one event per batch, in the
    given order) starting from ``state`` gives, computed with numpy instead of a Python loop:
    the same per-input maxima and bounds, idle rule (``clock - last_arrival_i >=
    idle_timeout``, never-seen expected partitions timed from the first arrival), waiting for
    expected partitions, min rule and monotonicity (``WM = max(WM_prev, min over active
    WM_i)``).

    Arguments are 1-D int64-compatible arrays of equal length (microseconds; ``partition``
    may be None for a single partition 0); ``source`` (strings) is read when the policy's
    inputs are by source. Returns ``(before, final)``: ``before[i]`` is the global watermark
    left by events ``0..i-1`` (``state.watermark`` for ``i = 0``), the one event i is
    classified against; ``final`` is the state after the last event. An undefined watermark
    is ``numpy.iinfo(int64).min``: every window end exceeds it, so ``is_open`` and
    ``is_beyond_grace`` treat it exactly as they treat "no watermark yet". Memory stays below
    about ``max_cells`` input x event cells per step (the log is walked in chunks).
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
    labels, index = _input_index(p, source, policy, state)
    width = len(labels)
    bounds = np.asarray([policy.bound(k) for k in labels], dtype=np.int64)[:, None]
    max_t = np.full(width, none, dtype=np.int64)
    last_a = np.full(width, none, dtype=np.int64)  # none <=> input not seen yet
    for k, label in enumerate(labels):
        if label in state.partitions:
            max_t[k] = state.partitions[label].max_event_time
            last_a[k] = state.partitions[label].last_arrival
    expected = np.asarray(policy.expected_partitions, dtype=np.int64)[:, None]
    seen_before = {input_partition(k) for k in state.partitions}
    part_seen = np.asarray([e in seen_before for e in policy.expected_partitions], dtype=bool)
    first, clock = state.first_arrival, state.clock
    wm = none if state.watermark is None else state.watermark
    before = np.empty(len(t), dtype=np.int64)
    chunk = max(1, max_cells // max(width + len(expected), 1))
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
        idle = (clock_c[None, :] - np.where(seen, arrivals, first_c[None, :])) >= policy.idle_timeout
        active = seen & ~idle
        # an expected partition waits until one of its inputs delivers or it times out idle
        delivered = np.logical_or.accumulate(p[lo:lo + chunk][None, :] == expected, axis=1)
        delivered |= part_seen[:, None]
        timed_out = (clock_c - first_c) >= policy.idle_timeout
        waiting = (~delivered & ~timed_out[None, :]).any(axis=0)
        marks = np.where(seen, maxima, 0) - bounds  # max_i - L_i (0 where not seen: unused)
        candidate = np.where(active, marks, np.iinfo(np.int64).max).min(axis=0)
        after = np.where(~waiting & active.any(axis=0), candidate, none)
        np.maximum.accumulate(after, out=after)
        np.maximum(after, wm, out=after)
        before[lo] = wm
        before[lo + 1:lo + len(tc)] = after[:-1]
        wm = int(after[-1])
        max_t, last_a = maxima[:, -1].copy(), arrivals[:, -1].copy()
        clock, first = int(clock_c[-1]), int(first_c[-1])
        part_seen = delivered[:, -1].copy() if len(expected) else part_seen
    inputs = {label: PartitionProgress(int(max_t[k]), int(last_a[k]))
              for k, label in enumerate(labels) if last_a[k] != none}
    return before, WatermarkState(inputs, first, clock, None if wm == none else int(wm))


def _input_index(partition: Any, source: Any, policy: WatermarkPolicy, state: WatermarkState
                 ) -> tuple[list[InputKey], Any]:
    """The inputs (state's and events', in input order) and each event's row among them."""
    import numpy as np

    if not policy.by_source:
        known = np.asarray([k for k in state.partitions if isinstance(k, int)], dtype=np.int64)
        found = np.unique(np.concatenate([partition, known]))
        return [int(x) for x in found.tolist()], np.searchsorted(found, partition)
    sources = [""] * len(partition) if source is None else [s or "" for s in source]
    if len(sources) != len(partition):
        raise ConfigError(f"source must have one value per event, got {len(sources)} for "
                          f"{len(partition)} events")
    keys: list[InputKey] = [(int(p), s) for p, s in zip(partition.tolist(), sources, strict=True)]
    labels = sorted({*keys, *state.partitions}, key=_input_order)
    row = {k: i for i, k in enumerate(labels)}
    return labels, np.asarray([row[k] for k in keys], dtype=np.int64)


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
              expected_partitions: Iterable[int] = (), inputs: str = "",
              bound_by_partition: Mapping[Any, str | int] | None = None,
              bound_by_source: Mapping[str, str | int] | None = None) -> EventTimeRules:
        return cls(
            WindowSpec.parse(window, slide),
            WatermarkPolicy(parse_duration(lateness, "lateness"),
                            parse_duration(idle_timeout, "idle_timeout"),
                            tuple(expected_partitions),
                            by_source=_by_source(inputs, bool(bound_by_source)),
                            partition_bounds=_partition_bounds(bound_by_partition or {}),
                            source_bounds=tuple(
                                (str(k), parse_duration(v, f"watermark bound of source {k}"))
                                for k, v in (bound_by_source or {}).items())),
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
        """The rules as settings; the bounds per input only when they are not the default
        (one bound for all), so a default spec reads exactly as it did before they existed."""
        config = self._to_config()
        for name, default in (("watermark_inputs", "partition"),
                              ("watermark_bound_by_partition", {}),
                              ("watermark_bound_by_source", {})):
            if config[name] == default:
                del config[name]
        return config

    def _to_config(self) -> dict[str, Any]:
        return {**self.windows.to_config(),
                "lateness": format_duration(self.watermark.lateness),
                "grace": format_duration(self.grace),
                "idle_timeout": format_duration(self.watermark.idle_timeout),
                "max_clock_skew": format_duration(self.max_clock_skew),
                "dedup_horizon": format_duration(self.dedup_horizon),
                "expected_partitions": list(self.watermark.expected_partitions),
                "watermark_inputs": "source" if self.watermark.by_source else "partition",
                "watermark_bound_by_partition": {
                    str(p): format_duration(b) for p, b in self.watermark.partition_bounds},
                "watermark_bound_by_source": {
                    k: format_duration(b) for k, b in self.watermark.source_bounds}}


#: ``watermark_inputs``: what has its own maximum and bound (see ``WatermarkPolicy``).
WATERMARK_INPUTS = ("partition", "source")


def _by_source(inputs: str, source_bounds: bool) -> bool:
    """Inputs by source when asked, or (not given: ``""``) when bounds by source are."""
    if inputs not in ("", *WATERMARK_INPUTS):
        raise ConfigError(f"watermark_inputs={inputs!r} is not valid: write \"partition\" "
                          "(one input per partition) or \"source\" (one per partition and "
                          "source)")
    return inputs == "source" or (inputs == "" and source_bounds)


def _partition_bounds(given: Mapping[Any, str | int]) -> tuple[tuple[int, int], ...]:
    out = []
    for key, value in given.items():
        try:
            partition = int(key)
        except ValueError:
            raise ConfigError(f"watermark_bound_by_partition: {key!r} is not a partition "
                              "number (write 0=5s,3=30s)") from None
        out.append((partition, parse_duration(value, f"watermark bound of partition {key}")))
    return tuple(out)
