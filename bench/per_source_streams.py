"""The per-source benchmark's real streams: the day streamed under a configuration into its
own warehouse, the figures read back from the tables that stream wrote, and the checks that
those equal the pure ones (``bench.per_source_points``) and the report's per-batch replay.

Example:
    >>> figures = stream(out / "landing", out / "wh-per_source", policy)  # doctest: +SKIP
    >>> figures["completeness"], figures["avg_emit_latency_seconds"]  # doctest: +SKIP
    (1.0, 29.02)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from bench.per_source_points import label, point_figures, settings_for, single, windows
from bench.per_source_scenarios import DAY, TARGET, S
from reckon.eventtime import WatermarkPolicy, WindowSpec
from reckon.whatif import CurvePoint
from reckon.whatif_inputs import PerInputRecommendation

__all__ = ["STREAMED", "recommend_on", "stream", "streamed_checks", "streamed_figures"]

#: the configurations streamed for real with ``--compare-streams`` (the others, and every
#: single bound of the sweep, are judged pure and replayed from the per-source stream's
#: recorded batches, which the streams show to be the same: a stream takes minutes a
#: configuration on a busy machine)
STREAMED = ("per_source", "best_single")


def stream(landing: Path, warehouse: Path, policy: WatermarkPolicy) -> dict[str, Any]:
    """Stream the landing into a fresh ``warehouse`` under ``policy``; the figures from the
    tables it wrote, with wall and CPU seconds (load-dependent)."""
    from bench.harness import measure
    from spark.session import get_spark
    from spark.sources import StreamSource
    from spark.stream import run_stream

    settings = settings_for(warehouse, policy)
    spark = get_spark(settings, app_name="bench-per-source")
    _, cost = measure(spark, lambda: run_stream(spark, settings, StreamSource(
        landing=str(landing)), on_batch=None))
    return {"policy": policy.describe(), **streamed_figures(spark, warehouse, windows()),
            **{k: v for k, v in cost.items()
               if k in ("wall_seconds", "cpu_seconds_python", "cpu_seconds_jvm",
                        "peak_driver_rss_mb")}}


def streamed_figures(spark: Any, warehouse: Path, spec: WindowSpec) -> dict[str, Any]:
    """Completeness and average emit latency of what a stream wrote, from its own tables:
    ``watermark_progress`` (per batch: pairs counted on time or as revisions, pairs late,
    the watermark it left, the largest event time of each partition) and ``event_log`` (the
    windows of the day's events). A window's emit latency: the largest event time seen by the
    batch whose watermark first reached its end, minus the end (windows never reached are
    left out, as in the what-if)."""
    from pyspark.sql import functions as F

    from spark import tables as tb
    from spark.rules import window_starts_col

    rows = (tb.read_table(spark, warehouse, tb.WATERMARK_PROGRESS)
            .select("batch_id", "on_time", "revised", "late",
                    F.unix_micros("watermark").alias("wm"),
                    F.unix_micros(F.array_max(F.map_values("partition_max_event_time")))
                    .alias("seen"))
            .orderBy("batch_id").collect())
    ends = sorted(int(r.end) for r in (
        tb.read_table(spark, warehouse, tb.EVENT_LOG)
        .filter(~F.coalesce(F.col("is_duplicate"), F.lit(False)))
        .select(F.explode(window_starts_col(F.unix_micros("event_time"), spec)).alias("ws"))
        .select((F.col("ws") + F.lit(spec.size)).alias("end")).distinct().collect()))
    none = np.iinfo(np.int64).min
    wm = np.array([none if r.wm is None else int(r.wm) for r in rows], dtype=np.int64)
    seen = np.maximum.accumulate(np.array([none if r.seen is None else int(r.seen)
                                           for r in rows], dtype=np.int64))
    first = np.searchsorted(np.maximum.accumulate(wm), np.array(ends, dtype=np.int64))
    reached = first < len(rows)
    latency = seen[first[reached]] - np.array(ends, dtype=np.int64)[reached]
    counted = sum(int(r.on_time) + int(r.revised) for r in rows)
    late = sum(int(r.late) for r in rows)
    return {"batches": len(rows), "pairs": counted + late, "late_pairs": late,
            "completeness": counted / (counted + late) if counted + late else 1.0,
            "windows_emitted": int(reached.sum()), "windows": len(ends),
            "avg_emit_latency_seconds": float(latency.sum() / reached.sum() / S)
            if reached.any() else None}


def _agrees(streamed: dict[str, Any], point: CurvePoint) -> bool:
    """The stream's own figures are the pure per-batch point's (latency to the microsecond)."""
    mine, theirs = streamed["avg_emit_latency_seconds"], point.avg_emit_latency
    return (streamed["late_pairs"] == point.dropped
            and streamed["pairs"] == point.admitted + point.dropped
            and (mine is None) == (theirs is None)
            and (mine is None or theirs is None or abs(mine - theirs) < 1e-6))


def recommend_on(spark: Any, warehouse: Path, policy: WatermarkPolicy
                 ) -> PerInputRecommendation:
    """``reckon bound-whatif --per-source`` on a streamed day (per event, the standard candidate
    ladder plus the configured bound, the default target)."""
    from audits.bound_whatif import analyze_inputs

    return analyze_inputs(spark, settings_for(warehouse, policy).whatif_config(), DAY,
                          target=TARGET)


def streamed_checks(out: Path, compared: dict[str, WatermarkPolicy],
                     points: dict[tuple[bool, int], CurvePoint], pure: dict[str, CurvePoint],
                     rec: PerInputRecommendation,
                     configurations: dict[str, dict[str, Any]]) -> dict[str, bool]:
    """Stream the STREAMED configurations for real, replay the per-source stream's recorded
    batches as the report does, add both to ``configurations`` and check every figure
    against the pure ones."""
    from audits.bound_whatif_batches import batch_points
    from bench.harness import log
    from spark.session import get_spark

    streamed: dict[str, dict[str, Any]] = {}
    for name in (n for n in STREAMED if n in compared):
        log(f"  streaming {label(compared[name])} ...")
        streamed[name] = stream(out / "landing", out / f"wh-{name}", compared[name])
        log(f"  streamed {label(compared[name])}: {json.dumps(streamed[name])}")
    wh, per_source = out / "wh-per_source", compared["per_source"]
    spark = get_spark(settings_for(wh, per_source))
    on_warehouse = recommend_on(spark, wh, per_source)
    # the report's per-batch replay of the per-source stream's recorded batches: under every
    # compared configuration, and under every single bound of the sweep
    whatif = settings_for(wh, per_source).whatif_config()
    replayed = batch_points(spark, whatif, DAY, compared)
    swept = batch_points(spark, whatif, DAY,
                         {f"{int(k[0])}:{k[1]}": single(k[1] * S, k[0]) for k in points})
    for name in compared:
        if name in streamed:
            configurations[name]["streamed"] = streamed[name]
        configurations[name]["replayed_per_batch"] = point_figures(replayed[name])
    return {
        "streams_equal_pure_per_batch": all(_agrees(streamed[n], pure[n]) for n in streamed),
        "report_replay_equals_streams": all(_agrees(streamed[n], replayed[n])
                                            for n in streamed),
        "report_replay_equals_pure": all(replayed[n] == pure[n] for n in compared),
        "sweep_replayed_from_the_warehouse_equals_pure": all(
            swept[f"{int(k[0])}:{k[1]}"] == pt for k, pt in points.items()),
        "recommendation_on_the_warehouse_is_the_pure_one":
            on_warehouse.to_json_dict() == rec.to_json_dict(),
    }
