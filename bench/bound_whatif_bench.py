"""The lateness workload (no Spark): the vectorised lateness curve (``reckon.whatif``) against
the pure-Python reference it is checked by, on the same events and allowed-lateness bounds."""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import SparkSession

from bench import datasets as ds
from bench.harness import Scale, log, measure, target
from reckon.timeutil import parse_duration

__all__ = ["bench_lateness"]


def bench_lateness(spark: SparkSession | None, scale: Scale) -> dict[str, Any]:
    """The curve over ``scale.lateness_events`` events and six bounds, the reference over a
    slice of them; both must agree on the slice."""
    from reckon.eventtime import WatermarkPolicy, WindowSpec, watermark_series
    from reckon.whatif import DEFAULT_IDLE_TIMEOUT, lateness_curve, lateness_curve_reference

    bounds = [parse_duration(b) for b in ("0s", "1s", "2s", "5s", "10s", "30s")]
    windows = WindowSpec.parse("10s")
    n = scale.lateness_events
    log(f"lateness: building {n:,} events")
    t, a, p = ds.lateness_arrays(n)
    log(f"lateness: vectorised curve, {len(bounds)} bounds")
    points, ours = measure(None, lambda: lateness_curve(t, a, p, windows, bounds,
                                                         expected_partitions=range(4)))
    m = scale.reference_events
    events = list(zip(t[:m].tolist(), a[:m].tolist(), p[:m].tolist(), strict=True))
    log(f"lateness: pure-Python reference on {m:,} events")
    ref, theirs = measure(None, lambda: lateness_curve_reference(
        events, windows, bounds, expected_partitions=range(4)))
    small = lateness_curve(t[:m], a[:m], p[:m], windows, bounds, expected_partitions=range(4))
    # profile: the share of one bound's time spent in watermark_series (bound-independent
    # except for the final "- L": a candidate for computing once for all bounds)
    policy = WatermarkPolicy(bounds[2], DEFAULT_IDLE_TIMEOUT, tuple(range(4)))
    t0 = time.perf_counter()
    watermark_series(t, a, p, policy)
    series_s = time.perf_counter() - t0
    per_bound_eps = n / (ours["wall_seconds"] / len(bounds))
    ref_eps = m / (theirs["wall_seconds"] / len(bounds))
    return {
        "scale": {"events": n, "bounds": len(bounds), "reference_events": m},
        "results": {
            "reckon_lateness_curve": {**ours, "events_per_second_per_bound": round(per_bound_eps)},
            "pure_python_reference": {
                **theirs, "events_per_second_per_bound": round(ref_eps),
                "extrapolated_wall_seconds_at_full_events": round(theirs["wall_seconds"] * n / m,
                                                                  1)},
        },
        "ratios": {"vectorised_over_reference_per_event": round(per_bound_eps / ref_eps, 1)},
        "targets": [target("lateness curve throughput per bound", round(per_bound_eps),
                           ">= 1,000,000 events/s per bound", per_bound_eps >= 1_000_000)],
        "profile": {"agree_on_reference_slice": small == ref,
                    "watermark_series_seconds_one_bound": round(series_s, 3),
                    "curve_seconds_per_bound": round(ours["wall_seconds"] / len(bounds), 3),
                    "curve": [pt.to_json_dict() for pt in points]},
        "settings": {"window": "10s", "bounds_seconds": [b / 1e6 for b in bounds]},
    }
