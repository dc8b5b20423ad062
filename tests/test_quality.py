"""Data-quality suites (audits.quality, audits.suites) on tiny Delta tables with the real schemas.

Two warehouses are built once for the module: a clean day, and the same day with one fault per
table. Each check run is a real GX validation of Spark DataFrames, recorded in the real SQLite
report database and rendered to Data Docs. Money is per (window, key, currency): the clean day
has a key with EUR and JPY in one window, each its own row in every per-grain table.
"""

from __future__ import annotations

import dataclasses
import json
import re
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


def _total(key: str, count: int, amount: str, currency: str = "USD",
           **extra: Any) -> dict[str, Any]:
    return {"window_start": _t(0), "window_end": _t(10), "key": key, "currency": currency,
            "total_amount": Decimal(amount), "event_count": count, "window_date": DAY, **extra}


def _canonical(key: str, count: int, amount: str, currency: str = "USD",
               replay_id: str = "r1") -> dict[str, Any]:
    return _total(key, count, amount, currency, replay_id=replay_id)


def _provisional(key: str, count: int, amount: str, currency: str = "USD") -> dict[str, Any]:
    """A provisional_deltas row: what batch 1 added (provisional_totals folds them)."""
    return _total(key, count, amount, currency, revised=0, batch_id=1, query_id="q1",
                  processed_at=_t(12))


def _late(event_id: str, watermark: float, lateness: str) -> dict[str, Any]:
    return {**_event(event_id, "k1", "5.00", 4, 15), "window_start": _t(0),
            "window_end": _t(10), "watermark": _t(watermark),
            "lateness_seconds": Decimal(lateness), "batch_id": 3, "window_date": DAY}


def _recon(key: str, status: str, p: tuple[str, int] | None, c: tuple[str, int] | None,
           late: tuple[str, int], dup: tuple[str, int] = ("0.00", 0),
           currency: str = "USD") -> dict[str, Any]:
    p_amt, p_cnt = (Decimal(p[0]), p[1]) if p else (Decimal("0.00"), 0)
    c_amt, c_cnt = (Decimal(c[0]), c[1]) if c else (Decimal("0.00"), 0)
    gap = (c_amt - p_amt, c_cnt - p_cnt)
    res = (gap[0] - Decimal(late[0]) + Decimal(dup[0]), gap[1] - late[1] + dup[1])
    return {"window_start": _t(0), "window_end": _t(10), "key": key, "currency": currency,
            "provisional_amount": p and p_amt, "provisional_count": p and p_cnt,
            "provisional_status": p and "FINAL", "provisional_revision": p and 0,
            "canonical_amount": c and c_amt, "canonical_count": c and c_cnt,
            "gap_amount": gap[0], "gap_count": gap[1],
            "late_amount": Decimal(late[0]), "late_count": late[1],
            "duplicate_amount": Decimal(dup[0]), "duplicate_count": dup[1],
            "residual_amount": res[0], "residual_count": res[1], "status": status,
            "audit_run_id": "audit-1", "window_date": DAY}


def _duplicate(key: str, count: int, amount: str, currency: str = "EUR") -> dict[str, Any]:
    return {"window_start": _t(0), "window_end": _t(10), "key": key, "currency": currency,
            "duplicate_amount": Decimal(amount), "duplicate_count": count, "window_date": DAY,
            "replay_id": "r1"}


def _quarantine(reason: str | None) -> dict[str, Any]:
    return {"reason": reason, "detail": "amount 'x'", "payload": "{}", "partition": 0,
            "offset": 7, "arrival_time": _t(3), "input_file": "f-0001.ndjson", "batch_id": 1,
            "origin": "stream", "quarantined_at": _t(3), "event_id": "q1", "event_time": None,
            "arrival_date": DAY, "payload_base64": None}


def _clean_rows() -> dict[str, list[dict[str, Any]]]:
    return {
        "event_log": [
            {**_event("e1", "k1", "10.00", 1, 2), "event_date": DAY},
            {**_event("e2", "k1", "5.00", 4, 15), "event_date": DAY},
            {**_event("e3", "k2", "7.50", 3, 3.5, "EUR"), "event_date": DAY},
            {**_event("e5", "k2", "7", 5, 5.5, "JPY"), "event_date": DAY},
        ],
        "provisional_deltas": [_provisional("k1", 1, "10.00"),
                               _provisional("k2", 1, "7.50", "EUR"),
                               _provisional("k2", 1, "7", "JPY")],
        # what the replay sums from the event log: one row per currency of (window, key)
        "canonical_totals": [_canonical("k1", 2, "15.00"), _canonical("k2", 1, "7.50", "EUR"),
                             _canonical("k2", 1, "7", "JPY")],
        # allowed lateness 0: lateness 0 (watermark exactly at the window's end) is late, and valid
        "late_events": [_late("e2", 12, "2.000000"), _late("e4", 10, "0.000000")],
        "uncaught_duplicates": [_duplicate("k2", 1, "7.50")],
        "reconciliation": [
            _recon("k1", "EXPLAINED", ("10.00", 1), ("15.00", 2), ("5.00", 1)),
            _recon("k2", "MATCHED", ("7.50", 1), ("7.50", 1), ("0.00", 0), currency="EUR"),
            _recon("k2", "MATCHED", ("7", 1), ("7", 1), ("0", 0), currency="JPY"),
        ],
        "quarantine": [_quarantine("bad_amount")],
    }


def _faulty_rows() -> dict[str, list[dict[str, Any]]]:
    rows = _clean_rows()
    rows["event_log"] += [{**_event("e9", "k1", "1.00", 900, 1), "event_date": DAY},
                          {**_event("e10", "k4", "5.5", 6, 7, "JPY"),  # JPY has no cents
                           "event_date": DAY}]
    rows["provisional_deltas"] += [_provisional("k1", 1, "10.00"),         # batch 1 again
                                   _provisional("k5", 1, "5.5", "JPY")]     # half a yen
    rows["canonical_totals"].append(_canonical("k3", -1, "1.00"))          # not in the log
    rows["late_events"].append(_late("e5", 8, "-2.000000"))                 # window still open
    rows["uncaught_duplicates"] += [_duplicate("k2", 1, "7.50"),            # duplicate key
                                    _duplicate("k6", 0, "0.00")]            # no copy at all
    rows["reconciliation"].append(                                          # 5.00 unexplained
        _recon("k3", "EXPLAINED", ("10.00", 1), ("20.00", 2), ("5.00", 1)))
    rows["quarantine"] += [_quarantine(None), _quarantine(" "), _quarantine("mystery")]
    return rows


_PARTITION = {"event_log": "event_date", "quarantine": "arrival_date",
              "provisional_deltas": "window_date", "late_events": "window_date",
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


def _replay_run(spark: Any, warehouse: Path, versions: dict[str, int | None]) -> None:
    """replay_runs rows of the day: replay_id -> the event_log version it pinned (None: a
    replay from Kafka)."""
    from spark.tables import REPLAY_RUNS, SCHEMAS, table_path

    rows = [{"replay_id": replay_id, "window_date": DAY,
             "source": "event_log" if version is not None else "kafka:events",
             "event_log_version": version, "rows_read": 0, "valid_events": 0, "quarantined": 0,
             "duplicate_copies": 0, "conflicts": 0, "arrived_after_close": 0,
             "new_since_previous": None, "windows": 0, "total_amounts": {},
             "started_at": _t(86_400), "duration_seconds": 1.0, "rules_json": "{}"}
            for replay_id, version in versions.items()]
    (spark.createDataFrame(rows, SCHEMAS[REPLAY_RUNS]).write.format("delta").mode("overwrite")
     .save(table_path(warehouse, REPLAY_RUNS)))


def _settings(warehouse: Path, **overrides: Any) -> Any:
    from app.settings import load_settings

    return load_settings(env={}, warehouse=str(warehouse), **overrides)


def _run_checks(spark: Any, settings: Any, day: date, **kwargs: Any) -> Any:
    """``audits.quality.run_checks`` with the settings' report database as its ledger, as
    ``reckon check`` runs it."""
    from audits.quality import run_checks
    from reports.db.repository import ReportDB

    with ReportDB.from_settings(settings) as db:
        return run_checks(spark, settings.check_run_config(), day, ledger=db, **kwargs)


def _check_day(spark: Any, settings: Any, day: date) -> Any:
    """``audits.quality.check_day`` with the settings' report database as its ledger."""
    from audits.quality import check_day
    from reports.db.repository import ReportDB

    with ReportDB.from_settings(settings) as db:
        return check_day(spark, settings.check_run_config(), day, ledger=db)


@pytest.fixture(scope="module")
def clean_wh(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    wh = tmp_path_factory.mktemp("quality-clean") / "wh"
    _write(spark, wh, _clean_rows())
    _replay_run(spark, wh, {"r1": 0})  # the replay read event_log version 0
    return wh


@pytest.fixture(scope="module")
def faulty_wh(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    wh = tmp_path_factory.mktemp("quality-faulty") / "wh"
    _write(spark, wh, _faulty_rows())
    _replay_run(spark, wh, {"r1": 0})
    return wh


@pytest.fixture(scope="module")
def clean_result(spark: Any, clean_wh: Path) -> Any:

    t0 = time.perf_counter()
    result = _check_day(spark, _settings(clean_wh), DAY)
    print(f"\ncheck_day on the clean tiny warehouse: {time.perf_counter() - t0:.1f} s")
    return result


# ----------------------------------------------------------------------------- clean day


def test_every_suite_passes_on_clean_rows(clean_result: Any) -> None:
    assert clean_result.success, clean_result.summary()
    assert [s.suite for s in clean_result.suites] == list(SUITES)
    rows = {s.table: s.rows for s in clean_result.suites}
    assert rows == {"event_log": 4, "quarantine": 1, "provisional_totals": 3,
                    "late_events": 2, "canonical_totals": 3, "uncaught_duplicates": 1,
                    "reconciliation": 3}
    failed = [r for r in clean_result.results if not r.success]
    assert failed == []
    assert clean_result.warnings == 0
    assert clean_result.expectations == len(clean_result.results) >= 35
    payload = json.loads(json.dumps(clean_result.to_dict()))
    assert payload["success"] is True and payload["blocking_failures"] == 0


def test_clean_run_is_recorded_in_the_report_db(clean_result: Any, clean_wh: Path) -> None:
    from reports.db.repository import ReportDB

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


def _section(dom: str, start: str, end: str) -> str:
    """The text of the DOM between two markers (tags stripped, whitespace collapsed)."""
    part = dom[dom.index(start):]
    part = part[:part.index(end)] if end in part else part
    return " ".join(re.sub(r"<[^>]+>", " ", part).split())


def test_data_docs_open_offline_and_show_what_was_checked(clean_result: Any, clean_wh: Path,
                                                          tmp_path: Path) -> None:
    """What a finance reviewer sees with the network off: the index lists this run's
    validations of every suite (drawn by bootstrap-table, which a blank page lacked), and a
    validation page names the data asset (table, day, Delta version) and shows observed values
    (a row count, "0% unexpected"), not "Data asset: None" and "--"."""
    from tests.browser import chromium, need, png_stats
    from tests.test_datadocs import missing_files

    browser = need("chromium")
    assert clean_result.data_docs_warning is None  # the site needs no internet
    index = Path(clean_result.data_docs_index)
    assert missing_files(index.parent) == []  # every file a page loads is on disk

    shot = tmp_path / "index.png"
    proc = chromium(browser, f"--screenshot={shot}", "--window-size=1280,1000", index.as_uri())
    assert shot.is_file(), proc.stderr[-2000:]
    width, height, colours = png_stats(shot)
    assert (width, height) == (1280, 1000) and colours > 10  # not a blank page

    dom = chromium(browser, "--dump-dom", index.as_uri()).stdout
    table = re.search(r'<table[^>]*ge-index-page-validation-results-table[^>]*>(.*?)</table>',
                      dom, re.S)
    assert table, dom[:3000]
    # rows exist only once bootstrap-table has drawn them from the page's JSON
    rows = [" ".join(re.sub(r"<[^>]+>", " ", row).split())
            for row in re.findall(r"<tr[^>]*data-index[^>]*>(.*?)</tr>", table.group(1), re.S)]
    this_run = [row for row in rows if clean_result.run_id in row]
    assert len(this_run) == len(SUITES), rows
    for suite in SUITES:  # one row per suite
        assert sum(suite in row for row in this_run) == 1, (suite, this_run)

    page = next(index.parent.glob(
        f"validations/reckon_canonical_totals/{clean_result.run_id}/*/*.html"))
    dom = chromium(browser, "--dump-dom", page.as_uri()).stdout
    overview = _section(dom, "Overview", "Statistics")
    assert "Data asset: canonical_totals (window_date 2026-01-01, Delta version 0)" in overview
    assert "None" not in overview and "Succeeded" in overview
    text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
    # the clean day has 3 canonical_totals rows: the row-count check shows what it counted
    assert re.search(r"Must have greater than or equal to 1 rows\. 3 ", text), text[:3000]
    assert "0% unexpected" in text and "unknown % not null" not in text


# ----------------------------------------------------------------------------- faults


EXPECTED_FAILURES = {
    ("event_log", "expect_column_values_to_be_null", "skew_beyond_bound_seconds", "blocking"),
    ("event_log", "expect_column_values_to_be_null", "minor_unit_break", "blocking"),
    ("provisional_totals", "expect_column_values_to_be_null", "batch_added_twice", "blocking"),
    ("provisional_totals", "expect_column_values_to_be_null", "minor_unit_break", "blocking"),
    ("canonical_totals", "expect_column_values_to_be_between", "event_count", "blocking"),
    ("canonical_totals", "expect_column_values_to_be_null", "event_log_mismatch", "blocking"),
    ("uncaught_duplicates", "expect_compound_columns_to_be_unique",
     "window_start,key,currency", "blocking"),
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
    from reckon.errors import DataQualityError
    from reports.db.repository import ReportDB

    settings = _settings(faulty_wh)
    with pytest.raises(DataQualityError) as info:
        _check_day(spark, settings, DAY)
    message = str(info.value)
    assert "13 blocking expectation(s)" in message
    # each failure names the table, the expectation, the column and offending rows
    assert ("provisional_totals: expect_column_values_to_be_null on column "
            "batch_added_twice: 1 unexpected") in message and "batch 1 x2" in message
    # a JPY total of 5.5 is not a whole number of yen; nor is a JPY event of 5.5
    assert ("provisional_totals: expect_column_values_to_be_null on column minor_unit_break: "
            "1 unexpected") in message and '"minor_unit_break": "total_amount 5.500 JPY"' \
        in message
    assert ("event_log: expect_column_values_to_be_null on column minor_unit_break: "
            "1 unexpected") in message and '"minor_unit_break": "amount 5.500 JPY"' in message
    # a canonical row the event log does not hold
    assert ("canonical_totals: expect_column_values_to_be_null on column event_log_mismatch: "
            "1 unexpected") in message
    assert '"event_log_mismatch": "event log: USD 0.00 in 0 event(s)"' in message
    assert "canonical_totals: expect_column_values_to_be_between on column event_count: " \
           "1 unexpected" in message
    assert '"event_count": -1' in message and '"key": "k3"' in message
    assert ("uncaught_duplicates: expect_compound_columns_to_be_unique on column "
            "window_start,key,currency: 2 unexpected") in message
    assert ("uncaught_duplicates: expect_column_values_to_be_between on column "
            "duplicate_count: 1 unexpected") in message and '"key": "k6"' in message
    assert "late_events: expect_column_values_to_be_in_set on column beyond_grace" in message
    assert '"event_id": "e5"' in message and '"lateness_seconds": "-2.000000"' in message
    assert '"event_id": "e4"' not in message  # lateness 0 with allowed lateness 0 is legitimately late
    assert "reconciliation: expect_column_values_to_be_in_set on column invariant_holds" \
           in message
    assert '"canonical_amount": "20.000"' in message
    assert "quarantine: expect_column_values_to_not_be_null on column reason: 1 unexpected" \
           in message
    assert ("event_log: expect_column_values_to_be_null on column skew_beyond_bound_seconds"
            in message)
    assert '"event_id": "e9"' in message and "899.000000" in message
    assert "mystery" not in message  # a warning is recorded but never fails the run

    with ReportDB.from_settings(settings) as db:
        run = db.current_check_run(DAY)
        assert run is not None and not run.success
        assert (run.blocking_failures, run.warnings) == (13, 1)
        failed = {(r.table, r.expectation, r.column, r.severity)
                  for r in db.expectation_results(run.run_id) if not r.success}
    assert failed == EXPECTED_FAILURES
    # one verdict per suite, recorded with the run, and the Data Docs index colours each
    # suite's row by it (reckon.quality_verdict)
    assert run.verdict == "FAILED"
    assert run.suite_verdicts == {
        "reckon_event_log": "FAILED (2 blocking)", "reckon_quarantine": "FAILED (2 blocking)",
        "reckon_provisional_totals": "FAILED (2 blocking)",
        "reckon_late_events": "FAILED (2 blocking)",
        "reckon_canonical_totals": "FAILED (2 blocking)",
        "reckon_uncaught_duplicates": "FAILED (2 blocking)",
        "reckon_reconciliation": "FAILED (1 blocking)"}
    assert _index_status(faulty_wh, run.run_id) == dict.fromkeys(SUITES, "Failed")


# ----------------------------------------------------------------------------- engines


def _what_it_says(result: Any) -> tuple[list[tuple[Any, ...]], list[Any]]:
    """A run without its id: each suite's figures and verdict, and every record as stored."""
    suites = [(s.suite, s.table, s.rows, s.table_exists, s.table_version, s.day_has_events,
               s.verdict.text) for s in result.suites]
    return suites, [dataclasses.replace(r, run_id="") for r in result.results]


def _validation_pages(warehouse: Path, run_id: str) -> dict[str, list[str]]:
    """suite -> the text of ``run_id``'s validation page, without the run's name and time and
    the "Show more info" lines that say how the batch was loaded (GX's load time, the pandas
    fingerprint, and the engine itself: ``PandasDataFrame`` or ``SparkDataFrame``)."""
    pages = {}
    site = warehouse / "reports" / "data_docs" / "validations"
    for page in site.glob(f"*/{run_id}/*/*.html"):
        html = re.sub(r"<(script|style)\b.*?</\1>", "", page.read_text(encoding="utf-8"),
                      flags=re.S)
        lines = [" ".join(line.split()) for line in re.sub(r"<[^>]+>", "\n", html).splitlines()]
        lines = [re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<time>",
                        line.replace(run_id, "<run>")) for line in lines if line]
        cut = lines.index("Batch Markers"), lines.index("data_asset_name")
        pages[page.parts[-4]] = lines[:cut[0]] + lines[cut[1]:]
    return pages


@pytest.fixture(scope="module")
def on_spark_runs() -> dict[str, Any]:
    """The module's warehouses' check runs on Spark, by case: each is run once."""
    return {}


# The faulty day is the differential's day: each suite fails its fault there and passes its
# other expectations, so a clean day (about 80 CPU seconds more) would compare nothing new.
@pytest.mark.parametrize("case, bound", [("faulty", 200_000), ("faulty", 3),
                                         ("tables missing", 200_000)])
def test_in_memory_and_spark_validations_say_the_same(spark: Any, faulty_wh: Path,
                                                      warehouse: Path,
                                                      on_spark_runs: dict[str, Any],
                                                      case: str, bound: int) -> None:
    """The pandas engine (a day of at most ``check_in_memory_rows`` rows, in the driver's
    memory) and the Spark engine (``check_in_memory_rows = 0``) give the same suites, verdicts,
    unexpected counts, samples (index columns, Decimals as text, timestamps, nulls) and Data
    Docs pages, on each suite's fault (and its passing expectations), with the engines mixed (bound 3: the
    3-row tables in memory, the rest on Spark) and on missing tables (empty frames of the
    schema, ``MIN_ROWS`` 0)."""
    if case == "tables missing":
        _write(spark, warehouse, {"reconciliation": _clean_rows()["reconciliation"]})
    wh = {"faulty": faulty_wh}.get(case, warehouse)
    if case not in on_spark_runs or case == "tables missing":  # that warehouse is the test's
        on_spark_runs[case] = _run_checks(spark, _settings(wh, check_in_memory_rows=0), DAY,
                                          record=False)
    on_spark = on_spark_runs[case]
    in_memory = _run_checks(spark, _settings(wh, check_in_memory_rows=bound), DAY, record=False)

    assert {s.engine for s in on_spark.suites} == {"spark"}
    engines = {s.table: s.engine for s in in_memory.suites}
    assert engines == {s.table: "pandas" if s.rows <= bound else "spark"
                       for s in in_memory.suites}
    if bound == 3:
        assert set(engines.values()) == {"pandas", "spark"}, engines
    assert _what_it_says(in_memory) == _what_it_says(on_spark)
    assert in_memory.verdict == on_spark.verdict
    if case == "faulty":
        assert {(r.table, r.expectation, r.column, r.severity)
                for r in in_memory.results if not r.success} == EXPECTED_FAILURES
        (late,) = [r for r in in_memory.results if r.column == "beyond_grace"]
        assert '"lateness_seconds": "-2.000000"' in late.sample  # a Decimal, as text
    pages = _validation_pages(wh, in_memory.run_id)
    assert sorted(pages) == sorted(SUITES)
    assert pages == _validation_pages(wh, on_spark.run_id)


def test_the_driver_frame_holds_what_collect_gives(spark: Any) -> None:
    """Every column of the in-memory frame holds Python objects equal to ``collect``'s:
    Decimals with their scale (never floats), a nullable integer as int and None (not NaN),
    naive timestamps to the microsecond, dates, booleans and nulls."""
    from audits.driver_frame import driver_frame, is_flat

    df = spark.createDataFrame(
        [(Decimal("10.500"), 3, _t(1.25), DAY, True, "a"),
         (None, None, None, None, None, None)],
        "amount decimal(38,3), n long, at timestamp, d date, ok boolean, s string")
    frame = driver_frame(df)
    assert {str(t) for t in frame.dtypes} == {"object"}
    assert frame.to_dict("records") == [r.asDict() for r in df.collect()]
    (first, empty) = frame.to_dict("records")
    assert type(first["amount"]) is Decimal and str(first["amount"]) == "10.500"
    assert type(first["n"]) is int and empty["n"] is None and empty["amount"] is None
    assert first["at"] == datetime(2026, 1, 1, 0, 0, 1, 250_000)  # naive, as collect gives
    assert is_flat(df.schema) and not is_flat(spark.range(1).selectExpr("array(id) a").schema)
    assert list(driver_frame(df.limit(0)).columns) == df.columns


def _index_status(warehouse: Path, run_id: str) -> dict[str, str]:
    """Each suite's status in the Data Docs index for ``run_id``."""
    from tests.test_datadocs import validation_rows

    return {r["suite"]: r["status"] for r in validation_rows(
        warehouse / "reports" / "data_docs" / "index.html") if r["run"] == run_id}


def test_allow_unexplained_turns_unexplained_rows_into_a_warning(spark: Any,
                                                                  warehouse: Path) -> None:

    rows = _clean_rows()
    rows["reconciliation"].append(_recon("k4", "MISSING_IN_STREAM", None, ("3.00", 1),
                                         ("0.00", 0)))
    _write(spark, warehouse, {"reconciliation": rows["reconciliation"]})
    strict = _run_checks(spark, _settings(warehouse), DAY, record=False)
    lenient = _run_checks(spark, _settings(warehouse, allow_unexplained=True), DAY,
                         record=False)
    key = ("reconciliation", "expect_column_values_to_not_be_in_set", "status")
    (s,) = [r for r in strict.results if (r.table, r.expectation, r.column) == key]
    (w,) = [r for r in lenient.results if (r.table, r.expectation, r.column) == key]
    assert (s.success, s.severity, s.unexpected_count) == (False, "blocking", 1)
    assert (w.success, w.severity) == (False, "warning")
    assert not strict.success
    # a warning never fails a suite: not in reckon's verdict, nor in Data Docs' colour
    (recon,) = [o for o in lenient.suites if o.table == "reconciliation"]
    assert (recon.verdict.passed, recon.verdict.text) == (True, "passed with 1 warning")
    assert _index_status(warehouse, lenient.run_id)["reckon_reconciliation"] == "Success"
    assert _index_status(warehouse, strict.run_id)["reckon_reconciliation"] == "Failed"
    # the tables written nowhere fail the check (a mistyped warehouse or a step not run must
    # not "pass"), as blocking expectations of their own, not crashes; with them, the
    # lenient run's only blocking failures
    missing = {r.table for r in lenient.results if r.expectation == "expect_table_to_exist"}
    # (suites name provisional_totals, which is derived from the provisional_deltas table)
    assert missing == {*_PARTITION, "provisional_totals"} - {"reconciliation",
                                                             "provisional_deltas"}
    assert {r.table for r in lenient.blocking_failures} == missing and not lenient.success
    assert not any(s.table_exists for s in lenient.suites if s.table != "reconciliation")


def test_a_check_reads_each_table_at_the_version_it_records(spark: Any, warehouse: Path,
                                                            monkeypatch: Any) -> None:
    """A row committed after the run took a table's version (the stream keeps writing) is not
    checked, and the run records the version it did check, next to its results."""
    import spark.tables as tb
    from reports.db.repository import ReportDB
    from storage import commits

    rows = _clean_rows()["event_log"]
    _write(spark, warehouse, {"event_log": rows})
    extra = spark.createDataFrame([{**rows[0], "event_id": "e4"}], tb.SCHEMAS["event_log"])
    extra.write.format("delta").mode("append").save(tb.table_path(warehouse, "event_log"))
    assert commits.current_version(warehouse, "event_log") == 1

    def event_log_rows(result: Any) -> tuple[int, int | None]:
        (suite,) = [s for s in result.suites if s.table == "event_log"]
        return suite.rows, suite.table_version

    assert event_log_rows(_run_checks(spark, _settings(warehouse), DAY, record=False)) == (5, 1)
    current_version = commits.current_version
    with monkeypatch.context() as before_the_append:
        before_the_append.setattr(commits, "current_version", lambda wh, name: (
            0 if name == "event_log" else current_version(wh, name)))
        result = _run_checks(spark, _settings(warehouse), DAY)
    assert event_log_rows(result) == (4, 0)
    assert json.loads(json.dumps(result.to_dict()))["suites"][0]["table_version"] == 0
    assert "event_log" in result.summary() and "4 rows, version 0" in result.summary()
    with ReportDB.from_settings(_settings(warehouse)) as db:
        run = db.current_check_run(DAY)
    assert run is not None and run.run_id == result.run_id
    assert run.table_versions == {"event_log": 0}  # the other tables are missing


def test_the_invariant_is_judged_by_the_tolerance_the_audit_applied(spark: Any,
                                                                      warehouse: Path) -> None:
    """`reckon audit --tolerance-abs 0.05` explained a 0.03 residual; `reckon check`, run with
    the configuration's tolerance (0), must judge that row by the audit's rule, read from the
    day's current run in the report database, not report the invariant broken."""
    from reports.db.repository import ReportDB
    from tests.test_report_db import make_run

    row = _recon("k1", "EXPLAINED", ("10.00", 1), ("15.03", 2), ("5.00", 1))
    assert row["residual_amount"] == Decimal("0.03")
    _write(spark, warehouse, {"reconciliation": [row]})
    key = ("reconciliation", "expect_column_values_to_be_in_set", "invariant_holds")

    def invariant() -> bool:
        result = _run_checks(spark, _settings(warehouse), DAY, record=False)
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
    from app.cli import main
    from reports.db.repository import ReportDB

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
    ("9.99", ["10.000"]),                 # amounts are stored at scale 3
    # as a double, which GX makes of a "between" bound, this is 10.0 and would let 10.00 pass
    ("9.9999999999999999", ["10.000"]),
])
def test_amount_bounds_are_compared_exactly_not_as_floats(spark: Any, clean_wh: Path,
                                                          amount_max: str,
                                                          flagged: list[str]) -> None:

    result = _run_checks(spark, _settings(clean_wh, amount_max=Decimal(amount_max)), DAY,
                        record=False)
    key = ("event_log", "expect_column_values_to_be_null", "amount_out_of_range")
    (check,) = [r for r in result.results if (r.table, r.expectation, r.column) == key]
    assert check.success == (not flagged) and check.severity == "blocking"
    assert (check.unexpected_count or 0) == len(flagged)
    if flagged:
        sample = json.loads(check.sample)
        assert [row["amount_out_of_range"] for row in sample] == flagged
        assert [row["event_id"] for row in sample] == ["e1"]


# ----------------------------------------------------------------------------- money per currency


def _result(result: Any, table: str, expectation: str, column: str) -> Any:
    (found,) = [r for r in result.results
                if (r.table, r.expectation, r.column) == (table, expectation, column)]
    return found


_MISMATCH = ("canonical_totals", "expect_column_values_to_be_null", "event_log_mismatch")
_COMPARABLE = ("canonical_totals", "expect_column_values_to_be_in_set", "event_log_comparable")


def test_the_clean_day_passes_the_per_currency_checks(clean_result: Any) -> None:
    """The clean day's k2 has EUR and JPY in one window, each its own row: every row agrees
    with the event log's sum of its grain, and every amount keeps its currency's minor unit."""
    mismatch = _result(clean_result, *_MISMATCH)
    assert (mismatch.success, mismatch.severity, mismatch.unexpected_count) == (
        True, "blocking", 0)
    assert _result(clean_result, *_COMPARABLE).success
    breaks = [r for r in clean_result.results if r.column == "minor_unit_break"]
    assert {r.table for r in breaks} == {"event_log", "provisional_totals", "late_events",
                                         "canonical_totals", "uncaught_duplicates",
                                         "reconciliation"}
    assert all(r.success for r in breaks)
    unique = [json.loads(r.kwargs)["column_list"] for r in clean_result.results
              if r.expectation == "expect_compound_columns_to_be_unique"]
    assert unique == [["window_start", "key", "currency"]] * 4


def test_a_total_that_mixes_currencies_fails(spark: Any, warehouse: Path) -> None:
    """canonical_totals whose (window, k2, EUR) row adds the JPY event's 7 to the EUR 7.50
    (and has no JPY row): the row differs from the event log's EUR sum for its grain, and the
    expectation names it. A row whose replay read Kafka (no event_log version) cannot be
    compared: a warning, not a pass and not a failure."""

    clean = _clean_rows()
    mixed = [_canonical("k2", 2, "14.50", "EUR"),                # EUR 7.50 + JPY 7
             _canonical("k1", 2, "15.00", replay_id="r-kafka")]  # fine, but not comparable
    _write(spark, warehouse, {"event_log": clean["event_log"], "canonical_totals": mixed})
    _replay_run(spark, warehouse, {"r1": 0, "r-kafka": None})
    result = _run_checks(spark, _settings(warehouse), DAY, record=False)

    mismatch = _result(result, *_MISMATCH)
    assert (mismatch.success, mismatch.severity, mismatch.unexpected_count) == (
        False, "blocking", 1)
    (row,) = json.loads(mismatch.sample)
    assert (row["key"], row["currency"], row["total_amount"], row["event_count"]) == (
        "k2", "EUR", "14.500", 2)
    assert row["event_log_mismatch"] == "event log: EUR 7.50 in 1 event(s)"
    comparable = _result(result, *_COMPARABLE)
    assert (comparable.success, comparable.severity, comparable.unexpected_count) == (
        False, "warning", 1)
    assert [r["key"] for r in json.loads(comparable.sample)] == ["k1"]
    assert not result.success


def test_a_narrowed_currency_list_refuses_the_others(spark: Any, clean_wh: Path) -> None:
    """currencies = EUR, USD: the clean day's JPY rows are outside the booked set in every
    table that holds them."""

    result = _run_checks(spark, _settings(clean_wh, currencies=("EUR", "USD")), DAY,
                        record=False)
    failed = {(r.table, r.unexpected_count) for r in result.results
              if r.column == "currency" and r.expectation == "expect_column_values_to_be_in_set"
              and not r.success}
    assert failed == {("event_log", 1), ("provisional_totals", 1), ("canonical_totals", 1),
                      ("reconciliation", 1)}
    kwargs = json.loads(_result(result, "event_log", "expect_column_values_to_be_in_set",
                                "currency").kwargs)
    assert kwargs["value_set"] == ["EUR", "USD"]


def test_the_event_log_sums_are_the_replays(spark: Any, warehouse: Path) -> None:
    """What the canonical_totals check compares with is what the replay writes, on the cases
    that make the replay's sums non-trivial: hopping windows (an event in two windows, one
    reaching past midnight), copies of an event (the first in arrival order counts once),
    copies that disagree, a row the typed rules reject (half a yen), three currencies with 2,
    0 and 3 places in one window, and another day's events."""
    from audits.event_log_match import event_log_totals
    from spark import tables as tb
    from spark.replay import replay_day

    def log(event_id: str, key: str, amount: str, currency: str, at: float, arrival: float,
            duplicate: bool = False) -> dict[str, Any]:
        row = _event(event_id, key, amount, at, arrival, currency)
        return {**row, "payload": None, "batch_id": 1, "is_duplicate": duplicate,
                "event_date": row["event_time"].date()}

    day_end = 86_400
    rows = [log("a1", "k1", "1.25", "EUR", 3, 4), log("a1", "k1", "1.25", "EUR", 3, 6, True),
            log("a2", "k1", "7", "JPY", 4, 5), log("a3", "k1", "0.125", "KWD", 8, 9),
            log("c1", "k2", "2.00", "EUR", 12, 13), log("c1", "k2", "3.00", "EUR", 12, 20),
            log("b1", "k1", "5.5", "JPY", 6, 7),                      # rejected: half a yen
            log("m1", "k3", "4.00", "EUR", day_end - 2, day_end - 1),
            log("n1", "k3", "1.00", "EUR", day_end + 2, day_end + 3),  # next day, DAY's window
            log("p1", "k1", "9.00", "EUR", -20, -19)]                  # the day before
    settings = _settings(warehouse, window="10s", slide="5s")
    tb.ensure_table(spark, warehouse, tb.EVENT_LOG)
    tb.marked_append(spark.createDataFrame(rows, tb.SCHEMAS[tb.EVENT_LOG]), warehouse,
                     tb.EVENT_LOG, "test", 0)
    result = replay_day(spark, settings.replay_config(), DAY)
    assert result.event_log_version == 1

    def as_set(df: Any, amount: str, count: str) -> set[tuple[Any, ...]]:
        return {(r.window_start, r.key, r.currency, Decimal(r[amount]), int(r[count]))
                for r in df.collect()}

    canonical = tb.read_table(spark, warehouse, tb.CANONICAL_TOTALS).filter(
        f"window_date = '{DAY.isoformat()}'")
    ours = as_set(event_log_totals(spark, settings.replay_config(), DAY, 1), "log_amount",
                  "log_count")
    assert ours == as_set(canonical, "total_amount", "event_count")
    by_grain = {(r[0].timestamp() - T0.timestamp(), r[1], r[2]): (r[3], r[4]) for r in ours}
    assert by_grain[(0, "k1", "EUR")] == (Decimal("1.25"), 1)       # one copy of a1
    assert by_grain[(0, "k1", "JPY")] == (Decimal("7"), 1)          # b1 is not counted
    assert by_grain[(5, "k1", "KWD")] == (Decimal("0.125"), 1)
    assert by_grain[(10, "k2", "EUR")] == (Decimal("2.00"), 1)      # the first copy of c1
    assert by_grain[(day_end - 5, "k3", "EUR")] == (Decimal("5.00"), 2)
    assert (-20, "k1", "EUR") not in by_grain and (-25, "k1", "EUR") not in by_grain
