"""Spike for the stream redesign (issue 38): what a batch costs when it only appends.

Not production code and not a table contract. It measures, side by side in one run on the
same landing dir and the same foreachBatch source, three contenders:

* ``current``: reckon's BatchProcessor as it is at the commit run (at the recorded result,
  five commits and a MERGE into provisional_totals; since, appends only);
* ``append``: the same parse, validation, de-duplication and classification, then only
  appends: every valid row with its disposition, the quarantine, the late rows, the batch's
  per-(window, key, currency) deltas, and the progress row; no MERGE, no status rewrite;
* ``native``: Spark's withWatermark + groupBy(window, key, currency) appended to Delta.

At two trigger sizes: 1 file (10K lines, the fixed cost of a steady batch) and 10 files
(100K lines). Afterwards it times the dashboard read on the append layout: current totals
of the open and recent windows folded from the deltas.

    .venv/bin/python -m bench.spike_append [--events 300000] [--breakdown]

``--breakdown`` times the one-commit batch at 1 file a trigger with parts removed (the
archive read; every write, to a no-op sink) and adds it to the recorded result.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from app.generate import GeneratorConfig
from bench import datasets as ds
from bench.harness import base_settings, log
from bench.stream_bench import native_stream, native_with_archive
from reckon.config import Settings
from reckon.eventtime import (
    Disposition,
    PartitionObservation,
    WatermarkState,
    advance_watermark,
    is_duplicate_of_recent,
)
from reckon.schema import TOTAL_IDENTITY
from spark import tables as tb
from spark.concurrent_writes import ConcurrentWrites
from spark.parse import parse_events
from spark.rules import arrival_order, disposition_col, window_starts_col
from spark.sources import RAW_COLUMNS, StreamSource
from spark.stream import run_stream
from storage import commits

_EVENT_COLUMNS = ("event_id", "key", "amount", "currency", "event_time", "source",
                  "partition", "offset", "arrival_time", "input_file")
_COUNTED = (Disposition.ON_TIME.value, Disposition.REVISION.value)


class AppendOnlyBatch:
    """The append-only batch: one cached parse, one small summary job, then four appends
    in parallel and the progress row."""

    def __init__(self, spark: SparkSession, settings: Settings, folder: Path) -> None:
        self.spark, self.settings, self.folder = spark, settings, folder
        self.rules = settings.event_time_rules()
        self.state = WatermarkState.from_json(None)
        self.app_id = "spike"
        self.seconds: list[tuple[int, float, dict[str, float]]] = []
        self.events_version: int | None = None  # the archive the next batch de-duplicates by

    def _append(self, df: DataFrame, name: str, batch_id: int) -> None:
        (df.write.format("delta").mode("append").option("mergeSchema", "true")
         .option("userMetadata", commits.batch_mark(self.app_id, name, batch_id, {}))
         .save(str(self.folder / name)))

    def _parse_and_summarise(self, raw: DataFrame) -> tuple[DataFrame, list[Any], list[Any],
                                                             WatermarkState]:
        """The cached parse, its one summary job (per partition and validity: counts, maxima,
        earliest arrival), the valid rows' summaries and the watermark state after them."""
        parsed = (parse_events(raw.select(*RAW_COLUMNS), self.settings.parse_config())
                  .withColumn("event_us", F.unix_micros("event_time"))
                  .withColumn("arrival_us", F.unix_micros("arrival_time"))
                  .persist(StorageLevel.MEMORY_AND_DISK))
        summary = (parsed.groupBy("partition", F.col("reason").isNull().alias("ok"))
                   .agg(F.count(F.lit(1)).alias("n"), F.max("event_us").alias("max_event"),
                        F.max("arrival_us").alias("max_arrival"),
                        F.min("arrival_us").alias("min_arrival")).collect())
        valid_rows = [r for r in summary if r.ok]
        after = advance_watermark(self.state, [
            PartitionObservation(r.partition, r.max_event, r.max_arrival, r.min_arrival)
            for r in valid_rows], self.rules.watermark)
        return parsed, summary, valid_rows, after

    def __call__(self, raw: DataFrame, batch_id: int) -> None:
        started, steps = time.monotonic(), {}
        wm_before = self.state.watermark
        t = time.monotonic()
        parsed, summary, valid_rows, after = self._parse_and_summarise(raw)
        steps["parse+summary"] = time.monotonic() - t
        writes = ConcurrentWrites()
        t = time.monotonic()
        classified = None
        if len(valid_rows) < len(summary):
            bad = parsed.filter(F.col("reason").isNotNull()).select(
                "reason", "detail", "payload", "partition", "offset", "input_file",
                F.lit(batch_id).alias("batch_id"))
            writes.start("quarantine", self._append, bad, "quarantine", batch_id)
        if valid_rows:
            classified = self._classified(parsed, valid_rows, wm_before)
            events = classified.select(*_EVENT_COLUMNS, "payload", "disposition",
                                       F.timestamp_micros("ws_us").alias("window_start"),
                                       F.lit(batch_id).alias("batch_id"),
                                       F.to_date("event_time").alias("event_date"))
            writes.start("events", self._append, events, "events", batch_id)
            if wm_before is not None:
                late = classified.filter(F.col("disposition") == Disposition.LATE.value)
                writes.start("late", self._append,
                             late.select(*_EVENT_COLUMNS, F.timestamp_micros("ws_us")
                                         .alias("window_start"),
                                         F.lit(batch_id).alias("batch_id")),
                             "late", batch_id)
            deltas = (classified.filter(F.col("disposition").isin(*_COUNTED))
                      .groupBy("ws_us", *TOTAL_IDENTITY)
                      .agg(F.sum(F.col("amount").cast(tb.TOTAL)).alias("total_amount"),
                           F.count(F.lit(1)).alias("event_count"))
                      .select(F.timestamp_micros("ws_us").alias("window_start"),
                              *TOTAL_IDENTITY, "total_amount", "event_count",
                              F.lit(batch_id).alias("batch_id"),
                              F.to_date(F.timestamp_micros("ws_us")).alias("window_date")))
            writes.start("deltas", self._append, deltas, "deltas", batch_id)
        writes.wait()
        writes.raise_first_error()
        steps["appends"] = time.monotonic() - t
        t = time.monotonic()
        progress = self.spark.createDataFrame(
            [(batch_id, after.watermark, after.to_json())],
            "batch_id long, watermark long, state_json string")
        self._append(progress, "progress", batch_id)
        steps["progress"] = time.monotonic() - t
        if classified is not None:
            classified.unpersist()
        parsed.unpersist()
        self.state = after
        self.events_version = commits.current_version(self.folder, "events")
        self.seconds.append((batch_id, time.monotonic() - started, steps))

    def _classified(self, parsed: DataFrame, valid_rows: list[Any],
                    wm_before: int | None) -> DataFrame:
        """BatchProcessor._deduplicate and _classify's logic (the same spark.rules columns),
        against the spike's own archive table, so the spike measures the same work."""
        rules = self.rules
        valid = parsed.filter(F.col("reason").isNull()).drop("reason", "detail")
        min_arrival = min(r.min_arrival for r in valid_rows)
        if self.events_version is None:
            prior = self.spark.createDataFrame([], "event_id string, prior_arrival long")
        else:
            prior = (self.spark.read.format("delta").option("versionAsOf", self.events_version)
                     .load(str(self.folder / "events"))
                     .filter(F.col("arrival_time") >= F.timestamp_micros(
                         F.lit(min_arrival - rules.dedup_horizon)))
                     .join(valid.select("event_id"), "event_id", "left_semi")
                     .groupBy("event_id")
                     .agg(F.max(F.unix_micros("arrival_time")).alias("prior_arrival")))
        order = Window.partitionBy("event_id").orderBy(*arrival_order("arrival_us")).rowsBetween(
            Window.unboundedPreceding, -1)
        latest = F.greatest(F.col("prior_arrival"), F.max("arrival_us").over(order))
        dup = F.coalesce(is_duplicate_of_recent(latest, F.col("arrival_us"),
                                                rules.dedup_horizon), F.lit(False))
        starts = F.when(F.col("is_duplicate"), F.array(F.lit(None).cast("long"))).otherwise(
            window_starts_col(F.col("event_us"), rules.windows))
        exploded = (valid.join(prior, "event_id", "left").withColumn("is_duplicate", dup)
                    .withColumn("ws_us", F.explode(starts))
                    .withColumn("we_us", F.col("ws_us") + F.lit(rules.windows.size)))
        disposition = F.when(F.col("is_duplicate"), F.lit(Disposition.DUPLICATE.value)) \
            .otherwise(disposition_col(F.col("we_us"), wm_before, rules.allowed_lateness))
        return exploded.withColumn("disposition", disposition).persist(
            StorageLevel.MEMORY_AND_DISK)


class OneCommitBatch(AppendOnlyBatch):
    """The same rows as AppendOnlyBatch, written as one append to one table (``events``,
    with a ``kind`` column: event, quarantine, delta, progress): one Delta commit a batch.
    Late rows are the events whose disposition is late (the side output becomes a view)."""

    def __call__(self, raw: DataFrame, batch_id: int) -> None:
        started, steps = time.monotonic(), {}
        wm_before = self.state.watermark
        t = time.monotonic()
        parsed, summary, valid_rows, after = self._parse_and_summarise(raw)
        steps["parse+summary"] = time.monotonic() - t
        t = time.monotonic()
        parts = [self.spark.createDataFrame(
            [("progress", batch_id, after.watermark, after.to_json())],
            "kind string, batch_id long, watermark long, state_json string")]
        if len(valid_rows) < len(summary):
            parts.append(parsed.filter(F.col("reason").isNotNull()).select(
                F.lit("quarantine").alias("kind"), "reason", "detail", "payload", "partition",
                "offset", "input_file", F.lit(batch_id).alias("batch_id")))
        classified = None
        if valid_rows:
            classified = self._classified(parsed, valid_rows, wm_before)
            parts.append(classified.select(
                F.lit("event").alias("kind"), *_EVENT_COLUMNS, "payload", "disposition",
                F.timestamp_micros("ws_us").alias("window_start"),
                F.lit(batch_id).alias("batch_id"),
                F.to_date("event_time").alias("event_date")))
            parts.append(classified.filter(F.col("disposition").isin(*_COUNTED))
                         .groupBy("ws_us", *TOTAL_IDENTITY)
                         .agg(F.sum(F.col("amount").cast(tb.TOTAL)).alias("total_amount"),
                              F.count(F.lit(1)).alias("event_count"))
                         .select(F.lit("delta").alias("kind"),
                                 F.timestamp_micros("ws_us").alias("window_start"),
                                 *TOTAL_IDENTITY, "total_amount", "event_count",
                                 F.lit(batch_id).alias("batch_id")))
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part, allowMissingColumns=True)
        self._append(union, "events", batch_id)
        steps["appends"] = time.monotonic() - t
        if classified is not None:
            classified.unpersist()
        parsed.unpersist()
        self.state = after
        self.events_version = commits.current_version(self.folder, "events")
        self.seconds.append((batch_id, time.monotonic() - started, steps))


class OneCommitNoDedup(OneCommitBatch):
    """Breakdown only: the one-commit batch without the archive read (no de-duplication
    against earlier batches)."""

    def _classified(self, parsed: DataFrame, valid_rows: list[Any],
                    wm_before: int | None) -> DataFrame:
        saved, self.events_version = self.events_version, None
        try:
            return super()._classified(parsed, valid_rows, wm_before)
        finally:
            self.events_version = saved


class ComputeOnly(OneCommitBatch):
    """Breakdown only: the same plans run to a no-op sink (no Delta write, so no archive to
    read either): what the batch costs before any IO."""

    def _append(self, df: DataFrame, name: str, batch_id: int) -> None:
        df.write.format("noop").mode("overwrite").save()


def breakdown(spark: SparkSession, landing: Path, data: Path) -> dict[str, Any]:
    """Median steady 10K-line batch of the one-commit design with parts removed."""
    out: dict[str, Any] = {}
    for label, kind in (("warm_up", OneCommitBatch), ("one_commit", OneCommitBatch),
                        ("without_archive_read", OneCommitNoDedup),
                        ("compute_only_noop_sink", ComputeOnly)):
        work = ds.fresh_folder(data / "work-breakdown")
        settings = base_settings(work / "wh", max_files_per_trigger=1)
        batch = _run_append(spark, settings, StreamSource(landing=str(landing)), work / "x",
                            kind)
        kept = batch.seconds[2:]
        out[label] = {
            "median_batch_seconds": round(statistics.median(x for _b, x, _st in kept), 3),
            "median_parse_summary_seconds": round(statistics.median(
                st["parse+summary"] for _b, _x, st in kept), 3)}
        log(f"spike breakdown: {label}: {out[label]}")
    return out


def _run_append(spark: SparkSession, settings: Settings, source: StreamSource,
                folder: Path, kind: type[AppendOnlyBatch] = AppendOnlyBatch) -> AppendOnlyBatch:
    batch = kind(spark, settings, folder)
    raw = source.read(spark, settings.trigger_limits())
    query = (raw.writeStream.foreachBatch(batch).trigger(availableNow=True)
             .option("checkpointLocation", str(folder / "_checkpoint")).start())
    query.awaitTermination()
    return batch


def _dashboard_read(spark: SparkSession, folder: Path, table: str, horizon_windows: int,
                    window_us: int) -> dict[str, Any]:
    """Current totals of the open and recent windows: the deltas folded on read, status from
    the last recorded watermark (a progress row per batch)."""
    t = time.monotonic()
    one = table == "events"
    progress = spark.read.format("delta").load(str(folder / ("events" if one else "progress")))
    if one:
        progress = progress.filter(F.col("kind") == "progress")
    wm = progress.orderBy(F.col("batch_id").desc()).select("watermark").first()
    assert wm is not None
    since = int(wm.watermark) - horizon_windows * window_us
    deltas = spark.read.format("delta").load(str(folder / table))
    if one:
        deltas = deltas.filter(F.col("kind") == "delta")
    rows = (deltas.filter(F.col("window_start") >= F.timestamp_micros(F.lit(since)))
            .groupBy("window_start", *TOTAL_IDENTITY)
            .agg(F.sum("total_amount").alias("total_amount"),
                 F.sum("event_count").alias("event_count"))
            .withColumn("status", F.when(F.unix_micros("window_start") + F.lit(window_us)
                                         <= F.lit(int(wm.watermark)), "CLOSED")
                        .otherwise("OPEN"))
            .count())
    return {"seconds": round(time.monotonic() - t, 2), "rows": rows,
            "delta_rows": deltas.count()}


def _timed(fn: Any) -> tuple[Any, float]:
    t = time.monotonic()
    out = fn()
    return out, time.monotonic() - t


def main() -> None:
    from spark.session import get_spark

    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--data", default="bench/data")
    parser.add_argument("--breakdown", action="store_true",
                        help="only the breakdown of the one-commit batch (1 file a trigger)")
    args = parser.parse_args()
    data = Path(args.data).resolve()
    landing = data / f"spike-landing-{args.events}"
    manifest = ds.ensure_landing(landing, GeneratorConfig(events=args.events,
                                                          lines_per_file=10_000, seed=11))
    spark = get_spark(base_settings(data / "_session"), app_name="reckon-spike")
    results: dict[str, Any] = {"lines": manifest["lines"], "files": len(manifest["files"])}
    out = Path("bench/results/spike_append.json")
    if args.breakdown:
        recorded = json.loads(out.read_text()) if out.exists() else results
        recorded["breakdown_10k_lines"] = breakdown(spark, landing, data)
        out.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
        return
    source = StreamSource(landing=str(landing))
    parts = tuple(manifest["expected_partitions"])
    warm = data / "spike-landing-warmup"
    ds.ensure_landing(warm, GeneratorConfig(events=30_000, lines_per_file=10_000, seed=12))
    for files in (0, 1, 10):  # round 0: every contender once on 3 files (JIT, class loading)
        if files == 0:
            work = ds.fresh_folder(data / "work-spike")
            settings = base_settings(work / "wh", max_files_per_trigger=1)
            _run_append(spark, settings, StreamSource(landing=str(warm)), work / "append")
            _run_append(spark, settings, StreamSource(landing=str(warm)), work / "one_commit",
                        OneCommitBatch)
            run_stream(spark, settings, StreamSource(landing=str(warm)), available_now=True)
            native_stream(spark, StreamSource(landing=str(warm)), settings,
                          str(work / "native"), str(work / "_native_checkpoint"))
            continue
        work = ds.fresh_folder(data / "work-spike")
        settings = base_settings(work / "wh", max_files_per_trigger=files,
                                 expected_partitions=parts)
        walls: dict[str, float] = {}
        steady: dict[str, float | None] = {}
        steps: dict[str, dict[str, float]] = {}
        for name, kind in (("append", AppendOnlyBatch), ("one_commit", OneCommitBatch)):
            log(f"spike: {files} file(s) a trigger: {name}")
            batch, walls[name] = _timed(lambda s=settings, w=work, k=kind, n=name: _run_append(
                spark, s, source, w / n, k))
            kept = batch.seconds[2:]
            steady[name] = round(statistics.median(x for _b, x, _st in kept), 3) if kept else None
            steps[name] = {k: round(statistics.median(st.get(k, 0.0) for _b, _x, st in kept), 3)
                           for k in ("parse+summary", "appends", "progress")} if kept else {}
        log(f"spike: {files} file(s) a trigger: current BatchProcessor")
        current: list[Any] = []
        _, walls["current"] = _timed(lambda s=settings, c=current: run_stream(
            spark, s, source, available_now=True, on_batch=c.append))
        steady["current"] = (round(statistics.median(
            m.duration_seconds for m in current[2:]), 3) if current[2:] else None)
        log(f"spike: {files} file(s) a trigger: Spark native")
        _, walls["native"] = _timed(lambda s=settings, w=work: native_stream(
            spark, source, s, str(w / "native"), str(w / "_native_checkpoint")))
        log(f"spike: {files} file(s) a trigger: Spark native + raw archive")
        _, walls["native_archive"] = _timed(lambda s=settings, w=work: native_with_archive(
            spark, source, s, w / "native_archive"))
        size = settings.event_time_rules().windows.size
        results[f"{files}_files"] = {
            "lines_per_trigger": files * 10_000, "batches": len(current),
            "wall_seconds": {k: round(v, 2) for k, v in walls.items()},
            "events_per_second": {k: round(manifest["lines"] / v) for k, v in walls.items()},
            "ratio_vs_native": {k: round(walls["native"] / v, 3) for k, v in walls.items()
                                if k != "native"},
            "ratio_vs_native_archive": {k: round(walls["native_archive"] / v, 3)
                                        for k, v in walls.items() if k != "native_archive"},
            "median_steady_batch_seconds": steady,
            "step_medians": steps,
            "dashboard_read": {
                "append": _dashboard_read(spark, work / "append", "deltas", 12, size),
                "one_commit": _dashboard_read(spark, work / "one_commit", "events", 12, size)},
        }
        log(json.dumps(results[f"{files}_files"]))
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    log(f"spike: written {out}")


if __name__ == "__main__":
    main()
