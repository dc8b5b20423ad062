"""The long-day workload: stream batches late in a long day and in the morning, side by side.
The same feed runs on a warehouse holding an hour of event_log behind the de-duplication and,
in the evening, a day of provisional_deltas up to 20:00 (none in the morning). The stream
only appends, so a batch's time should not grow with the day; the dashboard's read of the
last hour's windows is timed on each too.

In named steps: the feed (``_feed``), the two warehouses it runs on (``_bases``), the batches
on one of them (``_long_day_batches``) and each contender's row (``_contender_row``).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench import datasets as ds
from bench.harness import ROUNDS, Scale, alternate, base_settings, measure, target
from reckon.config import Settings
from reckon.generate import GeneratorConfig
from reckon.timeutil import MICROS_PER_SECOND, parse_timestamp

__all__ = ["LONG_DAY_FILES_PER_BATCH", "LONG_DAY_START", "bench_long_day"]

#: The feed of the long-day workload: 1,000 events/s in files of a second, 5 files a batch (a
#: 5 s trigger); the day is laid out up to 20:00 UTC, when the feed starts.
LONG_DAY_START = "2026-01-01T20:00:00Z"
LONG_DAY_FILES_PER_BATCH = 5


@dataclass(frozen=True)
class _Feed:
    """The staged feed: ``files`` holds a list of landing files per batch (the first batch
    untimed, ``timed`` after it)."""

    rate: int
    timed: int
    files: list[list[Path]]
    expected_partitions: tuple[int, ...]


def _feed(scale: Scale) -> _Feed:
    """Generate (or reuse) the feed: ``rate`` events a second, a file a second."""
    rate = scale.n(1_000, floor=50)
    timed = 6 if scale.factor >= 0.05 else 2
    per_batch = LONG_DAY_FILES_PER_BATCH
    feed = GeneratorConfig(events=rate * per_batch * (timed + 1), lines_per_file=rate,
                           rate=float(rate), keys=ds.DAY_KEYS, start=LONG_DAY_START, seed=29)
    staged = scale.data_dir / f"long-day-feed-{rate}-{timed}"
    manifest = ds.ensure_landing(staged, feed)
    files = [[staged / f for f in manifest["files"][i:i + per_batch]]
             for i in range(0, len(manifest["files"]), per_batch)][:timed + 1]
    return _Feed(rate=rate, timed=timed, files=files,
                 expected_partitions=tuple(manifest["expected_partitions"]))


def _bases(spark: SparkSession, scale: Scale, settings: Settings,
           rate: int) -> dict[str, tuple[Path, dict[str, Any]]]:
    """The evening and the morning warehouse, built once: an archived hour each and, in the
    evening, every 10 s window of the day until 20:00 at full scale (7,200 windows of
    DAY_CELLS (key, currency) rows)."""
    bases = {}
    for when, with_day in (("evening", True), ("morning", False)):
        base = scale.data_dir / f"long-day-{when}-{rate}"
        built = ds.build_evening(spark, base, settings, scale.n(3_600_000),
                                 scale.n(7_200 * ds.DAY_CELLS, floor=20 * ds.DAY_CELLS),
                                 parse_timestamp(LONG_DAY_START), with_day=with_day)
        bases[when] = (base, built)
    return bases


def _long_day_batches(spark: SparkSession, settings: Settings, files: list[list[Path]]
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Feed ``files`` (a list per batch) to a BatchProcessor: the first batch untimed (it sets
    the watermark the others start from), then the others, timed; then the dashboard's read
    of the open and recent windows (the last hour), timed on its own. Returns per-batch
    figures and the measurements of the timed batches."""
    from pyspark.sql import DataFrame

    from spark.provisional import read_provisional
    from spark.sources import landing_lines
    from spark.stream import BatchMetrics, BatchProcessor

    def raw(batch: list[Path]) -> DataFrame:
        return landing_lines(spark.read.format("text").option("wholetext", "true")
                             .load([str(f) for f in batch]))

    processor = BatchProcessor.of(spark, settings, query_id="bench-long-day")
    metrics: list[BatchMetrics] = []
    processor.on_batch = metrics.append
    processor(raw(files[0]), 0)
    metrics.clear()

    def batches() -> None:
        for i, batch in enumerate(files[1:], start=1):
            processor(raw(batch), i)

    _, measured = measure(spark, batches)
    watermark = metrics[-1].watermark
    t0 = time.perf_counter()
    since = None if watermark is None else watermark - 3_600 * MICROS_PER_SECOND
    shown = read_provisional(spark, settings.warehouse_path, processor.rules,
                             since_start=since).count()
    figures = {
        "batch_seconds": [round(m.duration_seconds, 2) for m in metrics],
        "deltas_seconds": [round(m.step_seconds.get("deltas", 0.0), 2) for m in metrics],
        "lines_in": sum(m.rows_in for m in metrics),
        "dashboard_read_seconds": round(time.perf_counter() - t0, 3),
        "dashboard_rows": shown,
    }
    return figures, measured


def _contender_row(value: dict[str, Any], m: dict[str, Any], walls: list[float]
                   ) -> dict[str, Any]:
    """The median run's measurements and figures, with per-batch medians within it."""
    return {**m, **value, "events_per_second": round(value["lines_in"] / m["wall_seconds"]),
            "median_batch_seconds": round(statistics.median(value["batch_seconds"]), 3),
            "median_deltas_seconds": round(statistics.median(value["deltas_seconds"]), 3),
            "wall_seconds_runs": walls}


def bench_long_day(spark: SparkSession, scale: Scale) -> dict[str, Any]:
    """The same batches on the morning and the evening warehouse, in turns (each on a fresh
    clone): a batch late in the day should cost what one in the morning does."""
    feed = _feed(scale)
    work = scale.data_dir / "work-long-day"
    settings = base_settings(work, expected_partitions=feed.expected_partitions,
                             event_log_compact_every=0)  # no compaction inside the timing
    bases = _bases(spark, scale, settings, feed.rate)

    def batches(when: str) -> tuple[dict[str, Any], dict[str, Any]]:
        ds.clone_warehouse(bases[when][0], work)  # untimed: every run starts the same
        spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
        return _long_day_batches(spark, settings, feed.files)

    runs = alternate(spark, {
        "reckon_batches_morning": lambda: batches("morning"),
        "reckon_batches_evening": lambda: batches("evening"),
    }, ROUNDS, "long_day")
    results = {name: _contender_row(value, m, walls) for name, (value, m, walls) in runs.items()}
    morning = results["reckon_batches_morning"]["median_batch_seconds"]
    evening = results["reckon_batches_evening"]["median_batch_seconds"]
    flat = round(evening / morning, 3)
    built = bases["evening"][1]
    per_batch = LONG_DAY_FILES_PER_BATCH
    return {
        "scale": {"events_per_second_fed": feed.rate, "lines_per_batch": feed.rate * per_batch,
                  "timed_batches": feed.timed, "archived_rows": built["archived_hour_rows"],
                  "provisional_deltas_rows": built["provisional_windows"] * built["cells"]},
        "results": results,
        "ratios": {"batch_evening_vs_morning": flat},
        "targets": [target("a batch late in the day costs what one in the morning does",
                           flat, "<= 1.15x", flat <= 1.15)],
        "profile": {"dashboard_read_seconds_evening":
                    results["reckon_batches_evening"]["dashboard_read_seconds"]},
        "settings": {"window": settings.window, "lateness": settings.lateness,
                     "trigger_equivalent": f"{per_batch} s", "rounds": ROUNDS,
                     "reference": "reckon_batches_morning",
                     "reported": "median run of each contender; per-batch medians within it",
                     "order_in_a_round": "morning, then evening, each on a fresh copy: the "
                     "first batch, the timed batches, the dashboard read"},
    }
