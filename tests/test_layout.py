"""Spark tier: a warehouse written by the earlier layout (totals per (window, key) that added
currencies together, amounts at scale 2) is refused at the start of the stream, the replay, the
audit and the report, with how to rebuild it, and nothing is written into it."""

from __future__ import annotations

from datetime import date

import pytest
from pyspark.sql import types as T

from app.pipeline import run_report
from audits.audit import audit_day
from reckon.errors import LayoutError
from spark import tables as tb
from spark.replay import replay_day
from spark.stream import BatchProcessor
from storage import commits
from storage.layout import logged_columns, require_logged_layout
from tests.streamkit import stream_settings

_OLD_TOTALS = T.StructType([
    T.StructField("window_start", T.TimestampType(), False),
    T.StructField("window_end", T.TimestampType(), False),
    T.StructField("key", T.StringType(), False),
    T.StructField("total_amount", T.DecimalType(38, 2), False),
    T.StructField("event_count", T.LongType(), False),
    T.StructField("window_date", T.DateType(), False),
])


def _old_table(spark, warehouse, name: str, schema: T.StructType) -> None:
    spark.createDataFrame([], schema).write.format("delta").save(tb.table_path(warehouse, name))


def _versions(warehouse) -> dict[str, int | None]:
    return {name: commits.current_version(warehouse, name) for name in tb.TABLES}


def test_an_earlier_layout_is_refused_by_every_writer_and_left_untouched(spark, tmp_path):
    warehouse = tmp_path / "wh"
    settings = stream_settings(warehouse)
    _old_table(spark, warehouse, tb.PROVISIONAL_TOTALS, _OLD_TOTALS)
    _old_table(spark, warehouse, tb.CANONICAL_TOTALS, _OLD_TOTALS)
    old_log = T.StructType([f if f.name != "amount" else T.StructField(
        "amount", T.DecimalType(18, 2), False) for f in tb.SCHEMAS[tb.EVENT_LOG].fields])
    _old_table(spark, warehouse, tb.EVENT_LOG, old_log)
    before = _versions(warehouse)
    steps = {
        "stream": lambda: BatchProcessor.of(spark, settings, query_id="q"),
        "replay": lambda: replay_day(spark, settings.replay_config(), date(2026, 1, 1)),
        "audit": lambda: audit_day(spark, settings.audit_config(), date(2026, 1, 1), recorder=None),
        "report": lambda: run_report(settings, date(2026, 1, 1), out=str(tmp_path / "r")),
    }
    for step, run in steps.items():
        with pytest.raises(LayoutError) as caught:
            run()
        message = str(caught.value)
        assert "earlier reckon layout" in message, step
        assert "provisional_totals is a table" in message, step
        assert "no column currency" in message or "decimal(18,2), not decimal(18,3)" in message
        assert "into a new, empty --warehouse" in message, step
        assert "\n" not in message  # one line
    assert _versions(warehouse) == before  # nothing was created or written
    assert not (tmp_path / "r").exists()


def test_the_current_layout_passes_and_a_missing_table_is_no_problem(spark, tmp_path):
    warehouse = tmp_path / "wh"
    tb.require_layout(spark, warehouse)  # nothing exists yet
    tb.ensure_table(spark, warehouse, tb.PROVISIONAL_DELTAS)
    tb.require_layout(spark, warehouse)
    require_logged_layout(warehouse)  # every step's check, from the Delta log, agrees
    assert logged_columns(warehouse, tb.PROVISIONAL_DELTAS) == {
        f.name: f.dataType.simpleString()
        for f in tb.read_table(spark, warehouse, tb.PROVISIONAL_DELTAS).schema.fields}
    assert tb.layout_problem(tb.SCHEMAS[tb.RECONCILIATION], tb.RECONCILIATION) is None
    assert tb.layout_problem(_OLD_TOTALS, tb.CANONICAL_TOTALS) == (
        "canonical_totals has no column currency")
