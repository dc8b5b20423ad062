"""The bound what-if at the stream's own granularity: one watermark step per micro-batch.

``reckon.whatif`` replays a day one event at a time: every event moves the watermark before
the next one is judged. The stream moves its watermark once per micro-batch: every event of
batch n is judged against the watermark left by batch n-1 (docs/semantics.md "Watermark"),
so at the same bound it drops fewer events. This module replays the stream's recorded batches
instead, so that the row at the configured bound is what the stream actually did.

Inputs are the batches in the order the stream ran them, each as its per-(partition, source)
summary (``PartitionObservation``: max event time, max and min arrival over the batch's valid
rows, duplicates and other days' events included: all of them moved the stream's watermark;
a policy with inputs by partition merges a partition's sources), and the state the stream
started from (``start``, recorded at bound ``start_bound``). Each bound's watermarks are the
bound-0 ones minus the bound (``eventtime.shift_watermark_series``'s argument: the min rule,
idle rule and running maximum commute with subtracting a constant), so the batches are walked
once (``batch_steps``). A policy with a bound per input (issue 41) is walked on its own
(``batch_point_reference``; ``policy_point`` finishes a walk of ``batch_steps`` under it).

Two implementations that must agree exactly (property-tested):
- ``batch_curve_reference`` and ``batch_point_reference``: plain lists, ``advance_watermark``
  and ``classify`` per bound or per policy;
- the warehouse one (``audits.bound_whatif_batches``): ``batch_steps`` on the driver from the
  per-(batch, partition, source) summaries, the pairs judged in Spark, ``curve_points`` or
  ``policy_point`` to finish.

Counting unit: (event, window) pairs of the *judged* events whose window starts in
``[starts[0], starts[1])`` (the day's windows, the grain of ``late_events`` and of the audit).
Emit latency as in ``reckon.whatif``, at the batch that first brings the watermark to a
window's end, with "the largest event time seen" including the start state's maxima.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import groupby

import numpy as np

from reckon.eventtime import (
    Disposition,
    InputKey,
    PartitionObservation,
    PartitionProgress,
    WatermarkPolicy,
    WatermarkState,
    WindowSpec,
    advance_watermark,
    classify,
    input_partition,
)
from reckon.whatif import DEFAULT_IDLE_TIMEOUT, CurvePoint, normalize_bounds

__all__ = [
    "BatchStep",
    "BatchedEvent",
    "batch_curve_reference",
    "batch_point_reference",
    "batch_steps",
    "curve_points",
    "policy_point",
    "shift_state",
    "state_under",
]

_NONE = np.iinfo(np.int64).min


@dataclass(frozen=True)
class BatchedEvent:
    """One valid event as the stream archived it: ``batch`` is its micro-batch (the stream's
    order), ``judged`` whether its pairs are counted (the day's events the stream did not flag
    as duplicates); every event moves the watermark, judged or not.

    >>> BatchedEvent(event_us=12, arrival_us=15, partition=0, batch=3, judged=True).batch
    3
    """

    event_us: int
    arrival_us: int
    partition: int
    batch: int
    judged: bool = True
    source: str | None = None  # read when the policy's inputs are (partition, source) pairs


@dataclass(frozen=True)
class BatchStep:
    """One batch under bound 0: the watermark its events are judged against (``before``), the
    one it leaves (``after``; None: undefined) and the largest event time seen up to and
    including it (None: none yet)."""

    batch: int
    before: int | None
    after: int | None
    max_seen: int | None


def shift_state(state: WatermarkState, by: int) -> WatermarkState:
    """``state`` with its watermark moved by ``by`` (an undefined one stays undefined); the
    per-partition progress does not depend on the bound.

    >>> shift_state(WatermarkState(watermark=10), 3).watermark
    13
    """
    return state if state.watermark is None else replace(state,
                                                         watermark=state.watermark + by)


def observations(events: Iterable[BatchedEvent]) -> list[PartitionObservation]:
    """Per (partition, source) of one batch: max event time, max and min arrival (what the
    stream absorbs); a policy with inputs by partition merges a partition's sources
    (``advance_watermark``). ``observations([BatchedEvent(5, 7, 0, 0)])[0].max_event_time == 5``."""
    by_input: dict[tuple[int, str], list[BatchedEvent]] = {}
    for e in events:
        by_input.setdefault((e.partition, e.source or ""), []).append(e)
    return [PartitionObservation(p, max(e.event_us for e in es), max(e.arrival_us for e in es),
                                 min(e.arrival_us for e in es), source)
            for (p, source), es in sorted(by_input.items())]


def state_under(state: WatermarkState, policy: WatermarkPolicy) -> WatermarkState:
    """A state the stream recorded under its own policy, as the start of a walk under another
    ``policy`` (the per-batch what-if of bounds per input): its inputs re-keyed to
    ``policy``'s (a partition's (partition, source) pairs merged into the partition; a
    partition cannot be split into its sources, so for inputs by source it starts unknown),
    and the watermark those inputs give under ``policy`` (the history that raised the
    recorded one is not known). Under the recorded policy itself, use the state as it is.

    >>> s = WatermarkState({(0, "a"): PartitionProgress(50, 9), (0, "b"): PartitionProgress(40, 9)},
    ...                    9, 9, 38)
    >>> state_under(s, WatermarkPolicy(5, 60)).watermark, state_under(s, WatermarkPolicy(
    ...     0, 60, by_source=True, source_bounds=(("b", 3),))).watermark
    (45, 37)
    """
    inputs: dict[InputKey, PartitionProgress] = {}
    for key, pr in state.partitions.items():
        if policy.by_source and isinstance(key, int):
            continue
        mine: InputKey = key if policy.by_source else input_partition(key)
        old = inputs.get(mine)
        inputs[mine] = pr if old is None else PartitionProgress(
            max(old.max_event_time, pr.max_event_time), max(old.last_arrival, pr.last_arrival))
    bare = WatermarkState(inputs, state.first_arrival, state.clock, None)
    return advance_watermark(bare, (), policy) if inputs else bare


def batch_steps(batches: Sequence[tuple[int, Sequence[PartitionObservation]]],
                policy: WatermarkPolicy, start: WatermarkState | None = None
                ) -> list[BatchStep]:
    """Walk the batches once with ``advance_watermark`` (``policy.watermark_bound`` is normally 0 and
    ``start`` the recorded state shifted to it, ``shift_state``).

    >>> steps = batch_steps([(0, [PartitionObservation(0, 10, 10)])], WatermarkPolicy(0, 60))
    >>> (steps[0].before, steps[0].after, steps[0].max_seen)
    (None, 10, 10)
    """
    state = start or WatermarkState()
    seen = max((p.max_event_time for p in state.partitions.values()), default=None)
    out = []
    for batch, obs in batches:
        after = advance_watermark(state, obs, policy)
        for o in obs:
            seen = o.max_event_time if seen is None else max(seen, o.max_event_time)
        out.append(BatchStep(batch=batch, before=state.watermark, after=after.watermark,
                             max_seen=seen))
        state = after
    return out


def curve_points(steps: Sequence[BatchStep], bounds: Iterable[int], pairs: int,
                 dropped: Mapping[int, int], window_ends: Sequence[int]) -> list[CurvePoint]:
    """The curve from the bound-0 steps and the pairs counted elsewhere: ``pairs`` judged
    pairs, ``dropped[bound]`` of them late, ``window_ends`` the distinct ends of their windows.
    A window's emit latency is taken at the first batch whose watermark (bound-0 one minus L)
    reaches its end.

    >>> step = BatchStep(batch=0, before=None, after=20, max_seen=20)
    >>> curve_points([step], [0], 1, {0: 0}, [10])[0].avg_emit_latency
    1e-05
    """
    after = np.array([_NONE if s.after is None else s.after for s in steps], dtype=np.int64)
    seen = np.array([_NONE if s.max_seen is None else s.max_seen for s in steps],
                    dtype=np.int64)
    ends = np.asarray(sorted(window_ends), dtype=np.int64)
    points = []
    for bound in normalize_bounds(bounds):
        first = np.searchsorted(after, ends + bound, side="left")  # first WM0 - L >= end
        passed = first < len(steps)
        latency = seen[first[passed]] - ends[passed]
        points.append(CurvePoint.from_counts(bound, pairs - dropped.get(bound, 0),
                                             dropped.get(bound, 0), int(latency.sum()),
                                             int(passed.sum())))
    return points


def policy_point(steps: Sequence[BatchStep], policy: WatermarkPolicy, pairs: int,
                 dropped: int, window_ends: Sequence[int]) -> CurvePoint:
    """``curve_points`` of steps walked under ``policy`` itself (bounds per input: nothing to
    shift), ``dropped`` of the ``pairs`` late against their ``before``; the point's ``bound``
    is the policy's default.

    >>> step = BatchStep(batch=0, before=None, after=20, max_seen=20)
    >>> policy_point([step], WatermarkPolicy(7, 60), 1, 0, [10]).bound
    7
    """
    (point,) = curve_points(steps, [0], pairs, {0: dropped}, window_ends)
    return replace(point, bound=policy.watermark_bound)


def batch_curve_reference(events: Sequence[BatchedEvent], windows: WindowSpec,
                          bounds: Iterable[int], *, allowed_lateness: int = 0,
                          idle_timeout: int = DEFAULT_IDLE_TIMEOUT,
                          expected_partitions: Iterable[int] = (),
                          start: WatermarkState | None = None, start_bound: int = 0,
                          starts: tuple[int, int] | None = None,
                          by_source: bool = False) -> list[CurvePoint]:
    """The per-batch curve by the book, per bound: for each batch (in ``batch`` order), every
    judged pair whose window start lies in ``starts`` (all, if None) is classified against the
    watermark left by the previous batch, then ``advance_watermark`` takes the batch's
    per-input summary. ``start`` (recorded at ``start_bound``) is shifted to each bound. Each
    bound applies to every input: partitions, or (partition, source) pairs with ``by_source``.

    >>> evs = [BatchedEvent(1, 1, 0, 0), BatchedEvent(15, 2, 0, 0), BatchedEvent(2, 3, 0, 1)]
    >>> [p.dropped for p in batch_curve_reference(evs, WindowSpec(10), [0, 10])]
    [1, 0]
    """
    expected = tuple(expected_partitions)
    return [batch_point_reference(
        events, windows, WatermarkPolicy(bound, idle_timeout, expected, by_source=by_source),
        allowed_lateness=allowed_lateness, start=shift_state(start or WatermarkState(), start_bound - bound),
        starts=starts) for bound in normalize_bounds(bounds)]


def batch_point_reference(events: Sequence[BatchedEvent], windows: WindowSpec,
                          policy: WatermarkPolicy, *, allowed_lateness: int = 0,
                          start: WatermarkState | None = None,
                          starts: tuple[int, int] | None = None) -> CurvePoint:
    """The batches judged by the book under one ``policy``, a bound per input and all (the
    point's ``bound`` is the policy's default): what a stream with that policy, reading the
    same batches, counts and drops, and when it emits each window. ``start`` is the state the
    walk starts from, as it is (``state_under`` re-keys a recorded one).

    >>> evs = [BatchedEvent(1, 1, 0, 0, source="a"), BatchedEvent(15, 2, 0, 0, source="b"),
    ...        BatchedEvent(2, 3, 0, 1, source="a")]
    >>> policy = WatermarkPolicy(0, 60, by_source=True, source_bounds=(("b", 10),))
    >>> batch_point_reference(evs, WindowSpec(10), policy).dropped
    0
    """
    ordered = sorted(events, key=lambda e: e.batch)
    batches = [list(es) for _, es in groupby(ordered, key=lambda e: e.batch)]
    lo, hi = starts if starts is not None else (-(2 ** 62), 2 ** 62)
    judged = [(e, w) for e in ordered if e.judged for w in windows.assign(e.event_us)
              if lo <= w.start < hi]
    state = start or WatermarkState()
    seen = max((p.max_event_time for p in state.partitions.values()), default=None)
    dropped = latency = passed = 0
    pending = sorted({w.end for _, w in judged})
    for batch in batches:
        for e in batch:
            if not e.judged:
                continue
            for w in windows.assign(e.event_us):
                if lo <= w.start < hi and classify(w.end, state.watermark,
                                                   allowed_lateness) is Disposition.LATE:
                    dropped += 1
        state = advance_watermark(state, observations(batch), policy)
        seen = max([*([] if seen is None else [seen]), *(e.event_us for e in batch)])
        while pending and state.watermark is not None and pending[0] <= state.watermark:
            latency += seen - pending.pop(0)
            passed += 1
    return CurvePoint.from_counts(policy.watermark_bound, len(judged) - dropped, dropped, latency,
                                  passed)
