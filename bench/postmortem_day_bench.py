"""The postmortem questions on a big day (issue 58): ``reckon sql`` over the bench's 20M-event
day, on DuckDB (the default, ``reports.duck``) and on ``--engine spark``, the same tables.

Two questions an engineer asks of a day after a bad night, each the whole command a user runs
(``python -m app.cli sql --json --warehouse WH "..."`` in a fresh process, Python's start,
the imports and, on Spark, the JVM's and the session's start included), alternating, so a load
spike hits both engines alike:

* ``per_key_aggregate``: every merchant's events and money per currency over ``event_log``
  (20.2M rows at full scale, re-delivered copies the stream caught left out);
* ``reconciliation_late_join``: ``reconciliation`` joined with ``late_events`` on (window,
  key, currency): how many late events and how much late money each status holds, per
  currency.

Every run's answer (its ``--json`` output) must be the first run's, on either engine: the
bench compares two engines giving the same rows, or fails. The warehouse is the replay and
audit workloads' day (``bench.datasets.day_warehouse``, audited by ``audit_bench.audited_day``),
reused when built; issue 58's goal is the Spark path at least 5x the DuckDB path's time.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.audit_bench import audited_day
from bench.harness import Scale, load_average, log, target
from bench.postmortem_bench import repeats, time_process

__all__ = ["DAY_QUESTIONS", "GOAL_RATIO", "bench_postmortem_day", "same_answer"]

ENGINES = ("duckdb", "spark")
#: question -> SQL; each ORDER BY is total, so equal answers are equal lists of rows
DAY_QUESTIONS = {
    "per_key_aggregate": (
        "SELECT key, currency, count(*) AS events, sum(amount) AS total_amount "
        "FROM event_log WHERE NOT is_duplicate GROUP BY key, currency ORDER BY key, currency"),
    "reconciliation_late_join": (
        "SELECT r.status, r.currency, count(*) AS late_events, count(DISTINCT r.key) AS keys, "
        "sum(l.amount) AS late_amount, max(l.lateness_seconds) AS max_lateness_seconds "
        "FROM reconciliation r JOIN late_events l ON l.window_start = r.window_start "
        "AND l.key = r.key AND l.currency = r.currency "
        "GROUP BY r.status, r.currency ORDER BY r.status, r.currency"),
}
#: issue 58: the DuckDB path at least this many times faster than Spark's, start-up included
GOAL_RATIO = 5.0


def same_answer(question: str, first: list[dict[str, Any]], answer: list[dict[str, Any]],
                where: str) -> None:
    """Refuse to time two different answers: ``answer`` (one run's parsed ``--json``) must
    be ``first`` (the question's first run), row for row, value for value (decimals are
    strings in the JSON, so their scale counts too).

    >>> same_answer("q", [{"n": 1}], [{"n": 1}], "spark run 2")
    >>> same_answer("q", [{"n": 1}], [{"n": 2}], "spark run 2")
    Traceback (most recent call last):
    ...
    RuntimeError: postmortem_day: q answered differently on spark run 2: row 0 {'n': 2}, not {'n': 1}
    """
    if answer == first:
        return
    i = next((i for i, (a, b) in enumerate(zip(first, answer, strict=False)) if a != b),
             min(len(first), len(answer)))
    got = answer[i] if i < len(answer) else "no row"
    want = first[i] if i < len(first) else "no row"
    raise RuntimeError(f"postmortem_day: {question} answered differently on {where}: "
                       f"row {i} {got}, not {want}")


def _command(wh: Path, engine: str, sql: str) -> list[str]:
    return ["-m", "app.cli", "sql", "--json", "--warehouse", str(wh), "--engine", engine,
            sql]


def _run_all(wh: Path, repeats: int, tmp: Path
             ) -> tuple[dict[str, dict[str, list[float]]], dict[str, float], dict[str, int]]:
    """Every question on each engine, alternating, ``repeats`` times: wall seconds per
    engine and question, peak Python RSS per engine, and each answer's row count."""
    walls: dict[str, dict[str, list[float]]] = {e: {q: [] for q in DAY_QUESTIONS}
                                                for e in ENGINES}
    rss = dict.fromkeys(ENGINES, 0.0)
    first: dict[str, list[dict[str, Any]]] = {}
    for i in range(repeats):
        for question, sql in DAY_QUESTIONS.items():
            for engine in ENGINES:
                out = tmp / f"{question}-{engine}.json"
                wall, peak = time_process(_command(wh, engine, sql), 0, out)
                answer = json.loads(out.read_text())
                first.setdefault(question, answer)
                same_answer(question, first[question], answer, f"{engine} run {i + 1}")
                walls[engine][question].append(round(wall, 2))
                rss[engine] = max(rss[engine], round(peak, 1))
                log(f"postmortem_day: {engine} {question} {wall:.2f}s, {len(answer)} rows "
                    f"(load {load_average()})")
    return walls, rss, {q: len(a) for q, a in first.items()}


def _table_rows(wh: Path) -> dict[str, int]:
    """Rows of the tables the questions read (untimed, through the DuckDB path)."""
    from reports.duck import run_duck_query

    return {name: int(run_duck_query(wh, f"SELECT count(*) FROM {name}").rows[0][0])
            for name in ("event_log", "reconciliation", "late_events")}


def bench_postmortem_day(spark: Any, scale: Scale) -> dict[str, Any]:
    """Both questions on both engines, in turns, ``repeats(scale)`` times (3 at full scale),
    on the audited bench day; the median wall time of each is what a user waits."""
    settings = audited_day(spark, scale)
    wh = settings.warehouse_path
    runs = repeats(scale)
    rows = _table_rows(wh)
    log(f"postmortem_day: {', '.join(f'{k} {v:,}' for k, v in rows.items())} rows; "
        f"{runs} repeats")
    with tempfile.TemporaryDirectory() as tmp:
        walls, rss, answer_rows = _run_all(wh, runs, Path(tmp))
    median = {e: {q: round(statistics.median(v), 2) for q, v in qs.items()}
              for e, qs in walls.items()}
    ratios = {f"{q}_spark_over_duckdb": round(median["spark"][q] / median["duckdb"][q], 1)
              for q in DAY_QUESTIONS}
    return {
        "scale": {"events": scale.day_events, "table_rows": rows, "warehouse": str(wh),
                  "repeats": runs},
        "results": {f"reckon_sql_{e}": {
            "wall_seconds": round(sum(median[e].values()), 2),
            **{f"{q}_seconds": s for q, s in median[e].items()}, "runs": walls[e],
            "peak_driver_rss_mb": rss[e], "peak_python_rss_mb": rss[e],
            "peak_jvm_rss_mb": None, "peak_jvm_heap_used_mb": None} for e in ENGINES},
        "ratios": ratios,
        "targets": [target(f"reckon sql {q} on a {scale.day_events:,}-event day, whole "
                           "command: Spark path over DuckDB path", ratios[key],
                           f">= {GOAL_RATIO:g}x", ratios[key] >= GOAL_RATIO)
                    for q in DAY_QUESTIONS for key in [f"{q}_spark_over_duckdb"]],
        "profile": {"what": "each run a fresh `python -m app.cli sql --json` process; "
                            "every run's answer checked equal to the question's first",
                    "answers_equal": True, "answer_rows": answer_rows},
        "settings": {"engines": list(ENGINES), "questions": DAY_QUESTIONS,
                     "goal_ratio": GOAL_RATIO},
    }
