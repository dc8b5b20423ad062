"""An adaptive watermark bound: each input's bound set online to a target completeness.

Why: a fixed bound ``L`` wastes latency while a source is calm and drops data when a burst of
skew comes. Here each unit's bound (a source, or a partition when inputs are partitions)
becomes, after every batch, the target quantile of how far behind the unit's frontier its
recent events arrived. The estimator (``next_bound``):

* an event's **lag** is ``max(0, F - t)``: ``F`` is its unit's largest event time before the
  event's batch, ``t`` its event time. With a bound of at least the lag, the event is never
  behind its unit's watermark when it arrives (``F - L <= t``), so it is never late for that
  reason;
* the **proposal** is the nearest-rank ``target`` quantile of the unit's lags over the last
  ``horizon`` batches that held events of it, rounded up to ``granularity`` (fewer changes
  for nothing), between ``floor`` and ``ceiling``;
* a bound **rises at once** (the watermark never moves back: a rise only slows it) and
  **falls at most by the unit's frontier advance in the batch**, so its watermark moves at
  most twice as fast as its events: a fall is phased in, never a jump past events in flight;
* it changes at most once a batch and applies from the next batch (``AdaptiveStep``: what the
  warehouse's spec is to record, with the batch it applies from).

This module is the rule and its reference on plain lists (``adaptive_point_reference``, the
per-batch walk of reckon/whatif_batches.py with the bounds moving); the stream does not run
it yet (issue 64).

Example: lags of 1 s in a calm hour, then a burst of 30 s:

>>> policy = AdaptivePolicy(target=Fraction(9, 10), floor=0, ceiling=60 * S, horizon=10)
>>> next_bound(2 * S, [[S] * 10], policy, frontier_advance=10 * S)
1000000
>>> next_bound(S, [[S] * 10, [30 * S] * 90], policy, frontier_advance=10 * S)
30000000
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import groupby
from math import ceil

from reckon.errors import ConfigError
from reckon.eventtime import (
    Disposition,
    WatermarkPolicy,
    WatermarkState,
    WindowSpec,
    advance_watermark,
    classify,
)
from reckon.whatif import DEFAULT_IDLE_TIMEOUT, CurvePoint
from reckon.whatif_batches import BatchedEvent, observations

__all__ = ["AdaptiveOutcome", "AdaptivePolicy", "AdaptiveStep", "adaptive_point_reference",
           "lags_behind", "next_bound", "quantile_lag"]

S = 1_000_000


@dataclass(frozen=True)
class AdaptivePolicy:
    """The adaptive bound's settings: the completeness it aims at, the bounds it stays
    between (microseconds), the batches of lags it remembers per unit, and the step its
    bounds are multiples of."""

    target: Fraction
    floor: int
    ceiling: int
    horizon: int = 20
    granularity: int = 100_000

    def __post_init__(self) -> None:
        if not 0 < self.target <= 1:
            raise ConfigError(f"target_completeness={float(self.target):.4%} is not valid: "
                              "a share above 0% and at most 100%, e.g. 99.9%")
        if not 0 <= self.floor <= self.ceiling:
            raise ConfigError(f"the adaptive bound's floor {self.floor}us and ceiling "
                              f"{self.ceiling}us must satisfy 0 <= floor <= ceiling")
        if self.horizon < 1 or self.granularity < 1:
            raise ConfigError("the adaptive bound's horizon (batches) and granularity must be "
                              f">= 1, not {self.horizon} and {self.granularity}")


def lags_behind(frontier: int | None, event_times: Iterable[int]) -> list[int]:
    """How far behind ``frontier`` (its unit's largest event time before the batch; None:
    the unit's first batch) each event came.

    >>> lags_behind(100, [90, 100, 120]), lags_behind(None, [5])
    ([10, 0, 0], [0])
    """
    return [0 if frontier is None else max(0, frontier - t) for t in event_times]


def quantile_lag(lags: Sequence[int], target: Fraction) -> int:
    """The nearest-rank ``target`` quantile: the smallest lag with at least ``target`` of
    the lags at or below it (0 without lags).

    >>> quantile_lag([5, 1, 3, 2], Fraction(3, 4)), quantile_lag([], Fraction(1))
    (3, 0)
    """
    if not lags:
        return 0
    ordered = sorted(lags)
    return ordered[max(0, ceil(target * len(ordered)) - 1)]


def next_bound(current: int, history: Sequence[Sequence[int]], policy: AdaptivePolicy,
               frontier_advance: int) -> int:
    """The unit's bound for the next batch from its ``history`` of lags (one list per batch
    that held its events, oldest first): the proposal, risen at once or fallen by at most the
    unit's ``frontier_advance`` in this batch."""
    lags = [lag for batch in history[-policy.horizon:] for lag in batch]
    step = policy.granularity
    proposed = -(-quantile_lag(lags, policy.target) // step) * step
    proposed = min(max(proposed, policy.floor), policy.ceiling)
    return proposed if proposed >= current else max(proposed, current - max(0, frontier_advance))


@dataclass(frozen=True)
class AdaptiveStep:
    """A bound change: ``unit``'s bound is ``bound`` from batch ``applies_from`` on."""

    applies_from: int
    unit: int | str
    bound: int


@dataclass
class AdaptiveOutcome:
    """What a stream under the adaptive bound counts, drops and emits (``point``, its
    ``bound`` the starting one), and every bound change it would record."""

    point: CurvePoint
    changes: list[AdaptiveStep] = field(default_factory=list)


def _unit(e: BatchedEvent, by_source: bool) -> int | str:
    return (e.source or "") if by_source else e.partition


def _policy(bounds: dict[int | str, int], start: int, idle_timeout: int,
            by_source: bool) -> WatermarkPolicy:
    if by_source:
        return WatermarkPolicy(start, idle_timeout, by_source=True,
                               source_bounds=tuple((str(u), b) for u, b in bounds.items()))
    return WatermarkPolicy(start, idle_timeout,
                           partition_bounds=tuple((int(u), b) for u, b in bounds.items()))


def adaptive_point_reference(events: Sequence[BatchedEvent], windows: WindowSpec,
                             policy: AdaptivePolicy, start_bound: int, *,
                             allowed_lateness: int = 0, by_source: bool = False,
                             idle_timeout: int = DEFAULT_IDLE_TIMEOUT) -> AdaptiveOutcome:
    """The batches judged by the book while each unit's bound follows ``next_bound``: every
    unit starts at ``start_bound``; each batch is judged against the watermark left by the
    previous one (reckon/whatif_batches.py ``batch_point_reference``, whose counting and emit
    latency this keeps), then absorbed under the bounds in force, then each unit that had
    events gets its bound for the next batch."""
    ordered = sorted(events, key=lambda e: e.batch)
    judged = [(e, w) for e in ordered if e.judged for w in windows.assign(e.event_us)]
    pending = sorted({w.end for _, w in judged})
    state = WatermarkState()
    bounds: dict[int | str, int] = {}
    history: dict[int | str, list[list[int]]] = {}
    frontier: dict[int | str, int] = {}
    out = AdaptiveOutcome(point=CurvePoint.from_counts(start_bound, 0, 0, 0, 0))
    dropped = latency = passed = 0
    seen: int | None = None
    for batch_id, group in groupby(ordered, key=lambda e: e.batch):
        batch = list(group)
        dropped += sum(1 for e in batch if e.judged for w in windows.assign(e.event_us)
                       if classify(w.end, state.watermark, allowed_lateness)
                       is Disposition.LATE)
        in_force = {u: bounds.get(u, start_bound) for u in {_unit(e, by_source) for e in batch}}
        bounds.update(in_force)
        state = advance_watermark(state, observations(batch),
                                  _policy(bounds, start_bound, idle_timeout, by_source))
        seen = max([*([] if seen is None else [seen]), *(e.event_us for e in batch)])
        while pending and state.watermark is not None and pending[0] <= state.watermark:
            latency += seen - pending.pop(0)
            passed += 1
        for unit, mine in groupby(sorted(batch, key=lambda e: str(_unit(e, by_source))),
                                  key=lambda e: _unit(e, by_source)):
            times = [e.event_us for e in mine]
            before = frontier.get(unit)
            history.setdefault(unit, []).append(lags_behind(before, times))
            frontier[unit] = max([*([] if before is None else [before]), *times])
            advance = 0 if before is None else frontier[unit] - before
            new = next_bound(bounds[unit], history[unit], policy, advance)
            if new != bounds[unit]:
                bounds[unit] = new
                out.changes.append(AdaptiveStep(batch_id + 1, unit, new))
    out.point = CurvePoint.from_counts(start_bound, len(judged) - dropped, dropped, latency,
                                       passed)
    return out
