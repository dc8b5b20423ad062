"""Measurement plumbing shared by every workload: the sizes of a run (Scale), timers, a memory
sampler, the protocol that runs contenders in turns (alternate), a job's commit timeline, a
stated target's row, the environment record (versions, machine, load, git commit) and the
result file.

Memory: on local Spark the "driver" is two processes, this Python interpreter and the JVM it
starts (a child process). Both RSS values are sampled, plus the JVM heap in use (through
py4j), because the JVM's RSS only ever grows to its heap size and hides whether the job's
working set is flat.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from app.settings import load_settings
from reckon.config import PROJECT_ROOT, Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MAX_FILES_PER_TRIGGER", "ROUNDS", "MemorySampler", "Scale", "Timer", "alternate",
           "base_settings", "cpu_seconds", "environment", "load_average", "log", "measure",
           "target", "timed_with_timeline", "timeline", "write_result"]

#: Landing files per micro-batch in every benchmark warehouse (see base_settings).
MAX_FILES_PER_TRIGGER = 10

_MB = 1024 * 1024


@dataclass(frozen=True)
class Scale:
    """Sizes of every workload for one run; ``factor`` 1.0 is the full benchmark.

    >>> Scale(factor=0.05, data_dir=Path("/tmp/d")).stream_events
    100000
    """

    factor: float
    data_dir: Path

    def n(self, full: int, floor: int = 1_000) -> int:
        return max(floor, int(full * self.factor))

    @property
    def stream_events(self) -> int:
        return self.n(2_000_000)

    @property
    def day_events(self) -> int:
        return self.n(20_000_000)

    @property
    def lateness_events(self) -> int:
        return self.n(10_000_000)

    @property
    def reference_events(self) -> int:
        return min(20_000, self.lateness_events)

    @property
    def curve_scales(self) -> list[int]:
        return [self.n(1_000_000, 300), self.n(5_000_000, 600), self.n(20_000_000)]

    @property
    def freshness_seconds(self) -> float:
        return max(4.0, 90.0 * min(1.0, self.factor * 4))

    @property
    def freshness_trigger(self) -> str:
        # Back to back: a batch starts as soon as the one before ends (Spark runs the next
        # trigger at once when a batch overran it), so a file waits at most for the running
        # batch and then its own (the p95 bound: trigger + 2 x the median batch).
        return "1s"

    @property
    def freshness_rates(self) -> list[int]:
        """Events per second fed to the landing dir (one file per second)."""
        return [max(floor, int(r * min(1.0, self.factor * 4)))
                for r, floor in ((1_000, 100), (5_000, 200))]

    def freshness_archived_rows(self, rate: int) -> int:
        """Rows archived in the hour before the feed starts: at full scale the de-duplication
        horizon (1 h) of a stream that has run at ``rate`` for an hour, so every batch re-reads
        what it would at steady state, not an event_log that starts empty."""
        return max(100, int(rate * 3_600 * min(1.0, self.factor * 4)))


def target(name: str, measured: float | None, goal: str, holds: bool | None) -> dict[str, Any]:
    """One stated target of a workload as its result records it (``met`` None: not measurable
    at this run's scale), so BENCHMARKS.md's targets table reads every workload alike.

    >>> target("audit speed-up over DataComPy", 3.4, ">= 3x", True)["met"]
    True
    """
    return {"target": name, "goal": goal, "measured": measured, "met": holds}


def log(message: str) -> None:
    """A progress line on stderr (the run is long; say what it is doing)."""
    stamp = datetime.now().strftime("%H:%M:%S")
    print(f"[bench {stamp}] {message}", file=sys.stderr, flush=True)


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages (the machine is shared: every result records them)."""
    return [round(x, 2) for x in os.getloadavg()]


@dataclass
class Timer:
    """Named wall-clock sections, in the order they ran."""

    sections: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def section(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.sections[name] = round(self.sections.get(name, 0.0)
                                        + time.perf_counter() - t0, 3)


class MemorySampler:
    """Peak RSS of this process and of its child processes (the Spark JVM), and peak JVM heap
    in use, sampled every ``interval`` seconds on a daemon thread while the block runs."""

    def __init__(self, spark: Any | None = None, interval: float = 0.25) -> None:
        self.spark = spark
        self.interval = interval
        self.peak_python = 0
        self.peak_children = 0
        self.peak_heap = 0
        self.retained_heap = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._me = psutil.Process()

    def _heap_used(self) -> int:
        if self.spark is None:
            return 0
        try:
            rt = self.spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
            return int(rt.totalMemory() - rt.freeMemory())
        except Exception:  # the JVM is busy shutting down or py4j is not ready: skip a sample
            return 0

    def sample(self) -> None:
        try:
            self.peak_python = max(self.peak_python, self._me.memory_info().rss)
            kids = sum(c.memory_info().rss for c in self._me.children(recursive=True))
            self.peak_children = max(self.peak_children, kids)
        except psutil.Error:
            pass
        self.peak_heap = max(self.peak_heap, self._heap_used())

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> MemorySampler:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="bench-mem", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        self.retained_heap = self._heap_after_gc()

    def _heap_after_gc(self, settle_seconds: float = 0.5, attempts: int = 4) -> int:
        """The JVM heap still in use after full GCs once the block ended: what the driver
        kept. The peak heap also counts garbage the collector had no reason to reclaim yet
        and, in local mode, the executors' working memory, so it grows with the data
        although nothing is held. One collection is not enough either: Spark's ContextCleaner
        drops a finished job's broadcasts, shuffle statuses and unpersisted blocks only once a
        GC has found them unreachable, so collect, give the cleaner a moment, and collect
        again until two readings agree within 1 MB."""
        if self.spark is None:
            return 0
        readings: list[int] = []
        for _ in range(attempts):
            try:
                self.spark.sparkContext._jvm.java.lang.System.gc()
            except Exception:
                return 0
            time.sleep(settle_seconds)
            readings.append(self._heap_used())
            if len(readings) >= 2 and abs(readings[-1] - readings[-2]) < _MB:
                break
        return readings[-1]

    def result(self) -> dict[str, float]:
        return {"peak_python_rss_mb": round(self.peak_python / _MB, 1),
                "peak_jvm_rss_mb": round(self.peak_children / _MB, 1),
                "peak_jvm_heap_used_mb": round(self.peak_heap / _MB, 1),
                "jvm_heap_after_gc_mb": round(self.retained_heap / _MB, 1),
                "peak_driver_rss_mb": round((self.peak_python + self.peak_children) / _MB, 1)}


def cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far by this process and by its live children (the Spark JVM):
    unlike wall time, hardly inflated when other work shares the cores."""
    me = psutil.Process()
    own = me.cpu_times()
    kids = 0.0
    for child in me.children(recursive=True):
        try:
            ct = child.cpu_times()
            kids += ct.user + ct.system
        except psutil.Error:
            pass
    return {"python": own.user + own.system, "jvm": kids}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True,
                             timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def environment() -> dict[str, Any]:
    """Versions, machine and repository state: what a reader needs to reproduce a number."""
    vm = psutil.virtual_memory()
    status = _git("status", "--porcelain")
    return {
        "versions": {
            "python": platform.python_version(),
            "pyspark": _version("pyspark"), "delta-spark": _version("delta-spark"),
            "duckdb": _version("duckdb"), "datacompy": _version("datacompy"),
            "numpy": _version("numpy"), "pandas": _version("pandas"),
            "java": _java_version(),
        },
        "machine": {
            "cpu_count": os.cpu_count(), "memory_gb": round(vm.total / 1024 ** 3, 1),
            "available_memory_gb": round(vm.available / 1024 ** 3, 1),
            "platform": platform.platform(), "processor": platform.machine(),
        },
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
    }


def _java_version() -> str | None:
    java = Path(os.environ.get("JAVA_HOME", "")) / "bin" / "java"
    cmd = str(java) if java.is_file() else "java"
    try:
        out = subprocess.run([cmd, "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    first = (out.stderr or out.stdout).splitlines()
    return first[0].strip() if first else None


def write_result(results_dir: Path, workload: str, payload: dict[str, Any]) -> Path:
    """Write ``<workload>.json`` atomically (a crashed run never leaves half a file)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{workload}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(path)
    return path


def base_settings(warehouse: Path, **overrides: Any) -> Settings:
    """Embedded defaults (no reckon.toml, no RECKON_* variables), local[2], own warehouse: a
    benchmark measures the code, not whatever the machine's reckon.toml says. Shared by the
    workloads, the driver-memory process and the spike, so all three run the same settings.

    >>> base_settings(Path("/tmp/wh"), spark_master="local[1]").max_files_per_trigger
    10
    """
    return load_settings(env={}, warehouse=str(warehouse),
                         **{"spark_master": "local[2]",
                            "max_files_per_trigger": MAX_FILES_PER_TRIGGER, **overrides})


def measure(spark: SparkSession | None, fn: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """Run ``fn`` once: its value, wall seconds, CPU seconds and peak memory. Every workload
    and the driver-memory process report the same fields, so their tables line up.

    Example: ``rows, m = measure(spark, lambda: replay_day(spark, config, day))``, then
    ``m["wall_seconds"]``, ``m["peak_jvm_heap_used_mb"]``.
    """
    with MemorySampler(spark) as mem:
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        value = fn()
        wall = time.perf_counter() - t0
        c1 = cpu_seconds()
    return value, {"wall_seconds": round(wall, 3),
                   "cpu_seconds_python": round(c1["python"] - c0["python"], 2),
                   "cpu_seconds_jvm": round(c1["jvm"] - c0["jvm"], 2), **mem.result()}


# The replay, the audit, the compaction and the long day run each contender this many times,
# in turns (ours, theirs, ours, ...), after one untimed round on the same data; the median run
# is reported. One run each, in a fixed order, measured the JVM's state as much as the code:
# the audit took 21.0, 17.6 and 14.7 s in turns, DataComPy's first run after ours 38 s and its
# next (doing more) 35 s; the 20M replay took 51-99 s first and 39-46 s after.
ROUNDS = 3


def alternate(spark: SparkSession,
              contenders: dict[str, Callable[[], tuple[Any, dict[str, Any]]]], rounds: int,
              workload: str) -> dict[str, tuple[Any, dict[str, Any], list[float]]]:
    """Run every contender once untimed, then ``rounds`` times in turns. Per contender: the
    value of its median run, that run's measurements, and every timed run's wall seconds.

    After each run the session's cached data is dropped (untimed): DataComPy caches its
    joined rows and never unpersists them, so three runs left three copies of 1.7M rows in
    the block manager, and the next contender ran with less execution memory (ours took
    16.6, 19.6 and 19.1 s in turns with it, 13-15 s alone).

    Example: ``alternate(spark, {"ours": lambda: measure(spark, job)}, ROUNDS, "replay")
    ["ours"]`` is ``(value, median_measurements, [wall, wall, wall])``."""
    runs: dict[str, list[tuple[Any, dict[str, Any]]]] = {name: [] for name in contenders}
    spark.catalog.clearCache()  # the first run starts as clean as the others
    for i in range(rounds + 1):
        for name, fn in contenders.items():
            log(f"{workload}: {name} " + (f"(run {i} of {rounds})" if i
                                          else "(untimed, same data)"))
            done = fn()
            if i:
                runs[name].append(done)
            spark.catalog.clearCache()
    out = {}
    for name, timed in runs.items():
        walls = [m["wall_seconds"] for _, m in timed]
        value, median = sorted(timed, key=lambda vm: vm[1]["wall_seconds"])[len(timed) // 2]
        out[name] = (value, median, walls)
    return out


def timeline(spark: SparkSession, settings: Settings, started: float, ended: float,
             names: tuple[str, ...]) -> dict[str, float]:
    """Seconds spent before each table's latest commit (Delta commit timestamps), in commit
    order, and after the last one: a profile of a job without touching its code.

    Example: ``{"until canonical_totals commit": 31.2, "after the last commit": 0.4}``."""
    from delta.tables import DeltaTable

    from spark import tables as tb

    stamps, out = [], {}
    for name in names:
        path = tb.table_path(settings.warehouse_path, name)
        latest = DeltaTable.forPath(spark, path).history(1).select("timestamp").first()
        assert latest is not None  # a Delta table has at least the commit that created it
        ts = latest[0]
        if ts.timestamp() >= started - 1.0:  # slack: the commit file mtime may be coarse
            stamps.append((ts.timestamp(), name))
        else:  # e.g. an empty replaceWhere with nothing to replace commits nothing
            out[f"{name}: no commit in this run"] = 0.0
    prev = started
    for ts, name in sorted(stamps):
        out[f"until {name} commit"] = round(ts - prev, 2)
        prev = ts
    out["after the last commit"] = round(ended - prev, 2)
    return out


def timed_with_timeline(spark: SparkSession, settings: Settings, fn: Callable[[], Any],
                        names: tuple[str, ...]) -> tuple[Any, dict[str, Any], dict[str, float]]:
    """``measure`` plus the ``timeline`` of the tables ``fn`` commits to."""
    started = time.time()
    value, m = measure(spark, fn)
    return value, m, timeline(spark, settings, started, time.time(), names)
