"""The watermark wait of the nightly run, against a tiny real watermark_progress table."""

from __future__ import annotations

import json
import re
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from app.settings import load_settings
from reckon.config import Settings
from reckon.errors import UsageError, WatermarkNotReadyError
from reckon.timeutil import day_bounds, to_micros

DAY = date(2026, 1, 1)
END = datetime(2026, 1, 2, tzinfo=UTC)


def _settings(warehouse: Path, allowed_lateness: str = "5s") -> Settings:
    return load_settings(env={}, warehouse=str(warehouse), allowed_lateness=allowed_lateness, shuffle_partitions=2)


def _append_progress(spark, warehouse: Path, batch_id: int, watermark: datetime | None) -> None:
    from spark import tables as tb

    tb.ensure_table(spark, warehouse, tb.WATERMARK_PROGRESS)
    now = datetime(2026, 1, 2, 1, 0, tzinfo=UTC)
    row: tuple[object, ...] = (batch_id, "query-1", now, None, watermark, {0: END}, {0: now}, [], "{}",
           1, 1, 0, 0, 1, 0, 0, 0.1, "{}", None, None)
    df = spark.createDataFrame([row], tb.SCHEMAS[tb.WATERMARK_PROGRESS])
    df.write.format("delta").mode("append").save(tb.table_path(warehouse, tb.WATERMARK_PROGRESS))


def test_no_progress_table_means_no_watermark_and_a_clear_error(spark, warehouse):
    from spark.progress import latest_watermark, wait_for_day_closed

    settings = _settings(warehouse)
    assert latest_watermark(spark, settings.warehouse_path) is None
    with pytest.raises(WatermarkNotReadyError) as err:
        wait_for_day_closed(spark, settings.progress_config(), DAY, timeout="0s", poll="1s")
    text = str(err.value)
    assert "2026-01-01" in text
    assert "2026-01-02T00:00:05Z" in text  # end of day + allowed lateness 5s
    assert "has not written any progress yet" in text
    assert "Is the stream running" in text and "lookback_days" in text


def test_undefined_watermark_is_reported_as_such(spark, warehouse):
    from spark.progress import latest_watermark, wait_for_day_closed

    settings = _settings(warehouse)
    _append_progress(spark, warehouse, 0, None)
    assert latest_watermark(spark, settings.warehouse_path) is None
    with pytest.raises(WatermarkNotReadyError, match="recorded no watermark yet"):
        wait_for_day_closed(spark, settings.progress_config(), DAY, timeout="0s", poll="1s")


def test_latest_watermark_is_the_largest_recorded(spark, warehouse):
    from spark.progress import latest_watermark

    settings = _settings(warehouse)
    _append_progress(spark, warehouse, 0, END - timedelta(seconds=30))
    _append_progress(spark, warehouse, 1, END + timedelta(seconds=2, microseconds=7))
    _append_progress(spark, warehouse, 2, None)
    assert latest_watermark(spark, settings.warehouse_path) == to_micros(END) + 2_000_007


def test_short_of_end_plus_grace_times_out_naming_day_and_watermark(spark, warehouse):
    from spark.progress import wait_for_day_closed

    settings = _settings(warehouse, allowed_lateness="5s")
    # past the end of the day, but not past end + allowed_lateness
    _append_progress(spark, warehouse, 0, END + timedelta(seconds=4))
    with pytest.raises(WatermarkNotReadyError) as err:
        wait_for_day_closed(spark, settings.progress_config(), DAY, timeout="1s", poll="300ms")
    text = str(err.value)
    assert "day 2026-01-01 is not closed yet" in text
    assert "at or past 2026-01-02T00:00:05Z" in text
    assert "latest watermark is 2026-01-02T00:00:04Z (1 second short)" in text
    assert re.search(r"after waiting \d+ seconds? \(the limit is 1 second\)", text), text


def test_passes_once_watermark_reaches_end_plus_grace(spark, warehouse):
    from spark.progress import wait_for_day_closed

    settings = _settings(warehouse, allowed_lateness="5s")
    _append_progress(spark, warehouse, 0, END + timedelta(seconds=5))
    result = wait_for_day_closed(spark, settings.progress_config(), DAY, timeout="0s", poll="1s")
    assert json.loads(json.dumps(result)) == result  # JSON-safe, what an Airflow task passes on
    assert result["day"] == "2026-01-01"
    assert result["required_watermark"] == day_bounds(DAY)[1] + 5_000_000
    assert result["watermark"] == result["required_watermark"]
    assert result["watermark_iso"] == "2026-01-02T00:00:05Z"
    assert result["checks"] == 1


def test_keeps_polling_until_the_stream_gets_there(spark, warehouse):
    from spark.progress import wait_for_day_closed

    settings = _settings(warehouse, allowed_lateness="0s")
    _append_progress(spark, warehouse, 0, END - timedelta(seconds=1))
    writer = threading.Timer(1.0, _append_progress, (spark, warehouse, 1, END))
    writer.start()
    try:
        result = wait_for_day_closed(spark, settings.progress_config(), DAY, timeout="60s",
                                     poll="200ms")
    finally:
        writer.join()
    assert result["watermark"] == to_micros(END)
    assert result["checks"] > 1
    assert result["waited_seconds"] >= 1.0


def test_bad_durations_name_the_argument(spark, warehouse):
    from spark.progress import wait_for_day_closed

    settings = _settings(warehouse)
    with pytest.raises(UsageError, match="poll='0s' is not valid"):
        wait_for_day_closed(spark, settings.progress_config(), DAY, timeout="1s", poll="0s")
    with pytest.raises(UsageError, match="timeout='soon' is not valid"):
        wait_for_day_closed(spark, settings.progress_config(), DAY, timeout="soon", poll="1s")


@pytest.mark.parametrize(("window", "slide", "allowed_lateness"), [
    ("10s", "", "5s"), ("10s", "5s", "0s"), ("1m", "15s", "3s"), ("1h", "1m", "0s"),
    ("7m", "", "0s"), ("14s", "7s", "1s")])  # steps that do not divide a day
def test_required_watermark_is_where_the_days_last_window_turns_final(tmp_path, window, slide,
                                                                      allowed_lateness):
    """Fast tier: the wait threshold against the one lifecycle rule (reckon.eventtime). Every
    window starting in the day is FINAL at it, and one microsecond earlier one is not: with
    hopping windows, or a step that does not divide 24 hours, that is past midnight + allowed_lateness,
    since the last ones end in the next day."""
    from reckon.eventtime import WindowStatus, window_status
    from spark.progress import required_watermark

    settings = load_settings(env={}, warehouse=str(tmp_path), window=window, slide=slide,
                             allowed_lateness=allowed_lateness)
    rules = settings.event_time_rules()
    start, end = day_bounds(DAY)
    step = rules.windows.step
    first_start = -(-start // step) * step  # windows sit on the epoch's grid, not midnight's
    day_window_ends = [s + rules.windows.size for s in range(first_start, end, step)]
    required = required_watermark(settings.event_time_rules(), DAY)
    assert all(window_status(e, required, rules.allowed_lateness) is WindowStatus.FINAL
               for e in day_window_ends)
    assert any(window_status(e, required - 1, rules.allowed_lateness) is not WindowStatus.FINAL
               for e in day_window_ends)
    assert required == max(day_window_ends) + rules.allowed_lateness


def test_the_log_statistics_give_the_watermark_without_spark(spark, warehouse):
    """logged_watermark reads the Delta log's file statistics (no Spark job): it equals the
    aggregate over the table at every step (to the millisecond, rounded down: never ahead),
    through an undefined watermark, a newest row behind an earlier one (two queries), and a
    compaction of the table; a file without statistics for the column is not guessed at."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from spark import tables as tb
    from spark.progress import latest_watermark, logged_watermark

    settings = _settings(warehouse)
    path = tb.table_path(warehouse, tb.WATERMARK_PROGRESS)

    def exact() -> int:  # the aggregate over the table's rows
        return spark.read.format("delta").load(path).agg(
            F.max(F.unix_micros("watermark"))).first()[0]

    assert logged_watermark(warehouse) == (True, None)  # no table yet
    _append_progress(spark, warehouse, 0, None)
    assert logged_watermark(warehouse) == (False, None)  # only null rows: Spark settles it
    assert latest_watermark(spark, settings.warehouse_path) is None
    steps = [END - timedelta(seconds=9), END + timedelta(microseconds=1_500), END]
    for batch_id, watermark in enumerate(steps, start=1):
        _append_progress(spark, warehouse, batch_id, watermark)
        known, seen = logged_watermark(warehouse)
        assert known and exact() - 1_000 < seen <= exact()
        assert latest_watermark(None, settings.warehouse_path) == seen  # no Spark at all
        # Spark: to the microsecond
        assert latest_watermark(spark, settings.warehouse_path) == exact()
    DeltaTable.forPath(spark, path).optimize().executeCompaction()
    assert logged_watermark(warehouse) == (True, to_micros(END + timedelta(milliseconds=1)))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES "
              "('delta.dataSkippingNumIndexedCols' = '0')")
    _append_progress(spark, warehouse, 9, END + timedelta(seconds=1))
    assert logged_watermark(warehouse) == (False, None)  # a file without statistics
    assert latest_watermark(spark, settings.warehouse_path) == to_micros(END + timedelta(seconds=1))
