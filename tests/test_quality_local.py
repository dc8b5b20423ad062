"""Spark tier: the JVM-free check (audits.quality_local) says what the Spark check says.

Each case runs ``audits.quality.run_checks`` (Spark: the suites' derives as Spark columns) and
``run_checks_without_jvm`` (delta-rs reads, ``audits.suites_local``'s derives) on one
warehouse and day, and compares every expectation's record (success, severity, unexpected
count, the sample the report shows, its kwargs), every suite's figures and verdict, the day's
verdict and the Data Docs validation pages. Warehouses the real stream wrote
(tests/scenarios.py), replayed and audited: late events (allowed lateness 5 s), EUR, JPY and KWD on one
key, a caught and an uncaught duplicate, a hand-edited delta (an unexplained break: a blocking
failure), a quiet day; and tests/test_quality.py's hand-written day with one fault per table.
Then ``reckon check`` in its own process on a small streamed day: no JVM, the same verdict.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.scenarios import BASE, SCENARIOS, S, ev
from tests.streamkit import copy_warehouse, edit_a_provisional_delta
from tests.test_quality import _faulty_rows, _replay_run, _validation_pages, _what_it_says, _write

DAY = date(2026, 1, 1)
GRACE = next(c for c in SCENARIOS if c.name.startswith("worked example, allowed lateness 5s"))
CURRENCIES = next(c for c in SCENARIOS if c.name.startswith("EUR, JPY and KWD"))


def _nightly(spark: Any, settings: Any, day: date = DAY) -> None:
    """The day's replay and audit, as the nightly DAG runs them before the check."""
    from audits.audit import audit_day
    from reports.db.repository import audit_recorder
    from spark.replay import replay_day

    replay_day(spark, settings.replay_config(), day)
    audit_day(spark, settings.audit_config(), day, recorder=audit_recorder(settings))


def _streamed(spark: Any, streamed_scenario: Any, name: str, tmp: Path) -> Any:
    """A private, replayed and audited copy of a streamed scenario's warehouse."""
    settings = streamed_scenario(name)
    wh = copy_warehouse(settings.warehouse_path, tmp)
    settings = settings.with_overrides(warehouse=str(wh))
    _nightly(spark, settings)
    return settings


def _on_both(spark: Any, settings: Any, day: date = DAY) -> tuple[Any, Any]:
    """(Spark's result, the JVM-free one), neither recorded, asserted to say the same."""
    from audits.check_reads import DeltaDayReads
    from audits.quality import run_checks
    from audits.quality_local import fits_without_jvm, run_checks_without_jvm
    from reports.db.repository import ReportDB

    config, reads = settings.check_run_config(), DeltaDayReads(settings.warehouse_path)
    assert fits_without_jvm(reads, config, day, max_rows=200_000)
    assert not fits_without_jvm(reads, config, day, max_rows=0)
    with ReportDB.from_settings(settings) as db:
        on_spark = run_checks(spark, config, day, ledger=db, record=False)
        local = run_checks_without_jvm(config, day, ledger=db, reads=reads, record=False)
    assert {s.engine for s in local.suites} == {"pandas"}
    assert _what_it_says(local) == _what_it_says(on_spark)
    assert local.verdict == on_spark.verdict and local.success == on_spark.success
    pages = _validation_pages(settings.warehouse_path, local.run_id)
    assert len(pages) == 7 and pages == _validation_pages(settings.warehouse_path,
                                                         on_spark.run_id)
    return on_spark, local


@pytest.fixture(scope="module")
def duplicates(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Key A: d1 twice in one batch (caught), u1 again 18 s later past a 5 s dedup horizon
    (admitted twice: an uncaught duplicate); replayed and audited."""
    from app.settings import load_settings
    from spark.stream import BatchProcessor
    from tests.test_replay_audit import _raw

    wh = tmp_path_factory.mktemp("local-dups") / "wh"
    settings = load_settings(env={}, warehouse=str(wh), window="10s", watermark_bound="1h",
                             dedup_horizon="5s", shuffle_partitions=2)
    caught = ev(3, 4, key="A", amount="2.50", currency="KWD")
    uncaught = ev(1, 2, key="A", amount="3.00")
    processor = BatchProcessor.of(spark, settings, query_id="quality-local-dups")
    processor(_raw(spark, [uncaught, caught, replace(caught, offset=9)]), 0)
    processor(_raw(spark, [replace(uncaught, arrival_time=BASE + 20 * S, offset=20)]), 1)
    _nightly(spark, settings)
    return settings


def test_late_events_and_a_quiet_day_say_the_same(spark: Any, streamed_scenario: Any,
                                                  tmp_path: Path) -> None:
    settings = _streamed(spark, streamed_scenario, GRACE.name, tmp_path)
    on_spark, _ = _on_both(spark, settings)
    assert on_spark.success and next(s for s in on_spark.suites
                                     if s.table == "late_events").rows == 1
    quiet, _ = _on_both(spark, settings, DAY + timedelta(days=5))
    assert quiet.verdict.text == "passed (no events on the day)"


def test_currencies_of_0_2_and_3_places_say_the_same(spark: Any, streamed_scenario: Any,
                                                     tmp_path: Path) -> None:
    settings = _streamed(spark, streamed_scenario, CURRENCIES.name, tmp_path)
    on_spark, _ = _on_both(spark, settings)
    assert on_spark.success, on_spark.summary()
    assert next(s for s in on_spark.suites if s.table == "quarantine").rows == 2


def test_duplicates_say_the_same(spark: Any, duplicates: Any) -> None:
    on_spark, _ = _on_both(spark, duplicates)
    assert next(s for s in on_spark.suites if s.table == "uncaught_duplicates").rows == 1


def test_an_edited_delta_fails_the_same(spark: Any, streamed_scenario: Any,
                                       tmp_path: Path) -> None:
    """A hand-edited delta: provisional_totals no longer agrees with the replay, the audit
    finds an unexplained break, and the reconciliation suite fails on both engines."""
    settings = streamed_scenario(GRACE.name)
    wh = copy_warehouse(settings.warehouse_path, tmp_path)
    settings = settings.with_overrides(warehouse=str(wh))
    edit_a_provisional_delta(spark, wh, "key = 'merchant-x'", Decimal("0.07"))
    _nightly(spark, settings)
    on_spark, local = _on_both(spark, settings)
    assert not on_spark.success and local.summary().splitlines()[1:-1] == \
        on_spark.summary().splitlines()[1:-1]
    failed = {(r.table, r.column) for r in local.results if not r.success}
    assert ("reconciliation", "status") in failed, failed


def test_one_fault_per_table_fails_the_same(spark: Any, tmp_path: Path) -> None:
    """tests/test_quality.py's faulty day: every suite fails its own fault."""
    from app.settings import load_settings

    wh = tmp_path / "wh"
    _write(spark, wh, _faulty_rows())
    _replay_run(spark, wh, {"r1": 0})
    on_spark, _ = _on_both(spark, load_settings(env={}, warehouse=str(wh)))
    assert {s.verdict.text.split(" ")[0] for s in on_spark.suites} == {"FAILED"}


def test_missing_tables_fail_the_same(spark: Any, tmp_path: Path) -> None:
    from app.settings import load_settings

    on_spark, _ = _on_both(spark, load_settings(env={}, warehouse=str(tmp_path / "wh")))
    assert not on_spark.success


def _check_in_a_process(settings: Any, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``reckon check`` in its own process, then whether it opened a Py4J gateway and
    whether a java process is its child."""
    probe = (
        "import os, sys; from app.cli import main; "
        f"rc = main(['check', '--warehouse', {str(settings.warehouse_path)!r}, "
        f"'--date', '{DAY}']); "
        "from pyspark import SparkContext; "
        "kids = [p for p in os.listdir('/proc') if p.isdigit() and "
        "open(f'/proc/{p}/stat').read().split(') ')[1].split()[1] == str(os.getpid())]; "
        "java = [p for p in kids if 'java' in open(f'/proc/{p}/comm').read()]; "
        "print('gateway', SparkContext._gateway is not None, 'java', bool(java)); "
        "sys.exit(rc)")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent), "TZ": "UTC"}
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


def test_reckon_check_of_a_small_day_starts_no_jvm(spark: Any, streamed_scenario: Any,
                                                   tmp_path: Path) -> None:
    """The same exit code and verdict line as the Spark check, and no JVM."""
    from audits.quality import run_checks
    from reports.db.repository import ReportDB

    settings = _streamed(spark, streamed_scenario, GRACE.name, tmp_path)
    with ReportDB.from_settings(settings) as db:
        on_spark = run_checks(spark, settings.check_run_config(), DAY, ledger=db,
                              record=False)
    run = _check_in_a_process(settings, tmp_path)
    assert run.returncode == (0 if on_spark.success else 1), run.stderr
    assert run.stdout.splitlines()[-1] == "gateway False java False", run.stdout
    head = run.stdout.splitlines()[0]
    assert head.startswith(f"data-quality check {DAY} {on_spark.verdict.text}: "), head
