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
2. the bounds per source recommended by ``reckon bound-whatif --per-source`` (per event, on the
   streamed day, the standard candidate ladder);
3. with ``--compare-streams``: the real stream (landing dir, ``reckon stream``'s code) run
   twice, with the bounds per source and with the best single bound (``STREAMED``), each
   into its own warehouse, and each one's completeness (counted pairs over counted and late,
   from ``watermark_progress``) and average emit latency (for each window of the day's
   events, the largest event time the stream had seen at the batch whose watermark first
   reached the window's end, minus the end; from ``watermark_progress`` and ``event_log``)
   computed from the tables that stream wrote; then the per-batch what-if of the report
   (``audits.bound_whatif_batches.batch_points``) replays the per-source stream's recorded batches
   under every compared configuration and every single bound of the sweep. Streams and
   replays must equal the pure figures of step 1 exactly (``checks`` in the result).

Where each part lives: the days (``bench/per_source_scenarios.py``), the configurations and
their pure figures (``bench/per_source_points.py``), the real streams and their checks
(``bench/per_source_streams.py``); this module runs them and writes the result.

Completeness and emit latency are event-time measures: they do not depend on the machine's
load. Wall and CPU seconds do, and the machine is shared. ``--record`` writes
bench/results/per_source_day.json (BENCHMARKS.md is generated from it: ``python -m bench
--report-only``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.per_source_points import (
    SWEEP,
    as_early,
    best_single,
    label,
    per_event_point,
    point_figures,
    pure_point,
    single,
    sweep,
    windows,
)
from bench.per_source_scenarios import (
    IDLE_TIMEOUT,
    SCENARIOS,
    TARGET,
    WINDOW,
    Day,
    S,
    Scenario,
    make_day,
    write_day,
)
from bench.per_source_streams import streamed_checks
from reckon.config import PROJECT_ROOT
from reckon.eventtime import WatermarkPolicy
from reckon.timeutil import parse_duration
from reckon.whatif import CurvePoint
from reckon.whatif_inputs import PerInputRecommendation

__all__ = ["run", "seed_sweep", "sweep_unit"]


def _seconds(value: float | None) -> str:
    return "no window emitted" if value is None else f"{value:.2f} s"


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
                                  "pure_per_batch": point_figures(pure[name]),
                                  "pure_per_event": point_figures(per_event[name])}
                           for name, pol in compared.items()},
        "sweep_per_batch": [{"inputs": "source" if k[0] else "partition", "bound_seconds": k[1],
                             **point_figures(pt)} for k, pt in sorted(points.items())],
        "unit_sweep_per_batch": sweep_unit(day, rec),
    }
    for name, pol in compared.items():
        log(f"  pure per batch, {label(pol)}: {pure[name].completeness:.4%}, "
            f"{_seconds(pure[name].avg_emit_latency)}")
    if compare_streams:
        result["checks"] = streamed_checks(out, compared, points, pure, rec,
                                            result["configurations"])
    return result


def _recommend(day: Day) -> PerInputRecommendation:
    """The recommendation, pure (per event, as a running stream): what `reckon bound-whatif
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
                    **point_figures(pure_point(day, policy))})
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
                                                 **point_figures(ps)},
                    "best_single": None if best is None else {
                        "label": label(single(best[1] * S, best[0])),
                        **point_figures(points[best])}})
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
