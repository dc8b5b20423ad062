"""The freshness workload: files land at a steady rate while the stream runs with a
processing-time trigger; per file, the seconds from landing to its batch committed to
provisional_totals (the on_batch callback fires after its deltas and the progress row are
committed).

One rate is run by ``_freshness_at`` in named steps: stage the feed and the warehouse
(``_prepare``), land the files on a clock (``_Feed``), watch the batches and stop the query
once every landed line went through one (``_BatchWatch``), then read which batch took each
file (``_file_batches``) and report the latencies (``_latency_row``).
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from app.generate import GeneratorConfig
from bench import datasets as ds
from bench.harness import Scale, base_settings, log, measure, target
from bench.steady import land
from reckon.config import Settings
from reckon.timeutil import parse_duration, parse_timestamp
from spark import tables as tb

__all__ = ["FRESHNESS_MAX_FILES", "bench_freshness"]

FRESHNESS_MAX_FILES = 1_000  # every landed file: see _freshness_at


def bench_freshness(spark: SparkSession, scale: Scale) -> dict[str, Any]:
    """Files land at a steady rate while the stream runs with a processing-time trigger; per
    file, landing -> its batch committed to provisional_totals (the on_batch callback fires
    after its deltas and the progress row are committed)."""
    trigger = scale.freshness_trigger
    seconds = scale.freshness_seconds
    per_rate: dict[str, Any] = {}
    targets = []
    for rate in scale.freshness_rates:
        log(f"freshness: {rate:,} events/s for {seconds:.0f}s, trigger {trigger}")
        row = _freshness_at(spark, scale, rate, seconds, trigger)
        per_rate[str(rate)] = row
        lat, bound = row["latency_seconds"], row["p95_bound_seconds"]
        met = None if not lat or bound is None else lat["p95"] <= bound
        targets.append(target(f"freshness p95 at {rate} ev/s", lat.get("p95"),
                              "<= trigger + 2 x the median batch duration", met))
        if rate == 1000 and lat:  # the goal users hold the stream to
            targets.append(target("freshness p95 at 1,000 ev/s (seconds)", lat.get("p95"),
                                  "<= 5 s", lat["p95"] <= 5))
    return {
        "scale": {"seconds_per_rate": seconds, "rates_events_per_second":
                  scale.freshness_rates, "trigger": trigger},
        "results": per_rate, "ratios": {}, "targets": targets,
        "profile": {"note": "latency = wait for the next trigger + the batch itself; "
                    "see median_batch_seconds per rate"},
        "settings": {"trigger": trigger, "max_files_per_trigger": FRESHNESS_MAX_FILES,
                     "warm_start": True, "archived_hour_before_the_feed": True},
    }


@dataclass(frozen=True)
class _Prepared:
    """One rate's staged feed (generated once, reused), its work folder and its warehouse."""

    staged: Path
    manifest: dict[str, Any]
    work: Path
    settings: Settings
    archived_rows: int


def _prepare(spark: SparkSession, scale: Scale, rate: int, seconds: float) -> _Prepared:
    """Stage a file a second for ``seconds`` (plus the warm-up file) and clone a warehouse
    holding the archived hour before the feed (``Scale.freshness_archived_rows``)."""
    files_n = int(seconds) + 1  # the first one warms the query up
    staged = scale.data_dir / f"fresh-staged-{rate}-{files_n}"
    feed_cfg = GeneratorConfig(events=rate * files_n, lines_per_file=rate, rate=float(rate),
                               seed=23)
    manifest = ds.ensure_landing(staged, feed_cfg)
    work = ds.fresh_folder(scale.data_dir / f"work-fresh-{rate}")
    archived_rows = scale.freshness_archived_rows(rate)
    archive = scale.data_dir / f"fresh-archived-hour-{archived_rows}"
    ds.build_archived_hour(spark, archive, archived_rows, parse_timestamp(feed_cfg.start))
    ds.clone_warehouse(archive, work / "wh")
    settings = base_settings(work / "wh",
                             expected_partitions=tuple(manifest["expected_partitions"]),
                             max_files_per_trigger=FRESHNESS_MAX_FILES)
    return _Prepared(staged=staged, manifest=manifest, work=work, settings=settings,
                     archived_rows=archived_rows)


@dataclass
class _Feed:
    """Lands the staged files in the landing dir on a clock, on its own thread: the warm-up
    file first, then, once its batch has committed (``warm``), one file a second until the
    last or ``stop``. ``landed`` holds each landed file's wall-clock time."""

    staged: Path
    landing: Path
    warm_file: str
    timed_files: list[str]
    landed: dict[str, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    warm: threading.Event = field(default_factory=threading.Event)

    def land(self, name: str) -> None:
        land(self.staged, [name], self.landing)  # whole at once: the source never sees half
        self.landed[name] = time.time()

    def run(self) -> None:
        time.sleep(2.0)  # let the query start first
        self.land(self.warm_file)
        if not self.warm.wait(1800):  # a new checkpoint seeds its dedup state first
            return
        t0 = time.time()
        for i, name in enumerate(self.timed_files):
            wait = t0 + i - time.time()
            if wait > 0 and self.stop.wait(wait):
                return
            self.land(name)


@dataclass
class _BatchWatch:
    """The stream's on_batch callback: when each batch committed and how long the timed ones
    took; stops the query once the feed is done and every landed line went through a
    committed batch (the drain)."""

    spark: SparkSession
    feed: _Feed
    feeder: threading.Thread
    lines: dict[str, int]
    done: dict[int, float] = field(default_factory=dict)
    durations: list[float] = field(default_factory=list)
    rows_seen: int = 0

    def __call__(self, m: Any) -> None:
        self.done[m.batch_id] = time.time()
        if not self.feed.warm.is_set():
            if m.rows_in:
                self.feed.warm.set()  # the warm-up file's batch: not one of the timed ones
            return
        self.durations.append(m.duration_seconds)
        self.rows_seen += m.rows_in
        if not self.feeder.is_alive() and self.rows_seen >= self._timed_lines():
            self._stop_query()  # drained: every landed line went through a committed batch

    def _timed_lines(self) -> int:
        """Lines of the timed files landed so far (read once the feeder has ended: it no
        longer adds to ``landed``)."""
        return sum(self.lines[f] for f in self.feed.landed if f != self.feed.warm_file)

    def _stop_query(self) -> None:
        def _stop() -> None:
            for q in self.spark.streams.active:
                if q.name and q.name.startswith("reckon-stream"):
                    q.stop()
        threading.Thread(target=_stop, name="bench-stop", daemon=True).start()


def _file_batches(spark: SparkSession, settings: Settings) -> dict[str, int]:
    """The first batch that took each landed file, from the event_log (a row per file:
    small)."""
    return {r["f"].rsplit("/", 1)[-1]: int(r["b"]) for r in
            tb.read_table(spark, settings.warehouse_path, tb.EVENT_LOG)
            .groupBy(F.col("input_file").alias("f")).agg(F.min("batch_id").alias("b"))
            .collect()}


def _latency_row(feed: _Feed, watch: _BatchWatch, file_batch: dict[str, int],
                 trigger_s: float) -> dict[str, Any]:
    """Per timed file, landing -> its batch committed; the warm-up file's as the cold start."""
    landed, done, durations, warm_file = feed.landed, watch.done, watch.durations, feed.warm_file
    cold = (done[file_batch[warm_file]] - landed[warm_file]
            if warm_file in landed and file_batch.get(warm_file) in done else None)
    latencies = sorted(done[file_batch[f]] - t for f, t in landed.items()
                       if f != warm_file and f in file_batch and file_batch[f] in done)
    timed_landed = len(landed) - (warm_file in landed)
    median_batch = statistics.median(durations) if durations else None
    return {
        "files_landed": timed_landed, "files_visible": len(latencies),
        "files_not_visible_at_stop": timed_landed - len(latencies),
        "latency_seconds": _percentiles(latencies), "batches": len(durations),
        "cold_start_seconds": None if cold is None else round(cold, 2),
        "median_batch_seconds": None if median_batch is None else round(median_batch, 2),
        "max_batch_seconds": round(max(durations), 2) if durations else None,
        "p95_bound_seconds": None if median_batch is None
        else round(trigger_s + 2 * median_batch, 2)}


def _freshness_at(spark: SparkSession, scale: Scale, rate: int, seconds: float,
                  trigger: str) -> dict[str, Any]:
    """Steady-state latency: the first staged file is landed alone and the paced feed starts
    only once its batch has committed, so the query's start-up (JIT, first snapshots, the
    restore of its marks) is reported as ``cold_start_seconds``, not queued into every later
    file's latency. A batch takes every file that has landed (``FRESHNESS_MAX_FILES``), as a
    latency-oriented deployment would, so a slow batch is caught up by the next one. The
    warehouse starts with an hour of archived events at the feed's rate
    (``Scale.freshness_archived_rows``): every batch's de-duplication reads the horizon a
    stream that has been running for an hour reads."""
    from spark.sources import StreamSource
    from spark.stream import run_stream as reckon_stream

    trigger_s = parse_duration(trigger) / 1e6
    prep = _prepare(spark, scale, rate, seconds)
    warm_file, *timed_files = prep.manifest["files"]
    feed = _Feed(staged=prep.staged, landing=ds.fresh_folder(prep.work / "landing"),
                 warm_file=warm_file, timed_files=timed_files)
    feeder = threading.Thread(target=feed.run, name="bench-feeder", daemon=True)
    lines = {name: (prep.staged / name).read_bytes().count(b"\n")
             for name in prep.manifest["files"]}
    watch = _BatchWatch(spark=spark, feed=feed, feeder=feeder, lines=lines)
    feeder.start()
    drain = 6 * trigger_s + 300  # safety net only: the query stops once drained
    _, mem = measure(spark, lambda: reckon_stream(
        spark, prep.settings, StreamSource(landing=str(feed.landing)), available_now=False,
        trigger=trigger, on_batch=watch, timeout_seconds=seconds + 2 + drain + 600))
    feed.stop.set()
    feed.warm.set()
    feeder.join()
    file_batch = _file_batches(spark, prep.settings)
    return {
        "events_per_second_fed": rate, "archived_rows_before_the_feed": prep.archived_rows,
        "event_log_rows_at_end": tb.read_table(spark, prep.settings.warehouse_path,
                                               tb.EVENT_LOG).count(),
        **_latency_row(feed, watch, file_batch, trigger_s), **mem}


def _percentiles(values: list[float]) -> dict[str, float]:
    """p50, p95, p99, max and mean of sorted ``values`` (empty: none).

    >>> _percentiles([1.0, 2.0, 3.0])["p50"]
    2.0
    """
    if not values:
        return {}

    def at(q: float) -> float:
        return round(values[min(len(values) - 1, round(q * (len(values) - 1)))], 3)

    return {"p50": at(0.50), "p95": at(0.95), "p99": at(0.99), "max": round(values[-1], 3),
            "mean": round(statistics.fmean(values), 3)}
