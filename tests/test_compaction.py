"""Spark tier: the nightly compaction rewrites a day's small files and nothing else -- every row
stays, a replay gives the same totals, a re-run is a no-op, an open day's provisional_deltas
are left to the stream, and the stream (restarted or not) goes on as if nothing happened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from reckon.errors import UsageError
from reckon.eventtime import EventTimeRules
from reckon.reference import stream_outcome
from spark import tables as tb
from spark.compaction import COMPACTED, compact_day
from spark.progress import latest_watermark, required_watermark
from spark.replay import replay_day
from spark.stream import BatchProcessor
from tests.stream_chaos import table_snapshot
from tests.streamkit import (
    canonical_rows,
    late_rows,
    provisional_rows,
    reference_late,
    reference_rows,
    stream_settings,
)
from tests.test_replay_audit import (
    DAY1,
    DAY2,
    RULES,
    _commits,
    _raw,
    random_batches,
    run_batches,
)


def _live_files(spark, warehouse: Path, name: str, column: str, day) -> int:
    """Files of the table's current version holding the day's partition (Delta's file list)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    table = DeltaTable.forPath(spark, tb.table_path(warehouse, name)).toDF()
    return len(table.filter(F.col(column) == F.lit(day)).inputFiles())


def test_compaction_changes_no_row_and_the_stream_goes_on(spark, tmp_path, capsys):
    warehouse = tmp_path / "wh"
    settings = stream_settings(warehouse, **RULES)
    batches = random_batches(41, n=60, batches=4)
    run_batches(spark, settings, batches[:3])
    # the case under test: the first day is closed, the second is not
    seen = latest_watermark(spark, settings.warehouse_path)
    assert seen is not None
    rules = settings.event_time_rules()
    assert required_watermark(rules, DAY1) <= seen < required_watermark(rules, DAY2)

    names = [name for name, _ in COMPACTED]
    rows_before = {name: table_snapshot(spark, warehouse, name) for name in names}
    files_before = {name: _live_files(spark, warehouse, name, column, DAY1)
                    for name, column in COMPACTED}
    assert files_before[tb.EVENT_LOG] > 1  # (a MERGE rewrites a partition this small whole)
    replay_day(spark, settings.replay_config(), DAY1)
    canonical_before = canonical_rows(spark, settings, DAY1)

    result = compact_day(spark, settings.compaction_config(), DAY1)
    by_table = {p.table: p for p in result.partitions}
    for name, column in COMPACTED:
        part = by_table[name]
        assert part.skipped is None
        assert part.partition == f"{column}={DAY1.isoformat()}"
        assert part.files_before == files_before[name]
        assert part.files_after == _live_files(spark, warehouse, name, column, DAY1)
        assert part.files_after == min(files_before[name], 1)
        assert (part.bytes_written > 0) == (files_before[name] > 1)
    summary = result.to_dict()
    assert summary["event_log_files_before"] == files_before[tb.EVENT_LOG]
    assert summary["event_log_files_after"] == 1 and summary["skipped"] == []

    assert {name: table_snapshot(spark, warehouse, name) for name in names} == rows_before
    replay_day(spark, settings.replay_config(), DAY1)
    assert canonical_rows(spark, settings, DAY1) == canonical_before

    # a re-run finds nothing to do and commits nothing, also through the CLI
    commits = _commits(warehouse)
    again = compact_day(spark, settings.compaction_config(), DAY1)
    assert [(p.files_before, p.files_after, p.bytes_written) for p in again.partitions] == [
        (min(files_before[name], 1), min(files_before[name], 1), 0) for name in names]
    assert main(["compact", "--warehouse", str(warehouse), "--date", DAY1.isoformat(),
                 "--json"]) == 0
    [cli] = json.loads(capsys.readouterr().out)
    assert (cli["day"], cli["event_log_files_before"], cli["event_log_files_after"],
            cli["skipped"]) == (DAY1.isoformat(), 1, 1, [])
    assert _commits(warehouse) == commits

    # the open day: event_log and provisional_deltas are the stream's to compact (it does so
    # itself every few batches) until its watermark leaves the day
    files_day2 = _live_files(spark, warehouse, tb.PROVISIONAL_DELTAS, "window_date", DAY2)
    open_day = {p.table: p
                for p in compact_day(spark, settings.compaction_config(), DAY2).partitions}
    for name in (tb.EVENT_LOG, tb.PROVISIONAL_DELTAS):
        assert f"the stream compacts this day's {name} itself" in (open_day[name].skipped or "")
    assert _live_files(spark, warehouse, tb.PROVISIONAL_DELTAS, "window_date", DAY2) == files_day2
    assert open_day[tb.LATE_EVENTS].skipped is None and open_day[tb.QUARANTINE].skipped is None
    assert {name: table_snapshot(spark, warehouse, name) for name in names} == rows_before

    # a restart re-runs the last batch: its mark still found in every table's commits past the
    # compaction commits, so nothing is written twice; then the stream goes on
    commits = _commits(warehouse)
    restarted = BatchProcessor.of(spark, settings, query_id="test-query")
    restarted(_raw(spark, batches[2]), 2)
    assert _commits(warehouse) == commits
    restarted(_raw(spark, batches[3]), 3)
    expected = stream_outcome(batches, EventTimeRules.parse(**RULES))
    assert provisional_rows(spark, warehouse) == reference_rows(expected)
    assert late_rows(spark, warehouse) == reference_late(expected)
    log = spark.read.format("delta").load(str(warehouse / tb.EVENT_LOG))
    assert log.count() == sum(len(b) for b in batches)


def test_compacting_a_warehouse_without_an_event_log_says_what_to_do(spark, tmp_path):
    settings = stream_settings(tmp_path / "empty", **RULES)
    with pytest.raises(UsageError, match=r"no event_log in warehouse .*check --warehouse"):
        compact_day(spark, settings.compaction_config(), DAY1)


def test_the_stream_compacts_its_event_log_every_few_batches(spark, tmp_path):
    """Every ``event_log_compact_every`` batches (2 here) the stream bin-packs the small files
    of event_log's and provisional_deltas' current days between the batch's writes and its
    progress row: those commits carry no batch mark (none is set then), fewer
    files are live than were written, and rows, totals and a restart's re-run are as without
    it."""
    from delta.tables import DeltaTable

    warehouse = tmp_path / "wh"
    settings = stream_settings(warehouse, **RULES, event_log_compact_every=2)
    batches = random_batches(43, n=80, batches=6)
    processor = BatchProcessor.of(spark, settings, query_id="test-query")
    for batch_id, batch in enumerate(batches):
        processor(_raw(spark, batch), batch_id)
    history = (DeltaTable.forPath(spark, tb.table_path(warehouse, tb.EVENT_LOG)).history()
               .select("operation", "operationMetrics", "userMetadata").collect())
    written = sum(int(h.operationMetrics["numFiles"]) for h in history if h.operation == "WRITE")
    compactions = [h for h in history if h.operation == "OPTIMIZE"]
    assert compactions and all(h.userMetadata is None for h in compactions)
    live = len(spark.read.format("delta").load(str(warehouse / tb.EVENT_LOG)).inputFiles())
    assert live < written
    # watermark_progress too: a file per batch, compacted with it (rows unchanged)
    progress = DeltaTable.forPath(spark, tb.table_path(warehouse, tb.WATERMARK_PROGRESS))
    marks = [h.userMetadata for h in progress.history().collect() if h.operation == "OPTIMIZE"]
    assert marks and all(m is None for m in marks)
    assert len(progress.toDF().inputFiles()) < len(batches)
    # provisional_deltas' current days too (a read of the open windows folds them)
    deltas = DeltaTable.forPath(spark, tb.table_path(warehouse, tb.PROVISIONAL_DELTAS))
    packs = [h for h in deltas.history().collect() if h.operation == "OPTIMIZE"]
    assert packs and all(h.userMetadata is None for h in packs)
    assert sorted(r.batch_id for r in progress.toDF().collect()) == list(range(len(batches)))
    log = spark.read.format("delta").load(str(warehouse / tb.EVENT_LOG))
    assert log.count() == sum(len(b) for b in batches)
    expected = stream_outcome(batches, EventTimeRules.parse(**RULES))
    assert provisional_rows(spark, warehouse) == reference_rows(expected)
    assert late_rows(spark, warehouse) == reference_late(expected)
    commits = _commits(warehouse)
    BatchProcessor.of(spark, settings, query_id="test-query")(_raw(spark, batches[-1]),
                                                            len(batches) - 1)
    assert _commits(warehouse) == commits


