"""Spark tier: one postmortem corpus, two engines, identical answers.

Every query runs through ``spark.sql_query.run_query`` (Spark SQL over Delta) and through
``reports.duck.run_duck_query`` (DuckDB over delta-rs) on warehouses the real stream wrote
(tests/scenarios.py: the worked example with revisions, late events and allowed_lateness; EUR, JPY and
KWD on one key). Results must be equal value for value: Decimals compared with their scale
(``Decimal('12.500')`` is not ``Decimal('12.5')``), only row order and how a timestamp
carries its UTC zone normalised. provisional_totals is folded by each engine on its own
(spark.provisional, reports.duck.provisional_sql): the corpus is that fold's differential test.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from reports.duck import run_duck_query
from spark.sql_query import run_query
from storage import commits
from tests.scenarios import SCENARIOS

CASES = [next(c for c in SCENARIOS if c.name.startswith("worked example, allowed lateness 5s")),
         next(c for c in SCENARIOS if c.name.startswith("EUR, JPY and KWD"))]

PT = "provisional_totals"
CORPUS = [
    # the README tour's questions, on the tables a stream writes
    "SELECT currency, status, count(*) AS n FROM provisional_totals GROUP BY 1, 2",
    "SELECT * FROM late_events ORDER BY lateness_seconds DESC, event_id LIMIT 5",
    "SELECT * FROM provisional_deltas VERSION AS OF 1",
    "SELECT * FROM provisional_totals",
    "SELECT * FROM provisional_totals WHERE status = 'OPEN'",
    "SELECT count(*) AS n FROM event_log",
    "SELECT * FROM watermark_progress ORDER BY batch_id",
    "SELECT reason, count(*) AS n FROM quarantine GROUP BY reason",
    # money: sums per currency, never across; decimals of 0, 2 and 3 places kept exact
    "SELECT currency, sum(total_amount) AS total, sum(event_count) AS n FROM provisional_totals "
    "GROUP BY currency",
    "SELECT currency, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi "
    "FROM event_log GROUP BY currency",
    "SELECT key, currency, CAST(sum(amount) AS DECIMAL(38, 3)) AS total FROM event_log "
    "WHERE NOT is_duplicate GROUP BY key, currency",
    "SELECT currency, CAST(round(sum(total_amount), 2) AS DECIMAL(38, 2)) AS r2 "
    "FROM provisional_totals GROUP BY currency",
    "SELECT key, currency, total_amount, abs(total_amount - 1) AS off_by_one "
    "FROM provisional_totals",
    "SELECT currency, amount, CAST(amount AS STRING) AS text FROM event_log",
    "SELECT t.currency, t.total_amount - d.total_amount AS rest FROM provisional_totals t "
    "JOIN (SELECT window_start, key, currency, sum(total_amount) AS total_amount "
    "FROM provisional_deltas GROUP BY 1, 2, 3) d ON t.window_start = d.window_start "
    "AND t.key = d.key AND t.currency = d.currency",
    # the fold's every column: statuses, revisions, the batches that closed and finalised
    "SELECT window_start, key, currency, status, revision, first_batch_id, last_batch_id "
    "FROM provisional_totals",
    "SELECT window_start, key, currency, closed_at, closed_batch_id, watermark_at_close, "
    "finalized_at, finalized_batch_id FROM provisional_totals",
    "SELECT status, count(*) AS n, sum(revision) AS revisions FROM provisional_totals "
    "GROUP BY status",
    "SELECT * FROM provisional_totals WHERE closed_batch_id IS NULL",
    "SELECT * FROM provisional_totals WHERE revision > 0",
    "SELECT window_date, count(*) AS n FROM provisional_totals GROUP BY window_date",
    # joins
    "SELECT l.event_id, l.currency, l.amount, t.status, t.total_amount FROM late_events l "
    "LEFT JOIN provisional_totals t ON l.window_start = t.window_start AND l.key = t.key "
    "AND l.currency = t.currency",
    "SELECT e.event_id, w.watermark FROM event_log e JOIN watermark_progress w "
    "ON e.batch_id = w.batch_id",
    "SELECT e.key, e.currency, count(*) AS n FROM event_log e WHERE EXISTS (SELECT 1 FROM "
    "late_events l WHERE l.event_id = e.event_id) GROUP BY e.key, e.currency",
    "SELECT event_id FROM event_log WHERE event_id NOT IN (SELECT event_id FROM late_events)",
    "SELECT key, currency FROM provisional_totals UNION ALL SELECT key, currency "
    "FROM late_events",
    "SELECT key, currency FROM provisional_deltas EXCEPT SELECT key, currency FROM late_events",
    "SELECT key, currency FROM provisional_deltas INTERSECT SELECT key, currency "
    "FROM event_log",
    # window functions
    "SELECT key, currency, window_start, row_number() OVER (PARTITION BY key, currency "
    "ORDER BY window_start) AS n FROM provisional_totals",
    "SELECT key, currency, window_start, total_amount, sum(total_amount) OVER (PARTITION BY "
    "key, currency ORDER BY window_start ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
    "AS running FROM provisional_totals",
    "SELECT batch_id, window_start, key, currency, total_amount, lag(total_amount) OVER "
    "(PARTITION BY window_start, key, currency ORDER BY processed_at, batch_id) AS before "
    "FROM provisional_deltas",
    "SELECT event_id, rank() OVER (PARTITION BY currency ORDER BY amount DESC, event_id) "
    "AS r FROM event_log",
    "SELECT batch_id, watermark, lead(watermark) OVER (ORDER BY processed_at) AS next_wm "
    "FROM watermark_progress",
    # CTEs, CASE, HAVING, DISTINCT, strings, dates
    "WITH per AS (SELECT key, currency, count(*) AS n FROM event_log GROUP BY 1, 2) "
    "SELECT * FROM per WHERE n > 1",
    "SELECT key, CASE WHEN status = 'FINAL' THEN 'done' ELSE 'pending' END AS state "
    "FROM provisional_totals",
    "SELECT currency, count(DISTINCT key) AS keys FROM event_log GROUP BY currency "
    "HAVING count(*) > 0",
    "SELECT DISTINCT currency FROM event_log",
    "SELECT upper(key) || '/' || lower(currency) AS label, length(event_id) AS len "
    "FROM event_log",
    "SELECT date_trunc('minute', event_time) AS minute, count(*) AS n FROM event_log "
    "GROUP BY 1",
    "SELECT max(event_time) AS newest, min(arrival_time) AS first_arrival FROM event_log",
    "SELECT coalesce(closed_batch_id, -1) AS closed, coalesce(finalized_batch_id, -1) AS fin "
    "FROM provisional_totals",
    # time travel: a table as it was after its first commits, and against now
    "SELECT count(*) AS n FROM event_log VERSION AS OF 0",
    "SELECT * FROM watermark_progress VERSION AS OF 0",
    "SELECT n.batch_id FROM watermark_progress n LEFT JOIN watermark_progress VERSION AS OF 0 "
    "o ON n.batch_id = o.batch_id WHERE o.batch_id IS NULL",
    "SELECT * FROM provisional_deltas FOR SYSTEM_VERSION AS OF 0",
    "SELECT count(*) AS n FROM provisional_deltas TIMESTAMP AS OF '{ts1}'",
    "SELECT sum(total_amount) AS total FROM provisional_deltas TIMESTAMP AS OF '{ts1}'",
]


def _norm(value: Any) -> Any:
    """A value as both engines must agree on it: a Decimal with its scale, a timestamp as
    UTC (Spark hands back naive local times, DuckDB zone-aware ones)."""
    if isinstance(value, Decimal):
        return ("decimal", str(value))
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.astimezone()).astimezone(UTC)
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    return value


def _rows(result: Any) -> list[Any]:
    return sorted((_norm(r) for r in result.rows), key=repr)


def _between_commits(warehouse: Any, table: str, version: int) -> str:
    """A TIMESTAMP AS OF literal (UTC) halfway between the commits of ``version`` and the
    next: whether an engine dates a commit by its commitInfo or its file's time, it is
    ``version``."""
    infos = dict(commits.commit_infos(warehouse, table, version - 1))
    middle = (infos[version]["timestamp"] + infos[version + 1]["timestamp"]) / 2000
    return datetime.fromtimestamp(middle, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


@pytest.mark.parametrize("case", CASES, ids=["grace", "currencies"])
def test_the_postmortem_corpus_answers_the_same_on_duckdb_and_spark(spark, streamed_scenario,
                                                                   case):
    wh = streamed_scenario(case.name).warehouse_path
    ts1 = _between_commits(wh, "provisional_deltas", 1)
    assert len(CORPUS) >= 40
    checked = 0
    for template in CORPUS:
        sql = template.format(ts1=ts1)
        on_spark = run_query(spark, wh, sql, limit=100_000)
        on_duck = run_duck_query(wh, sql, limit=100_000)
        assert [c.lower() for c in on_duck.columns] == [c.lower() for c in on_spark.columns], sql
        assert _rows(on_duck) == _rows(on_spark), sql
        checked += bool(on_spark.rows)
    assert checked >= 35  # the corpus asks about rows that exist, not empty tables
    totals = run_duck_query(wh, "SELECT DISTINCT currency FROM provisional_totals")
    assert len(totals.rows) >= (3 if "JPY" in case.name else 1)
