"""The stream workload: reckon's aggregator against Spark's own withWatermark +
groupBy(window, key, currency) appended to Delta (and against that query plus the raw archive
a nightly replay needs), same landing dir and reader, same maxFilesPerTrigger, available-now;
then both again at larger triggers (the sweep).

``native_stream`` and ``native_with_archive`` are public: the stream redesign's spike
(bench/spike_append.py) runs the same native contenders.
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from app.generate import GeneratorConfig
from bench import datasets as ds
from bench.harness import (
    MAX_FILES_PER_TRIGGER,
    ROUNDS,
    Scale,
    alternate,
    base_settings,
    log,
    measure,
    target,
)
from reckon.config import Settings
from reckon.eventtime import WindowSpec
from reckon.schema import TOTAL_IDENTITY
from reckon.timeutil import parse_duration
from spark import tables as tb

__all__ = ["STREAM_SWEEP_FILES", "bench_stream", "native_stream", "native_with_archive",
           "run_ours_alone", "sweep_sizes"]

#: Larger triggers, run after the main pair: how throughput moves with the batch size, for
#: both contenders at the same size each time (files per trigger; sizes above the landing
#: dir's file count are one point, the whole dir in one batch).
STREAM_SWEEP_FILES = (50, 1_000)


def native_stream(spark: SparkSession, source: Any, settings: Settings, native_path: str,
                  checkpoint: str, *, dedup: bool = False) -> dict[str, Any]:
    """Spark native: the same landing source, the parse a Spark user would write (one
    from_json with casts, unparseable rows dropped), Spark's own watermark and state store,
    appending closed windows per (window, key, currency), reckon's grain, to Delta. Our
    validation (quarantine with reasons, strict JSON, ISO 4217 codes and minor units) is part
    of what ours pays for. ``dedup`` adds Spark's own de-duplication by event_id
    (``dropDuplicatesWithinWatermark``, a state entry per event, as the contract's dedup
    horizon needs) ahead of the aggregation.

    Example: ``native_stream(spark, StreamSource(landing=d), settings, out, ckpt)["batches"]``.
    """
    raw = source.read(spark, settings.trigger_limits())
    j = F.from_json("payload", "event_id string, key string, amount string, "
                               "currency string, event_time string, source string")
    valid = (raw.select(j.alias("j"))
             .select(F.col("j.event_id").alias("event_id"), F.col("j.key").alias("key"),
                     F.col("j.currency").alias("currency"),
                     F.col("j.amount").try_cast(tb.AMOUNT).alias("amount"),
                     F.col("j.event_time").try_cast("timestamp").alias("event_time"))
             .filter(F.col("key").isNotNull() & F.col("currency").isNotNull()
                     & F.col("amount").isNotNull() & F.col("event_time").isNotNull()))
    watermarked = valid.withWatermark("event_time", f"{parse_duration(settings.watermark_bound) // 1000}"
                                                    " milliseconds")
    if dedup:
        watermarked = watermarked.dropDuplicatesWithinWatermark(["event_id"])
    agg = (watermarked
           .groupBy(F.window("event_time", f"{settings.event_time_rules().windows.size // 1000}"
                                           " milliseconds"), *TOTAL_IDENTITY)
           .agg(F.sum(F.col("amount").cast(tb.TOTAL)).alias("total_amount"),
                F.count(F.lit(1)).alias("event_count"))
           .select(F.col("window.start").alias("window_start"),
                   F.col("window.end").alias("window_end"), *TOTAL_IDENTITY, "total_amount",
                   "event_count"))
    q = (agg.writeStream.format("delta").outputMode("append")
         .option("checkpointLocation", checkpoint).trigger(availableNow=True)
         .queryName("bench-native").start(native_path))
    q.awaitTermination()
    progress = q.recentProgress
    return {"batches": len([p for p in progress if p.get("numInputRows", 0) > 0]),
            "watermark": (progress[-1].get("eventTime") or {}).get("watermark")
            if progress else None,
            "dropped_by_watermark_metric": sum(
                op.get("numRowsDroppedByWatermark", 0)
                for p in progress for op in p.get("stateOperators", []))}


def native_with_archive(spark: SparkSession, source: Any, settings: Settings,
                        folder: Path, *, dedup: bool = False) -> dict[str, Any]:
    """What a native user must run to have a nightly replay at all: the native windowed
    aggregation (native_stream, ``dedup`` as there) and, beside it on the same source, an
    append of every raw line to Delta: two queries started together, done when both are.
    Returns the native query's figures."""
    raw = source.read(spark, settings.trigger_limits())
    archive = (raw.writeStream.format("delta").outputMode("append")
               .option("checkpointLocation", str(folder / "_archive_checkpoint"))
               .trigger(availableNow=True).queryName("bench-native-archive")
               .start(str(folder / "archive")))
    info: dict[str, Any] = {}

    def native() -> None:
        info.update(native_stream(spark, source, settings, str(folder / "native"),
                                  str(folder / "_native_checkpoint"), dedup=dedup))

    done = threading.Thread(target=native)
    done.start()
    archive.awaitTermination()
    done.join()
    return info


def sweep_sizes(files: int) -> list[int]:
    """The distinct files-per-trigger sizes of the sweep for a landing dir of ``files``.

    >>> sweep_sizes(202), sweep_sizes(20)
    ([50, 202], [20])
    """
    return sorted({min(size, files) for size in STREAM_SWEEP_FILES})


def _trigger_sweep(spark: SparkSession, source: Any, manifest: dict[str, Any],
                   work: Path) -> list[dict[str, Any]]:
    """Ours and Spark's native query again, each pair at one larger trigger size."""
    from spark.stream import run_stream as reckon_stream

    points = []
    for files in sweep_sizes(len(manifest["files"])):
        per = files * manifest["lines"] // len(manifest["files"])
        where = ds.fresh_folder(work / f"sweep-{files}")
        settings = base_settings(where / "wh-reckon", max_files_per_trigger=files,
                                 expected_partitions=tuple(manifest["expected_partitions"]))
        late: list[int] = []

        def ours_run(s: Settings = settings, kept: list[int] = late) -> Any:
            return reckon_stream(spark, s, source, available_now=True,
                                 on_batch=lambda m: kept.append(m.late))
        log(f"stream: trigger sweep, {files} files (~{per:,} lines) a trigger: reckon")
        _, ours = measure(spark, ours_run)
        log(f"stream: trigger sweep, {files} files a trigger: Spark native")
        _, theirs = measure(spark, partial(
            native_stream, spark, source, settings, str(where / "native_totals"),
            str(where / "_checkpoints" / "native")))
        points.append({
            "files_per_trigger": files, "lines_per_trigger": per, "batches": len(late),
            "reckon_events_per_second": round(manifest["lines"] / ours["wall_seconds"]),
            "native_events_per_second": round(manifest["lines"] / theirs["wall_seconds"]),
            "ratio": round(theirs["wall_seconds"] / ours["wall_seconds"], 3),
            "reckon_late_events_kept": sum(late),
            "reckon_cpu_seconds_jvm": ours["cpu_seconds_jvm"],
            "native_cpu_seconds_jvm": theirs["cpu_seconds_jvm"]})
        shutil.rmtree(where, ignore_errors=True)
    return points


@dataclass(frozen=True)
class _StreamInputs:
    """The landing dir both contenders read, its manifest, and ours's warehouse."""

    events: int
    lines_per_file: int
    landing: Path
    manifest: dict[str, Any]
    work: Path
    settings: Settings
    source: Any

    @property
    def lines(self) -> int:
        return int(self.manifest["lines"])


def _stream_inputs(scale: Scale) -> _StreamInputs:
    """Generate (or reuse) the landing dir: ~20 triggers at any scale."""
    from spark.sources import StreamSource

    n = scale.stream_events
    lines_per_file = max(200, n // (20 * MAX_FILES_PER_TRIGGER))
    landing = scale.data_dir / f"landing-{n}"
    manifest = ds.ensure_landing(landing, GeneratorConfig(events=n, lines_per_file=lines_per_file,
                                                          seed=11))
    work = ds.fresh_folder(scale.data_dir / "work-stream")
    settings = _ours_settings(manifest, work / "wh-reckon")
    return _StreamInputs(events=n, lines_per_file=lines_per_file, landing=landing,
                         manifest=manifest, work=work, settings=settings,
                         source=StreamSource(landing=str(landing)))


def _ours_settings(manifest: dict[str, Any], warehouse: Path) -> Settings:
    """Our contender's settings: the bench's, in ``warehouse``, expecting the landing dir's
    partitions."""
    return base_settings(warehouse, expected_partitions=tuple(manifest["expected_partitions"]))


def _warm_up_parse(spark: SparkSession, inputs: _StreamInputs) -> None:
    """Parse one file, untimed (JIT, class loading), so neither contender pays it alone."""
    from spark.parse import parse_events

    first = spark.read.text(str(inputs.landing / inputs.manifest["files"][0]))
    parse_events(first.select(F.col("value").alias("payload"),
                              F.lit(None).cast("int").alias("transport_partition"),
                              F.lit(0).cast("long").alias("offset"),
                              F.current_timestamp().alias("transport_time"),
                              F.lit("warmup").alias("input_file")),
                 inputs.settings.parse_config()).count()


def _run_ours(spark: SparkSession, inputs: _StreamInputs) -> tuple[list[Any], dict[str, Any]]:
    """reckon's stream, available-now: every batch's metrics and the run's measurements."""
    from spark.stream import run_stream as reckon_stream

    batches: list[Any] = []
    log(f"stream: reckon aggregator over {inputs.lines:,} lines "
        f"({len(inputs.manifest['files'])} files, {MAX_FILES_PER_TRIGGER} per trigger)")

    def on_batch(m: Any) -> None:
        batches.append(m)
        log(f"stream:   batch {m.batch_id}: {m.rows_in:,} rows, {m.late:,} late, "
            f"{m.duration_seconds:.1f}s")

    _, ours = measure(spark, lambda: reckon_stream(
        spark, inputs.settings, inputs.source, available_now=True, on_batch=on_batch))
    return batches, ours


def _native_losses(spark: SparkSession, settings: Settings, native_path: str) -> tuple[int, int]:
    """What Spark's query dropped and what it still held when the input ran out: valid
    deliveries in windows it has emitted, minus what its emitted windows count (it counts
    duplicates, so deliveries not unique events); and valid deliveries in windows it has not
    emitted. Spark's windows are tumbling, of the stream's window width."""
    out = spark.read.format("delta").load(native_path)
    emitted = out.agg(F.sum("event_count").alias("n"), F.max("window_end").alias("hi")).first()
    assert emitted is not None  # an aggregate without groupBy has exactly one row
    counted, cutoff = int(emitted["n"] or 0), emitted["hi"]
    log_df = tb.read_table(spark, settings.warehouse_path, tb.EVENT_LOG)
    eligible = 0
    if cutoff is not None:
        spark_windows = WindowSpec(settings.event_time_rules().windows.size)
        (start,) = spark_windows.window_starts(F.unix_micros("event_time"))
        eligible = log_df.filter(start + F.lit(spark_windows.size)
                                 <= F.unix_micros(F.lit(cutoff))).count()
    return eligible - counted, log_df.count() - eligible


def _stream_profile(batches: list[Any], ours: dict[str, Any],
                    sweep: list[dict[str, Any]]) -> dict[str, Any]:
    """Where ours spent its time: per step summed over batches, inside and outside them."""
    steps: dict[str, float] = {}
    for b in batches:
        for k, v in b.step_seconds.items():
            steps[k] = steps.get(k, 0.0) + v
    batch_total = sum(b.duration_seconds for b in batches)
    return {
        "reckon_step_seconds_total": dict(sorted(((k, round(v, 2)) for k, v in steps.items()),
                                                 key=lambda kv: -kv[1])),
        "reckon_batch_seconds_total": round(batch_total, 2),
        "reckon_outside_batches_seconds": round(ours["wall_seconds"] - batch_total, 2),
        "reckon_median_batch_seconds": round(statistics.median(
            [b.duration_seconds for b in batches]), 2) if batches else None,
        "trigger_sweep": sweep,
        "reckon_batches": [{"batch_id": b.batch_id, "rows_in": b.rows_in,
                            "seconds": round(b.duration_seconds, 2),
                            "steps": {k: round(v, 2) for k, v in b.step_seconds.items()}}
                           for b in batches],
    }


def _stream_scale(inputs: _StreamInputs) -> dict[str, Any]:
    manifest = inputs.manifest
    return {"events": inputs.events, "lines": inputs.lines, "files": len(manifest["files"]),
            "lines_per_file": inputs.lines_per_file,
            "max_files_per_trigger": MAX_FILES_PER_TRIGGER,
            "valid_events": manifest["valid_events"], "duplicates": manifest["duplicates"],
            "quarantined": manifest["future_dated"] + sum(manifest["malformed"].values())}


def _contenders(spark: SparkSession, inputs: _StreamInputs, outputs: dict[str, list[Any]]
                ) -> dict[str, Callable[[], tuple[Any, dict[str, Any]]]]:
    """Each contender as one measured run in its own fresh folder (a run's checkpoint would
    otherwise leave the next one nothing to read); ``outputs`` keeps each run's folder or
    batches, in order."""
    settings, source = inputs.settings, inputs.source
    runs = iter(range(1_000_000))

    def folder(name: str) -> Path:
        where = ds.fresh_folder(inputs.work / "runs" / f"{name}-{next(runs)}")
        outputs.setdefault(name, []).append(where)
        return where

    def ours() -> tuple[Any, dict[str, Any]]:
        where = folder("reckon")
        return _run_ours(spark, dataclasses.replace(
            inputs, settings=_ours_settings(inputs.manifest, where / "wh-reckon")))

    def native() -> tuple[Any, dict[str, Any]]:
        where = folder("native")
        return measure(spark, partial(native_stream, spark, source, settings,
                                      str(where / "native_totals"), str(where / "_checkpoint")))

    def archived(dedup: bool) -> Callable[[], tuple[Any, dict[str, Any]]]:
        name = "native_dedup_archive" if dedup else "native_archive"
        return lambda: measure(spark, lambda: native_with_archive(
            spark, source, settings, folder(name), dedup=dedup))

    return {"reckon_stream": ours, "spark_native_watermark": native,
            "spark_native_plus_archive": archived(False),
            "spark_native_dedup_plus_archive": archived(True)}


def bench_stream(spark: SparkSession, scale: Scale) -> dict[str, Any]:
    """Our aggregator vs Spark's withWatermark + groupBy(window, key, currency) append to
    Delta, same landing dir and reader, same maxFilesPerTrigger, available-now; with a raw
    archive beside it, and with Spark's own dedup too. In turns after an untimed round
    (harness.alternate): whoever ran first in a cold JVM paid its class loading and JIT
    alone (ours took 75 s first and 48-51 s after, in one process)."""
    inputs = _stream_inputs(scale)
    settings, source, work = inputs.settings, inputs.source, inputs.work
    _warm_up_parse(spark, inputs)
    outputs: dict[str, list[Any]] = {}
    runs = alternate(spark, _contenders(spark, inputs, outputs), ROUNDS, "stream")
    batches, ours, _ = runs["reckon_stream"]
    native_info, theirs, _ = runs["spark_native_watermark"]
    _, archived, _ = runs["spark_native_plus_archive"]
    _, deduped, _ = runs["spark_native_dedup_plus_archive"]
    walls = {name: run[2] for name, run in runs.items()}
    # the native output and our event log of the last run of each (every run reads the
    # same landing dir, so any run's losses are the same)
    native_path = str(outputs["native"][-1] / "native_totals")
    settings = _ours_settings(inputs.manifest, outputs["reckon"][-1] / "wh-reckon")
    native_dropped, pending = _native_losses(spark, settings, native_path)
    sweep = _trigger_sweep(spark, source, inputs.manifest, work)
    eps = {name: inputs.lines / m["wall_seconds"]
           for name, m in (("ours", ours), ("theirs", theirs), ("archived", archived),
                           ("deduped", deduped))}
    ratio, ratio_archived = eps["ours"] / eps["theirs"], eps["ours"] / eps["archived"]
    results = {
        "reckon_stream": {**ours, "events_per_second": round(eps["ours"]),
                          "wall_seconds_runs": walls["reckon_stream"],
                          "batches": len(batches),
                          "late_events_kept": sum(b.late for b in batches)},
        "spark_native_watermark": {
            **theirs, "events_per_second": round(eps["theirs"]),
            "wall_seconds_runs": walls["spark_native_watermark"],
            "batches": native_info["batches"], "late_events_kept": 0,
            "late_events_dropped": native_dropped, "events_left_in_state_unemitted": pending,
            "numRowsDroppedByWatermark_metric": native_info["dropped_by_watermark_metric"],
            "final_watermark": native_info["watermark"]},
        "spark_native_plus_archive": {**archived, "events_per_second": round(eps["archived"]),
                                      "wall_seconds_runs": walls["spark_native_plus_archive"],
                                      "late_events_kept": 0},
        "spark_native_dedup_plus_archive": {**deduped, "events_per_second": round(eps["deduped"]),
                                            "wall_seconds_runs": walls[
                                                "spark_native_dedup_plus_archive"],
                                            "late_events_kept": 0},
    }
    targets = [target("stream throughput vs Spark native", round(ratio, 3),
                      ">= 0.8x while keeping every late event",
                      ratio >= 0.8 and native_dropped >= 0),
               target("stream throughput vs Spark native + raw archive",
                      round(ratio_archived, 3), ">= 1.0x", ratio_archived >= 1.0)]
    return {
        "scale": _stream_scale(inputs), "results": results,
        "ratios": {"reckon_vs_native_throughput": round(ratio, 3),
                   "reckon_vs_native_plus_archive_throughput": round(ratio_archived, 3),
                   # what Spark's own operators reach doing the contract's dedup and archive
                   "native_dedup_archive_vs_native_throughput": round(
                       eps["deduped"] / eps["theirs"], 3)},
        "targets": targets, "profile": _stream_profile(batches, ours, sweep),
        "settings": {"window": settings.window, "lateness": settings.watermark_bound,
                     "grace": settings.allowed_lateness, "shuffle_partitions": settings.shuffle_partitions,
                     "trigger": "availableNow"},
    }


def run_ours_alone(spark: SparkSession, scale: Scale) -> tuple[int, dict[str, Any]]:
    """reckon's contender alone, as bench_stream runs it (inputs, warm-up, run): what
    ``bench.profile_stream`` records. Returns the batch count and the run's measurements."""
    inputs = _stream_inputs(scale)
    _warm_up_parse(spark, inputs)
    batches, ours = _run_ours(spark, inputs)
    return len(batches), ours
