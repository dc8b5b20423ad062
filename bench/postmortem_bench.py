"""The postmortem workload (issue 58): a question asked of a warehouse, as a user asks it.

Each run is the whole command in its own process (``python -m app.cli ...``), Python's
start and every import included, one after the other on the same warehouse, alternating so a
load spike hits each alike. No Spark session of the bench's own is used. The rows:

* ``reckon sql`` on DuckDB (the default, ``reports.duck``) and on ``--engine spark``: a count
  of reconciliation (event_log when no audit has run) and a misspelled table, which must be
  refused quickly;
* the peer of the DuckDB count: a bare delta-rs + DuckDB read of the same table (a process
  that imports ``deltalake`` and ``duckdb`` and counts), the floor reckon's checks, registering
  and locking add to (issue 58: reckon within 1.5x of it);
* ``reckon explain`` on DuckDB (the default, ``reports.explain_duck``) and on ``--engine
  spark``, for one key's window the warehouse holds (a late event's when there is one);
* ``reckon bound-whatif`` for that window's day on DuckDB (the default, ``audits.bound_whatif_duck``)
  and on ``--engine spark``: the same analysis (tests/test_bound_whatif_duck.py), the per-event
  curve replaying the day's events in arrival order on either.

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
from storage.table_names import RECONCILIATION, table_exists

__all__ = ["QUESTIONS", "bench_postmortem", "repeats", "time_command", "time_process"]

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


def repeats(scale: Scale) -> int:
    """How many times each command runs: 3 at full scale, fewer below it (at least 1), or
    ``RECKON_BENCH_POSTMORTEM_REPEATS`` when set (a machine so busy that a Spark command takes
    minutes; the result records the count it ran).

    >>> repeats(Scale(factor=0.05, data_dir=Path("/tmp/d")))
    1
    """
    given = os.environ.get("RECKON_BENCH_POSTMORTEM_REPEATS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise UsageError(f"RECKON_BENCH_POSTMORTEM_REPEATS={given!r} is not valid: give a "
                             "whole number of runs, at least 1")
        return int(given)
    return max(1, round(3 * min(scale.factor, 1.0)))


def time_command(warehouse: Path, engine: str, sql: str, expect: int) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB of the Python process) of one ``reckon sql`` in a fresh
    process; its exit code must be ``expect`` (a refusal is measured as a refusal, not as a
    crash). The Spark path's JVM is a process of its own, not in that RSS."""
    return time_process(["-m", "app.cli", "sql", "--warehouse", str(warehouse),
                         "--engine", engine, sql], expect)


def time_process(args: list[str], expect: int = 0, out: Path | None = None
                 ) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of ``python ARGS`` in a fresh process, which must end
    with ``expect``, e.g. ``time_process(["-m", "app.cli", "explain", ...])``. Its output
    goes to ``out`` when given (a file, so a big answer never blocks a pipe), else nowhere."""
    argv = [sys.executable, *args]
    with tempfile.TemporaryFile() as err, open(out or os.devnull, "wb") as sink:
        t0 = time.perf_counter()
        child = subprocess.Popen(argv, stdout=sink, stderr=err,
                                 env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t0
        child.returncode = code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        last = err.read().decode(errors="replace").strip().splitlines()[-1:]
    if code != expect:
        raise RuntimeError(f"{' '.join(args[2:5])} ended {code}, not {expect}: {last}")
    return wall, usage.ru_maxrss / 1024


#: the peer of ``reckon sql`` count: delta-rs and DuckDB alone, nothing of reckon
_BARE_COUNT = ("import sys, duckdb; from deltalake import DeltaTable; "
               "con = duckdb.connect(); con.register('t', DeltaTable(sys.argv[1])"
               ".to_pyarrow_dataset()); print(con.sql('SELECT count(*) FROM t').fetchall())")


def _a_window(wh: Path) -> dict[str, str]:
    """A key, an instant inside one of its windows, and that day: a late event's window when
    the warehouse has one (the richer story), else the newest event's."""
    from reports.duck import run_duck_query

    sql = ("SELECT key, strftime(window_start, '%Y-%m-%dT%H:%M:%SZ') FROM late_events "
           "ORDER BY window_start DESC LIMIT 1" if table_exists(wh, "late_events") else "")
    rows = run_duck_query(wh, sql).rows if sql else ()
    if not rows:
        rows = run_duck_query(wh, "SELECT key, strftime(event_time, '%Y-%m-%dT%H:%M:%SZ') "
                                  "FROM event_log ORDER BY event_time DESC LIMIT 1").rows
    key, at = rows[0]
    return {"key": str(key), "at": str(at), "day": str(at)[:10]}


def _commands(wh: Path, table: str, window: dict[str, str]
              ) -> dict[str, dict[str, tuple[list[str], int]]]:
    """row -> question -> (python's arguments, the exit code it must end with)."""
    cli = ["-m", "app.cli"]
    explain = ["explain", "--warehouse", str(wh), "--key", window["key"], "--window",
               window["at"]]
    rows: dict[str, dict[str, tuple[list[str], int]]] = {
        f"reckon_sql_{e}": {q: ([*cli, "sql", "--warehouse", str(wh), "--engine", e,
                                 sql.format(table=table)], code)
                            for q, (sql, code) in QUESTIONS.items()} for e in ENGINES}
    rows["bare_deltalake_duckdb"] = {"count": (["-c", _BARE_COUNT,
                                                str(wh / table)], 0)}
    for e in ENGINES:
        rows[f"reckon_explain_{e}"] = {"explain": ([*cli, *explain, "--engine", e], 0)}
    for e in ENGINES:
        # the rows keep their recorded names (bench/results); the command is bound-whatif
        rows[f"reckon_lateness_{e}"] = {"lateness": ([*cli, "bound-whatif", "--warehouse", str(wh),
                                                      "--date", window["day"], "--engine", e],
                                                     0)}
    return rows


def bench_postmortem(spark: Any, scale: Scale) -> dict[str, Any]:
    """Each row's questions, alternating, ``repeats(scale)`` times (3 at full scale);
    the median wall time is what a user waits."""
    wh = _warehouse()
    table = RECONCILIATION if table_exists(wh, RECONCILIATION) else "event_log"
    runs = repeats(scale)
    window = _a_window(wh)
    commands = _commands(wh, table, window)
    walls: dict[str, dict[str, list[float]]] = {r: {q: [] for q in qs}
                                                for r, qs in commands.items()}
    rss = dict.fromkeys(commands, 0.0)
    for _ in range(runs):
        for row, questions in commands.items():
            for question, (args, expect) in questions.items():
                wall, peak = time_process(args, expect)
                walls[row][question].append(round(wall, 2))
                rss[row] = max(rss[row], round(peak, 1))
                log(f"postmortem: {row} {question} {wall:.2f}s (load {load_average()})")
    median = {r: {q: round(statistics.median(v), 2) for q, v in qs.items()}
              for r, qs in walls.items()}
    return _result(wh, table, window, runs, walls, median, rss)


#: issue 58's goals for the other commands, whole command, demo warehouse (seconds)
COMMAND_GOALS = {("reckon_explain_duckdb", "explain"): 2.0,
                 ("reckon_lateness_duckdb", "lateness"): 3.0}


def _result(wh: Path, table: str, window: dict[str, str], repeats: int,
            walls: dict[str, dict[str, list[float]]], median: dict[str, dict[str, float]],
            rss: dict[str, float]) -> dict[str, Any]:
    duck = median["reckon_sql_duckdb"]
    bare = median["bare_deltalake_duckdb"]["count"]
    return {
        "scale": {"warehouse": str(wh), "count_table": table, "repeats": repeats,
                  "explain": window},
        "results": {r: {
            "wall_seconds": round(sum(median[r].values()), 2),
            **{f"{q}_seconds": s for q, s in median[r].items()}, "runs": walls[r],
            "peak_driver_rss_mb": rss[r], "peak_python_rss_mb": rss[r],
            "peak_jvm_rss_mb": None, "peak_jvm_heap_used_mb": None} for r in median},
        "ratios": {**{f"{q}_spark_over_duckdb": round(median["reckon_sql_spark"][q] / duck[q], 1)
                      for q in QUESTIONS},
                   "count_reckon_over_bare_deltalake_duckdb": round(duck["count"] / bare, 2),
                   "explain_spark_over_duckdb": round(
                       median["reckon_explain_spark"]["explain"]
                       / median["reckon_explain_duckdb"]["explain"], 1),
                   "lateness_spark_over_duckdb": round(
                       median["reckon_lateness_spark"]["lateness"]
                       / median["reckon_lateness_duckdb"]["lateness"], 1)},
        "targets": [
            *[target(f"reckon sql {q}, whole command (DuckDB path)", duck[q], f"<= {goal} s",
                     duck[q] <= goal) for q, goal in GOALS.items()],
            target("reckon sql count within 1.5x of bare delta-rs + DuckDB", duck["count"],
                   f"<= {1.5 * bare:.2f} s", duck["count"] <= 1.5 * bare),
            *[target(f"reckon {q}, whole command (DuckDB path)", median[r][q], f"<= {goal} s",
                     median[r][q] <= goal) for (r, q), goal in COMMAND_GOALS.items()]],
        "profile": {"what": "each run a fresh Python process (`python -m app.cli ...`, or "
                            "the bare read's `python -c`); the Spark path's time is mostly "
                            "the JVM's start and the session's"},
        # each row against the floor of any answer: Python started, one table read by
        # delta-rs and DuckDB (the rows ask different questions; "ratios" pairs them)
        "settings": {"reference": "bare_deltalake_duckdb", "engines": list(ENGINES),
                     "questions": {q: sql.format(table=table) for q, (sql, _) in
                                   QUESTIONS.items()},
                     "explain": window},
    }
