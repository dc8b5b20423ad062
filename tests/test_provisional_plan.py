"""How provisional_totals is read, as Spark plans it: the fold of the deltas comes out keyed on
the grain readers join on, and a missing watermark_progress costs no join. Both decide what the
audit's join costs on a 2M-row day (BENCHMARKS.md, audit); a plan that shuffled the folded rows
again, or joined them with nothing, would pass every result test and be slower."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from app.settings import load_settings
from spark import tables as tb
from spark.provisional import ProvisionalVersions, read_provisional
from storage.commits import current_version

pytestmark = pytest.mark.spark

DAY = date(2026, 1, 1)


def _delta(key: str, currency: str, amount: str, batch_id: int, window_date: date = DAY
           ) -> dict[str, object]:
    start = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)
    return {"window_start": start, "window_end": datetime(2026, 1, 1, 0, 1, tzinfo=UTC),
            "key": key, "currency": currency, "total_amount": Decimal(amount),
            "event_count": 1, "revised": 0, "batch_id": batch_id, "query_id": "q1",
            "processed_at": datetime(2026, 1, 1, 0, 2, batch_id, tzinfo=UTC),
            "window_date": window_date}


def _deltas_only(spark, tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    """A warehouse with provisional_deltas and no watermark_progress (a stream that recorded
    no batch yet, or a benchmark's synthetic day)."""
    wh = tmp_path / "wh"
    tb.ensure_table(spark, wh, tb.PROVISIONAL_DELTAS)
    (spark.createDataFrame(rows, tb.SCHEMAS[tb.PROVISIONAL_DELTAS]).write.format("delta")
     .mode("append").save(tb.table_path(wh, tb.PROVISIONAL_DELTAS)))
    return wh


def _read_day(spark, wh: Path):
    lo = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
    rules = load_settings(env={}, warehouse=str(wh), window="1m").event_time_rules()
    return read_provisional(spark, wh, rules,
                            versions=ProvisionalVersions(
                                current_version(wh, tb.PROVISIONAL_DELTAS), progress=None),
                            since_start=lo, until_start=lo + 86_400_000_000)


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_a_join_on_the_grain_moves_the_folded_rows_once(spark, tmp_path: Path) -> None:
    wh = _deltas_only(spark, tmp_path, [_delta("k1", "EUR", "1.00", 1),
                                        _delta("k1", "EUR", "2.50", 2),
                                        _delta("k1", "JPY", "7", 1)])
    folded = _read_day(spark, wh)
    other = spark.createDataFrame([(datetime(2026, 1, 1, tzinfo=UTC), "k1", "EUR")],
                                  "window_start timestamp, key string, currency string")
    plan = _plan(folded.join(other, ["window_start", "key", "currency"], "full"))
    # one exchange for the fold (on the grain), one for the other side: none between
    assert plan.count("Exchange hashpartitioning") == 2, plan
    assert "SortMergeJoin" in plan and plan.count("Join") == 1, plan  # no join with progress
    rows = {(r.key, r.currency): (r.total_amount, r.event_count, r.first_batch_id,
                                  r.last_batch_id) for r in folded.collect()}
    assert rows == {("k1", "EUR"): (Decimal("3.500"), 2, 1, 2),
                    ("k1", "JPY"): (Decimal("7.000"), 1, 1, 1)}


def test_a_row_in_the_next_days_partition_stays_out_of_the_day(spark, tmp_path: Path) -> None:
    wh = _deltas_only(spark, tmp_path, [
        _delta("k1", "EUR", "1.00", 1),
        _delta("k1", "EUR", "9.00", 2, window_date=date(2026, 1, 2))])  # edited by hand
    rows = [(r.total_amount, r.window_date) for r in _read_day(spark, wh).collect()]
    assert rows == [(Decimal("1.000"), DAY)]
