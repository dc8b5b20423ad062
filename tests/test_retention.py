"""Spark tier: `reckon vacuum` deletes the files no version within the retention uses and
nothing else. Every current row stays, the stream goes on, and the readers of old versions
say what is gone: the audit asks for a new replay; explain's history (appended deltas) stays
whole."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from app.airflow_env import run_dag_for_day, settings_env
from app.cli import main
from audits.audit import audit_day
from audits.explain_spark import explain_window
from reckon.errors import UsageError
from reckon.eventtime import EventTimeRules
from reckon.reference import stream_outcome
from reports.db.repository import audit_recorder
from spark import tables as tb
from spark.compaction import compact_day
from spark.replay import replay_day
from spark.retention import vacuum_warehouse
from spark.session import session_conf
from tests.stream_chaos import table_snapshot
from tests.streamkit import provisional_rows, reference_rows, stream_settings
from tests.test_replay_audit import DAY1, RULES, _raw, random_batches, run_batches


def explain(spark, settings, key, instant, currency=None):
    """``explain_window`` as ``reckon explain`` calls it: the settings' warehouse and rules."""
    return explain_window(spark, settings.warehouse_path, settings.event_time_rules(), key,
                          instant, currency)


NO_SAFETY_CHECK = {"spark.databricks.delta.retentionDurationCheck.enabled": "false"}


def _data_files(warehouse: Path) -> set[Path]:
    """Every data and change-data file on disk (not the logs or their checkpoints)."""
    return {p for p in warehouse.rglob("*.parquet") if "_delta_log" not in p.parts}


def _tables(warehouse: Path) -> list[str]:
    return [name for name in tb.SCHEMAS if tb.table_exists(warehouse, name)]


def test_vacuum_deletes_unused_files_only_and_old_readers_say_what_is_gone(
        spark, tmp_path, capsys):
    warehouse = tmp_path / "wh"
    settings = stream_settings(warehouse, **RULES)
    batches = random_batches(41, n=60, batches=4)
    processor = run_batches(spark, settings, batches[:3])
    # pins the event_log version its audit will read
    replay_day(spark, settings.replay_config(), DAY1)
    compact_day(spark, settings.compaction_config(), DAY1)  # replaces that version's small files
    names = _tables(warehouse)
    rows = {name: table_snapshot(spark, warehouse, name) for name in names}
    on_disk = _data_files(warehouse)

    with pytest.raises(UsageError, match="below 7d"):
        vacuum_warehouse(spark, settings.warehouse_path, retain="1h")
    # the weekly DAG, for real (dag.test in a subprocess), counts without deleting; at the
    # default 30 days nothing is old enough: every replaced file is minutes old
    # (any day after the DAG's start date: a weekly run ignores the day)
    run = run_dag_for_day(date(2026, 3, 1), settings_env(settings),
                          airflow_home=tmp_path / "airflow",
                          run_conf={"dry_run": True}, dag_id="reckon_vacuum")
    assert run.succeeded, f"{run.describe()}\n{run.log_tail}"
    returned = run.returns["vacuum"]
    assert (returned["step"], returned["summary"]["dry_run"]) == ("vacuum", True)
    assert [t["table"] for t in returned["summary"]["tables"]] == names
    assert (returned["summary"]["retain"], returned["summary"]["files"]) == ("30d", 0)
    assert _data_files(warehouse) == on_disk

    with session_conf(spark, NO_SAFETY_CHECK):
        dry = vacuum_warehouse(spark, settings.warehouse_path, retain="0s", dry_run=True)
        assert _data_files(warehouse) == on_disk
        assert main(["vacuum", "--warehouse", str(warehouse), "--retain", "0s", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    left = _data_files(warehouse)
    assert dry.files > 0 and left < on_disk
    assert done["files"] == dry.files == len(on_disk - left)
    assert {t["table"]: t["files"] for t in done["tables"]} == \
        {t.table: t.files for t in dry.tables}
    assert {name: table_snapshot(spark, warehouse, name) for name in names} == rows

    # the audit's attribution reads event_log as the day's replay pinned it, whose files the
    # compaction replaced and the vacuum deleted: it asks for a new replay
    with pytest.raises(UsageError, match=f"reckon replay --date {DAY1}"):
        audit_day(spark, settings.audit_config(), DAY1, recorder=audit_recorder(settings))
    replay_day(spark, settings.replay_config(), DAY1)
    assert audit_day(spark, settings.audit_config(), DAY1, recorder=audit_recorder(settings)).unexplained == 0

    # the stream goes on; explain still tells the whole history: the provisional row's
    # history is its deltas, rows the vacuum never removes (it removes replaced files only)
    processor(_raw(spark, batches[3]), 3)
    expected = stream_outcome(batches, EventTimeRules.parse(**RULES))
    assert provisional_rows(spark, warehouse) == reference_rows(expected)
    (start, key, currency), row = next(
        (k, v) for k, v in sorted(provisional_rows(spark, warehouse).items())
        if v[-1] == 3 and v[-2] < 3)  # first counted before, revised in 3
    with session_conf(spark, NO_SAFETY_CHECK):
        vacuum_warehouse(spark, settings.warehouse_path, retain="0s")
    story = explain(spark, settings, key, start, currency=currency)
    [chapter] = [ch for ch in story.chapters if ch.window_start == start]
    counted = [h for h in chapter.history if h.change == "counted"]
    assert counted[0].batch_id == row[-2] and counted[-1].batch_id == 3
    assert chapter.history[-1].total_amount == row[0]
    assert any(line.startswith(f"  batch {row[-2]} (counted)") for line in chapter.lines)
