"""The fixed-cost workload: what a steady 10,000-line batch of the real streaming query costs,
and where it goes. One landing file of 10,000 lines a trigger (available-now), so every batch
is that size; the first batches warm the query up (code generation, the JIT: a dozen at
full scale), the others are steady, and their medians are reported: commit to commit (the whole cost of a batch, Spark's
part included), inside foreachBatch, and per step (BatchMetrics.step_seconds).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from app.generate import GeneratorConfig
from bench import datasets as ds
from bench.harness import Scale, base_settings, log, measure, target
from bench.steady import BatchLog, land, steady_figures

__all__ = ["FIXED_COST_LINES", "bench_fixed_cost"]

#: Lines in a batch at full scale (one file a trigger), the size issue 38's goal names.
FIXED_COST_LINES = 10_000
#: The batches a run sets aside before the steady ones (full scale; 2 below --quick): the
#: query's start, the first code generation and the JIT's warm-up fall in them: a fresh JVM's
#: batches get faster over about a dozen (bench/CHANGELOG.md, fixed_cost).
WARM_UP_BATCHES = 12
#: The goal for a steady 10,000-line batch, commit to commit (seconds).
FIXED_COST_GOAL_SECONDS = 1.5


def bench_fixed_cost(spark: SparkSession, scale: Scale) -> dict[str, Any]:
    """A steady batch of FIXED_COST_LINES lines through ``spark.stream.run_stream``: the
    median seconds from one commit to the next, inside foreachBatch, and of each step.

    The warehouse starts empty, so its dedup state holds what the run itself added (the
    long-day workload runs on an hour of it): this is the cost a batch cannot avoid."""
    from spark.sources import StreamSource
    from spark.stream import run_stream

    lines = scale.n(FIXED_COST_LINES, floor=200)
    steady, warm_up = (20, WARM_UP_BATCHES) if scale.factor >= 0.05 else (3, 2)
    files = warm_up + steady
    staged = scale.data_dir / f"fixed-cost-feed-{lines}-{files}"
    manifest = ds.ensure_landing(staged, GeneratorConfig(
        events=lines * files, lines_per_file=lines, rate=float(lines), seed=31))
    work = ds.fresh_folder(scale.data_dir / "work-fixed-cost")
    settings = base_settings(work / "wh", max_files_per_trigger=1,
                             expected_partitions=tuple(manifest["expected_partitions"]))
    # the generator's extra lines (duplicates, malformed) spill into a last, smaller file
    land(staged, list(manifest["files"])[:files], work / "landing")
    batches = BatchLog()
    log(f"fixed_cost: {files} batches of {lines:,} lines, one file a trigger "
        f"({warm_up} warm-up)")
    _, measured = measure(spark, lambda: run_stream(
        spark, settings, StreamSource(landing=str(work / "landing")), available_now=True,
        on_batch=batches))
    figures = steady_figures(batches, warm_up=warm_up)
    spent = sum(figures["commit_interval_seconds"])
    cost = figures["median_commit_interval_seconds"]
    ours = {**measured, **figures,
            "events_per_second": round(figures["lines_in"] / spent) if spent else None}
    return {
        "scale": {"lines_per_batch": lines, "batches": files, "warm_up_batches": warm_up,
                  "lines": figures["lines_in"]},
        "results": {"reckon_stream_steady_batches": ours},
        "ratios": {"in_foreachbatch_share": None if not cost
                   else round(figures["median_batch_seconds"] / cost, 3)},
        "targets": [target(f"fixed cost of a steady {FIXED_COST_LINES // 1000}K-line batch "
                           "(s, commit to commit)", cost, f"<= {FIXED_COST_GOAL_SECONDS} s",
                           None if cost is None or lines != FIXED_COST_LINES
                           else cost <= FIXED_COST_GOAL_SECONDS)],
        "profile": {"median_step_seconds": figures["median_step_seconds"]},
        "settings": {"trigger": "available-now, 1 file a trigger", "window": settings.window,
                     "lateness": settings.watermark_bound, "warehouse": "empty at the start",
                     "event_log_compact_every": settings.event_log_compact_every,
                     "reported": "medians of the steady batches of one run"},
    }
