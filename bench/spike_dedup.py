"""Spike for the stream redesign (issue 38): de-duplication in the state store against the
archive read, at the steady state of a stream that has run for a whole horizon.

Not production code. Both contenders judge the same micro-batches of ``--batch`` rows, after
``--horizon-rows`` earlier arrivals (the dedup horizon's worth: 3.6M at 1,000 events/s and an
hour), by the same rule (reckon.eventtime.is_duplicate_of_recent), and count the duplicates:

* ``archive``: the stream's archive path (spark.dedup.judge_by_archive): read the horizon of
  event_log, semi-join it with the batch's ids, the latest earlier arrival per id, and a window
  over the batch's own copies;
* ``state``: the stream's dedup state (spark.dedup.judged_stream), a transformWithState processor
  on RocksDB, inside a real streaming query over the same rows as Parquet files, one a trigger.

    .venv/bin/python -m bench.spike_dedup [--horizon-rows 3600000] [--batch 10000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.harness import base_settings, load_average, log
from reckon.eventtime import EventTimeRules
from spark import tables as tb
from spark.dedup import STATE_BUCKETS, judge_by_archive, judged_stream
from spark.session import get_spark
from storage import commits

HORIZON_US = 3_600 * 1_000_000
_SCHEMA = "event_id string, arrival_us long, partition int, input_file string, offset long"


def _rows(spark: SparkSession, first: int, n: int, start_us: int, span_us: int,
          copies_of: int | None, name: str) -> DataFrame:
    """``n`` arrivals numbered from ``first``, spread over ``span_us`` from ``start_us``; one in
    a hundred a copy of an id below ``copies_of`` (an earlier arrival), when given."""
    i = F.col("id")
    own = F.concat(F.lit("ev-"), F.lpad(i.cast("string"), 12, "0"))
    if copies_of:
        copied = F.concat(F.lit("ev-"), F.lpad((F.abs(F.xxhash64(i)) % copies_of)
                                               .cast("string"), 12, "0"))
        own = F.when(i % 100 == 0, copied).otherwise(own)
    return (spark.range(first, first + n, numPartitions=2)
            .select(own.alias("event_id"),
                    (F.lit(start_us) + (i - first) * F.lit(max(1, span_us // n)))
                    .alias("arrival_us"),
                    (i % 4).cast("int").alias("partition"), F.lit(name).alias("input_file"),
                    i.alias("offset")))


def _archive_dedup(spark: SparkSession, work: Path, batch: DataFrame, min_arrival: int) -> int:
    """The stream's own archive path (spark.dedup.judge_by_archive) on the spike's event_log."""
    version = commits.current_version(work, tb.EVENT_LOG)
    assert version is not None
    flagged = judge_by_archive(spark, work, batch, event_log_version=version,
                               min_arrival=min_arrival, horizon=HORIZON_US)
    return int(flagged.filter("is_duplicate").count())


def _batches(spark: SparkSession, horizon_rows: int, batch: int, count: int,
             t0: int) -> list[DataFrame]:
    return [_rows(spark, horizon_rows + k * batch, batch, t0 + k * 1_000_000, 1_000_000,
                  horizon_rows + k * batch, f"batch-{k}") for k in range(count)]


def run_archive(spark: SparkSession, work: Path, horizon_rows: int, batch: int,
                count: int) -> dict[str, Any]:
    log_path = str(work / tb.EVENT_LOG)
    t0 = HORIZON_US  # the horizon's arrivals span [0, t0)
    (_rows(spark, 0, horizon_rows, 0, HORIZON_US, None, "warm")
     .withColumn("arrival_time", F.timestamp_micros("arrival_us"))
     .write.format("delta").mode("overwrite").save(log_path))
    seconds, dups = [], []
    for k, df in enumerate(_batches(spark, horizon_rows, batch, count, t0)):
        df = df.cache()
        df.count()
        started = time.monotonic()
        dups.append(_archive_dedup(spark, work, df, t0 + k * 1_000_000))
        seconds.append(time.monotonic() - started)
        (df.withColumn("arrival_time", F.timestamp_micros("arrival_us"))
         .write.format("delta").mode("append").save(log_path))
        df.unpersist()
    return {"batch_seconds": seconds, "duplicates": dups}


def run_state(spark: SparkSession, work: Path, horizon_rows: int, batch: int,
              count: int) -> dict[str, Any]:
    source, staged = work / "source", work / "staged"
    t0 = HORIZON_US
    frames = [_rows(spark, 0, horizon_rows, 0, HORIZON_US, None, "warm")]
    frames += _batches(spark, horizon_rows, batch, count, t0)
    for k, df in enumerate(frames):
        df.coalesce(1).write.mode("overwrite").parquet(str(staged / f"{k:04d}"))
    source.mkdir(parents=True)
    stream = (spark.readStream.schema(_SCHEMA).option("maxFilesPerTrigger", 1)
              .parquet(str(source)).withColumn("reason", F.lit(None).cast("string")))
    seed = spark.createDataFrame([], "event_id string, latest_us long")  # a new checkpoint
    flagged = judged_stream(spark, stream, EventTimeRules.parse(
        window="1m", dedup_horizon="1h"), seed, STATE_BUCKETS)
    seen: dict[int, tuple[float, int]] = {}

    def each(df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        n = df.filter("is_duplicate").count()
        seen[batch_id] = (time.monotonic() - started, n)

    query = (flagged.writeStream.foreachBatch(each)
             .option("checkpointLocation", str(work / "checkpoint")).start())
    for k in range(len(frames)):  # one file at a time, each its own trigger
        part = next((staged / f"{k:04d}").glob("*.parquet"))
        shutil.copy(part, source / f"{k:04d}.parquet")
        while k not in seen:
            if query.exception() is not None or not query.isActive:
                raise RuntimeError(f"the query stopped: {query.exception()}")
            time.sleep(0.05)
    last = max(seen)
    deadline = time.monotonic() + 60
    while (not any(p["batchId"] == last for p in query.recentProgress)
           and time.monotonic() < deadline):
        time.sleep(0.1)  # a batch's progress is reported just after foreachBatch returns
    progress = query.recentProgress
    query.stop()
    durations = {p["batchId"]: p["durationMs"] for p in progress}
    timed = [b for b in sorted(seen) if b > 0]
    return {"batch_seconds": [durations[b]["triggerExecution"] / 1000 for b in timed],
            "add_batch_seconds": [durations[b].get("addBatch", 0) / 1000 for b in timed],
            "foreach_count_seconds": [seen[b][0] for b in timed],
            "duplicates": [seen[b][1] for b in timed],
            "warm_batch_seconds": durations[0]["triggerExecution"] / 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--horizon-rows", type=int, default=3_600_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--work", default="/tmp/reckon-spike-dedup")
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    spark = get_spark(base_settings(work / "wh"), "spike-dedup")
    result: dict[str, Any] = {"horizon_rows": args.horizon_rows, "batch": args.batch,
                              "load_average_before": load_average()}
    for name, run in (("state", run_state), ("archive", run_archive)):
        log(f"spike dedup: {name}")
        out = run(spark, work / name, args.horizon_rows, args.batch, args.batches)
        out["median_batch_seconds"] = statistics.median(out["batch_seconds"][1:])
        result[name] = out
        log(f"  {name}: median {out['median_batch_seconds']:.2f}s, "
            f"duplicates {out['duplicates']}")
    result["load_average_after"] = load_average()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
