"""The long-day workload: the real streaming query's batches late in a long day and in the
morning, side by side. The same feed runs on a warehouse holding an hour of event_log (the
dedup state is seeded from it) and, in the evening, a day of provisional_deltas up to 20:00
(none in the morning). The stream only appends, so a batch's time should not grow with the
day; the dashboard's read of the open and recent windows is timed on each too.

In named steps: the feed (``_feed``), each warehouse with its query's checkpoint seeded once
(``_seeded``), one run restored from it (``_run``: restart, warm-up batch, timed batches, the
dashboard read, ``_dashboard_read``) and each contender's row (``_contender_row``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from app.generate import GeneratorConfig
from bench import datasets as ds
from bench.harness import ROUNDS, Scale, alternate, base_settings, log, measure, target
from bench.steady import BatchLog, land, steady_figures
from reckon.config import Settings
from reckon.timeutil import MICROS_PER_SECOND, parse_timestamp
from spark.dedup import STATE_BUCKETS

__all__ = ["LONG_DAY_FILES_PER_BATCH", "LONG_DAY_START", "bench_long_day"]

#: The feed of the long-day workload: 1,000 events/s in files of a second, 5 files a batch (a
#: 5 s trigger); the day is laid out up to 20:00 UTC, when the feed starts.
LONG_DAY_START = "2026-01-01T20:00:00Z"
LONG_DAY_FILES_PER_BATCH = 5
#: The dashboard reads the windows starting in the last hour before the watermark.
DASHBOARD_SPAN_SECONDS = 3_600
DASHBOARD_READS = 3


@dataclass(frozen=True)
class _Feed:
    """The staged feed: landing file names per batch. Batch 0 seeds the query's checkpoint
    (once per warehouse), batch 1 warms the restarted query up, the ``timed`` others follow."""

    rate: int
    timed: int
    staged: Path
    batches: list[list[str]]
    expected_partitions: tuple[int, ...]


def _feed(scale: Scale) -> _Feed:
    """Generate (or reuse) the feed: ``rate`` events a second, a file a second."""
    rate = scale.n(1_000, floor=50)
    timed = 6 if scale.factor >= 0.05 else 2
    per_batch = LONG_DAY_FILES_PER_BATCH
    feed = GeneratorConfig(events=rate * per_batch * (timed + 2), lines_per_file=rate,
                           rate=float(rate), keys=ds.DAY_KEYS, start=LONG_DAY_START, seed=29)
    staged = scale.data_dir / f"long-day-feed-{rate}-{timed}"
    manifest = ds.ensure_landing(staged, feed)
    names = list(manifest["files"])
    batches = [names[i:i + per_batch] for i in range(0, len(names), per_batch)][:timed + 2]
    return _Feed(rate=rate, timed=timed, staged=staged, batches=batches,
                 expected_partitions=tuple(manifest["expected_partitions"]))


def _copy_run(src: Path, dst: Path) -> None:
    """``dst`` as a copy of ``src``: data and landing files hard-linked (never rewritten),
    Delta logs and the query's checkpoint copied (both are rewritten or appended in place)."""
    def link_or_copy(a: str, b: str) -> None:
        if {"_delta_log", "_checkpoints"} & set(Path(a).parts):
            shutil.copy2(a, b)
        else:
            os.link(a, b)

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, copy_function=link_or_copy)


def _stream(spark: SparkSession, settings: Settings, landing: Path, on_batch: Any) -> None:
    from spark.sources import StreamSource
    from spark.stream import run_stream

    run_stream(spark, settings, StreamSource(landing=str(landing)), available_now=True,
               on_batch=on_batch)


def _seeded(spark: SparkSession, scale: Scale, settings: Settings, feed: _Feed, work: Path,
            when: str) -> Path:
    """The evening (a day of deltas up to 20:00) or morning (none) warehouse after its query's
    first batch, checkpoint included: that batch seeds the dedup state from the archived hour
    (minutes at full scale), paid once here, not in every run. Built at ``work``, where every
    run is restored (the checkpoint names its files by path); reused when built for these
    inputs."""
    base = scale.data_dir / f"long-day-{when}-{feed.rate}"
    built = ds.build_evening(spark, base, settings, scale.n(3_600_000),
                             scale.n(7_200 * ds.DAY_CELLS, floor=20 * ds.DAY_CELLS),
                             parse_timestamp(LONG_DAY_START), with_day=when == "evening")
    snapshot = scale.data_dir / f"long-day-seeded-{when}-{feed.rate}-{feed.timed}"
    # the state's layout is the checkpoint's: a snapshot seeded under another is built again
    spec = {"v": 1, "built": built, "work": str(work), "seed_files": feed.batches[0],
            "state_buckets": STATE_BUCKETS}
    marker = snapshot.parent / f"{snapshot.name}.json"
    if snapshot.is_dir() and marker.is_file() and json.loads(marker.read_text()) == spec:
        return snapshot
    log(f"long_day: seeding the {when} query's dedup state (its first batch)")
    ds.fresh_folder(work)
    ds.clone_warehouse(base, work / "wh")
    land(feed.staged, feed.batches[0], work / "landing")
    _stream(spark, settings, work / "landing", on_batch=lambda m: None)
    _copy_run(work, snapshot)
    marker.write_text(json.dumps(spec))
    return snapshot


def _dashboard_read(spark: SparkSession, settings: Settings, watermark: int | None
                    ) -> dict[str, Any]:
    """The dashboard's query, timed: the current totals of the windows starting in the last
    hour before the watermark (the open and recent ones), folded from their deltas
    (spark.provisional.read_provisional) and collected, as a dashboard shows them. A dashboard
    polls, so the read runs DASHBOARD_READS times: the median, and the first (cold) apart."""
    from spark.provisional import read_provisional
    from storage.spec_log import rules_in_force

    rules = rules_in_force(settings.warehouse_path)
    since = None if watermark is None else watermark - DASHBOARD_SPAN_SECONDS * MICROS_PER_SECOND
    seconds, rows = [], []
    for _ in range(DASHBOARD_READS):
        t0 = time.perf_counter()
        rows = read_provisional(spark, settings.warehouse_path, rules,
                                since_start=since).collect()
        seconds.append(time.perf_counter() - t0)
    return {"dashboard_read_seconds": round(statistics.median(seconds), 3),
            "dashboard_first_read_seconds": round(seconds[0], 3),
            "dashboard_rows": len(rows),
            "dashboard_windows": len({r["window_start"] for r in rows})}


def _run(spark: SparkSession, settings: Settings, feed: _Feed, work: Path, snapshot: Path
         ) -> tuple[dict[str, Any], dict[str, Any]]:
    """One run on a fresh restore of ``snapshot``: the stream restarted on the warm-up batch
    and the timed ones (available-now, LONG_DAY_FILES_PER_BATCH files a trigger), then the
    dashboard read. Returns the steady batches' figures and the run's measurements."""
    _copy_run(snapshot, work)  # untimed: every run starts the same
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
    land(feed.staged, [f for b in feed.batches[1:] for f in b], work / "landing")
    batches = BatchLog()
    _, measured = measure(spark, lambda: _stream(spark, settings, work / "landing", batches))
    figures = steady_figures(batches, warm_up=1)
    watermark = batches.metrics[-1].watermark if batches.metrics else None
    return {**figures, **_dashboard_read(spark, settings, watermark)}, measured


def _contender_row(value: dict[str, Any], m: dict[str, Any], walls: list[float]
                   ) -> dict[str, Any]:
    """The median run's measurements and figures; its throughput is the steady lines over
    the seconds between their commits (the query's start and warm-up batch left out)."""
    spent = sum(value["commit_interval_seconds"])
    return {**m, **value, "wall_seconds_runs": walls,
            "events_per_second": round(value["lines_in"] / spent) if spent else None}


def _targets(morning: dict[str, Any], evening: dict[str, Any]) -> list[dict[str, Any]]:
    """Flat: a steady batch in the evening costs what one in the morning does (commit to
    commit, the whole cost of a batch), by the dedup state in both; the dashboard's read of
    the hour of windows it shows, with the day's deltas behind them, fits in the trigger a
    dashboard polling every batch would have."""
    flat = _ratio(evening["median_commit_interval_seconds"],
                  morning["median_commit_interval_seconds"])
    read = evening["dashboard_read_seconds"]
    trigger = LONG_DAY_FILES_PER_BATCH  # seconds: a file a second
    judged = [r["dedup_by"] for r in (morning, evening)]
    share = _ratio(sum(d.get("state", 0) for d in judged), sum(sum(d.values()) for d in judged))
    return [target("a batch late in the day costs what one in the morning does", flat,
                   "<= 1.15x", None if flat is None else flat <= 1.15),
            target("share of the steady batches that judge duplicates by the dedup state",
                   share, "1.0 (every one)", share == 1.0),
            target("the dashboard read of the open and recent windows in the evening (s)",
                   read, f"<= the trigger ({trigger} s)", read <= trigger)]


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)


def bench_long_day(spark: SparkSession, scale: Scale) -> dict[str, Any]:
    """The same batches of the real streaming query on the morning and the evening
    warehouse, in turns (each restored from its seeded checkpoint): a batch late in the day
    should cost what one in the morning does, and the dashboard read stay bounded."""
    feed = _feed(scale)
    work = scale.data_dir / "work-long-day"
    per_batch = LONG_DAY_FILES_PER_BATCH
    settings = base_settings(work / "wh", expected_partitions=feed.expected_partitions,
                             max_files_per_trigger=per_batch,
                             event_log_compact_every=0)  # no compaction inside the timing
    snapshots = {when: _seeded(spark, scale, settings, feed, work, when)
                 for when in ("morning", "evening")}
    runs = alternate(spark, {f"reckon_stream_{when}": partial(_run, spark, settings, feed, work,
                                                               snapshots[when])
                             for when in ("morning", "evening")}, ROUNDS, "long_day")
    results = {name: _contender_row(value, m, walls) for name, (value, m, walls) in runs.items()}
    morning, evening = results["reckon_stream_morning"], results["reckon_stream_evening"]
    built = json.loads((snapshots["evening"].parent
                        / f"{snapshots['evening'].name}.json").read_text())["built"]
    return {
        "scale": {"events_per_second_fed": feed.rate, "lines_per_batch": feed.rate * per_batch,
                  "timed_batches": feed.timed, "archived_rows": built["archived_hour_rows"],
                  "provisional_deltas_rows": built["provisional_windows"] * built["cells"]},
        "results": results,
        "ratios": {"batch_evening_vs_morning": _ratio(
                       evening["median_commit_interval_seconds"],
                       morning["median_commit_interval_seconds"]),
                   "batch_in_foreachbatch_evening_vs_morning": _ratio(
                       evening["median_batch_seconds"], morning["median_batch_seconds"]),
                   "dashboard_read_evening_vs_morning": _ratio(
                       evening["dashboard_read_seconds"], morning["dashboard_read_seconds"])},
        "targets": _targets(morning, evening),
        "profile": {"dashboard_read_seconds_evening": evening["dashboard_read_seconds"]},
        "settings": {"window": settings.window, "lateness": settings.watermark_bound,
                     "trigger": f"available-now, {per_batch} files ({per_batch} s) a trigger",
                     "query": "spark.stream.run_stream (the dedup state)", "rounds": ROUNDS,
                     "reference": "reckon_stream_morning",
                     "dashboard_span_seconds": DASHBOARD_SPAN_SECONDS,
                     "reported": "median run of each contender; per-batch medians within it",
                     "order_in_a_run": "restore the seeded warehouse and checkpoint, restart "
                     "the query: a warm-up batch, the timed batches; then the dashboard read"},
    }
