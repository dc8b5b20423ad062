"""The configurations the per-source benchmark compares, and their pure figures: a single
bound (inputs by partition or by source) or bounds per source, judged per micro-batch as the
stream judges (``pure_point``) or per event as ``reckon bound-whatif --per-source`` does.

Example (the day from ``bench.per_source_scenarios``):
    >>> day = make_day(SCENARIOS["flushing_link"].scaled(minutes=1.5))  # doctest: +SKIP
    >>> label(single(10 * S, by_source=True))
    'one bound 10s, inputs by source'
    >>> best_single(sweep(day), TARGET)  # doctest: +SKIP
    (True, 12)
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

from bench.per_source_scenarios import IDLE_TIMEOUT, WINDOW, Day, S
from reckon.config import Settings
from reckon.eventtime import WatermarkPolicy, WindowSpec
from reckon.timeutil import format_duration, parse_duration
from reckon.whatif import CurvePoint
from reckon.whatif_batches import batch_point_reference

__all__ = ["SWEEP", "as_early", "best_single", "label", "per_event_point", "point_figures",
           "pure_point", "settings_for", "single", "sweep", "windows"]

#: the single bounds swept per micro-batch (pure), with inputs by partition and by source:
#: every second up to 20 s, then coarser, so that the best single bound is not held back
#: by a coarse step
SWEEP = (*range(0, 21), 25, 30, 40, 45, 50, 60)


def windows() -> WindowSpec:
    return WindowSpec.parse(WINDOW)


def single(bound: int, by_source: bool) -> WatermarkPolicy:
    return WatermarkPolicy(bound, parse_duration(IDLE_TIMEOUT, "idle_timeout"),
                           by_source=by_source)


def pure_point(day: Day, policy: WatermarkPolicy) -> CurvePoint:
    """The day's micro-batches judged by the book under ``policy``, from an empty state: what
    the stream does with it."""
    return batch_point_reference(day.batched(), windows(), policy)


def per_event_point(day: Day, policy: WatermarkPolicy) -> CurvePoint:
    """The day judged one event at a time under ``policy``, as a running stream: the
    per-event what-if that ``reckon bound-whatif --per-source`` and the report show."""
    from reckon.whatif_inputs import judge_policy, running_state

    point, _ = judge_policy(day.event_us, day.arrival_us, day.partition, day.source,
                            windows(), policy, state=running_state(
                                day.event_us, day.arrival_us, day.partition, day.source,
                                policy.by_source))
    return point


def _reaches(point: CurvePoint, target: str) -> bool:
    total = point.admitted + point.dropped
    return total == 0 or Fraction(point.admitted, total) >= Fraction(target)


def best_single(points: dict[tuple[bool, int], CurvePoint], target: str
                ) -> tuple[bool, int] | None:
    """The single bound (inputs by source?, bound) that reaches ``target`` with the earliest
    average emit (ties: the smaller bound); None when none reaches it."""
    reaching = [k for k, pt in points.items() if _reaches(pt, target)]
    return min(reaching, key=lambda k: (points[k].avg_emit_latency or float("inf"), k[1]),
               default=None)


def as_early(points: dict[tuple[bool, int], CurvePoint], latency: float) -> tuple[bool, int]:
    """The most complete single bound that emits on average no later than ``latency`` (one
    that emits no window is not early)."""
    early = [k for k, pt in points.items()
             if pt.avg_emit_latency is not None and pt.avg_emit_latency <= latency]
    return max(early or list(points), key=lambda k: (
        points[k].admitted, -(points[k].avg_emit_latency or float("inf"))))


def sweep(day: Day) -> dict[tuple[bool, int], CurvePoint]:
    return {(by_source, b): pure_point(day, single(b * S, by_source))
            for by_source in (False, True) for b in SWEEP}


def settings_for(warehouse: Path, policy: WatermarkPolicy) -> Settings:
    """The stream's settings for ``policy`` (one file a micro-batch)."""
    from bench.harness import base_settings

    rules: dict[str, Any] = {"watermark_bound": format_duration(policy.watermark_bound)}
    if policy.by_source:
        rules["watermark_inputs"] = "source"
    if policy.source_bounds:
        rules["watermark_bound_by_source"] = ",".join(
            f"{name}={format_duration(b)}" for name, b in policy.source_bounds)
    return base_settings(warehouse, window=WINDOW, idle_timeout=IDLE_TIMEOUT,
                         max_files_per_trigger=1, shuffle_partitions=2, **rules)


def label(policy: WatermarkPolicy) -> str:
    if policy.source_bounds:
        return "bounds per source: " + ", ".join(
            f"{name} {format_duration(b)}" for name, b in policy.source_bounds)
    return (f"one bound {format_duration(policy.watermark_bound)}, inputs by "
            + ("source" if policy.by_source else "partition"))


def point_figures(point: CurvePoint) -> dict[str, Any]:
    return {"completeness": point.completeness, "late_pairs": point.dropped,
            "pairs": point.admitted + point.dropped,
            "avg_emit_latency_seconds": point.avg_emit_latency}
