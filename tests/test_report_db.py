"""The report database on SQLite (fast tier) and on a real PostgreSQL (``postgres`` marker):
round trips, exact money per currency (EUR, JPY and KWD at the stored scale 3), re-audit
history, break review rules (a break is a (day, window, key, currency)), concurrent writers,
migrations (0004: runs recorded before per-currency figures keep their counts, not money)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa

import reports.db
from app.settings import load_settings
from audits.day_whatif import DayWhatIf, curve_line
from audits.records import (
    AttributionRow,
    AuditRun,
    BreakRow,
    CheckRun,
    CurrencySummary,
    ExpectationResult,
)
from reckon.errors import UsageError
from reports.db.executor_writes import insert_breaks
from reports.db.models import BREAKS, Base
from reports.db.repository import ReportDB
from reports.records import ReportRecord
from reports.review import append_signoff

DAY = date(2026, 1, 1)
T0 = datetime(2026, 1, 2, 3, 0, tzinfo=UTC)


@pytest.fixture()
def db(db_url: str) -> Iterator[ReportDB]:
    with ReportDB(db_url) as database:
        yield database


_CURRENCY_DEFAULTS: dict[str, dict[str, object]] = {
    # rows per status, then provisional, canonical, gap, late, duplicate, residual, tolerated
    "EUR": dict(status_counts={"MATCHED": 4, "EXPLAINED": 1, "UNEXPLAINED": 1},
                provisional_total=Decimal("12345678901234567.89"),
                canonical_total=Decimal("0.10") + Decimal("0.20"), gap_total=Decimal("-0.01"),
                late_total=Decimal("7.50"), duplicate_total=Decimal("0.00"),
                residual_total=Decimal("12345678901234567890123456789012345.67"),
                tolerated_total=Decimal("0.00")),
    "JPY": dict(status_counts={"MATCHED": 3, "EXPLAINED": 1},
                provisional_total=Decimal("3211000"), canonical_total=Decimal("3212200"),
                gap_total=Decimal("1200"), late_total=Decimal("1200"),
                duplicate_total=Decimal("0"), residual_total=Decimal("0"),
                tolerated_total=Decimal("0")),
    "KWD": dict(status_counts={"MATCHED": 3},
                provisional_total=Decimal("1000.500"), canonical_total=Decimal("1000.625"),
                gap_total=Decimal("0.125"), late_total=Decimal("0.250"),
                duplicate_total=Decimal("0.125"), residual_total=Decimal("0.000"),
                tolerated_total=Decimal("0.000")),
}


def make_currency(code: str = "EUR", **changes: object) -> CurrencySummary:
    """One currency's figures in a run (EUR, JPY or KWD defaults), with ``changes``."""
    values = dict(_CURRENCY_DEFAULTS[code])
    counts: dict[str, int] = values.pop("status_counts")  # type: ignore[assignment]
    summary = CurrencySummary(
        currency=code, rows=sum(counts.values()), status_counts=counts,
        unexplained=counts.get("UNEXPLAINED", 0), provisional_events=40, canonical_events=41,
        late_events=1, duplicate_events=0, completeness=Decimal("0.975609"),
        **values)  # type: ignore[arg-type]
    return replace(summary, **changes)  # type: ignore[arg-type]


def make_run(run_id: str = "run-1", day: date = DAY, *, kind: str = "nightly",
             started_at: datetime = T0, reconciler: str = "alice", **changes: object) -> AuditRun:
    """A run of 13 (window, key, currency) rows in EUR, JPY and KWD (counts over all three,
    money per currency only)."""
    run = AuditRun(
        run_id=run_id, day=day, kind=kind, started_at=started_at, duration_seconds=12.5,
        reconciler=reconciler,
        params={"window": "10s", "lateness": "3s", "tolerance_abs": "0.00", "nested": {"a": [1]}},
        status_counts={"MATCHED": 10, "EXPLAINED": 2, "UNEXPLAINED": 1},
        rows=13, unexplained=1,
        table_versions={"provisional_totals": 4, "canonical_totals": 2},
        currencies=(make_currency("EUR"), make_currency("JPY"), make_currency("KWD")),
        completeness=Decimal("0.99912345678901234567890123"),
    )
    return replace(run, **changes)  # type: ignore[arg-type]


def make_break(run_id: str = "run-1", key: str = "k1", *, day: date = DAY, minute: int = 0,
               status: str = "UNEXPLAINED", residual: str = "1.25",
               currency: str = "EUR") -> BreakRow:
    start = datetime(day.year, day.month, day.day, 0, minute, tzinfo=UTC)
    return BreakRow(
        run_id=run_id, day=day, window_start=start, window_end=start + timedelta(seconds=10),
        key=key, currency=currency, status=status,
        provisional_amount=None if status == "MISSING_IN_STREAM" else Decimal("10.10"),
        canonical_amount=Decimal("11.35"), gap_amount=Decimal("-1.25"), gap_count=1,
        late_amount=Decimal("0.00"), late_count=0, duplicate_amount=Decimal("0.00"),
        duplicate_count=0, residual_amount=Decimal(residual), residual_count=1,
        explanation=f"{status.lower()} break of {key}",
    )


ATTRIBUTION = [
    AttributionRow(dimension="partition", value="3", late_events=40,
                   late_amounts={"EUR": Decimal("123.45"), "JPY": Decimal("1200"),
                                 "KWD": Decimal("0.125")},
                   all_events=1000, late_share=Decimal("0.8"), event_share=Decimal("0.25"),
                   lift=Decimal("3.2")),
    AttributionRow(dimension="source", value="pos", late_events=0, late_amounts={},
                   all_events=0, late_share=Decimal("0"), event_share=Decimal("0"), lift=None),
]


# ----------------------------------------------------------------------------- round trips


def test_audit_run_round_trip_is_exact(db: ReportDB) -> None:
    run = make_run()
    db.record_audit_run(run, ATTRIBUTION)
    got = db.get_audit_run("run-1")
    assert got == run
    assert got is not None
    assert [c.currency for c in got.currencies] == ["EUR", "JPY", "KWD"]
    eur, jpy, kwd = got.currencies
    assert eur.provisional_total == Decimal("12345678901234567.89")
    # stored at scale 3 (DECIMAL(38,3)); the currency says how many places are its own
    assert str(eur.canonical_total) == "0.300" and str(jpy.gap_total) == "1200.000"
    assert (kwd.canonical_total, kwd.duplicate_total) == (Decimal("1000.625"), Decimal("0.125"))
    assert eur.residual_total == Decimal("12345678901234567890123456789012345.67")  # 37 digits
    assert (eur.status_counts, eur.rows, eur.unexplained) == (
        {"MATCHED": 4, "EXPLAINED": 1, "UNEXPLAINED": 1}, 6, 1)
    assert got.completeness == Decimal("0.99912345678901234567890123")
    assert got.started_at.tzinfo is not None and got.started_at.utcoffset() == timedelta(0)
    assert db.current_audit_run(DAY) == run
    assert db.attribution("run-1") == ATTRIBUTION
    assert db.get_audit_run("nope") is None
    assert db.current_audit_run(DAY, kind="adhoc") is None


def test_money_with_more_than_three_places_is_refused_not_rounded(db: ReportDB) -> None:
    def run_with(**changes: object) -> AuditRun:
        return make_run(currencies=(make_currency("KWD", **changes),))

    with pytest.raises(UsageError, match=r"money=Decimal\('0\.0001'\).*at most 3 decimal "
                                         r"places"):
        db.record_audit_run(run_with(gap_total=Decimal("0.0001")), [])
    with pytest.raises(UsageError, match="floats are not exact"):
        db.record_audit_run(run_with(late_total=0.1), [])
    with pytest.raises(UsageError, match=r"fits DECIMAL\(38,3\)"):
        db.record_audit_run(run_with(canonical_total=Decimal(10) ** 35), [])
    assert db.audit_runs() == []  # the failed transactions left nothing behind (not the run)
    db.record_audit_run(run_with(gap_total=Decimal("-0.001")), [])  # KWD's own minor unit
    got = db.get_audit_run("run-1")
    assert got is not None and got.currencies[0].gap_total == Decimal("-0.001")


def test_the_largest_amount_decimal_38_3_holds_is_stored(db: ReportDB) -> None:
    top = Decimal("99999999999999999999999999999999999.999")  # 35 + 3 digits
    db.record_audit_run(make_run(currencies=(make_currency("KWD", residual_total=top),)), [])
    got = db.get_audit_run("run-1")
    assert got is not None and got.currencies[0].residual_total == top


def test_breaks_round_trip(db: ReportDB) -> None:
    db.record_audit_run(make_run(), [])
    rows = [make_break(key="k2", minute=1, status="MISSING_IN_STREAM"),
            make_break(key="k1", status="EXPLAINED", residual="0.00"),
            make_break(key="k3", minute=2, residual="12345678901234567.89")]
    assert db.write_breaks("run-1", rows) == 3
    assert db.breaks("run-1") == sorted(rows, key=lambda r: (r.window_start, r.key))
    assert db.breaks("run-1")[1].provisional_amount is None
    assert db.breaks("other") == []


def test_one_window_and_key_breaks_separately_in_each_currency(db: ReportDB) -> None:
    """(window, key) k1 breaks in EUR and in JPY: two breaks, two reviews, each with its own
    figures and review status; deciding one does not touch the other."""
    db.record_audit_run(make_run(), [])
    eur = make_break(key="k1", residual="1.25")
    jpy = replace(make_break(key="k1", residual="1200", currency="JPY"),
                  provisional_amount=Decimal("1000"), canonical_amount=Decimal("2200"),
                  gap_amount=Decimal("1200"))
    kwd = make_break(key="k1", status="EXPLAINED", residual="0.000", currency="KWD")
    assert db.write_breaks("run-1", [jpy, kwd, eur], now=T0) == 3
    assert [(b.currency, b.residual_amount) for b in db.breaks("run-1")] == [
        ("EUR", Decimal("1.25")), ("JPY", Decimal("1200")), ("KWD", Decimal("0"))]
    listed = db.list_breaks(DAY, now=T0)
    assert [(b["key"], b["currency"], b["review_status"], b["gap_amount"]) for b in listed] == [
        ("k1", "EUR", "open", Decimal("-1.25")), ("k1", "JPY", "open", Decimal("1200")),
        ("k1", "KWD", "explained", Decimal("-1.25"))]
    append_signoff(db, "run-1", "bob", "accepted", "k1 accepted in every currency")
    assert {b["currency"]: b["review_status"] for b in db.list_breaks(DAY)} == {
        "EUR": "accepted", "JPY": "accepted", "KWD": "explained"}
    # the next audit: JPY's residual moved, so its decision no longer covers it; EUR's holds
    db.record_audit_run(make_run("run-2", started_at=T0 + timedelta(days=1)), [])
    db.write_breaks("run-2", [replace(eur, run_id="run-2"),
                              replace(jpy, run_id="run-2", residual_amount=Decimal("1300"))])
    assert {b["currency"]: b["review_status"] for b in db.list_breaks(DAY)} == {
        "EUR": "accepted", "JPY": "open"}


def test_check_run_and_results_round_trip(db: ReportDB) -> None:
    run = CheckRun(run_id="chk-1", day=DAY, started_at=T0, duration_seconds=3.25, success=False,
                   blocking_failures=1, warnings=2, suites=3, expectations=17,
                   data_docs_path="/wh/docs/index.html")
    results = [
        ExpectationResult(run_id="chk-1", suite="canonical", table="canonical_totals",
                          expectation="expect_column_values_to_not_be_null", column="key",
                          severity="blocking", success=False, unexpected_count=2,
                          sample='["a", null]', kwargs='{"column": "key"}'),
        ExpectationResult(run_id="chk-1", suite="canonical", table="canonical_totals",
                          expectation="expect_table_row_count_to_be_between", column=None,
                          severity="warning", success=True, unexpected_count=None, sample="[]",
                          kwargs='{"min_value": 1}'),
    ]
    db.record_check_run(run, results)
    db.record_check_run(run, results)  # retry: no duplicates
    assert db.current_check_run(DAY) == run
    assert db.expectation_results("chk-1") == results
    later = replace(run, run_id="chk-2", started_at=T0 + timedelta(hours=1), success=True)
    db.record_check_run(later, [])
    assert db.current_check_run(DAY) == later
    assert db.expectation_results("chk-1") == results  # history kept
    assert db.current_check_run(date(2026, 1, 2)) is None


def test_report_round_trip_and_current(db: ReportDB) -> None:
    first = ReportRecord(day=DAY, audit_run_id="run-1", created_at=T0, html_path="/r/a.html",
                         pdf_path="/r/a.pdf", csv_paths=["/r/breaks.csv", "/r/totals.csv"],
                         sha256="a" * 64)
    db.record_report(first)
    db.record_report(first)  # idempotent
    assert db.current_report(DAY) == first
    second = replace(first, created_at=T0 + timedelta(minutes=5), html_path="/r/b.html",
                     sha256="b" * 64, csv_paths=[])
    db.record_report(second)
    assert db.current_report(DAY) == second
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM reports")).scalar_one() == 2
    assert db.current_report(date(2025, 1, 1)) is None


# ----------------------------------------------------------------------------- re-audits


def test_reaudit_makes_the_second_run_current_and_keeps_history(db: ReportDB) -> None:
    first = make_run("run-1")
    second = make_run("run-2", started_at=T0 + timedelta(hours=2), reconciler="bob")
    other_kind = make_run("adhoc-1", kind="adhoc", started_at=T0 - timedelta(hours=1))
    db.record_audit_run(first, ATTRIBUTION)
    db.record_audit_run(other_kind, [])
    db.record_audit_run(second, ATTRIBUTION[:1])
    assert db.current_audit_run(DAY) == second
    assert db.current_audit_run(DAY, kind="adhoc") == other_kind  # other kinds untouched
    history = db.audit_runs(DAY)
    assert [r.run_id for r in history] == ["run-2", "run-1", "adhoc-1"]
    assert {r.run_id: r.is_current for r in history} == {
        "run-2": True, "run-1": False, "adhoc-1": True}
    assert db.attribution("run-1") == ATTRIBUTION  # history is never deleted
    assert db.audit_runs(date(2026, 1, 5)) == []


def test_signoffs_of_day_give_each_runs_gap_per_currency(db: ReportDB) -> None:
    db.record_audit_run(make_run("run-1", reconciler="alice"), [])
    append_signoff(db, "run-1", "bob", "approved", "ties out")
    later = make_run("run-2", started_at=T0 + timedelta(hours=1),
                     currencies=(make_currency("EUR", gap_total=Decimal("-0.03")),
                                 make_currency("JPY")))
    db.record_audit_run(later, [])
    append_signoff(db, "run-2", "carol", "rejected", "EUR moved")
    entries = db.signoffs_of_day(DAY)
    assert [(e["run_id"], e["is_current"], e["gap_totals"]) for e in entries] == [
        ("run-1", False, {"EUR": Decimal("-0.01"), "JPY": Decimal("1200"),
                          "KWD": Decimal("0.125")}),
        ("run-2", True, {"EUR": Decimal("-0.03"), "JPY": Decimal("1200")})]
    assert "gap_total" not in entries[0]  # no cross-currency gap exists


def test_same_run_id_twice_is_one_row(db: ReportDB) -> None:
    run = make_run()
    db.record_audit_run(run, ATTRIBUTION)
    db.record_audit_run(run, ATTRIBUTION)
    assert db.audit_runs() == [run]
    assert len(db.attribution("run-1")) == 2


def test_late_retry_of_an_older_run_does_not_displace_the_newer(db: ReportDB) -> None:
    newer = make_run("run-new", started_at=T0 + timedelta(hours=1))
    older = make_run("run-old", started_at=T0)
    db.record_audit_run(newer, [])
    db.record_audit_run(older, [])
    assert db.current_audit_run(DAY) == newer
    got = db.get_audit_run("run-old")
    assert got is not None and got.is_current is False


def test_check_runs_keep_the_audit_runs_rule_a_late_retry_or_a_rerecord_changes_nothing(
        db: ReportDB) -> None:
    """Check runs are recorded by the audit runs' rule (``repository._insert_run``): the
    newest by started_at is current, an older run recorded later is history, and a run_id
    recorded again changes nothing, even with other figures."""
    newer = CheckRun(run_id="chk-new", day=DAY, started_at=T0 + timedelta(hours=1),
                     duration_seconds=1.0, success=True, blocking_failures=0, warnings=0,
                     suites=7, expectations=40, data_docs_path="/wh/docs/index.html")
    older = replace(newer, run_id="chk-old", started_at=T0, success=False, blocking_failures=1)
    db.record_check_run(newer, [])
    db.record_check_run(older, [])
    db.record_check_run(replace(newer, success=False, warnings=9), [])
    assert db.current_check_run(DAY) == newer
    with db.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT run_id, is_current FROM check_runs "
                                    "ORDER BY run_id")).all()
    assert [tuple(r) for r in rows] == [("chk-new", True), ("chk-old", False)]


# ----------------------------------------------------------------------------- break review


def test_break_review_status_and_age_across_reaudits(db: ReportDB) -> None:
    db.record_audit_run(make_run("run-1"), [])
    db.write_breaks("run-1", [make_break("run-1", "k1", status="EXPLAINED", residual="0.00"),
                              make_break("run-1", "k2")], now=T0)
    listed = db.list_breaks(DAY, now=T0 + timedelta(hours=1))
    assert [(b["key"], b["review_status"], b["age_days"]) for b in listed] == [
        ("k1", "explained", 0), ("k2", "open", 0)]

    # re-audit three days later: k1 is now unexplained, k2 explained, k3 is new
    later = T0 + timedelta(days=3)
    db.record_audit_run(make_run("run-2", started_at=later), [])
    db.write_breaks("run-2", [make_break("run-2", "k1"),
                              make_break("run-2", "k2", status="EXPLAINED", residual="0.00"),
                              make_break("run-2", "k3", minute=5, status="MISSING_IN_STREAM")],
                    now=later)
    listed = db.list_breaks(DAY, now=later + timedelta(hours=1))
    assert [(b["key"], b["status"], b["review_status"], b["age_days"], b["run_id"])
            for b in listed] == [
        ("k1", "UNEXPLAINED", "open", 3, "run-2"),   # explained -> unexplained re-opens
        ("k2", "EXPLAINED", "open", 3, "run-2"),     # open stays open until a reviewer acts
        ("k3", "MISSING_IN_STREAM", "open", 0, "run-2"),
    ]
    assert listed[0]["first_seen_at"] == T0
    assert listed[0]["last_seen_run_id"] == "run-2"
    assert listed[0]["residual_amount"] == Decimal("1.25")
    assert db.list_breaks(review_status="explained") == []
    assert [b["key"] for b in db.list_breaks(review_status="open")] == ["k1", "k2", "k3"]
    assert db.list_breaks(date(2026, 1, 2)) == []
    assert len(db.breaks("run-1")) == 2  # the older run's breaks stay as history


def test_list_breaks_rejects_unknown_review_status(db: ReportDB) -> None:
    with pytest.raises(UsageError, match=r"review_status='closed'.*open, explained, accepted"):
        db.list_breaks(review_status="closed")


def test_insert_breaks_is_idempotent_and_checks_run_id(db: ReportDB, db_url: str) -> None:
    rows = [make_break(key=f"k{i}", minute=i % 60) for i in range(10)]
    assert insert_breaks(db_url, "run-1", rows) == 10
    assert insert_breaks(db_url, "run-1", rows) == 10  # a retried Spark task...
    assert db.breaks("run-1") == sorted(rows, key=lambda r: (r.window_start, r.key))  # ...no dups
    with pytest.raises(UsageError, match=r"BreakRow.run_id='run-1'.*'run-9'"):
        insert_breaks(db_url, "run-9", rows[:1])


def test_insert_breaks_in_chunks(db: ReportDB, db_url: str) -> None:
    rows = [make_break(key=f"key-{i:05d}") for i in range(10_001)]  # 3 chunks of <= 5000
    assert insert_breaks(db_url, "run-1", iter(rows)) == 10_001
    with db.engine.connect() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(BREAKS))
        assert count.scalar_one() == 10_001
        reviews = conn.execute(sa.text("SELECT count(*) FROM break_reviews")).scalar_one()
        assert reviews == 10_001


def test_concurrent_audits_write_breaks_at_once(db: ReportDB, db_url: str) -> None:
    """Two audits (different days) and two partitions of one of them insert at the same time."""
    db.migrate()
    days = [date(2026, 1, 1), date(2026, 1, 2)]
    jobs = [("run-a", days[0], range(0, 3000)), ("run-b", days[1], range(0, 1500)),
            ("run-b", days[1], range(1500, 3000))]
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []
    written: list[int] = []

    def job(run_id: str, day: date, keys: range) -> None:
        try:
            barrier.wait()
            rows = [make_break(run_id, f"k{i:04d}", day=day, minute=i % 60) for i in keys]
            written.append(insert_breaks(db_url, run_id, rows))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=spec) for spec in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert sorted(written) == [1500, 1500, 3000]
    assert len(db.breaks("run-a")) == 3000
    assert len(db.breaks("run-b")) == 3000
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM break_reviews")).scalar_one() == 6000


# ----------------------------------------------------------------------------- schema


def test_migrate_twice_is_harmless_and_head_is_the_models_schema(db: ReportDB) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.config import Config
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    db.migrate()
    db.record_audit_run(make_run(), [])
    db.migrate()
    assert db.get_audit_run("run-1") == make_run()
    with db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
        inspector = sa.inspect(conn)
        tables = set(inspector.get_table_names()) - {"alembic_version"}
        assert tables == set(Base.metadata.tables)
        for name, table in Base.metadata.tables.items():
            assert {c["name"] for c in inspector.get_columns(name)} == set(table.columns.keys())
        cfg = Config(str(Path(reports.db.__file__).parent.parent / "alembic.ini"))
        head = ScriptDirectory.from_config(cfg).get_current_head()
        assert context.get_current_revision() == head == "0018_audit_whatifs"


def test_a_run_recorded_before_per_currency_figures_keeps_its_counts_not_money(
        db_url: str) -> None:
    """Migration 0004 on a database holding a run of the earlier layout (one cross-currency
    total per figure) and its break: the run keeps its counts, its money is gone (it was
    never money), its break and review get currency '', and the report refuses the run."""
    from alembic import command

    from reckon.errors import LayoutError
    from reports.context import headline_from_run
    from reports.db.engine import alembic_config

    engine = sa.create_engine(db_url)
    pg = engine.dialect.name == "postgresql"

    def money(text: str) -> object:
        return Decimal(text) if pg else text

    at = T0 if pg else T0.replace(tzinfo=None)
    start = at.replace(day=1, hour=0)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0003_check_run_table_versions")
        old = sa.MetaData()
        runs, breaks, reviews = (sa.Table(n, old, autoload_with=conn)
                                 for n in ("audit_runs", "breaks", "break_reviews"))
        conn.execute(sa.insert(runs).values(
            run_id="run-old", day=DAY, kind="nightly", started_at=at, duration_seconds=1.0,
            reconciler="alice", params={}, status_counts={"MATCHED": 1, "UNEXPLAINED": 1},
            rows=2, provisional_total=money("4449278.54"), canonical_total=money("4449279.54"),
            gap_total=money("1.00"), late_total=money("0.00"), duplicate_total=money("0.00"),
            residual_total=money("1.00"), unexplained=1, table_versions={},
            completeness=None, is_current=True, recorded_at=at))
        conn.execute(sa.insert(breaks).values(
            run_id="run-old", day=DAY, window_start=start, window_end=start, key="k1",
            status="UNEXPLAINED", provisional_amount=money("1.00"),
            canonical_amount=money("2.00"), gap_amount=money("1.00"), gap_count=0,
            late_amount=money("0.00"), late_count=0, duplicate_amount=money("0.00"),
            duplicate_count=0, residual_amount=money("1.00"), residual_count=0,
            explanation="old"))
        conn.execute(sa.insert(reviews).values(
            day=DAY, window_start=start, key="k1", review_status="open",
            last_status="UNEXPLAINED", first_seen_at=at, last_seen_run_id="run-old",
            updated_at=at, last_residual_amount=money("1.00"), last_residual_count=0))
    engine.dispose()
    with ReportDB(db_url) as upgraded:
        run = upgraded.get_audit_run("run-old")
        assert run is not None and (run.rows, run.unexplained, run.currencies) == (2, 1, ())
        assert [(b.key, b.currency) for b in upgraded.breaks("run-old")] == [("k1", "")]
        assert [(b["key"], b["currency"]) for b in upgraded.list_breaks(DAY)] == [("k1", "")]
        assert upgraded.signoffs_of_day(DAY) == []
        with pytest.raises(LayoutError, match=r"reckon audit --date 2026-01-01"):
            headline_from_run(run)


def test_breaks_recorded_before_0013_get_their_exact_absolute_gap_in_order(
        db_url: str) -> None:
    """Migration 0013 on breaks written before it: each gets abs(gap) exactly (SQLite's text
    of 3 places in SQL, any other text in Python) and the index orders them as numbers (text
    order would put 9 after 10)."""
    from alembic import command

    from reports.db.engine import alembic_config

    engine = sa.create_engine(db_url)
    pg = engine.dialect.name == "postgresql"
    at = T0 if pg else T0.replace(tzinfo=None)
    gaps = ["-30000.000", "9.000", "10.000", "0.000", "-0.500", "12345678901234567890.125"]
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0012_signed_signoffs")
        breaks = sa.Table("breaks", sa.MetaData(), autoload_with=conn)
        rows = [*gaps, "-7.5"]  # the last: text as no writer of reckon's stores it
        conn.execute(sa.insert(breaks), [dict(
            run_id="run-old", day=DAY, window_start=at, window_end=at, key=f"k{n}",
            currency="EUR", status="UNEXPLAINED", provisional_amount=None,
            canonical_amount=None, gap_amount=Decimal(g) if pg else g, gap_count=1,
            late_amount=0, late_count=0, duplicate_amount=0, duplicate_count=0,
            residual_amount=0, residual_count=1, explanation="old") for n, g in enumerate(rows)])
    engine.dispose()
    with ReportDB(db_url) as upgraded, upgraded.ready().connect() as conn:
        b = BREAKS
        ordered = conn.execute(sa.select(b.c.key, b.c.gap_magnitude)
                               .order_by(b.c.gap_magnitude.desc())).all()
        above = conn.execute(sa.select(sa.func.count()).where(
            b.c.gap_magnitude >= Decimal("9.5"))).scalar_one()
    assert [m for _, m in ordered] == sorted(
        (abs(Decimal(g)).quantize(Decimal("0.001")) for g in rows), reverse=True)
    assert ordered[0] == ("k5", Decimal("12345678901234567890.125")) and above == 3


def test_schema_comparison_notices_a_missing_column(db: ReportDB) -> None:
    """The check above can fail: a column dropped behind Alembic's back is reported."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    db.migrate()
    with db.engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE break_reviews DROP COLUMN last_status"))
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert [(d[0], d[2], d[3].name) for d in diff] == [("add_column", "break_reviews",
                                                        "last_status")]


def test_two_processes_migrating_at_once(db_url: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def migrate() -> None:
        try:
            with ReportDB(db_url) as database:
                barrier.wait()
                database.migrate()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)  # neither hung
    assert errors == []
    with ReportDB(db_url) as database:
        assert database.audit_runs() == []


def test_the_switch_to_wal_is_retried_while_another_connection_holds_the_file(
        tmp_path: Path) -> None:
    """SQLite refuses a journal-mode switch at once ("database is locked", no busy handler)
    while another connection holds the file: the switch waits its turn instead of failing.
    Deterministic: the other connection holds an exclusive lock until released here."""
    import sqlite3
    import time

    from reports.db.engine import enable_wal

    path = tmp_path / "reckon.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x INTEGER)")
    holder.execute("BEGIN EXCLUSIVE")
    switcher = sqlite3.connect(path, timeout=0, check_same_thread=False)
    errors: list[BaseException] = []

    def switch() -> None:
        try:
            enable_wal(switcher.cursor(), timeout=30)
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=switch)
    thread.start()
    time.sleep(0.5)
    assert thread.is_alive() and errors == []  # refused, and still retrying
    holder.execute("COMMIT")
    thread.join(timeout=30)
    assert not thread.is_alive() and errors == []
    assert switcher.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    holder.close()
    switcher.close()


def test_from_settings_uses_a_sqlite_file_in_the_warehouse(tmp_path: Path) -> None:
    settings = load_settings(env={}, warehouse=str(tmp_path / "wh"))
    with ReportDB.from_settings(settings) as database:
        assert database.current_audit_run(DAY) is None
    assert (tmp_path / "wh" / "reports" / "reckon.db").is_file()


def test_bad_urls_are_refused() -> None:
    with pytest.raises(UsageError, match=r"url='reckon.db' is not valid"):
        ReportDB("reckon.db")


def test_quality_gate_names_every_failed_or_unchecked_day_after_the_reports(tmp_path) -> None:
    """The nightly DAG records every day's checks, renders the reports, then this gate fails
    the run: one error naming each day whose current check run failed, or that has none."""
    from app.pipeline import quality_gate
    from reckon.errors import DataQualityError

    settings = load_settings(env={}, warehouse=str(tmp_path / "wh"))
    days = [DAY, DAY + timedelta(days=1), DAY + timedelta(days=2)]
    ok = CheckRun(run_id="chk-ok", day=days[0], started_at=T0, duration_seconds=1.0,
                  success=True, blocking_failures=0, warnings=1, suites=3, expectations=17,
                  data_docs_path="/wh/docs/index.html")
    bad = replace(ok, run_id="chk-bad", day=days[1], success=False, blocking_failures=2)
    with ReportDB.from_settings(settings) as db:
        db.record_check_run(ok, [])
        db.record_check_run(bad, [])
    with pytest.raises(DataQualityError) as err:
        quality_gate(settings, days)
    text = str(err.value)
    assert "2026-01-01" not in text
    assert "2026-01-02: 2 blocking expectation(s) failed in check run chk-bad" in text
    assert "2026-01-03: no check run recorded" in text
    with ReportDB.from_settings(settings) as db:  # a re-check of the bad day that passes
        db.record_check_run(replace(bad, run_id="chk-fixed", success=True, blocking_failures=0,
                                    started_at=T0 + timedelta(hours=1)), [])
    assert quality_gate(settings, days[:2]).summary == {
        "check_runs": {"2026-01-01": "chk-ok", "2026-01-02": "chk-fixed"},
        "verdicts": {"2026-01-01": "passed", "2026-01-02": "passed"}}  # as recorded


#: Issue 61's migrations (after issue 63's, the head), newest first: what each downgrade
#: takes back (0018's tables are checked by test_whatifs_recorded_with_a_run_...).
_ISSUE_61_STEPS = (("0018_audit_whatifs", None, None),
                   ("0017_run_material_gap", "audit_runs", "material_gap"),
                   ("0016_exports_logged", None, None),
                   ("0015_break_assignment", "break_reviews", "assignee"),
                   ("0014_break_reject_reopen", None, None),
                   ("0013_break_gap_magnitude", "breaks", "gap_magnitude"))


@contextlib.contextmanager
def _writing(engine: sa.Engine) -> Iterator[sa.Connection]:
    """One transaction as reckon migrates in (reports.db.engine.migrate_engine)."""
    with engine.connect() as conn:
        conn = conn.execution_options(reckon_write=True)
        with conn.begin():
            yield conn


def _columns(conn: sa.Connection, table: str) -> set[str]:
    return {c["name"] for c in sa.inspect(conn).get_columns(table)}


def test_issue_61s_migrations_downgrade_step_by_step_and_upgrade_again(db_url: str) -> None:
    """Head (0018) down to 0012 one step at a time (each step's column gone, the run and its breaks
    kept), then up to head again: the schema is the models' once more and each break gets
    back its exact absolute gap (0013 fills it in). A downgrade below 0016 is refused while
    the log holds an export record (the log is append-only), and nothing is undone."""
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from reports.db.engine import alembic_config, make_engine

    with ReportDB(db_url) as db:
        db.record_audit_run(make_run(), [])
        db.write_breaks("run-1", [make_break(key="k1"), make_break(key="k2", minute=1)])
    # reckon's own engine: on SQLite its transactions are BEGUN by reckon, so a migration's
    # DDL is inside them and a refused step takes back the steps before it too
    engine = make_engine(db_url, pooled=False)
    try:
        for revision, table, column in _ISSUE_61_STEPS:
            with _writing(engine) as conn:
                assert MigrationContext.configure(conn).get_current_revision() == revision
                assert table is None or column in _columns(conn, table)
                command.downgrade(alembic_config(conn), "-1")
                assert table is None or column not in _columns(conn, table)
        with _writing(engine) as conn:
            assert MigrationContext.configure(conn).get_current_revision() == \
                "0012_signed_signoffs"
            assert conn.execute(sa.text("SELECT count(*) FROM breaks")).scalar_one() == 2
            command.upgrade(alembic_config(conn), "head")
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
            assert context.get_current_revision() == "0018_audit_whatifs"
            gaps = conn.execute(sa.select(BREAKS.c.key, BREAKS.c.gap_magnitude)
                                .order_by(BREAKS.c.key)).all()
        assert gaps == [("k1", Decimal("1.250")), ("k2", Decimal("1.250"))]
    finally:
        engine.dispose()
    if not db_url.startswith("sqlite"):
        return  # on PostgreSQL the log's triggers let only a signer append: shown on SQLite
    with ReportDB(db_url) as db:
        from reports.review import record_export

        record_export(db, "run-1", "carl", "breaks.csv (2 breaks)")
    with pytest.raises(RuntimeError, match="cannot downgrade below 0016"), \
            _writing(engine) as conn:  # the refusal rolls back 0018's and 0017's steps too
        command.downgrade(alembic_config(conn), "0015_break_assignment")
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == \
            "0018_audit_whatifs"
        assert "material_gap" in _columns(conn, "audit_runs")
    engine.dispose()


def _whatif() -> DayWhatIf:
    """What-ifs with every kind of value: a float that is no short decimal, a missing latency,
    a recommendation per source, a note, per-source rows in their order."""
    from reckon.whatif import CurvePoint
    from reckon.whatif_inputs import InputBound, PerInputRecommendation

    point = CurvePoint(3_000_000, 0.1 + 0.2, 80_900, 100, 1.2345678901234567)
    rec = PerInputRecommendation(
        by_source=True, target=Decimal("0.999"),
        bounds=(InputBound("pos", 10, 2_000_000, point, 0),
                InputBound("sat", 5, 7_500_000, point, 1)),
        per_input=point, single=None, single_fallback=point, reached=False, by_partition=point)
    line = curve_line(point)
    return DayWhatIf(
        curve=(replace(line, bound_seconds=Decimal("1.5"), avg_emit_latency=None), line),
        configured_bound_seconds=Decimal("3"), recommended_bound_seconds=None,
        target_completeness=Decimal("0.999"),
        batch_curve_note="batches 0..9 were written by more than one stream query",
        per_source=rec, per_source_batches=(("the stream as configured", line),
                                            ("bounds per source", line)),
        configured_policy="3s per partition")


def test_whatifs_recorded_with_a_run_read_back_exactly(db: ReportDB) -> None:
    """The what-ifs go in with their run and come back equal, value, type and Decimal scale
    (compared by repr); the ratios are stored as their exact float text, never a float
    column; a run recorded without them reads back None (the report says so)."""
    whatif = _whatif()
    db.record_audit_run(make_run(), [], whatif)
    db.record_audit_run(make_run("run-old", started_at=T0 - timedelta(hours=1)), [])
    assert db.audit_whatif("run-1") == whatif
    assert repr(db.audit_whatif("run-1")) == repr(whatif)
    assert db.audit_whatif("run-old") is None and db.audit_whatif("nope") is None
    with db.engine.connect() as conn:
        stored = conn.execute(sa.text(
            "SELECT completeness, avg_emit_latency FROM audit_whatif_points "
            "WHERE curve = 'per_event' ORDER BY seq")).all()
    assert stored == [("0.30000000000000004", None),
                      ("0.30000000000000004", "1.2345678901234567")]
    db.record_audit_run(make_run(), [], replace(whatif, curve=()))  # the same run: no change
    assert db.audit_whatif("run-1") == whatif


def test_a_float_ratio_column_refuses_a_decimal(db: ReportDB) -> None:
    """FloatText is for ratios: an exact figure offered to it is refused in one line."""
    from reports.db.types import FloatText

    with pytest.raises(UsageError, match="float ratio"):
        FloatText().process_bind_param(Decimal("0.5"), db.engine.dialect)


def test_0018_downgrades_and_upgrades_keeping_the_run(db_url: str) -> None:
    """0018 down: its two tables go, the run stays; up again: the run reads back with no
    what-ifs (a run recorded before them), a new run records its own."""
    from alembic import command

    from reports.db.engine import alembic_config, make_engine

    with ReportDB(db_url) as db:
        db.record_audit_run(make_run(), [], _whatif())
    engine = make_engine(db_url, pooled=False)
    try:
        with _writing(engine) as conn:
            command.downgrade(alembic_config(conn), "0017_run_material_gap")
            assert not {"audit_whatifs", "audit_whatif_points"} & set(
                sa.inspect(conn).get_table_names())
        with _writing(engine) as conn:
            command.upgrade(alembic_config(conn), "head")
    finally:
        engine.dispose()
    with ReportDB(db_url) as db:
        assert db.get_audit_run("run-1") == make_run() and db.audit_whatif("run-1") is None
        db.record_audit_run(make_run("run-2", started_at=T0 + timedelta(hours=1)), [],
                            _whatif())
        assert db.audit_whatif("run-2") == _whatif()
