"""Crash a real `reckon stream` process and restart it: shared by the recovery test and the
chaos script (scripts/chaos_stream.py). Tables are compared without the columns that record
wall-clock processing time, which legitimately differ between two runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from spark import tables as tb

# Columns that hold processing (wall-clock) time or a query's own id: not part of the result.
VOLATILE = {
    tb.PROVISIONAL_DELTAS: {"processed_at", "query_id"},
    tb.QUARANTINE: {"quarantined_at"},
    tb.WATERMARK_PROGRESS: {"processed_at", "duration_seconds", "query_id"},
    tb.EVENT_LOG: set(),
    tb.LATE_EVENTS: set(),
}


def stream_command(landing: Path, warehouse: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", "stream", "--landing", str(landing),
            "--warehouse", str(warehouse), "--available-now", *extra]


def stream_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(RECKON_SHUFFLE_PARTITIONS="2", RECKON_SPARK_DRIVER_MEMORY="1g",
               PYSPARK_PYTHON=sys.executable, RECKON_MAX_FILES_PER_TRIGGER="1")
    return env


def committed_batches(warehouse: Path) -> int:
    """Batches fully done: watermark_progress is the last write of every batch."""
    log = warehouse / tb.WATERMARK_PROGRESS / "_delta_log"
    return len(list(log.glob("*.json"))) - 1 if log.is_dir() else 0


def kill_during(cmd: list[str], warehouse: Path, *, after_batches: int, extra_delay: float,
                timeout: float = 600) -> bool:
    """Start the stream, SIGKILL its whole process group (the JVM too) once ``after_batches``
    batches are committed plus ``extra_delay`` seconds (so the kill lands mid-batch, often
    inside a Delta commit). Returns False if the stream finished before the kill."""
    proc = subprocess.Popen(cmd, env=stream_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    try:
        while committed_batches(warehouse) < after_batches:
            if proc.poll() is not None:
                return False
            if time.monotonic() > deadline:
                raise TimeoutError(f"stream made no progress past {after_batches} batches")
            time.sleep(0.2)
        time.sleep(extra_delay)
        if proc.poll() is not None:
            return False
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return True
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_to_end(cmd: list[str], timeout: float = 900) -> None:
    done = subprocess.run(cmd, env=stream_env(), capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"stream failed ({done.returncode}):\n{done.stderr[-4000:]}")


def table_snapshot(spark, warehouse: Path, name: str) -> list[tuple]:
    """Sorted rows of a (small, test-sized) table without its volatile columns."""
    df = spark.read.format("delta").load(str(warehouse / name))
    keep = [c for c in df.columns if c not in VOLATILE.get(name, set())]
    return sorted(tuple(str(v) for v in r) for r in df.select(*keep).collect())
