"""Spark tier: the nightly compaction rewrites a day's small files and nothing else -- every row
stays, a replay gives the same totals, a re-run is a no-op, an open day's provisional_totals
are left to the stream, and the stream (restarted or not) goes on as if nothing happened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reckon.cli import main
from reckon.errors import UsageError
from reckon.eventtime import EventTimeRules
from reckon.reference import run_stream
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
    seen = latest_watermark(spark, settings)
    assert seen is not None
    assert required_watermark(settings, DAY1) <= seen < required_watermark(settings, DAY2)

    names = [name for name, _ in COMPACTED]
    rows_before = {name: table_snapshot(spark, warehouse, name) for name in names}
    files_before = {name: _live_files(spark, warehouse, name, column, DAY1)
                    for name, column in COMPACTED}
    assert files_before[tb.EVENT_LOG] > 1  # (a MERGE rewrites a partition this small whole)
    replay_day(spark, settings, DAY1)
    canonical_before = canonical_rows(spark, settings, DAY1)

    result = compact_day(spark, settings, DAY1)
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
    replay_day(spark, settings, DAY1)
    assert canonical_rows(spark, settings, DAY1) == canonical_before

    # a re-run finds nothing to do and commits nothing, also through the CLI
    commits = _commits(warehouse)
    again = compact_day(spark, settings, DAY1)
    assert [(p.files_before, p.files_after, p.bytes_written) for p in again.partitions] == [
        (min(files_before[name], 1), min(files_before[name], 1), 0) for name in names]
    assert main(["compact", "--warehouse", str(warehouse), "--date", DAY1.isoformat(),
                 "--json"]) == 0
    [cli] = json.loads(capsys.readouterr().out)
    assert (cli["day"], cli["event_log_files_before"], cli["event_log_files_after"],
            cli["skipped"]) == (DAY1.isoformat(), 1, 1, [])
    assert _commits(warehouse) == commits

    # the open day: its provisional partition is the stream's until the watermark passes it
    files_day2 = _live_files(spark, warehouse, tb.PROVISIONAL_TOTALS, "window_date", DAY2)
    open_day = {p.table: p for p in compact_day(spark, settings, DAY2).partitions}
    reason = open_day[tb.PROVISIONAL_TOTALS].skipped
    assert reason is not None and "day not closed" in reason
    assert "2026-01-03T00:00:02Z" in reason  # end of the day's last window + grace 2s
    assert _live_files(spark, warehouse, tb.PROVISIONAL_TOTALS, "window_date", DAY2) == files_day2
    # ... and so is its event_log, which the stream compacts itself while the day is current
    assert "the stream compacts this day's event_log itself" in (
        open_day[tb.EVENT_LOG].skipped or "")
    assert open_day[tb.LATE_EVENTS].skipped is None and open_day[tb.QUARANTINE].skipped is None
    assert {name: table_snapshot(spark, warehouse, name) for name in names} == rows_before

    # a restart re-runs the last batch: its mark still found in every table's commits past the
    # compaction commits, so nothing is written twice; then the stream goes on
    commits = _commits(warehouse)
    restarted = BatchProcessor(spark, settings, query_id="test-query")
    restarted(_raw(spark, batches[2]), 2)
    assert _commits(warehouse) == commits
    restarted(_raw(spark, batches[3]), 3)
    expected = run_stream(batches, EventTimeRules.parse(**RULES))
    assert provisional_rows(spark, warehouse) == reference_rows(expected)
    assert late_rows(spark, warehouse) == reference_late(expected)
    log = spark.read.format("delta").load(str(warehouse / tb.EVENT_LOG))
    assert log.count() == sum(len(b) for b in batches)


def test_compacting_a_warehouse_without_an_event_log_says_what_to_do(spark, tmp_path):
    settings = stream_settings(tmp_path / "empty", **RULES)
    with pytest.raises(UsageError, match=r"no event_log in warehouse .*check --warehouse"):
        compact_day(spark, settings, DAY1)


def test_the_stream_compacts_its_event_log_every_few_batches(spark, tmp_path):
    """Every ``event_log_compact_every`` batches (2 here) the stream bin-packs the small files
    of event_log's current days and settles provisional_totals' open day between the batch's
    writes and its progress row: those commits carry no batch mark (none is set then), fewer
    files are live than were written, and rows, totals and a restart's re-run are as without
    it."""
    from delta.tables import DeltaTable

    warehouse = tmp_path / "wh"
    settings = stream_settings(warehouse, **RULES, event_log_compact_every=2)
    batches = random_batches(43, n=80, batches=6)
    processor = BatchProcessor(spark, settings, query_id="test-query")
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
    # provisional_totals' open day settled (the windows no MERGE reads again in a file of
    # their own): dataChange = false rewrites, unmarked too
    provisional = DeltaTable.forPath(spark, tb.table_path(warehouse, tb.PROVISIONAL_TOTALS))
    settles = [h for h in provisional.history().collect() if h.operation == "WRITE"]
    assert settles and all(h.userMetadata is None for h in settles)
    assert sorted(r.batch_id for r in progress.toDF().collect()) == list(range(len(batches)))
    log = spark.read.format("delta").load(str(warehouse / tb.EVENT_LOG))
    assert log.count() == sum(len(b) for b in batches)
    expected = run_stream(batches, EventTimeRules.parse(**RULES))
    assert provisional_rows(spark, warehouse) == reference_rows(expected)
    assert late_rows(spark, warehouse) == reference_late(expected)
    commits = _commits(warehouse)
    BatchProcessor(spark, settings, query_id="test-query")(_raw(spark, batches[-1]),
                                                            len(batches) - 1)
    assert _commits(warehouse) == commits


def test_settling_an_open_day_puts_the_windows_no_merge_reads_in_a_file_of_their_own(
        spark, tmp_path):
    """settle_open_provisional splits a day of provisional_totals at the cutoff: one file holds
    exactly the windows before it (which data skipping then keeps every later MERGE out of),
    the others only windows at or after it. Rows, the other day and the change feed are
    unchanged (a dataChange = false commit), and a second call finds nothing to do."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from reckon.timeutil import day_bounds
    from spark.compaction import settle_open_provisional

    warehouse = tmp_path / "wh"
    settings = stream_settings(warehouse, **RULES)
    path = tb.ensure_table(spark, warehouse, tb.PROVISIONAL_TOTALS)
    d0 = day_bounds(DAY1)[0]
    ws = F.lit(d0) + (F.col("id") * 10_000_000)  # 10 s windows from DAY1's midnight on
    rows = spark.range(0, 8_640 + 30, numPartitions=3).select(  # into DAY2's first windows
        F.timestamp_micros(ws).alias("window_start"),
        F.timestamp_micros(ws + 10_000_000).alias("window_end"),
        F.lit("m1").alias("key"), F.lit("EUR").alias("currency"),
        F.col("id").cast(tb.TOTAL).alias("total_amount"),
        F.lit(1).cast("long").alias("event_count"), F.lit(0).alias("revision"),
        F.lit("FINAL").alias("status"), F.lit(0).cast("long").alias("first_batch_id"),
        F.lit(0).cast("long").alias("last_batch_id"),
        *[F.lit(None).cast(t).alias(c) for c, t in (
            ("closed_at", "timestamp"), ("closed_batch_id", "long"),
            ("watermark_at_close", "timestamp"), ("finalized_at", "timestamp"),
            ("finalized_batch_id", "long"))],
        F.to_date(F.timestamp_micros(ws)).alias("window_date"))
    tb.conform(rows, tb.PROVISIONAL_TOTALS).write.format("delta").mode("append").save(path)
    table = DeltaTable.forPath(spark, path)
    before = sorted(table.toDF().collect())
    cutoff = d0 + 6_000 * 10_000_000 + 1  # windows 0..6000 settled, 6001.. open

    def files_of(day):
        df = table.toDF().filter(F.col("window_date") == F.lit(day))
        return (df.groupBy(F.input_file_name().alias("f"))
                .agg(F.min(F.unix_micros("window_start")).alias("lo"),
                     F.max(F.unix_micros("window_start")).alias("hi"),
                     F.count(F.lit(1)).alias("n")).collect())

    other_day = sorted(f.f for f in files_of(DAY2))
    assert any(f.lo < cutoff <= f.hi for f in files_of(DAY1))  # a straddling file
    assert settle_open_provisional(spark, settings, DAY1, cutoff)
    settled = [f for f in files_of(DAY1) if f.hi < cutoff]
    assert [f.n for f in settled] == [6_001]
    assert all(f.lo >= cutoff for f in files_of(DAY1) if f not in settled)
    assert sorted(f.f for f in files_of(DAY2)) == other_day
    assert sorted(table.toDF().collect()) == before
    last = table.history(1).first()
    assert last.userMetadata is None
    changes = (spark.read.format("delta").option("readChangeFeed", "true")
               .option("startingVersion", last.version).load(path))
    assert changes.count() == 0
    head = last.version
    assert not settle_open_provisional(spark, settings, DAY1, cutoff)
    assert table.history(1).first().version == head
    # the open side larger than the settled one: still two files, split at the cutoff
    earlier = d0 + 2_000 * 10_000_000 + 1
    assert settle_open_provisional(spark, settings, DAY1, earlier)
    sides = sorted((f.hi < earlier, f.lo >= earlier, f.n) for f in files_of(DAY1))
    assert sides == [(False, True, 8_640 - 2_001), (True, False, 2_001)]
    assert sorted(table.toDF().collect()) == before
