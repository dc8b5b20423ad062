"""A streamed day where one source is slow: bounds per source against the best single bound
(issue 41).

    python -m bench.per_source_day [--scenario flushing_link] [--compare-streams] [--out DIR]

Two named scenarios, each a deterministic day (its seed is part of it), three sources on two
partitions, every source on both:

* ``flushing_link`` (the day the claim is made on): ``sat`` is a buffered satellite link that
  sends what it holds, in order, whenever it gets a transmission slot (every 15-45 s,
  arriving 0.5 s later), so its lag climbs from about 0 to up to 45 s and drops again, and it
  is never silent for the idle timeout (60 s); ``http`` is a real-time feed whose deliveries
  are retried, up to 20 s late and out of order; ``radar`` arrives at once, in order.
* ``steady_lag`` (the day measured before, 2026-11-27): ``sat`` sends every 10 s and is always
  10-20 s behind, ``http`` has up to 3 s of jitter. There the slow source always holds the
  watermark back more than the jittery one needs, so the best single bound with inputs by
  source is 0 s and bounds per source cannot do better (the min rule already waits).

Why bounds per source win on ``flushing_link``: under the min rule the watermark is
``min_i(max_i - L_i)``. ``http`` needs a bound of ~15 s of its own, ``sat`` and ``radar`` none.
One bound for all subtracts those 15 s from ``sat`` too, whose watermark, right after each
flush, is what holds the global one; so every window waits for a flush and then 15 s more
(often the next flush). Bounds per source subtract it from ``http`` only: after a flush the
watermark climbs with ``http`` up to what the link delivered. A smaller single bound emits as
early but drops ``http``'s retried events in the seconds after a flush, when ``sat`` no longer
holds the watermark back. (A slow source that goes idle between bursts does not give this
day: an idle input cannot hold the watermark for events it has not sent, so the start of each
burst is late under every bound.)

The day is landing files of ``file_seconds`` of arrival each, streamed one file a micro-batch.
Every input delivers at the day's first instant, so the stream knows all six from its first
batch. What is measured:

1. pure, per micro-batch (``reckon.whatif_batches.batch_point_reference`` on the files as
   batches): every single bound of ``SWEEP``, by partition and by source, to find the best
   single bound (the earliest average emit that reaches the target) and the single bound that
   emits about as early as the bounds per source;
2. the bounds per source recommended by ``reckon lateness --per-source`` (per event, on the
   streamed day, the standard candidate ladder);
3. with ``--compare-streams``: the real stream (landing dir, ``reckon stream``'s code) run
   twice, with the bounds per source and with the best single bound (``STREAMED``), each
   into its own warehouse, and each one's completeness (counted pairs over counted and late,
   from ``watermark_progress``) and average emit latency (for each window of the day's
   events, the largest event time the stream had seen at the batch whose watermark first
   reached the window's end, minus the end; from ``watermark_progress`` and ``event_log``)
   computed from the tables that stream wrote; then the per-batch what-if of the report
   (``audits.lateness_batches.batch_points``) replays the per-source stream's recorded batches
   under every compared configuration and every single bound of the sweep. Streams and
   replays must equal the pure figures of step 1 exactly (``checks`` in the result).

Completeness and emit latency are event-time measures: they do not depend on the machine's
load. Wall and CPU seconds do, and the machine is shared. ``--record`` writes
bench/results/per_source_day.json (BENCHMARKS.md is generated from it: ``python -m bench
--report-only``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from reckon.config import PROJECT_ROOT, Settings
from reckon.eventtime import WatermarkPolicy, WindowSpec
from reckon.timeutil import format_duration, format_micros, parse_duration
from reckon.whatif import CurvePoint
from reckon.whatif_batches import BatchedEvent, batch_point_reference
from reckon.whatif_inputs import PerInputRecommendation

__all__ = ["SCENARIOS", "SWEEP", "Day", "Scenario", "best_single", "make_day", "pure_point",
           "streamed_figures", "write_day"]

S = 1_000_000
DAY = date(2026, 1, 1)
DAY_START = 1_767_225_600 * S  # 2026-01-01T00:00:00Z
SOURCES = ("radar", "sat", "http")
PARTITIONS = 2
WINDOW = "10s"
IDLE_TIMEOUT = "60s"
TARGET = "0.999"
#: the single bounds swept per micro-batch (pure), with inputs by partition and by source:
#: every second up to 20 s, then coarser, so that the best single bound is not held back
#: by a coarse step
SWEEP = (*range(0, 21), 25, 30, 40, 45, 50, 60)
#: the configurations streamed for real with ``--compare-streams`` (the others, and every
#: single bound of the sweep, are judged pure and replayed from the per-source stream's
#: recorded batches, which the streams show to be the same: a stream takes minutes a
#: configuration on a busy machine)
STREAMED = ("per_source", "best_single")


@dataclass(frozen=True)
class Day:
    """A generated day in arrival order: event and arrival times (microseconds), partition,
    source, and the landing file (= micro-batch) each event arrives in."""

    event_us: np.ndarray
    arrival_us: np.ndarray
    partition: np.ndarray
    source: np.ndarray
    batch: np.ndarray

    def __len__(self) -> int:
        return len(self.event_us)

    def batched(self) -> list[BatchedEvent]:
        return [BatchedEvent(int(t), int(a), int(p), int(b), source=str(s))
                for t, a, p, s, b in zip(self.event_us.tolist(), self.arrival_us.tolist(),
                                         self.partition.tolist(), self.source.tolist(),
                                         self.batch.tolist(), strict=True)]


@dataclass(frozen=True)
class Scenario:
    """A named day: ``minutes`` of event time from 01:00 at ``rate`` events a second over the
    three sources, landing files of ``file_seconds`` of arrival, and how each source's
    arrival follows its event time (``arrive``: rng, event times, source names, start ->
    arrival times)."""

    name: str
    about: str
    minutes: float
    rate: float
    file_seconds: int
    seed: int
    arrive: Callable[[np.random.Generator, np.ndarray, np.ndarray, int], np.ndarray]

    def scaled(self, minutes: float | None = None, rate: float | None = None) -> Scenario:
        return Scenario(self.name, self.about, minutes or self.minutes, rate or self.rate,
                        self.file_seconds, self.seed, self.arrive)


def _flushing_link(rng: np.random.Generator, t: np.ndarray, src: np.ndarray,
                   start: int) -> np.ndarray:
    """``sat`` flushes in order every 15-45 s (0.5 s in flight); ``http`` 0-20 s late
    (retries, out of order); ``radar`` under 0.1 s."""
    span = int(t.max() - start) + 1 if len(t) else 1
    gaps = rng.integers(15 * S, 45 * S, span // (15 * S) + 2)
    flushes = start + np.cumsum(gaps)
    sat = flushes[np.searchsorted(flushes, t, side="right")] + S // 2
    return np.where(src == "sat", sat, np.where(
        src == "http", t + rng.integers(0, 20 * S, len(t)), t + rng.integers(0, S // 10, len(t))))


def _steady_lag(rng: np.random.Generator, t: np.ndarray, src: np.ndarray,
                start: int) -> np.ndarray:
    """``sat`` sends what it holds every 10 s (5 s into each window), 10 s in flight; ``http``
    0-3 s late; ``radar`` at once (the day measured on 2026-11-27)."""
    due = ((t - start - 5 * S) // (10 * S) + 1) * 10 * S + 5 * S + start + 10 * S
    return np.where(src == "sat", due, t) + np.where(
        src == "http", rng.integers(0, 3 * S, len(t)), 0)


SCENARIOS = {
    "flushing_link": Scenario(
        "flushing_link", "sat: a buffered link flushing in order every 15-45 s (its lag "
        "0-45 s); http: retried deliveries up to 20 s late, out of order; radar: at once",
        minutes=8, rate=10, file_seconds=5, seed=41, arrive=_flushing_link),
    "steady_lag": Scenario(
        "steady_lag", "sat: sends every 10 s, 10 s in flight (always 10-20 s behind); http: "
        "up to 3 s of jitter; radar: at once", minutes=25, rate=4, file_seconds=30, seed=41,
        arrive=_steady_lag),
}


def make_day(scenario: Scenario) -> Day:
    """The scenario's day, in arrival order (ties: generation order). Every (partition,
    source) input delivers one event at 01:00:00 exactly, so a stream knows all of them from
    its first batch."""
    rng = np.random.default_rng(scenario.seed)
    start = DAY_START + 3600 * S
    n = int(scenario.minutes * 60 * scenario.rate)
    t = start + np.sort(rng.integers(0, int(scenario.minutes * 60 * S), n))
    src = rng.choice(np.array(SOURCES, dtype=object), n)
    part = rng.integers(0, PARTITIONS, n)
    a = scenario.arrive(rng, t, src, start)
    opening = [(p, s) for p in range(PARTITIONS) for s in SOURCES]
    t = np.concatenate([np.full(len(opening), start), t])
    a = np.concatenate([np.full(len(opening), start), a])
    part = np.concatenate([np.array([p for p, _ in opening]), part])
    src = np.concatenate([np.array([s for _, s in opening], dtype=object), src])
    # the order the stream and the what-if read it in: arrival, then partition, then the
    # line in its file (here: generation order)
    order = np.lexsort((np.arange(len(t)), part, a))
    t, a, part, src = t[order], a[order], part[order], src[order]
    return Day(t, a, part, src, (a - start) // (scenario.file_seconds * S))


def write_day(landing: Path, day: Day) -> int:
    """The day as landing files, one per micro-batch, named in arrival order; returns how
    many files."""
    landing.mkdir(parents=True, exist_ok=True)
    files: dict[int, list[str]] = {}
    for i, (t, a, p, s, b) in enumerate(zip(day.event_us.tolist(), day.arrival_us.tolist(),
                                            day.partition.tolist(), day.source.tolist(),
                                            day.batch.tolist(), strict=True)):
        files.setdefault(b, []).append(json.dumps(
            {"event_id": f"e{i}", "key": f"m{i % 7}", "amount": "1.00", "currency": "EUR",
             "event_time": format_micros(t), "source": s, "partition": p,
             "arrival_time": format_micros(a)}, separators=(",", ":")))
    for k, lines in sorted(files.items()):
        path = landing / f"events-{k:05d}.ndjson"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_800_000_000 + k, 1_800_000_000 + k))
    return len(files)


# --------------------------------------------------------------------------- configurations


def windows() -> WindowSpec:
    return WindowSpec.parse(WINDOW)


def single(bound: int, by_source: bool) -> WatermarkPolicy:
    return WatermarkPolicy(bound, parse_duration(IDLE_TIMEOUT, "idle_timeout"),
                           by_source=by_source)


def pure_point(day: Day, policy: WatermarkPolicy) -> CurvePoint:
    """The day's micro-batches judged by the book under ``policy``, from an empty state: what
    the stream does with it."""
    return batch_point_reference(day.batched(), windows(), policy)


def per_event_point(day: Day, policy: WatermarkPolicy) -> CurvePoint:
    """The day judged one event at a time under ``policy``, as a running stream: the
    per-event what-if that ``reckon lateness --per-source`` and the report show."""
    from reckon.whatif_inputs import judge_policy, running_state

    point, _ = judge_policy(day.event_us, day.arrival_us, day.partition, day.source,
                            windows(), policy, state=running_state(
                                day.event_us, day.arrival_us, day.partition, day.source,
                                policy.by_source))
    return point


def _reaches(point: CurvePoint, target: str) -> bool:
    total = point.admitted + point.dropped
    return total == 0 or Fraction(point.admitted, total) >= Fraction(target)


def best_single(points: dict[tuple[bool, int], CurvePoint], target: str
                ) -> tuple[bool, int] | None:
    """The single bound (inputs by source?, bound) that reaches ``target`` with the earliest
    average emit (ties: the smaller bound); None when none reaches it."""
    reaching = [k for k, pt in points.items() if _reaches(pt, target)]
    return min(reaching, key=lambda k: (points[k].avg_emit_latency or float("inf"), k[1]),
               default=None)


def as_early(points: dict[tuple[bool, int], CurvePoint], latency: float) -> tuple[bool, int]:
    """The most complete single bound that emits on average no later than ``latency`` (one
    that emits no window is not early)."""
    early = [k for k, pt in points.items()
             if pt.avg_emit_latency is not None and pt.avg_emit_latency <= latency]
    return max(early or list(points), key=lambda k: (
        points[k].admitted, -(points[k].avg_emit_latency or float("inf"))))


def sweep(day: Day) -> dict[tuple[bool, int], CurvePoint]:
    return {(by_source, b): pure_point(day, single(b * S, by_source))
            for by_source in (False, True) for b in SWEEP}


def settings_for(warehouse: Path, policy: WatermarkPolicy) -> Settings:
    """The stream's settings for ``policy`` (one file a micro-batch)."""
    from bench.harness import base_settings

    rules: dict[str, Any] = {"lateness": format_duration(policy.lateness)}
    if policy.by_source:
        rules["watermark_inputs"] = "source"
    if policy.source_bounds:
        rules["watermark_bound_by_source"] = ",".join(
            f"{name}={format_duration(b)}" for name, b in policy.source_bounds)
    return base_settings(warehouse, window=WINDOW, idle_timeout=IDLE_TIMEOUT,
                         max_files_per_trigger=1, shuffle_partitions=2, **rules)


def label(policy: WatermarkPolicy) -> str:
    if policy.source_bounds:
        return "bounds per source: " + ", ".join(
            f"{name} {format_duration(b)}" for name, b in policy.source_bounds)
    return (f"one bound {format_duration(policy.lateness)}, inputs by "
            + ("source" if policy.by_source else "partition"))


# --------------------------------------------------------------------------- the streams


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


def _seconds(value: float | None) -> str:
    return "no window emitted" if value is None else f"{value:.2f} s"


def _point_figures(point: CurvePoint) -> dict[str, Any]:
    return {"completeness": point.completeness, "late_pairs": point.dropped,
            "pairs": point.admitted + point.dropped,
            "avg_emit_latency_seconds": point.avg_emit_latency}


def _agrees(streamed: dict[str, Any], point: CurvePoint) -> bool:
    """The stream's own figures are the pure per-batch point's (latency to the microsecond)."""
    mine, theirs = streamed["avg_emit_latency_seconds"], point.avg_emit_latency
    return (streamed["late_pairs"] == point.dropped
            and streamed["pairs"] == point.admitted + point.dropped
            and (mine is None) == (theirs is None)
            and (mine is None or theirs is None or abs(mine - theirs) < 1e-6))


def recommend_on(spark: Any, warehouse: Path, policy: WatermarkPolicy
                 ) -> PerInputRecommendation:
    """``reckon lateness --per-source`` on a streamed day (per event, the standard candidate
    ladder plus the configured bound, the default target)."""
    from audits.lateness import analyze_inputs

    return analyze_inputs(spark, settings_for(warehouse, policy), DAY, target=TARGET)


# --------------------------------------------------------------------------- main


def run(scenario: Scenario, out: Path, compare_streams: bool) -> dict[str, Any]:
    """One scenario's day: the pure sweep, the recommendation and the configurations it is
    compared with; with ``compare_streams``, each streamed for real and checked against the
    pure figures (``_streamed_checks``)."""
    from bench.harness import log

    day = make_day(scenario)
    files = write_day(out / "landing", day)
    log(f"per_source_day {scenario.name}: {len(day):,} events in {files} files")
    points = sweep(day)
    rec = _recommend(day)
    per_source = rec.policy(parse_duration(IDLE_TIMEOUT, "idle_timeout"))
    compared = _compared(points, per_source, pure_point(day, per_source))
    pure = {name: pure_point(day, pol) for name, pol in compared.items()}
    per_event = {name: per_event_point(day, pol) for name, pol in compared.items()}
    result: dict[str, Any] = {
        "scenario": {"name": scenario.name, "about": scenario.about, "seed": scenario.seed,
                     "minutes": scenario.minutes, "rate": scenario.rate,
                     "file_seconds": scenario.file_seconds},
        "scale": {"events": len(day), "files": files},
        "recommendation": rec.to_json_dict(),
        "configurations": {name: {"label": label(pol), "policy": pol.describe(),
                                  "pure_per_batch": _point_figures(pure[name]),
                                  "pure_per_event": _point_figures(per_event[name])}
                           for name, pol in compared.items()},
        "sweep_per_batch": [{"inputs": "source" if k[0] else "partition", "bound_seconds": k[1],
                             **_point_figures(pt)} for k, pt in sorted(points.items())],
        "unit_sweep_per_batch": sweep_unit(day, rec),
    }
    for name, pol in compared.items():
        log(f"  pure per batch, {label(pol)}: {pure[name].completeness:.4%}, "
            f"{_seconds(pure[name].avg_emit_latency)}")
    if compare_streams:
        result["checks"] = _streamed_checks(out, compared, points, pure, rec,
                                            result["configurations"])
    return result


def _recommend(day: Day) -> PerInputRecommendation:
    """The recommendation, pure (per event, as a running stream): what `reckon lateness
    --per-source` says on the streamed day; checked against it when streaming."""
    from reckon.whatif import DEFAULT_BOUNDS, normalize_bounds
    from reckon.whatif_inputs import recommend_per_input

    return recommend_per_input(day.event_us, day.arrival_us, day.partition, day.source,
                               windows(), normalize_bounds(DEFAULT_BOUNDS), TARGET,
                               idle_timeout=parse_duration(IDLE_TIMEOUT, "idle_timeout"),
                               running=True)


def _compared(points: dict[tuple[bool, int], CurvePoint], per_source: WatermarkPolicy,
              ps_point: CurvePoint) -> dict[str, WatermarkPolicy]:
    """The per-source policy and the single bounds it is compared with: the best one, the
    one as early as per-source (if another) and the best by partition (if another)."""
    best = best_single(points, TARGET)
    by_partition = best_single({k: v for k, v in points.items() if not k[0]}, TARGET)
    early = as_early(points, ps_point.avg_emit_latency or 0.0)
    compared: dict[str, WatermarkPolicy] = {"per_source": per_source}
    if best is not None:
        compared["best_single"] = single(best[1] * S, best[0])
    if early != best:
        compared["single_as_early"] = single(early[1] * S, early[0])
    if by_partition is not None and by_partition != best:
        compared["best_single_by_partition"] = single(by_partition[1] * S, False)
    return compared


def _streamed_checks(out: Path, compared: dict[str, WatermarkPolicy],
                     points: dict[tuple[bool, int], CurvePoint], pure: dict[str, CurvePoint],
                     rec: PerInputRecommendation,
                     configurations: dict[str, dict[str, Any]]) -> dict[str, bool]:
    """Stream the STREAMED configurations for real, replay the per-source stream's recorded
    batches as the report does, add both to ``configurations`` and check every figure
    against the pure ones."""
    from audits.lateness_batches import batch_points
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
    replayed = batch_points(spark, settings_for(wh, per_source), DAY, compared)
    swept = batch_points(spark, settings_for(wh, per_source), DAY,
                         {f"{int(k[0])}:{k[1]}": single(k[1] * S, k[0]) for k in points})
    for name in compared:
        if name in streamed:
            configurations[name]["streamed"] = streamed[name]
        configurations[name]["replayed_per_batch"] = _point_figures(replayed[name])
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


def sweep_unit(day: Day, rec: PerInputRecommendation) -> list[dict[str, Any]]:
    """The recommended bounds per source with the largest one (the source that needs one)
    swept per micro-batch over ``SWEEP`` up to twice it, the others as recommended: what the
    recommendation, made per event, leaves on the table for a stream that moves its
    watermark per batch."""
    if not rec.by_source or not rec.bounds:
        return []
    idle = parse_duration(IDLE_TIMEOUT, "idle_timeout")
    top = max(rec.bounds, key=lambda b: b.bound)
    out = []
    for seconds in (b for b in SWEEP if b * S <= max(2 * top.bound, 5 * S)):
        policy = _policy_with(rec, idle, top.unit, seconds * S)
        out.append({"unit": top.unit, "bound_seconds": seconds, "label": label(policy),
                    **_point_figures(pure_point(day, policy))})
    return out


def _policy_with(rec: PerInputRecommendation, idle: int, unit: int | str, bound: int
                 ) -> WatermarkPolicy:
    bounds = {b.unit: b.bound for b in rec.bounds}
    bounds[unit] = bound
    return WatermarkPolicy(rec.per_input.bound, idle, by_source=True,
                           source_bounds=tuple((str(u), b) for u, b in bounds.items()))


def seed_sweep(scenario: Scenario, seeds: range) -> list[dict[str, Any]]:
    """The claim on other seeds of the same scenario, pure per micro-batch (what the streams
    would give: they equal it exactly): the recommended bounds per source against the best
    single bound of the sweep."""
    idle = parse_duration(IDLE_TIMEOUT, "idle_timeout")
    out = []
    for seed in seeds:
        day = make_day(replace(scenario, seed=seed))
        rec = _recommend(day)
        points = sweep(day)
        best = best_single(points, TARGET)
        ps = pure_point(day, rec.policy(idle))
        out.append({"seed": seed, "per_source": {"label": label(rec.policy(idle)),
                                                 **_point_figures(ps)},
                    "best_single": None if best is None else {
                        "label": label(single(best[1] * S, best[0])),
                        **_point_figures(points[best])}})
    return out


def _claim(result: dict[str, Any]) -> dict[str, Any]:
    """The issue's claim, on the streamed figures: bounds per source more complete (or as
    complete) and earlier than the best single bound."""
    conf = result["configurations"]
    ps, best = conf["per_source"]["streamed"], conf["best_single"]["streamed"]
    more = ps["completeness"] > best["completeness"]
    as_much = ps["completeness"] >= best["completeness"]
    earlier = ps["avg_emit_latency_seconds"] < best["avg_emit_latency_seconds"]
    return {"target": "bounds per source against the best single bound (streamed)",
            "goal": "higher completeness at lower average emit latency",
            "measured": f"{ps['completeness']:.4%} at {ps['avg_emit_latency_seconds']:.2f} s "
                        f"against {best['completeness']:.4%} at "
                        f"{best['avg_emit_latency_seconds']:.2f} s",
            "met": bool(more and earlier), "as_complete_and_earlier": bool(as_much and earlier)}


def main(argv: list[str] | None = None) -> int:
    from bench.harness import environment, load_average, log, write_result

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="flushing_link")
    parser.add_argument("--out", default="/tmp/reckon-per-source")
    parser.add_argument("--minutes", type=float, default=None,
                        help="a shorter (or longer) day of the same scenario")
    parser.add_argument("--compare-streams", action="store_true",
                        help="stream the day once per compared configuration (minutes each "
                             "on a busy machine)")
    parser.add_argument("--seeds", type=int, default=10,
                        help="also judge seeds 1..N of the scenario, pure per micro-batch")
    parser.add_argument("--record", action="store_true",
                        help="write bench/results/per_source_day.json (needs "
                             "--compare-streams)")
    args = parser.parse_args(argv)
    scenario = SCENARIOS[args.scenario].scaled(minutes=args.minutes)
    out = Path(args.out)
    if out.exists():
        import shutil

        shutil.rmtree(out)
    load_before, started, t0 = load_average(), datetime.now(UTC), time.perf_counter()
    result = run(scenario, out, args.compare_streams)
    others = {name: run(s, out / name, False) for name, s in SCENARIOS.items()
              if name != scenario.name}
    seeds = seed_sweep(scenario, range(1, args.seeds + 1))
    payload = {
        "workload": "per_source_day", "scale_factor": 1.0, "quick": False,
        "started_at": started.isoformat(), "total_seconds": round(time.perf_counter() - t0, 1),
        "load_average_before": load_before, "load_average_after": load_average(),
        "spark_master": "local[2]" if args.compare_streams else None,
        "shuffle_partitions": "2",
        "command": "python -m bench.per_source_day " + " ".join(
            sys.argv[1:] if argv is None else argv),
        "profile_env": False, **environment(),
        "settings": {"window": WINDOW, "idle_timeout": IDLE_TIMEOUT, "target": TARGET,
                     "sweep_seconds": list(SWEEP), "max_files_per_trigger": 1},
        **result, "other_scenarios_pure": {name: {k: r[k] for k in (
            "scenario", "scale", "recommendation", "configurations")}
            for name, r in others.items()},
        "other_seeds_pure_per_batch": seeds,
    }
    if args.compare_streams:
        payload["targets"] = [_claim(result)]
        payload["results"] = {name: c["streamed"] for name, c in
                              result["configurations"].items() if "streamed" in c}
    print(json.dumps(payload, indent=2, sort_keys=True, default=str))
    if args.record:
        if not args.compare_streams:
            parser.error("--record needs --compare-streams")
        path = write_result(PROJECT_ROOT / "bench" / "results", "per_source_day", payload)
        log(f"written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
