"""A nightly step over a small day runs Spark's expressions interpreted; a big day generates
code (spark.execution_mode). The day's size is the event log's rows by its Delta statistics;
whether Spark compiles is read from Spark's own codegen metric with a plan it never saw."""

from __future__ import annotations

import time
from datetime import date
from pathlib import Path

import pytest

from app.settings import load_settings
from reckon.errors import ConfigError
from spark.execution_mode import day_rows, interpreted_pays

DAY = date(2026, 1, 1)


@pytest.mark.parametrize(("rows", "max_rows", "interpreted"), [
    (0, 200_000, True), (200_000, 200_000, True), (200_001, 200_000, False),
    (None, 200_000, False), (5, 0, False), (0, 0, False)])
def test_a_known_day_at_most_the_setting_is_interpreted(rows, max_rows, interpreted):
    assert interpreted_pays(rows, max_rows) is interpreted


def test_the_setting_refuses_a_negative_bound_and_reaches_the_settings(tmp_path: Path):
    assert load_settings(env={}).interpreted_max_rows == 200_000
    assert load_settings(env={"RECKON_INTERPRETED_MAX_ROWS": "0"}).interpreted_max_rows == 0
    with pytest.raises(ConfigError, match=r"^interpreted_max_rows=-1 must be >= 0"):
        load_settings(env={}, interpreted_max_rows=-1)
    assert day_rows(tmp_path / "no-warehouse", [DAY]) == 0  # no event log: a quiet day


def _compiles_a_new_plan(spark) -> bool:
    """Whether Spark compiles generated code for a projection it has never seen."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    before = int(metrics.METRIC_COMPILATION_TIME().getCount())
    unseen = time.time_ns() % 1_000_000_007
    spark.range(3).selectExpr(f"id * {unseen} + 1 AS probe").collect()
    return int(metrics.METRIC_COMPILATION_TIME().getCount()) > before


@pytest.mark.spark
def test_a_small_day_is_interpreted_a_big_one_compiled_and_the_session_kept(
        spark, streamed_scenario):
    from pyspark.sql import functions as F

    from spark import tables as tb
    from spark.execution_mode import execution_for_days
    from spark.session import session_conf
    from tests.test_stream_codegen import GENERATED_CODE

    wh = streamed_scenario("worked example, allowed lateness 0").warehouse_path
    rows = tb.read_table(spark, wh, tb.EVENT_LOG).filter(F.col("event_date") == DAY).count()
    assert rows > 0 and day_rows(wh, [DAY]) == rows
    assert day_rows(wh, [date(2025, 12, 31)]) == 0
    with session_conf(spark, GENERATED_CODE):
        assert _compiles_a_new_plan(spark)  # the metric moves in this JVM
        with execution_for_days(spark, wh, [DAY], max_rows=rows) as interpreted:
            assert interpreted and not _compiles_a_new_plan(spark)
        with execution_for_days(spark, wh, [DAY], max_rows=rows - 1) as interpreted:
            assert not interpreted and _compiles_a_new_plan(spark)
        with execution_for_days(spark, wh, [DAY], max_rows=0) as interpreted:
            assert not interpreted and _compiles_a_new_plan(spark)
        assert {k: spark.conf.get(k) for k in GENERATED_CODE} == GENERATED_CODE  # as it was
