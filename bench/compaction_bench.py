"""The compaction workload: the replay of a day as the stream lays it out (many small
event_log files), the nightly compaction of that day, and the replay once compacted, in turns
(harness.alternate; each round starts from a fresh copy of the layout)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench import datasets as ds
from bench.harness import ROUNDS, Scale, alternate, base_settings, log, measure
from bench.replay_bench import run_replay, warm_up_replay
from spark import tables as tb

__all__ = ["STREAM_FILE_ROWS", "bench_compaction"]

#: Rows per event_log file in the stream-like layout: a stream fed 1,000 events/s with a 5 s
#: trigger and 4 shuffle partitions commits ~1,250 rows a file (a 1M-event day: 800 files).
STREAM_FILE_ROWS = 1_250


def _stream_layout(spark: SparkSession, scale: Scale, events: int) -> Path:
    """The bench day's event_log laid out as the stream writes it: files of STREAM_FILE_ROWS
    rows, each a contiguous slice of arrival time. Built once per size, then reused."""
    source = ds.day_warehouse(spark, scale.data_dir, events)
    files = max(2, events // STREAM_FILE_ROWS)
    target = scale.data_dir / f"layout-{events}-{files}"
    marker = target / "_bench_built.json"
    if not marker.is_file():
        log(f"compaction: laying out {events:,} events in {files:,} files as a stream would")
        ds.fresh_folder(target)
        tb.ensure_table(spark, target, tb.EVENT_LOG)
        (tb.read_table(spark, source.warehouse_path, tb.EVENT_LOG)
         .repartitionByRange(files, "arrival_time").write.format("delta").mode("append")
         .save(tb.table_path(target, tb.EVENT_LOG)))
        # the replay's own tables exist in every copy, so both timed replays replace a day
        # rather than one of them creating the tables
        run_replay(spark, base_settings(target))
        marker.write_text(json.dumps({"events": events, "files": files}))
    return target


def _cold(spark: SparkSession, fn: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """Each nightly task is a fresh process that reads every table's log from storage: the
    process's cached Delta logs are dropped (untimed), or whoever runs after the writes of
    another would find the tables' state in memory."""
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
    return measure(spark, fn)


def bench_compaction(spark: SparkSession, scale: Scale) -> dict[str, Any]:
    """The replay of a day as the stream lays it out, the nightly compaction of that day, and
    the replay once compacted, in turns (each round starts from a fresh copy of the layout)."""
    from spark.compaction import compact_day

    n = scale.n(1_000_000, floor=20_000)
    warm_up_replay(spark, scale)
    layout = _stream_layout(spark, scale, n)
    work = scale.data_dir / "work-compaction"
    settings = base_settings(work)
    compactions: list[Any] = []

    def replay_small_files() -> tuple[Any, dict[str, Any]]:
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(layout, work)  # untimed: every round starts from the stream's layout
        return _cold(spark, lambda: run_replay(spark, settings))

    def compact() -> tuple[Any, dict[str, Any]]:
        config = settings.compaction_config()
        value, m = _cold(spark, lambda: compact_day(spark, config, ds.BENCH_DAY))
        compactions.append(value)
        return value, m

    runs = alternate(spark, {
        "reckon_replay_small_files": replay_small_files,
        "reckon_compact_day": compact,
        "reckon_replay_compacted": lambda: _cold(spark, lambda: run_replay(spark, settings)),
    }, ROUNDS, "compaction")
    contenders = {name: {**m, "events_per_second": round(n / m["wall_seconds"]),
                         "wall_seconds_runs": walls}
                  for name, (_, m, walls) in runs.items()}
    wall = {name: m["wall_seconds"] for name, (_, m, _w) in runs.items()}
    log_part = next(p for p in compactions[-1].partitions if p.table == tb.EVENT_LOG)
    return {
        "scale": {"events": n, "event_log_files": log_part.files_before,
                  "rows_per_file": STREAM_FILE_ROWS},
        "results": contenders,
        "ratios": {
            "small_files_vs_compacted_replay": round(
                wall["reckon_replay_small_files"] / wall["reckon_replay_compacted"], 3),
            "compaction_plus_compacted_replay_vs_small_files_replay": round(
                (wall["reckon_compact_day"] + wall["reckon_replay_compacted"])
                / wall["reckon_replay_small_files"], 3)},
        "targets": [],
        "profile": {"compaction": compactions[-1].to_dict()},
        "settings": {"window": settings.window, "shuffle_partitions": settings.shuffle_partitions,
                     "rounds": ROUNDS, "reported": "median run of each contender",
                     "reference": "reckon_replay_small_files",
                     "order_in_a_round": "replay on a fresh copy of the stream layout, "
                     "compaction, replay of the compacted day"},
    }
