"""The registry of ``python -m bench``'s workloads, each against the engine a user would
otherwise pick, on the same data in the same process (one local[2] SparkSession for
everything Spark). Each family lives in its own module:

- ``stream_bench``: reckon's stream vs Spark's withWatermark + groupBy (and + raw archive);
- ``freshness``: landing -> committed latency under a steady feed;
- ``replay_bench``: replay_day vs Spark's groupBy floor and DuckDB;
- ``audit_bench``: audit_day vs DataComPy;
- ``bound_whatif_bench``: the vectorised lateness curve vs its pure-Python reference;
- ``scale_curve``: replay and audit at three sizes, and the driver's memory on a cluster;
- ``compaction_bench``: the replay of a stream-laid day, its compaction, the replay after;
- ``long_day``: stream batches late in a long day vs in the morning;
- ``fixed_cost``: a steady 10K-line batch of the real stream, step by step;
- ``postmortem``: ``reckon sql`` as a whole command, DuckDB path vs ``--engine spark``;
- ``postmortem_day``: the same on the 20M-event day (a per-key aggregate, a join);
- ``nightly_dag``: the demo day's nightly DAG through a real scheduler, task by task.

Each ``bench_*`` workload returns a JSON-ready dict: ``scale`` (what was processed),
``results`` (one entry per contender: wall seconds, events/s, memory), ``ratios``, ``targets``
(each stated target, the measured value and whether it holds: ``harness.target``) and
``profile`` (what dominates). The measuring protocol (``harness.measure``,
``harness.alternate``) and the run's sizes (``harness.Scale``) are shared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.audit_bench import bench_audit
from bench.bound_whatif_bench import bench_lateness
from bench.compaction_bench import bench_compaction
from bench.fixed_cost import bench_fixed_cost
from bench.freshness import bench_freshness
from bench.harness import Scale
from bench.long_day import bench_long_day
from bench.nightly_dag_bench import bench_nightly_dag
from bench.postmortem_bench import bench_postmortem
from bench.postmortem_day_bench import bench_postmortem_day
from bench.replay_bench import bench_replay
from bench.scale_curve import bench_scale_curve
from bench.stream_bench import bench_stream

__all__ = ["NO_SPARK_SESSION", "WORKLOADS", "Scale"]

WORKLOADS: dict[str, Callable[[Any, Scale], dict[str, Any]]] = {
    "stream": bench_stream,
    "freshness": bench_freshness,
    "replay": bench_replay,
    "audit": bench_audit,
    "lateness": bench_lateness,
    "scale": bench_scale_curve,
    "compaction": bench_compaction,
    "long_day": bench_long_day,
    "fixed_cost": bench_fixed_cost,
    "postmortem": bench_postmortem,
    "postmortem_day": bench_postmortem_day,
    "nightly_dag": bench_nightly_dag,
}
#: Workloads that need no Spark session in the bench's process.
NO_SPARK_SESSION = frozenset({"lateness", "postmortem"})
