"""Steady batches of the real streaming query, as the long-day and fixed-cost workloads read
them: each batch's BatchMetrics and the moment its on_batch fired, the first few set aside as
warm-up, and the medians a reader compares (batch seconds, seconds between commits, seconds
per step, how duplicates were judged).

Both workloads run ``spark.stream.run_stream`` available-now over a landing dir, so the
batches run back to back: the seconds between two commits are the whole cost of a batch,
Spark's own part (planning, the state store's commit, the offset and commit logs) included,
which BatchMetrics.duration_seconds, timed inside foreachBatch, leaves out.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import cpu_seconds

__all__ = ["STEP_ORDER", "BatchLog", "land", "steady_figures"]

#: BatchProcessor's steps in the order a batch runs them (spark/stream.py); a step a batch
#: did not run (no quarantined row: no quarantine write) counts 0 s in its medians.
STEP_ORDER = ("restore", "parse+summary", "dedup+classify", "event_log", "deltas",
              "late_events", "quarantine", "progress")


@dataclass
class BatchLog:
    """The stream's on_batch callback: every batch's metrics, when it fired (monotonic) and
    the CPU seconds this process and the Spark JVM had used by then (harness.cpu_seconds:
    on a shared machine, far less inflated by other work than the wall seconds).

    Example: ``log = BatchLog(); run_stream(..., on_batch=log)``, then
    ``steady_figures(log, warm_up=2)``.
    """

    metrics: list[Any] = field(default_factory=list)
    fired: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def __call__(self, m: Any) -> None:
        self.fired.append(time.monotonic())
        self.cpu.append(sum(cpu_seconds().values()))
        self.metrics.append(m)


def land(staged: Path, names: list[str], landing: Path) -> None:
    """Copy ``names`` from ``staged`` into ``landing`` in name order, each whole at once (a
    temporary name, then a rename), as a producer lands them."""
    tmp = landing.parent / f".{landing.name}-tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    landing.mkdir(parents=True, exist_ok=True)
    for name in sorted(names):
        shutil.copyfile(staged / name, tmp / name)
        (tmp / name).replace(landing / name)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def _since_previous(values: list[float], warm_up: int) -> list[float]:
    """Per steady batch, ``values`` at its commit minus at the commit before it."""
    return [b - a for a, b in zip(values[warm_up - 1:], values[warm_up:], strict=False)
            ] if warm_up else []


def steady_figures(log: BatchLog, warm_up: int) -> dict[str, Any]:
    """The batches after the first ``warm_up`` (query start, state load, first code
    generation): per batch its seconds inside foreachBatch (the progress row included), since
    the commit before it, and the CPU seconds (Python + JVM, both cores) spent since then;
    their medians; the median of each step; and how many were judged by the dedup state or by
    the archive.

    >>> from types import SimpleNamespace as B
    >>> log = BatchLog([B(rows_in=10, duration_seconds=0.5, dedup_by="state",
    ...                   step_seconds={"restore": 0.1, "progress": 0.2})] * 3, [0.0, 1.0, 2.5])
    >>> f = steady_figures(log, warm_up=1)
    >>> f["median_batch_seconds"], f["median_commit_interval_seconds"], f["dedup_by"]
    (0.7, 1.25, {'state': 2})
    """
    steady = log.metrics[warm_up:]
    intervals = _since_previous(log.fired, warm_up)
    cpu = _since_previous(log.cpu, warm_up)
    batch = [m.duration_seconds + m.step_seconds.get("progress", 0.0) for m in steady]
    names = [s for s in STEP_ORDER if any(s in m.step_seconds for m in steady)]
    names += sorted({s for m in steady for s in m.step_seconds} - set(names))
    return {
        "batches": len(steady), "lines_in": sum(m.rows_in for m in steady),
        "batch_seconds": [round(s, 3) for s in batch],
        "commit_interval_seconds": [round(s, 3) for s in intervals],
        "median_batch_seconds": _median(batch),
        "median_commit_interval_seconds": _median(intervals),
        "cpu_seconds_per_batch": [round(s, 3) for s in cpu],
        "median_cpu_seconds_per_batch": _median(cpu),
        "median_step_seconds": {s: _median([m.step_seconds.get(s, 0.0) for m in steady])
                                for s in names},
        "dedup_by": dict(Counter(m.dedup_by for m in steady)),
    }
