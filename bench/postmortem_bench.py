"""The postmortem workload (issue 58): a question asked of a warehouse, as a user asks it.

Each run is the whole command in its own process (``python -m reckon.cli sql ...``), Python's
start and every import included: the DuckDB read path (the default, ``reports.duck``) against
``--engine spark`` (a Spark session, then Spark SQL over Delta), one after the other on the
same warehouse, alternating so a load spike hits both. Two questions: a count of
reconciliation (event_log when no audit has run), and a misspelled table name, which must be
refused quickly. No Spark session of the bench's own is used.

The warehouse is the one ``make demo`` leaves behind (``./warehouse``), or
``RECKON_BENCH_POSTMORTEM_WAREHOUSE``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import Scale, load_average, log, target
from reckon.config import PROJECT_ROOT
from reckon.errors import UsageError
from spark.table_names import RECONCILIATION, table_exists

__all__ = ["QUESTIONS", "bench_postmortem", "time_command"]

ENGINES = ("duckdb", "spark")
#: question -> (SQL, the exit code it must end with)
QUESTIONS = {"count": ("SELECT count(*) AS n FROM {table}", 0),
             "misspelled_table": ("SELECT count(*) FROM reconcilation", 2)}
#: issue 58's goals, whole command, demo warehouse (seconds)
GOALS = {"count": 1.5, "misspelled_table": 1.0}


def _warehouse() -> Path:
    wh = Path(os.environ.get("RECKON_BENCH_POSTMORTEM_WAREHOUSE") or PROJECT_ROOT / "warehouse")
    if not table_exists(wh, "event_log"):
        raise UsageError(f"postmortem bench: {str(wh)!r} holds no reckon warehouse: run `make "
                         "demo` first, or set RECKON_BENCH_POSTMORTEM_WAREHOUSE")
    return wh


def time_command(warehouse: Path, engine: str, sql: str, expect: int) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB of the Python process) of one ``reckon sql`` in a fresh
    process; its exit code must be ``expect`` (a refusal is measured as a refusal, not as a
    crash). The Spark path's JVM is a process of its own, not in that RSS."""
    argv = [sys.executable, "-m", "reckon.cli", "sql", "--warehouse", str(warehouse),
            "--engine", engine, sql]
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                                 env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t0
        child.returncode = code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        last = err.read().decode(errors="replace").strip().splitlines()[-1:]
    if code != expect:
        raise RuntimeError(f"{' '.join(argv[3:])} ended {code}, not {expect}: {last}")
    return wall, usage.ru_maxrss / 1024


def bench_postmortem(spark: Any, scale: Scale) -> dict[str, Any]:
    """Each question on each engine, alternating, ``repeats`` times (at least 1; 3 at full
    scale); the median wall time is what a user waits."""
    wh = _warehouse()
    table = RECONCILIATION if table_exists(wh, RECONCILIATION) else "event_log"
    repeats = max(1, round(3 * min(scale.factor, 1.0)))
    walls: dict[str, dict[str, list[float]]] = {e: {q: [] for q in QUESTIONS} for e in ENGINES}
    rss = dict.fromkeys(ENGINES, 0.0)
    for _ in range(repeats):
        for question, (sql, expect) in QUESTIONS.items():
            for engine in ENGINES:
                wall, peak = time_command(wh, engine, sql.format(table=table), expect)
                walls[engine][question].append(round(wall, 2))
                rss[engine] = max(rss[engine], round(peak, 1))
                log(f"postmortem: {engine} {question} {wall:.2f}s (load {load_average()})")
    median = {e: {q: round(statistics.median(v), 2) for q, v in qs.items()}
              for e, qs in walls.items()}
    return {
        "scale": {"warehouse": str(wh), "count_table": table, "repeats": repeats},
        "results": {f"reckon_sql_{e}": {
            "wall_seconds": round(sum(median[e].values()), 2),
            **{f"{q}_seconds": s for q, s in median[e].items()}, "runs": walls[e],
            "peak_driver_rss_mb": rss[e], "peak_python_rss_mb": rss[e],
            "peak_jvm_rss_mb": None, "peak_jvm_heap_used_mb": None} for e in ENGINES},
        "ratios": {f"{q}_spark_over_duckdb": round(median["spark"][q] / median["duckdb"][q], 1)
                   for q in QUESTIONS},
        "targets": [target(f"reckon sql {q}, whole command (DuckDB path)", median["duckdb"][q],
                           f"<= {goal} s", median["duckdb"][q] <= goal)
                    for q, goal in GOALS.items()],
        "profile": {"what": "each run a fresh `python -m reckon.cli sql` process; the Spark "
                            "path's time is mostly the JVM's start and the session's"},
        "settings": {"engines": list(ENGINES),
                     "questions": {q: sql.format(table=table) for q, (sql, _) in
                                   QUESTIONS.items()}},
    }
