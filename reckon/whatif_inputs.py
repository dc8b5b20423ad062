"""The what-if per watermark input: a bound for each partition or source, recommended from the
data, against the best single bound (issue 41; docs/semantics.md "Bounds per input").

One slow producer forces one large bound on every input: every window then waits for the
slowest. Given a log in arrival order, ``recommend_per_input`` gives each unit (a partition,
or with inputs by source a source: its bound applies to each (partition, source) pair it
feeds) the smallest candidate bound that reaches the target completeness on the unit's own
events under its own watermark; then judges every event under those bounds together (the
min rule couples the inputs) and, while the whole log misses the target, raises the bound of
the unit whose raise loses least by one candidate; then lowers bounds one candidate at a time
while the target still holds and windows are emitted no later (another input's lag can cover
a unit's own need), and keeps that or the same descent from the best single bound, whichever
emits earlier. What it buys is measured on the same log:
completeness and average emit latency under the bounds per input, and under the smallest
single bound that reaches the target (``reckon.whatif.recommend``).

Example (a 10 s satellite buffer delivering in bursts, in order, next to a real-time feed: each
needs no bound of its own, since the watermark already waits for the satellite by the min rule):
    >>> import numpy as np
    >>> from reckon.eventtime import WindowSpec
    >>> S = 1_000_000
    >>> t = np.arange(0, 200) * S
    >>> src = np.array(["radar", "sat"] * 100)
    >>> a = np.where(src == "sat", (t // (10 * S) + 1) * 10 * S, t)
    >>> order = np.argsort(a, kind="stable")
    >>> rec = recommend_per_input(t[order], a[order], None, src[order], WindowSpec(10 * S),
    ...                           [0, S, 10 * S], "1")
    >>> [(b.unit, b.bound // S) for b in rec.bounds], rec.reached, rec.single.bound // S
    ([('radar', 0), ('sat', 0)], True, 0)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from reckon.eventtime import (
    InputKey,
    PartitionProgress,
    WatermarkPolicy,
    WatermarkState,
    WindowSpec,
    is_beyond_allowed_lateness,
    watermark_series,
)
from reckon.timeutil import MICROS_PER_SECOND
from reckon.whatif import (
    DEFAULT_IDLE_TIMEOUT,
    CurvePoint,
    _target,
    lateness_curve,
    normalize_bounds,
    recommend,
)

__all__ = ["InputBound", "PerInputRecommendation", "judge_policy", "recommend_per_input",
           "running_state"]

_NO_WATERMARK = np.iinfo(np.int64).min


@dataclass(frozen=True)
class InputBound:
    """One unit's bound: ``unit`` a partition number or a source name; ``own`` its events'
    outcome at ``bound`` on their own watermark (as if no other input held it back);
    ``dropped`` its pairs lost under every unit's bound together."""

    unit: int | str
    events: int
    bound: int
    own: CurvePoint
    dropped: int

    def to_json_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "events": self.events,
                "bound_seconds": self.bound / MICROS_PER_SECOND,
                "own": self.own.to_json_dict(), "dropped": self.dropped}

    @classmethod
    def from_json_dict(cls, raw: dict[str, Any]) -> InputBound:
        return cls(raw["unit"], int(raw["events"]), _micros(raw["bound_seconds"]),
                   _point(raw["own"]), int(raw["dropped"]))


def _micros(seconds: float) -> int:
    return round(seconds * MICROS_PER_SECOND)


def _point(raw: dict[str, Any]) -> CurvePoint:
    """A CurvePoint back from its ``to_json_dict`` (a recommendation made inside Spark)."""
    return CurvePoint(_micros(raw["bound_seconds"]), float(raw["completeness"]),
                      int(raw["admitted"]), int(raw["dropped"]),
                      raw["avg_emit_latency_seconds"])


@dataclass(frozen=True)
class PerInputRecommendation:
    """Bounds per unit and what they give against the best single bound, on one log.

    ``per_input``: the log judged under ``bounds`` (``bound`` of each point is the default,
    the bound of units the log does not hold); ``single``: the smallest single bound that
    reaches the target, same inputs (None: none does, then the largest candidate's point is
    ``single_fallback``); ``reached``: ``per_input`` reaches the target; ``by_partition``
    (inputs by source only): the smallest single bound reaching the target with inputs by
    partition, today's default rule (None: none does)."""

    by_source: bool
    target: Decimal
    bounds: tuple[InputBound, ...]
    per_input: CurvePoint
    single: CurvePoint | None
    single_fallback: CurvePoint
    reached: bool
    by_partition: CurvePoint | None = None

    def policy(self, idle_timeout: int, expected: Iterable[int] = ()) -> WatermarkPolicy:
        """The recommended bounds as the policy (and configuration) that applies them."""
        return _policy(self.by_source, self.per_input.bound,
                       {b.unit: b.bound for b in self.bounds}, idle_timeout, tuple(expected))

    def to_json_dict(self) -> dict[str, Any]:
        """For scripts (``reckon bound-whatif --per-source --json``); ``single`` is the best single
        bound's point, or the largest candidate's when none reaches the target."""
        single = self.single or self.single_fallback
        return {"inputs": "source" if self.by_source else "partition",
                "target": str(self.target), "reached": self.reached,
                "bounds": [b.to_json_dict() for b in self.bounds],
                "default_bound_seconds": self.per_input.bound / MICROS_PER_SECOND,
                "per_input": self.per_input.to_json_dict(),
                "single": {**single.to_json_dict(), "reaches_target": self.single is not None},
                "single_by_partition": None if self.by_partition is None
                else self.by_partition.to_json_dict()}

    @classmethod
    def from_json_dict(cls, raw: dict[str, Any]) -> PerInputRecommendation:
        single = _point(raw["single"])
        return cls(by_source=raw["inputs"] == "source", target=Decimal(raw["target"]),
                   bounds=tuple(InputBound.from_json_dict(b) for b in raw["bounds"]),
                   per_input=_point(raw["per_input"]),
                   single=single if raw["single"]["reaches_target"] else None,
                   single_fallback=single, reached=bool(raw["reached"]),
                   by_partition=None if raw.get("single_by_partition") is None
                   else _point(raw["single_by_partition"]))


def _policy(by_source: bool, default: int, bounds: dict[Any, int], idle_timeout: int,
            expected: tuple[int, ...]) -> WatermarkPolicy:
    pairs = tuple(bounds.items())
    return WatermarkPolicy(default, idle_timeout, expected, by_source=by_source,
                           source_bounds=pairs if by_source else (),
                           partition_bounds=() if by_source else pairs)


def judge_policy(event_us: Any, arrival_us: Any, partition: Any, source: Any,
                 windows: WindowSpec, policy: WatermarkPolicy, *, allowed_lateness: int = 0,
                 unit_codes: Any = None, units: int = 0, state: WatermarkState | None = None
                 ) -> tuple[CurvePoint, Any]:
    """The log (arrival order) judged one event at a time under ``policy``, bounds per input
    and all: its point (``bound`` = the policy's default) and, given each event's unit code
    (0..units-1), the dropped pairs per unit. Emit latency as in ``reckon.whatif``.
    ``state`` (without a watermark): inputs already known when the log starts.
    """
    t = np.asarray(event_us, dtype=np.int64)
    n = len(t)
    before, final = watermark_series(t, arrival_us, partition, policy, state, source=source)
    after = np.empty_like(before)
    after[:-1] = before[1:]
    if n:
        after[-1] = _NO_WATERMARK if final.watermark is None else final.watermark
    pair_ends = [start + windows.size for start in windows.window_starts(t)]
    lost = sum((is_beyond_allowed_lateness(ends, before, allowed_lateness).astype(np.int64) for ends in pair_ends),
               np.zeros(n, dtype=np.int64))
    window_ends = np.unique(np.concatenate(pair_ends)) if n else np.empty(0, dtype=np.int64)
    first_reach = np.searchsorted(after, window_ends, side="left")
    passed = first_reach < n
    max_seen = np.maximum.accumulate(t) if n else t
    latency = max_seen[first_reach[passed]] - window_ends[passed]
    dropped = int(lost.sum())
    point = CurvePoint.from_counts(policy.watermark_bound, n * windows.windows_per_event - dropped,
                                   dropped, int(latency.sum()), int(passed.sum()))
    per_unit = (np.bincount(unit_codes, weights=lost, minlength=units).astype(np.int64)
                if unit_codes is not None else None)
    return point, per_unit


def _reaches(point: CurvePoint, goal: Fraction) -> bool:
    total = point.admitted + point.dropped
    return total == 0 or Fraction(point.admitted, total) >= goal


def recommend_per_input(event_us: Any, arrival_us: Any, partition: Any, source: Any,
                        windows: WindowSpec, bounds: Iterable[int | str],
                        target: float | Decimal | str, *, allowed_lateness: int = 0,
                        idle_timeout: int = DEFAULT_IDLE_TIMEOUT,
                        expected_partitions: Iterable[int] = (), by_source: bool = True,
                        running: bool = False) -> PerInputRecommendation:
    """Bounds per unit (sources with ``by_source``, else partitions) for ``target``
    completeness, from candidate ``bounds``, against the best single bound (module
    docstring). Arrays in arrival order; ``partition`` None: one partition 0.

    ``running``: judge the log as a stream that was already running when it starts would
    (``running_state``), not one starting empty: there, an input first heard of an hour
    into the log does not exist until then, and every event it then brings for windows the
    others have closed counts as late, in every configuration alike."""
    goal = _target(target)
    candidates = normalize_bounds(bounds)
    t = np.asarray(event_us, dtype=np.int64)
    a = np.asarray(arrival_us, dtype=np.int64)
    p = np.zeros(len(t), dtype=np.int64) if partition is None else np.asarray(partition,
                                                                              dtype=np.int64)
    src = np.asarray([""] * len(t) if source is None else list(source), dtype=object)
    expected = tuple(expected_partitions)
    keys = src if by_source else p
    names, codes = np.unique(keys.astype(str) if by_source else keys, return_inverse=True)
    units: list[int | str] = [str(x) if by_source else int(x) for x in names.tolist()]
    start = running_state(t, a, p, src, by_source) if running else None
    single_curve = lateness_curve(t, a, p, windows, candidates, source=src, allowed_lateness=allowed_lateness,
                                  idle_timeout=idle_timeout, expected_partitions=expected,
                                  by_source=by_source, state=start)
    single = recommend(single_curve, target)
    chosen: dict[int | str, int] = {}
    own: dict[int | str, list[CurvePoint]] = {}
    for k, unit in enumerate(units):
        mask = codes == k
        own[unit] = lateness_curve(t[mask], a[mask], p[mask], windows, candidates,
                                   source=src[mask], allowed_lateness=allowed_lateness, idle_timeout=idle_timeout,
                                   by_source=by_source, state=None if not running else
                                   running_state(t[mask], a[mask], p[mask], src[mask],
                                                 by_source))
        pick = recommend(own[unit], target)
        chosen[unit] = (pick or own[unit][-1]).bound
    default = single.bound if single else candidates[-1]

    def judge(bounds: dict[int | str, int]) -> tuple[CurvePoint, Any]:
        return judge_policy(t, a, p, src, windows,
                            _policy(by_source, default, bounds, idle_timeout, expected),
                            allowed_lateness=allowed_lateness, unit_codes=codes, units=len(units), state=start)

    found = [_descend(_raise(chosen, judge(chosen), judge, candidates, goal), judge,
                      candidates, goal)]
    if single is not None:  # from the single bound down: never worse than it
        uniform = dict.fromkeys(units, single.bound)
        found.append(_descend((uniform, judge(uniform)), judge, candidates, goal))
    # reaching the target first, then the earlier emit (or, missing it, the fewer drops)
    chosen, (point, lost) = min(found, key=lambda f: (
        (0, _latency(f[1][0])) if _reaches(f[1][0], goal) else (1, f[1][0].dropped)))
    return PerInputRecommendation(
        by_source=by_source, target=Decimal(str(target)),
        bounds=tuple(InputBound(u, int((codes == k).sum()), chosen[u],
                                _at(own[u], chosen[u]), int(lost[k]))
                     for k, u in enumerate(units)),
        per_input=point, single=single, single_fallback=single_curve[-1],
        reached=_reaches(point, goal),
        by_partition=recommend(lateness_curve(
            t, a, p, windows, candidates, allowed_lateness=allowed_lateness, idle_timeout=idle_timeout,
            expected_partitions=expected,
            state=running_state(t, a, p, src, False) if running else None), target)
        if by_source else None)


def running_state(event_us: Any, arrival_us: Any, partition: Any, source: Any,
                  by_source: bool) -> WatermarkState:
    """Every input of the log known from its first arrival, at the event time of its first
    event: what a stream that ran before the log starts knew of it (roughly). No watermark
    yet, so the what-if's one walk at bound 0 still shifts to every bound.

    >>> running_state([5, 1, 7], [10, 11, 12], [0, 1, 0], ["a", "b", "a"], False)
    WatermarkState(partitions={0: PartitionProgress(max_event_time=5, last_arrival=10), 1: PartitionProgress(max_event_time=1, last_arrival=10)}, first_arrival=10, clock=10, watermark=None)
    """
    a = np.asarray(arrival_us, dtype=np.int64)
    if not len(a):
        return WatermarkState()
    first = int(a.min())
    inputs: dict[InputKey, PartitionProgress] = {}
    for t, p, s in zip(np.asarray(event_us).tolist(), np.asarray(partition).tolist(),
                       list(source), strict=True):
        key: InputKey = (int(p), str(s or "")) if by_source else int(p)
        inputs.setdefault(key, PartitionProgress(int(t), first))
    return WatermarkState(inputs, first, first, None)


Judged = tuple[CurvePoint, Any]
Bounds = dict[int | str, int]


def _raise(chosen: Bounds, judged: Judged, judge: Callable[[Bounds], Judged],
           candidates: list[int], goal: Fraction) -> tuple[Bounds, Judged]:
    """While the log misses the target, raise the one unit whose next candidate loses least
    (the min rule couples the inputs: a fast input's small bound can close windows a slower
    one still feeds, so the unit that loses pairs is not always the one to raise)."""
    while not _reaches(judged[0], goal):
        tries = [(judge(raised), raised) for u in chosen if chosen[u] < candidates[-1]
                 for raised in [{**chosen, u: next(b for b in candidates if b > chosen[u])}]]
        if not tries:
            break
        judged, chosen = min(tries, key=lambda tr: (tr[0][0].dropped, _latency(tr[0][0])))
    return chosen, judged


def _descend(start: tuple[Bounds, Judged], judge: Callable[[Bounds], Judged],
             candidates: list[int], goal: Fraction) -> tuple[Bounds, Judged]:
    """Lower one unit's bound by one candidate while the log still reaches the target and
    windows are emitted no later: a unit's own need can be covered by another's lag."""
    chosen, judged = start
    if not _reaches(judged[0], goal):
        return chosen, judged
    while True:
        tries = [(judge(lowered), lowered) for u in chosen if chosen[u] > candidates[0]
                 for lowered in [{**chosen, u: max(b for b in candidates if b < chosen[u])}]]
        fit = [tr for tr in tries if _reaches(tr[0][0], goal)
               and _latency(tr[0][0]) <= _latency(judged[0])]
        if not fit:
            return chosen, judged
        judged, chosen = min(fit, key=lambda tr: (_latency(tr[0][0]), tr[0][0].dropped))


def _latency(point: CurvePoint) -> float:
    return float("inf") if point.avg_emit_latency is None else point.avg_emit_latency


def _at(points: Sequence[CurvePoint], bound: int) -> CurvePoint:
    return next(pt for pt in points if pt.bound == bound)
