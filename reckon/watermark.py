"""The watermark: how far event time has progressed, per input and overall (part of the
event-time contract, see ``reckon.eventtime`` and docs/semantics.md).

Bounded out-of-orderness per input (a partition, or a (partition, source) pair), combined with
the min rule, monotone, with idle inputs left out -- the heuristic watermark of Beam's
watermark estimators, one bound per input. Three forms of one rule:

- ``advance_watermark``: one micro-batch at a time, as the stream runs (``WatermarkState``,
  persisted as JSON between batches);
- ``watermark_series``: one event at a time, on numpy arrays, for the what-if analyses;
- ``shift_watermark_series``: that series under another bound, without walking the log again.

``watermark_hold`` says which input holds the watermark back. Units: microseconds since the
Unix epoch (UTC).

>>> policy = WatermarkPolicy(watermark_bound=3, idle_timeout=60)
>>> state = advance_watermark(WatermarkState(), [PartitionObservation(0, 100, 5),
...                                              PartitionObservation(1, 90, 5)], policy)
>>> state.watermark
87
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reckon.errors import ConfigError
from reckon.timeutil import format_duration

__all__ = [
    "Hold",
    "InputKey",
    "PartitionObservation",
    "PartitionProgress",
    "WatermarkPolicy",
    "WatermarkState",
    "advance_watermark",
    "input_label",
    "input_partition",
    "shift_watermark_series",
    "watermark_hold",
    "watermark_series",
]


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
    partition's (``partition_bounds``), else ``watermark_bound``. With no override, every input has
    the bound ``watermark_bound``: exactly one bound for all.

    >>> policy = WatermarkPolicy(3, 60, by_source=True, source_bounds=(("sat", 10),))
    >>> policy.bound((0, "sat")), policy.bound((0, "radar"))
    (10, 3)
    """

    watermark_bound: int
    idle_timeout: int
    expected_partitions: tuple[int, ...] = ()
    by_source: bool = False
    partition_bounds: tuple[tuple[int, int], ...] = ()
    source_bounds: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if self.watermark_bound < 0:
            raise ConfigError(f"watermark_bound={self.watermark_bound}us is not valid: it must be >= 0")
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
        """One bound for every input (no override differs from ``watermark_bound``)."""
        return all(b == self.watermark_bound for _, b in (*self.partition_bounds, *self.source_bounds))

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
        return ", ".join([f"watermark bound {format_duration(self.watermark_bound)} per {unit}",
                          *overrides])

    def bound(self, key: InputKey) -> int:
        """``L_i``: the source's override, else the partition's, else ``watermark_bound``."""
        if not isinstance(key, int):
            for source, bound in self.source_bounds:
                if source == key[1]:
                    return bound
        partition = input_partition(key)
        for p, bound in self.partition_bounds:
            if p == partition:
                return bound
        return self.watermark_bound


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


#: An undefined watermark, maximum or arrival in ``watermark_series``'s arrays
#: (``numpy.iinfo(int64).min``): every window end exceeds it.
_UNDEFINED = -(1 << 63)


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
    ``is_beyond_allowed_lateness`` treat it exactly as they treat "no watermark yet". Memory stays below
    about ``max_cells`` input x event cells per step (the log is walked in chunks).
    """
    import numpy as np

    t, a, p = _event_columns(event_us, arrival_us, partition)
    state = state or WatermarkState()
    labels, index = _input_index(p, source, policy, state)
    bounds = np.asarray([policy.bound(k) for k in labels], dtype=np.int64)[:, None]
    expected = np.asarray(policy.expected_partitions, dtype=np.int64)[:, None]
    carry = _SeriesCarry.start(state, labels, policy)
    before = np.empty(len(t), dtype=np.int64)
    chunk = max(1, max_cells // max(len(labels) + len(expected), 1))
    for lo in range(0, len(t), chunk):
        rows = slice(lo, lo + chunk)
        after = _chunk_series(t[rows], a[rows], p[rows], index[rows], bounds, expected, policy,
                              carry)
        before[lo] = carry.watermark
        before[lo + 1:lo + len(after)] = after[:-1]
        carry.watermark = int(after[-1])
    return before, carry.state(labels)


def _event_columns(event_us: Any, arrival_us: Any, partition: Any) -> tuple[Any, Any, Any]:
    """The events as three int64 arrays of one length (partition 0 when ``partition`` is None);
    a ``ConfigError`` when the lengths differ."""
    import numpy as np

    t = np.asarray(event_us, dtype=np.int64).ravel()
    a = np.asarray(arrival_us, dtype=np.int64).ravel()
    p = (np.zeros(len(t), dtype=np.int64) if partition is None
         else np.asarray(partition, dtype=np.int64).ravel())
    if not len(t) == len(a) == len(p):
        raise ConfigError(f"event_us, arrival_us and partition must have the same length, "
                          f"got {len(t)}, {len(a)} and {len(p)}")
    return t, a, p


@dataclass
class _SeriesCarry:
    """What one chunk of ``watermark_series`` hands the next, as ``WatermarkState`` holds it
    between batches: per input (a row per label) the maximum event time and last arrival
    (``_UNDEFINED``: not seen yet), per expected partition whether it has delivered, and the
    first arrival, the clock and the watermark (``_UNDEFINED``: none yet)."""

    max_event_time: Any
    last_arrival: Any
    delivered: Any
    first_arrival: int | None
    clock: int | None
    watermark: int

    @classmethod
    def start(cls, state: WatermarkState, labels: list[InputKey], policy: WatermarkPolicy
              ) -> _SeriesCarry:
        import numpy as np

        max_t = np.full(len(labels), _UNDEFINED, dtype=np.int64)
        last_a = np.full(len(labels), _UNDEFINED, dtype=np.int64)
        for k, label in enumerate(labels):
            if label in state.partitions:
                max_t[k] = state.partitions[label].max_event_time
                last_a[k] = state.partitions[label].last_arrival
        seen_before = {input_partition(k) for k in state.partitions}
        delivered = np.asarray([e in seen_before for e in policy.expected_partitions],
                               dtype=bool)
        return cls(max_event_time=max_t, last_arrival=last_a, delivered=delivered,
                   first_arrival=state.first_arrival, clock=state.clock,
                   watermark=_UNDEFINED if state.watermark is None else state.watermark)

    def state(self, labels: list[InputKey]) -> WatermarkState:
        """The carry as the ``WatermarkState`` after the last event."""
        inputs = {label: PartitionProgress(int(self.max_event_time[k]),
                                           int(self.last_arrival[k]))
                  for k, label in enumerate(labels) if self.last_arrival[k] != _UNDEFINED}
        return WatermarkState(partitions=inputs, first_arrival=self.first_arrival,
                              clock=self.clock,
                              watermark=None if self.watermark == _UNDEFINED
                              else int(self.watermark))


def _chunk_series(t: Any, a: Any, p: Any, rows: Any, bounds: Any, expected: Any,
                  policy: WatermarkPolicy, carry: _SeriesCarry) -> Any:
    """The watermark after each event of one chunk (``WM = max(WM_prev, min over active
    WM_i)``, undefined while an expected partition waits or no input is active); moves
    ``carry`` past the chunk except for its watermark, which the caller still needs."""
    import numpy as np

    clock, first = _clock_series(a, carry)
    maxima = _running_max(rows, t, carry.max_event_time, len(bounds))
    arrivals = _running_max(rows, a, carry.last_arrival, len(bounds))
    seen = arrivals != _UNDEFINED
    idle = (clock[None, :] - np.where(seen, arrivals, first[None, :])) >= policy.idle_timeout
    active = seen & ~idle
    waiting, delivered = _waiting_series(p, expected, carry.delivered, clock - first, policy)
    marks = np.where(seen, maxima, 0) - bounds  # max_i - L_i (0 where not seen: unused)
    candidate = np.where(active, marks, np.iinfo(np.int64).max).min(axis=0)
    after = np.where(~waiting & active.any(axis=0), candidate, _UNDEFINED)
    np.maximum.accumulate(after, out=after)
    np.maximum(after, carry.watermark, out=after)
    carry.max_event_time, carry.last_arrival = maxima[:, -1].copy(), arrivals[:, -1].copy()
    carry.clock, carry.first_arrival = int(clock[-1]), int(first[-1])
    if len(expected):
        carry.delivered = delivered[:, -1].copy()
    return after


def _clock_series(a: Any, carry: _SeriesCarry) -> tuple[Any, Any]:
    """After each event: the clock (latest arrival so far) and the first arrival."""
    import numpy as np

    clock = np.maximum.accumulate(a)
    first = np.minimum.accumulate(a)
    if carry.clock is not None and carry.first_arrival is not None:
        np.maximum(clock, carry.clock, out=clock)
        np.minimum(first, carry.first_arrival, out=first)
    return clock, first


def _running_max(rows: Any, values: Any, carried: Any, width: int) -> Any:
    """Inputs x events: each input's maximum of ``values`` after each event, starting from
    ``carried`` (``_UNDEFINED`` until the input's first event)."""
    import numpy as np

    grid = np.full((width, len(values)), _UNDEFINED, dtype=np.int64)
    grid[rows, np.arange(len(values))] = values
    grid[:, 0] = np.maximum(grid[:, 0], carried)
    np.maximum.accumulate(grid, axis=1, out=grid)
    return grid


def _waiting_series(p: Any, expected: Any, delivered_before: Any, since_first: Any,
                    policy: WatermarkPolicy) -> tuple[Any, Any]:
    """After each event: whether the watermark still waits, and expected partitions x events,
    whether each has delivered. An expected partition waits until one of its inputs delivers
    or it times out idle (timed from the first arrival)."""
    import numpy as np

    delivered = np.logical_or.accumulate(p[None, :] == expected, axis=1)
    delivered |= delivered_before[:, None]
    timed_out = since_first >= policy.idle_timeout
    return (~delivered & ~timed_out[None, :]).any(axis=0), delivered


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


def shift_watermark_series(before: Any, bound: int) -> Any:
    """``watermark_series`` under bound ``bound`` from the series under bound 0, for the
    same events, idle timeout and expected partitions, started from an empty state.

    Each partition's watermark is its maximum event time minus L, and the min rule, the idle
    rule and the running maximum all commute with subtracting one constant, so every defined
    watermark is the bound-0 one minus L and an undefined one stays undefined. (A state
    carried over from earlier events holds a watermark of its own bound: not shifted here.)
    What-if analyses over many bounds walk the log once instead of once per bound."""
    import numpy as np

    series = np.asarray(before, dtype=np.int64)
    return np.where(series == _UNDEFINED, _UNDEFINED, series - np.int64(bound))
