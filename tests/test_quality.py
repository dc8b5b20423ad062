"""Data-quality suites (audits.quality, audits.suites) on tiny Delta tables with the real schemas.

Two warehouses are built once for the module: a clean day, and the same day with one fault per
table. Each check run is a real GX validation of Spark DataFrames, recorded in the real SQLite
report database and rendered to Data Docs.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

DAY = date(2026, 1, 1)
T0 = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
SUITES = ("reckon_event_log", "reckon_quarantine", "reckon_provisional_totals",
          "reckon_late_events", "reckon_canonical_totals", "reckon_uncaught_duplicates",
          "reckon_reconciliation")


def _t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _event(event_id: str, key: str, amount: str, at: float, arrival: float,
           currency: str = "USD") -> dict[str, Any]:
    return {"event_id": event_id, "key": key, "amount": Decimal(amount), "currency": currency,
            "event_time": _t(at), "source": "pos", "partition": 0, "offset": 1,
            "arrival_time": _t(arrival), "input_file": "f-0001.ndjson"}


def _total(key: str, count: int, amount: str, **extra: Any) -> dict[str, Any]:
    return {"window_start": _t(0), "window_end": _t(10), "key": key,
            "total_amount": Decimal(amount), "event_count": count, "window_date": DAY, **extra}


def _provisional(key: str, count: int, amount: str) -> dict[str, Any]:
    return _total(key, count, amount, status="FINAL", revision=0, first_batch_id=1,
                  last_batch_id=2, closed_at=_t(14), closed_batch_id=2,
                  watermark_at_close=_t(12), finalized_at=_t(14), finalized_batch_id=2)


def _late(event_id: str, watermark: float, lateness: str) -> dict[str, Any]:
    return {**_event(event_id, "k1", "5.00", 4, 15), "window_start": _t(0),
            "window_end": _t(10), "watermark": _t(watermark),
            "lateness_seconds": Decimal(lateness), "batch_id": 3, "window_date": DAY}


def _recon(key: str, status: str, p: tuple[str, int] | None, c: tuple[str, int] | None,
           late: tuple[str, int], dup: tuple[str, int] = ("0.00", 0)) -> dict[str, Any]:
    p_amt, p_cnt = (Decimal(p[0]), p[1]) if p else (Decimal("0.00"), 0)
    c_amt, c_cnt = (Decimal(c[0]), c[1]) if c else (Decimal("0.00"), 0)
    gap = (c_amt - p_amt, c_cnt - p_cnt)
    res = (gap[0] - Decimal(late[0]) + Decimal(dup[0]), gap[1] - late[1] + dup[1])
    return {"window_start": _t(0), "window_end": _t(10), "key": key,
            "provisional_amount": p and p_amt, "provisional_count": p and p_cnt,
            "provisional_status": p and "FINAL", "provisional_revision": p and 0,
            "canonical_amount": c and c_amt, "canonical_count": c and c_cnt,
            "gap_amount": gap[0], "gap_count": gap[1],
            "late_amount": Decimal(late[0]), "late_count": late[1],
            "duplicate_amount": Decimal(dup[0]), "duplicate_count": dup[1],
            "residual_amount": res[0], "residual_count": res[1], "status": status,
            "audit_run_id": "audit-1", "window_date": DAY}


def _duplicate(key: str, count: int, amount: str) -> dict[str, Any]:
    return {"window_start": _t(0), "window_end": _t(10), "key": key,
            "duplicate_amount": Decimal(amount), "duplicate_count": count, "window_date": DAY,
            "replay_id": "r1"}


def _quarantine(reason: str | None) -> dict[str, Any]:
    return {"reason": reason, "detail": "amount 'x'", "payload": "{}", "partition": 0,
            "offset": 7, "arrival_time": _t(3), "input_file": "f-0001.ndjson", "batch_id": 1,
            "origin": "stream", "quarantined_at": _t(3), "event_id": "q1", "event_time": None,
            "arrival_date": DAY}


def _clean_rows() -> dict[str, list[dict[str, Any]]]:
    return {
        "event_log": [
            {**_event("e1", "k1", "10.00", 1, 2), "event_date": DAY},
            {**_event("e2", "k1", "5.00", 4, 15), "event_date": DAY},
            {**_event("e3", "k2", "7.50", 3, 3.5, "EUR"), "event_date": DAY},
        ],
        "provisional_totals": [_provisional("k1", 1, "10.00"), _provisional("k2", 1, "7.50")],
        "canonical_totals": [_total("k1", 2, "15.00", replay_id="r1"),
                             _total("k2", 1, "7.50", replay_id="r1")],
        # grace 0: lateness 0 (watermark exactly at the window's end) is late, and valid
        "late_events": [_late("e2", 12, "2.000000"), _late("e4", 10, "0.000000")],
        "uncaught_duplicates": [_duplicate("k2", 1, "7.50")],
        "reconciliation": [
            _recon("k1", "EXPLAINED", ("10.00", 1), ("15.00", 2), ("5.00", 1)),
            _recon("k2", "MATCHED", ("7.50", 1), ("7.50", 1), ("0.00", 0)),
        ],
        "quarantine": [_quarantine("bad_amount")],
    }


def _faulty_rows() -> dict[str, list[dict[str, Any]]]:
    rows = _clean_rows()
    rows["event_log"].append({**_event("e9", "k1", "1.00", 900, 1), "event_date": DAY})
    rows["provisional_totals"].append(_provisional("k1", 1, "10.00"))       # duplicate key
    rows["canonical_totals"].append(_total("k3", -1, "1.00", replay_id="r1"))
    rows["late_events"].append(_late("e5", 8, "-2.000000"))                 # window still open
    rows["uncaught_duplicates"] += [_duplicate("k2", 1, "7.50"),            # duplicate key
                                    _duplicate("k6", 0, "0.00")]            # no copy at all
    rows["reconciliation"].append(                                          # 5.00 unexplained
        _recon("k3", "EXPLAINED", ("10.00", 1), ("20.00", 2), ("5.00", 1)))
    rows["quarantine"] += [_quarantine(None), _quarantine(" "), _quarantine("mystery")]
    return rows


_PARTITION = {"event_log": "event_date", "quarantine": "arrival_date",
              "provisional_totals": "window_date", "late_events": "window_date",
              "canonical_totals": "window_date", "uncaught_duplicates": "window_date",
              "reconciliation": "window_date"}


def _write(spark: Any, warehouse: Path, rows: dict[str, list[dict[str, Any]]]) -> None:
    from pyspark.sql import types as T

    from spark.tables import SCHEMAS, table_path

    for name, table_rows in rows.items():
        schema = SCHEMAS[name]
        if name == "quarantine":  # the faulty rows need a reason column that admits nulls
            schema = T.StructType([T.StructField(f.name, f.dataType, True) for f in schema])
        other_day = {**table_rows[0], _PARTITION[name]: DAY + timedelta(days=1)}
        if name == "quarantine":
            other_day["reason"] = None  # a fault on another day must not be seen
        df = spark.createDataFrame([*table_rows, other_day], schema)
        (df.write.format("delta").mode("overwrite").partitionBy(_PARTITION[name])
           .save(table_path(warehouse, name)))


def _settings(warehouse: Path, **overrides: Any) -> Any:
    from reckon.config import load_settings

    return load_settings(env={}, warehouse=str(warehouse), **overrides)


@pytest.fixture(scope="module")
def clean_wh(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    wh = tmp_path_factory.mktemp("quality-clean") / "wh"
    _write(spark, wh, _clean_rows())
    return wh


@pytest.fixture(scope="module")
def faulty_wh(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    wh = tmp_path_factory.mktemp("quality-faulty") / "wh"
    _write(spark, wh, _faulty_rows())
    return wh


@pytest.fixture(scope="module")
def clean_result(spark: Any, clean_wh: Path) -> Any:
    from audits.quality import check_day

    t0 = time.perf_counter()
    result = check_day(spark, _settings(clean_wh), DAY)
    print(f"\ncheck_day on the clean tiny warehouse: {time.perf_counter() - t0:.1f} s")
    return result


# ----------------------------------------------------------------------------- clean day


def test_every_suite_passes_on_clean_rows(clean_result: Any) -> None:
    assert clean_result.success, clean_result.summary()
    assert [s.suite for s in clean_result.suites] == list(SUITES)
    rows = {s.table: s.rows for s in clean_result.suites}
    assert rows == {"event_log": 3, "quarantine": 1, "provisional_totals": 2,
                    "late_events": 2, "canonical_totals": 2, "uncaught_duplicates": 1,
                    "reconciliation": 2}
    failed = [r for r in clean_result.results if not r.success]
    assert failed == []
    assert clean_result.warnings == 0
    assert clean_result.expectations == len(clean_result.results) >= 35
    payload = json.loads(json.dumps(clean_result.to_dict()))
    assert payload["success"] is True and payload["blocking_failures"] == 0


def test_clean_run_is_recorded_in_the_report_db(clean_result: Any, clean_wh: Path) -> None:
    from reports.db import ReportDB

    with ReportDB.from_settings(_settings(clean_wh)) as db:
        run = db.current_check_run(DAY)
        assert run is not None and run.run_id == clean_result.run_id
        assert run.success and run.suites == 7
        assert run.expectations == clean_result.expectations
        stored = db.expectation_results(run.run_id)
    assert {(r.suite, r.expectation, r.column) for r in stored} == {
        (r.suite, r.expectation, r.column) for r in clean_result.results}
    assert run.table_versions == {s.table: 0 for s in clean_result.suites}  # one write each
    severities = {(r.table, r.expectation, r.column): r.severity for r in stored}
    assert severities[("quarantine", "expect_column_values_to_be_in_set", "reason")] == "warning"
    assert severities[("reconciliation", "expect_column_values_to_not_be_in_set",
                       "status")] == "blocking"


def test_data_docs_index_lists_every_suite(clean_result: Any, clean_wh: Path) -> None:
    index = Path(clean_result.data_docs_index)
    assert index == clean_wh / "reports" / "data_docs" / "index.html"
    html = index.read_text(encoding="utf-8")
    for suite in SUITES:
        assert suite in html
        assert (index.parent / "expectations" / f"{suite}.html").is_file()
    assert clean_result.run_id in html  # this run's validation results are linked
    assert (clean_wh / "reports" / "gx" / "great_expectations.yml").is_file()


# ----------------------------------------------------------------------------- faults


EXPECTED_FAILURES = {
    ("event_log", "expect_column_values_to_be_null", "skew_beyond_bound_seconds", "blocking"),
    ("provisional_totals", "expect_compound_columns_to_be_unique", "window_start,key",
     "blocking"),
    ("canonical_totals", "expect_column_values_to_be_between", "event_count", "blocking"),
    ("uncaught_duplicates", "expect_compound_columns_to_be_unique", "window_start,key",
     "blocking"),
    ("uncaught_duplicates", "expect_column_values_to_be_between", "duplicate_count",
     "blocking"),
    ("late_events", "expect_column_values_to_be_in_set", "beyond_grace", "blocking"),
    ("late_events", "expect_column_pair_values_a_to_be_greater_than_b", "watermark,window_end",
     "blocking"),
    ("reconciliation", "expect_column_values_to_be_in_set", "invariant_holds", "blocking"),
    ("quarantine", "expect_column_values_to_not_be_null", "reason", "blocking"),
    ("quarantine", "expect_column_values_to_match_regex", "reason", "blocking"),
    ("quarantine", "expect_column_values_to_be_in_set", "reason", "warning"),
}


def test_each_suite_catches_its_fault(spark: Any, faulty_wh: Path) -> None:
    from audits.quality import check_day
    from reckon.errors import DataQualityError
    from reports.db import ReportDB

    settings = _settings(faulty_wh)
    with pytest.raises(DataQualityError) as info:
        check_day(spark, settings, DAY)
    message = str(info.value)
    assert "10 blocking expectation(s)" in message
    # each failure names the table, the expectation, the column and offending rows
    assert ("provisional_totals: expect_compound_columns_to_be_unique on column "
            "window_start,key: 2 unexpected") in message
    assert "canonical_totals: expect_column_values_to_be_between on column event_count: " \
           "1 unexpected" in message
    assert '"event_count": -1' in message and '"key": "k3"' in message
    assert ("uncaught_duplicates: expect_compound_columns_to_be_unique on column "
            "window_start,key: 2 unexpected") in message
    assert ("uncaught_duplicates: expect_column_values_to_be_between on column "
            "duplicate_count: 1 unexpected") in message and '"key": "k6"' in message
    assert "late_events: expect_column_values_to_be_in_set on column beyond_grace" in message
    assert '"event_id": "e5"' in message and '"lateness_seconds": "-2.000000"' in message
    assert '"event_id": "e4"' not in message  # lateness 0 with grace 0 is legitimately late
    assert "reconciliation: expect_column_values_to_be_in_set on column invariant_holds" \
           in message
    assert '"canonical_amount": "20.00"' in message
    assert "quarantine: expect_column_values_to_not_be_null on column reason: 1 unexpected" \
           in message
    assert ("event_log: expect_column_values_to_be_null on column skew_beyond_bound_seconds"
            in message)
    assert '"event_id": "e9"' in message and "899.000000" in message
    assert "mystery" not in message  # a warning is recorded but never fails the run

    with ReportDB.from_settings(settings) as db:
        run = db.current_check_run(DAY)
        assert run is not None and not run.success
        assert (run.blocking_failures, run.warnings) == (10, 1)
        failed = {(r.table, r.expectation, r.column, r.severity)
                  for r in db.expectation_results(run.run_id) if not r.success}
    assert failed == EXPECTED_FAILURES


def test_allow_unexplained_turns_unexplained_rows_into_a_warning(spark: Any,
                                                                  warehouse: Path) -> None:
    from audits.quality import run_checks

    rows = _clean_rows()
    rows["reconciliation"].append(_recon("k4", "MISSING_IN_STREAM", None, ("3.00", 1),
                                         ("0.00", 0)))
    _write(spark, warehouse, {"reconciliation": rows["reconciliation"]})
    strict = run_checks(spark, _settings(warehouse), DAY, record=False)
    lenient = run_checks(spark, _settings(warehouse, allow_unexplained=True), DAY,
                         record=False)
    key = ("reconciliation", "expect_column_values_to_not_be_in_set", "status")
    (s,) = [r for r in strict.results if (r.table, r.expectation, r.column) == key]
    (w,) = [r for r in lenient.results if (r.table, r.expectation, r.column) == key]
    assert (s.success, s.severity, s.unexpected_count) == (False, "blocking", 1)
    assert (w.success, w.severity) == (False, "warning")
    assert not strict.success and lenient.success
    # the tables written nowhere are reported as warnings, not crashes
    missing = {r.table for r in lenient.results if r.expectation == "expect_table_to_exist"}
    assert missing == set(_PARTITION) - {"reconciliation"}
    assert not any(s.table_exists for s in lenient.suites if s.table != "reconciliation")


def test_a_check_reads_each_table_at_the_version_it_records(spark: Any, warehouse: Path,
                                                            monkeypatch: Any) -> None:
    """A row committed after the run took a table's version (the stream keeps writing) is not
    checked, and the run records the version it did check, next to its results."""
    import spark.tables as tb
    from audits.quality import run_checks
    from reports.db import ReportDB

    rows = _clean_rows()["event_log"]
    _write(spark, warehouse, {"event_log": rows})
    extra = spark.createDataFrame([{**rows[0], "event_id": "e4"}], tb.SCHEMAS["event_log"])
    extra.write.format("delta").mode("append").save(tb.table_path(warehouse, "event_log"))
    assert tb.current_version(warehouse, "event_log") == 1

    def event_log_rows(result: Any) -> tuple[int, int | None]:
        (suite,) = [s for s in result.suites if s.table == "event_log"]
        return suite.rows, suite.table_version

    assert event_log_rows(run_checks(spark, _settings(warehouse), DAY, record=False)) == (4, 1)
    current_version = tb.current_version
    with monkeypatch.context() as before_the_append:
        before_the_append.setattr(tb, "current_version", lambda wh, name: (
            0 if name == "event_log" else current_version(wh, name)))
        result = run_checks(spark, _settings(warehouse), DAY)
    assert event_log_rows(result) == (3, 0)
    assert json.loads(json.dumps(result.to_dict()))["suites"][0]["table_version"] == 0
    assert "event_log" in result.summary() and "3 rows, version 0" in result.summary()
    with ReportDB.from_settings(_settings(warehouse)) as db:
        run = db.current_check_run(DAY)
    assert run is not None and run.run_id == result.run_id
    assert run.table_versions == {"event_log": 0}  # the other tables are missing


def test_the_invariant_is_judged_by_the_tolerance_the_audit_applied(spark: Any,
                                                                      warehouse: Path) -> None:
    """`reckon audit --tolerance-abs 0.05` explained a 0.03 residual; `reckon check`, run with
    the configuration's tolerance (0), must judge that row by the audit's rule, read from the
    day's current run in the report database, not report the invariant broken."""
    from audits.quality import run_checks
    from reports.db import ReportDB
    from tests.test_report_db import make_run

    row = _recon("k1", "EXPLAINED", ("10.00", 1), ("15.03", 2), ("5.00", 1))
    assert row["residual_amount"] == Decimal("0.03")
    _write(spark, warehouse, {"reconciliation": [row]})
    key = ("reconciliation", "expect_column_values_to_be_in_set", "invariant_holds")

    def invariant() -> bool:
        result = run_checks(spark, _settings(warehouse), DAY, record=False)
        (r,) = [r for r in result.results if (r.table, r.expectation, r.column) == key]
        return r.success

    assert not invariant()  # no audit run recorded: the configuration's tolerance, 0
    with ReportDB.from_settings(_settings(warehouse)) as db:
        db.record_audit_run(make_run("audit-1", params={"tolerance_abs": "0.05",
                                                       "tolerance_rel": "0"}), [])
    assert invariant()


# ----------------------------------------------------------------------------- CLI


def test_cli_check_exit_codes(spark: Any, clean_result: Any, clean_wh: Path, faulty_wh: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    from reckon.cli import main
    from reports.db import ReportDB

    assert main(["check", "--warehouse", str(faulty_wh), "--date", "2026-01-01"]) == 1
    out, err = capsys.readouterr()
    assert "reckon_provisional_totals" in out and "FAILED" in out
    assert "reckon check: error: data-quality check of 2026-01-01 failed" in err

    assert main(["check", "--warehouse", str(clean_wh), "--date", "2026-01-01", "--json"]) == 0
    out, _ = capsys.readouterr()
    payload = json.loads(out)
    assert payload["success"] is True and len(payload["suites"]) == 7
    # re-running the day records a new current run; the earlier one stays as history
    with ReportDB.from_settings(_settings(clean_wh)) as db:
        run = db.current_check_run(DAY)
        assert run is not None and run.run_id == payload["run_id"] != clean_result.run_id
        assert len(db.expectation_results(clean_result.run_id)) == clean_result.expectations

    assert main(["check", "--warehouse", str(clean_wh), "--date", "2026-13-01"]) == 2
    assert "date='2026-13-01' is not valid" in capsys.readouterr().err


@pytest.mark.parametrize("amount_max, flagged", [
    ("10.00", []),                        # the bound is inclusive
    ("9.99", ["10.00"]),
    # as a double, which GX makes of a "between" bound, this is 10.0 and would let 10.00 pass
    ("9.9999999999999999", ["10.00"]),
])
def test_amount_bounds_are_compared_exactly_not_as_floats(spark: Any, clean_wh: Path,
                                                          amount_max: str,
                                                          flagged: list[str]) -> None:
    from audits.quality import run_checks

    result = run_checks(spark, _settings(clean_wh, amount_max=Decimal(amount_max)), DAY,
                        record=False)
    key = ("event_log", "expect_column_values_to_be_null", "amount_out_of_range")
    (check,) = [r for r in result.results if (r.table, r.expectation, r.column) == key]
    assert check.success == (not flagged) and check.severity == "blocking"
    assert (check.unexpected_count or 0) == len(flagged)
    if flagged:
        sample = json.loads(check.sample)
        assert [row["amount_out_of_range"] for row in sample] == flagged
        assert [row["event_id"] for row in sample] == ["e1"]
