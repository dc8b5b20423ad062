"""The scale-curve workload: replay_day and audit_day(record=False) of the bench day at three
sizes (1M, 5M and 20M events at full scale), locally and, for the driver's memory, on a
one-worker standalone cluster (bench/driver_memory.py in its own process): both should grow
no faster than the data, the driver's memory not at all.

In named steps: one size measured (``_curve_point``), the cluster's driver
(``_driver_memory_on_cluster``), the growths from the smallest size to the largest
(``_Growth``) and the targets on them (``_curve_targets``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench import datasets as ds
from bench.audit_bench import run_audit, warm_up_audit
from bench.harness import Scale, log, measure, target
from bench.replay_bench import run_replay

__all__ = ["bench_scale_curve"]


def _curve_point(spark: SparkSession, scale: Scale, n: int) -> dict[str, Any]:
    """replay_day, then audit_day(record=False), of the ``n``-event day, each measured."""
    settings = ds.day_warehouse(spark, scale.data_dir, n)
    log(f"scale: replay_day at {n:,} events")
    rr, rep = measure(spark, partial(run_replay, spark, settings))
    ds.build_audit_inputs(spark, settings)
    log(f"scale: audit_day(record=False) at {n:,} events")
    ar, aud = measure(spark, partial(run_audit, spark, settings, False))
    return {"events": n, "canonical_rows": rr.windows, "audit_rows": ar.rows,
            "replay": rep, "audit": aud,
            "replay_us_per_event": round(rep["wall_seconds"] / n * 1e6, 3),
            "audit_us_per_row": round(aud["wall_seconds"] / ar.rows * 1e6, 3)}


def _driver_memory_on_cluster(warehouses: list[Path]) -> dict[str, Any]:
    """bench/driver_memory.py in its own process, against a one-worker standalone cluster on
    loopback (tests/spark_cluster.py): the driver's memory without the executors' in it."""
    from bench.driver_memory import EXECUTOR_MEMORY
    from reckon.config import PROJECT_ROOT
    from tests.spark_cluster import spark_cluster

    worker_memory = f"{int(EXECUTOR_MEMORY.removesuffix('g')) + 1}g"
    merged: dict[str, Any] = {}
    with spark_cluster(workers=1, cores=2, memory=worker_memory) as cluster:
        log(f"scale: driver memory on a standalone cluster ({cluster.master_url})")
        # One driver process per day: what a driver holds after a run would otherwise also
        # count the jobs of the days before it (Spark's status store keeps finished jobs,
        # stages and tasks up to its retention limits).
        for warehouse in warehouses:
            done = subprocess.run(
                [sys.executable, "-m", "bench.driver_memory", "--master", cluster.master_url,
                 str(warehouse)], cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True,
                timeout=3600, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"bench.driver_memory exited {done.returncode}; cluster "
                                   f"logs:\n{cluster.logs()}")
            point = json.loads(done.stdout.strip().splitlines()[-1])
            merged = {**point, "results": {**merged.get("results", {}), **point["results"]}}
    return merged


def _grew(values: list[float]) -> float:
    """Largest size's value over the smallest's.

    >>> _grew([100.0, 120.0, 130.0])
    1.3
    """
    return round(values[-1] / max(values[0], 1), 2)


@dataclass(frozen=True)
class _Growth:
    """Smallest size -> largest: the events, the walls, and every memory reading."""

    events: float
    replay_wall: float
    audit_wall: float
    heap: float           # local[2] JVM peak heap in use (driver and executors)
    kept: float           # local JVM heap after GCs
    python: float         # Python driver peak RSS
    driver_heap: float    # standalone cluster: driver JVM peak heap in use
    driver_rss: float     # standalone cluster: driver JVM peak RSS

    @classmethod
    def of(cls, points: list[dict[str, Any]], on_cluster: list[dict[str, Any]]) -> _Growth:
        lo, hi = points[0], points[-1]

        def replay_reading(name: str) -> float:
            return _grew([pt["replay"][name] for pt in points])

        def driver_peak(name: str) -> float:
            return _grew([max(pt[part][name] for part in ("replay", "audit"))
                          for pt in on_cluster])

        return cls(events=hi["events"] / lo["events"],
                   replay_wall=hi["replay"]["wall_seconds"] / lo["replay"]["wall_seconds"],
                   audit_wall=hi["audit"]["wall_seconds"] / lo["audit"]["wall_seconds"],
                   heap=replay_reading("peak_jvm_heap_used_mb"),
                   kept=replay_reading("jvm_heap_after_gc_mb"),
                   python=replay_reading("peak_python_rss_mb"),
                   driver_heap=driver_peak("peak_jvm_heap_used_mb"),
                   driver_rss=driver_peak("peak_jvm_rss_mb"))

    def ratios(self) -> dict[str, float]:
        return {"events_growth": round(self.events, 2),
                "replay_wall_growth": round(self.replay_wall, 2),
                "audit_wall_growth": round(self.audit_wall, 2),
                "replay_heap_growth": self.heap, "replay_heap_after_gc_growth": self.kept,
                "replay_python_rss_growth": self.python,
                "cluster_driver_heap_growth": self.driver_heap,
                "cluster_driver_rss_growth": self.driver_rss}


def _curve_targets(g: _Growth, driver_heap_limit: str) -> list[dict[str, Any]]:
    """Near-linear walls; flat driver memory (on a cluster: the target's measure; locally the
    one JVM also runs the executors, reported after it)."""
    flat = "<= 1.5x over a 20x range"
    replay, audit = g.replay_wall / g.events, g.audit_wall / g.events
    return [
        target("replay near-linear (wall growth / events growth)", round(replay, 3), "<= 1.2",
               replay <= 1.2),
        target("audit near-linear (wall growth / events growth)", round(audit, 3), "<= 1.2",
               audit <= 1.2),
        target("flat driver memory on a standalone cluster (driver JVM peak heap in use, "
               f"replay or audit, {driver_heap_limit} heap limit, smallest -> largest)",
               g.driver_heap, flat, g.driver_heap <= 1.5),
        target("flat driver memory on a standalone cluster (driver JVM peak RSS, smallest -> "
               "largest)", g.driver_rss, flat, g.driver_rss <= 1.5),
        # Peak heap in use counts garbage not yet collected and, in local mode, the
        # executors' working memory: reported, though it grows with the data.
        target("local[2] JVM (driver and executors in one) peak heap in use, smallest -> "
               "largest", g.heap, flat, g.heap <= 1.5),
        target("flat driver memory (JVM heap kept: after GCs, once the cleaner has run, "
               "smallest -> largest)", g.kept, flat, g.kept <= 1.5),
        target("flat driver memory (Python driver peak RSS, smallest -> largest)", g.python,
               flat, g.python <= 1.5),
    ]


def bench_scale_curve(spark: SparkSession, scale: Scale) -> dict[str, Any]:
    """The replay and the audit at each of ``scale.curve_scales``, then the driver's memory
    on a standalone cluster at the same sizes."""
    warm_up_audit(spark, scale)
    points = [_curve_point(spark, scale, n) for n in scale.curve_scales]
    cluster = _driver_memory_on_cluster([scale.data_dir / f"day-{n}" for n in scale.curve_scales])
    growth = _Growth.of(points, [cluster["results"][str(n)] for n in scale.curve_scales])
    return {
        "scale": {"events": scale.curve_scales},
        "results": {str(pt["events"]): pt for pt in points},
        "ratios": growth.ratios(),
        "driver_on_cluster": cluster,
        "targets": _curve_targets(growth, cluster["driver_heap"]),
        "profile": {"note": "fixed costs (Delta log reads, commits, job scheduling) dominate "
                    "the small scales; see us_per_event"},
        "settings": {},
    }
