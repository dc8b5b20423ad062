"""The nightly steps are idempotent per day (an Airflow retry or a backfill is safe), and a replay
killed mid-write leaves no partial day (Delta's atomic replaceWhere).

The warehouse comes from the real foreachBatch function (tests/test_replay_audit.py helpers:
events around midnight, out of order, duplicates beyond the dedup horizon, so the day has late
events and explained breaks). Steps run through app.pipeline, the functions the CLI and the
Airflow DAG call; the crash runs `reckon replay` as its own process and SIGKILLs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from app import pipeline
from reckon.errors import DataQualityError
from reports.db.repository import ReportDB
from spark import tables as tb
from spark.replay import replay_day
from tests.streamkit import copy_warehouse, stream_settings
from tests.test_replay_audit import DAY1, DAY2, RULES, random_batches, run_batches

pytestmark = pytest.mark.slow

RUNS = 3
# the same event-time rules for a `reckon replay` subprocess (its replay_id hashes them)
RULES_ENV = {"RECKON_" + k.upper(): v for k, v in RULES.items()}


@pytest.fixture(scope="module")
def streamed(spark, tmp_path_factory) -> Path:
    """A warehouse after the stream (built once; each test works on its own copy)."""
    warehouse = tmp_path_factory.mktemp("nightly") / "wh"
    run_batches(spark, stream_settings(warehouse, **RULES),
                random_batches(21, n=60, stragglers=3))
    late = spark.read.format("delta").load(str(warehouse / "late_events")).count()
    assert late >= 3  # the day has late events, so the steps' idempotency covers them
    return warehouse


def _rows(spark, warehouse: Path, name: str, day=None, drop: tuple[str, ...] = ()) -> list[tuple]:
    df = spark.read.format("delta").load(str(warehouse / name))
    if day is not None:
        df = df.filter(df.window_date == day)
    keep = [c for c in df.columns if c not in drop]
    return sorted(tuple(str(v) for v in r) for r in df.select(*keep).collect())


def _without(record: object, *names: str) -> dict:
    return {k: v for k, v in asdict(record).items() if k not in names}  # type: ignore[call-overload]


def _check(settings, day) -> tuple[str, str]:
    """Run the data-quality step; (outcome, check run id). A blocking failure is a result here
    (recorded before the raise), not an error: idempotency means the same answer each time."""
    try:
        pipeline.run_check(settings, day)
        outcome = "passed"
    except DataQualityError:
        outcome = "blocking failure"
    with ReportDB.from_settings(settings) as db:
        run = db.current_check_run(day)
    assert run is not None, "the check step recorded no run"
    return outcome, run.run_id


def _expectations(settings, run_id: str) -> list[tuple]:
    with ReportDB.from_settings(settings) as db:
        return sorted((r.suite, r.table, r.expectation, str(r.column), r.severity, r.success,
                       r.unexpected_count, r.kwargs) for r in db.expectation_results(run_id))


@pytest.mark.soak  # ~2.5 min; recorded in docs/reliability.md
def test_nightly_steps_three_times_give_the_same_day(spark, streamed, tmp_path):
    warehouse = copy_warehouse(streamed, tmp_path)
    settings = stream_settings(warehouse, **RULES)
    pipeline.run_replay(settings, DAY1)  # the other day, which must stay untouched
    other_day = _rows(spark, warehouse, tb.CANONICAL_TOTALS, DAY1)
    runs = []
    for i in range(RUNS):
        t0 = time.monotonic()
        replay = pipeline.run_replay(settings, DAY2)
        audit = pipeline.run_audit(settings, DAY2)
        check, check_id = _check(settings, DAY2)
        report = pipeline.run_report(settings, DAY2, out=str(tmp_path / f"report-{i}"))
        runs.append({
            "replay": {k: v for k, v in replay.summary.items() if k != "duration_seconds"},
            "audit": {k: v for k, v in audit.summary.items()
                      if k not in ("run_id", "duration_seconds", "table_versions")},
            "audit_id": audit.summary["run_id"], "check": check, "check_id": check_id,
            "expectations": _expectations(settings, check_id), "report": report.summary,
            "canonical": _rows(spark, warehouse, tb.CANONICAL_TOTALS, drop=("replay_id",)),
            "reconciliation": _rows(spark, warehouse, tb.RECONCILIATION,
                                    drop=("audit_run_id",)),
            "seconds": round(time.monotonic() - t0, 1),
        })
    print(f"\nnightly cycle seconds: {[r['seconds'] for r in runs]}")
    first = runs[0]
    assert first["reconciliation"] and first["canonical"]
    for later in runs[1:]:
        for part in ("replay", "audit", "check", "expectations", "canonical", "reconciliation"):
            assert later[part] == first[part], part
    assert _rows(spark, warehouse, tb.CANONICAL_TOTALS, DAY1) == other_day
    replays = spark.read.format("delta").load(str(warehouse / tb.REPLAY_RUNS))
    assert replays.filter(replays.window_date == DAY2).count() == 1  # same inputs, one record

    ids = [r["audit_id"] for r in runs]
    with ReportDB.from_settings(settings) as db:
        history = db.audit_runs(DAY2)
        assert [r.run_id for r in history] == ids[::-1]  # newest first, nothing lost
        assert [r.is_current for r in history] == [True, False, False]
        current = db.current_audit_run(DAY2)
        assert current is not None and current.run_id == ids[-1]
        assert {_without(r, "run_id", "started_at", "duration_seconds", "table_versions",
                         "is_current", "recorded_at") == _without(
                    current, "run_id", "started_at", "duration_seconds", "table_versions",
                    "is_current", "recorded_at") for r in history} == {True}
        breaks = [[_without(b, "run_id") for b in db.breaks(run_id)] for run_id in ids]
        assert breaks[0], "no breaks on this day: the comparison would be vacuous"
        assert breaks[2] == breaks[1] == breaks[0]
        listed = db.list_breaks(DAY2)  # only the current run's breaks, once each
        assert {b["run_id"] for b in listed} == {ids[-1]}
        assert len(listed) == len(breaks[2])
        check_run = db.current_check_run(DAY2)
        assert check_run is not None and check_run.run_id == runs[-1]["check_id"]
        assert len({r["check_id"] for r in runs}) == RUNS  # three runs recorded, not merged
        assert first["expectations"], "no expectation results recorded"
        assert db.current_report(DAY2).audit_run_id == ids[-1]


# ----------------------------------------------------------------------------- crash mid-replay


def _kill_replay(warehouse: Path, day, tmp_path: Path, timeout: float = 600) -> dict:
    """Run `reckon replay` for ``day`` in its own process group and SIGKILL it the moment a new
    canonical_totals data file appears (written, normally not yet committed). Returns what was
    on disk when it died."""
    table = warehouse / tb.CANONICAL_TOTALS
    log = table / "_delta_log"
    files_before = {p for p in table.rglob("*.parquet") if "_delta_log" not in p.parts}
    commits_before = len(list(log.glob("*.json")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    env.update(RULES_ENV, RECKON_SHUFFLE_PARTITIONS="2", RECKON_SPARK_DRIVER_MEMORY="1g",
               PYSPARK_PYTHON=sys.executable, TZ="UTC")
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "replay", "--warehouse",
                             str(warehouse), "--date", day.isoformat()], env=env, cwd=tmp_path,
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while True:
            new = {p for p in table.rglob("*.parquet") if "_delta_log" not in p.parts} \
                - files_before
            if new:
                os.killpg(proc.pid, signal.SIGKILL)
                break
            if proc.poll() is not None:
                raise AssertionError("the replay ended before writing canonical_totals "
                                     f"({proc.returncode}): {proc.stderr.read()[-3000:]!r}")
            if time.monotonic() > deadline:
                raise TimeoutError("the replay wrote no canonical_totals file in time")
            time.sleep(0.005)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    return {"new_files": {str(p.relative_to(table)) for p in new},
            "committed": len(list(log.glob("*.json"))) > commits_before}


def test_replay_killed_mid_write_leaves_no_partial_day(spark, streamed, tmp_path):
    warehouse = copy_warehouse(streamed, tmp_path)
    settings = stream_settings(warehouse, **RULES)
    replay_day(spark, settings.replay_config(), DAY1)
    replay_day(spark, settings.replay_config(), DAY2)
    clean = {d: _rows(spark, warehouse, tb.CANONICAL_TOTALS, d) for d in (DAY1, DAY2)}
    assert clean[DAY2]
    table = str(warehouse / tb.CANONICAL_TOTALS)

    torn = None
    for attempt in range(1, 4):  # the kill must land between writing files and committing
        crash = _kill_replay(warehouse, DAY2, tmp_path)
        print(f"\nkill {attempt}: new files {sorted(crash['new_files'])}, "
              f"committed: {crash['committed']}")
        # whatever the timing: each day is the clean result, never a partial day
        assert {d: _rows(spark, warehouse, tb.CANONICAL_TOTALS, d) for d in clean} == clean
        snapshot = {Path(f).name for f in spark.read.format("delta").load(table).inputFiles()}
        if not crash["committed"] and crash["new_files"]:
            torn = crash
            # the dead writer's files are on disk but in no commit: readers never see them
            assert not {Path(f).name for f in crash["new_files"]} & snapshot
            break
    assert torn is not None, "3 kills all landed after the commit: the mid-write case was " \
                             "never exercised"

    # the re-run (the same function the CLI calls) gives the clean day; the other day untouched
    day1_files = sorted(str(p.relative_to(table)) for p in
                        Path(table).glob("window_date=2026-01-01/*.parquet"))
    replay_day(spark, settings.replay_config(), DAY2)
    assert {d: _rows(spark, warehouse, tb.CANONICAL_TOTALS, d) for d in clean} == clean
    assert sorted(str(p.relative_to(table)) for p in
                  Path(table).glob("window_date=2026-01-01/*.parquet")) == day1_files
    replays = spark.read.format("delta").load(str(warehouse / tb.REPLAY_RUNS))
    assert replays.filter(replays.window_date == DAY2).count() == 1
