"""Money is exact for every value ``DECIMAL(38,3)`` holds (fast tier, no Spark): Python's
default decimal context keeps 28 significant digits and rounds (or fails to divide) beyond
them; reckon computes money in ``reckon.money.MONEY_CONTEXT`` instead. The largest and the
smallest values the type holds (+-99999999999999999999999999999999999.999) and a 35-digit whole
amount in USD (2 places), JPY (0) and KWD (3) go through every money operation: quantize,
formatting, the minor-unit rule, per-currency sums, the reference's gap and residual, the
report's roll-ups and files, and the workbench's pages."""

from __future__ import annotations

import dataclasses
import decimal
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from html import unescape
from pathlib import Path

import pytest

from reckon.money import (
    MONEY_CONTEXT,
    CurrencyTotals,
    breaks_minor_unit,
    format_amount,
    format_money,
    minor_unit_step,
    minor_unit_violation,
    money_context,
    money_sum,
    quantize_to_currency,
)
from reckon.reconcile import ReconStatus, Tolerance, reconcile_row

D = Decimal
TOP = D("99999999999999999999999999999999999.999")  # the largest DECIMAL(38,3) value
BOTTOM = D("-99999999999999999999999999999999999.999")  # the smallest
WHOLE = D("12345678901234567890123456789012345")  # 35 digits, a whole amount in any currency
# written out, not computed: -WHOLE or 2 * WHOLE here would round to 28 digits
NEG_WHOLE = D("-12345678901234567890123456789012345")
TWICE_WHOLE = D("24691357802469135780246913578024690")
NEG_TWICE_WHOLE = D("-24691357802469135780246913578024690")
PLACES = {"USD": 2, "JPY": 0, "KWD": 3}


def test_the_default_context_cannot_hold_these_amounts_and_money_context_can() -> None:
    """Why the module exists: at 28 digits these operations fail or round silently."""
    assert decimal.getcontext().prec == 28  # reckon leaves the process's context alone
    with pytest.raises(decimal.InvalidOperation):
        TOP.quantize(D("0.001"))
    with decimal.localcontext() as ctx:
        ctx.traps[decimal.Inexact] = True
        with pytest.raises(decimal.Inexact):
            _ = TOP - D("0.001")  # the default would round this silently, to 10^35
    assert TOP - D("0.001") == D(10) ** 35  # as it does, with Inexact not trapped
    with money_context():
        assert TOP - D("0.001") == D("99999999999999999999999999999999999.998")
        assert TOP + D("0.001") == D(10) ** 35
        assert -BOTTOM == TOP and abs(BOTTOM) == TOP
    assert decimal.getcontext().prec == 28 and MONEY_CONTEXT.prec >= 40


def test_a_result_that_would_need_rounding_raises_never_rounds() -> None:
    with money_context(), pytest.raises(decimal.Inexact):
        _ = D(10) ** 79 + D("0.001")  # 83 digits: beyond even MONEY_CONTEXT, so refused


@pytest.mark.parametrize("code", sorted(PLACES))
def test_quantize_keeps_every_digit(code: str) -> None:
    places = PLACES[code]
    step = minor_unit_step(places)
    # TOP and BOTTOM are whole minor units only in KWD: elsewhere they keep all three places
    for value in (TOP, BOTTOM):
        got = quantize_to_currency(value, code)
        assert got == value and str(got) == str(value)
    for value in (WHOLE, NEG_WHOLE):
        got = quantize_to_currency(value, code)
        assert got == value and got.as_tuple().exponent == -places
        assert str(got) == str(value) + ("." + "0" * places if places else "")
    assert str(quantize_to_currency(D("99999999999999999999999999999999999.000"), code)) == (
        "99999999999999999999999999999999999" + ("." + "0" * places if places else ""))
    assert step == D(1).scaleb(-places)


@pytest.mark.parametrize("code", sorted(PLACES))
def test_the_minor_unit_rule_judges_38_digit_amounts(code: str) -> None:
    places = PLACES[code]
    for value in (TOP, BOTTOM):
        broken = places < 3  # .999 is a whole number of KWD's fils, not of cents or yen
        assert breaks_minor_unit(value, minor_unit_step(places)) is broken
        assert (minor_unit_violation(value, code) is not None) is broken
    for value in (WHOLE, NEG_WHOLE):
        assert breaks_minor_unit(value, minor_unit_step(places)) is False
        assert minor_unit_violation(value, code) is None
    detail = minor_unit_violation(D("12345678901234567890123456789012345.5"), "JPY")
    assert detail == ("amount 12345678901234567890123456789012345.5 has more decimal places "
                      "than JPY allows (0)")


@pytest.mark.parametrize("code", sorted(PLACES))
def test_formatting_writes_every_digit(code: str) -> None:
    places = PLACES[code]
    grouped = "12,345,678,901,234,567,890,123,456,789,012,345"
    tail = "." + "0" * places if places else ""
    assert format_amount(WHOLE, code) == grouped + tail
    assert format_amount(NEG_WHOLE, code) == "-" + grouped + tail
    assert format_money(WHOLE, code) == f"{code} {grouped}{tail}"
    assert format_money(NEG_WHOLE, code) == f"-{code} {grouped}{tail}"
    nines = "99,999,999,999,999,999,999,999,999,999,999,999.999"  # never rounded to 10^35
    assert format_amount(TOP, code) == nines and format_amount(BOTTOM, code) == "-" + nines
    assert format_money(TOP, code) == f"{code} {nines}"
    assert format_money(BOTTOM, code) == f"-{code} {nines}"
    assert decimal.getcontext().prec == 28  # Babel ran in a local context


def test_currency_totals_and_sums_are_exact_beyond_28_digits() -> None:
    totals = CurrencyTotals().add("KWD", TOP).add("KWD", D("0.001")).add("USD", WHOLE)
    totals.add("USD", WHOLE).add("JPY", BOTTOM).add("JPY", TOP)
    assert totals == {"KWD": D(10) ** 35, "USD": TWICE_WHOLE, "JPY": D("0.000")}
    assert money_sum([TOP, TOP, BOTTOM]) == TOP
    assert money_sum([TOP] * 4) == D("399999999999999999999999999999999999.996")
    with pytest.raises(TypeError, match="never a float"):
        money_sum([D(1), 1.5])  # type: ignore[list-item]


def test_gap_and_residual_are_exact_for_the_extremes() -> None:
    row = reconcile_row((BOTTOM, 3), (TOP, 4), late=(TOP, 1))
    assert row.gap == (D("199999999999999999999999999999999999.998"), 1)
    assert row.residual == (TOP, 0)  # gap - late + duplicate, every digit kept
    assert row.status is ReconStatus.UNEXPLAINED
    both = reconcile_row((BOTTOM, 3), (TOP, 4), late=(TOP, 1), duplicate=(BOTTOM, 0))
    assert both.residual == (D("0.000"), 0) and both.status is ReconStatus.EXPLAINED
    exact = reconcile_row((WHOLE, 2), (WHOLE, 2))
    assert exact.gap == (D(0), 0) and exact.status is ReconStatus.MATCHED
    cent_more = D("12345678901234567890123456789012345.01")
    late = reconcile_row((WHOLE, 1), (cent_more, 2), late=(D("0.01"), 1))
    assert late.gap == (D("0.01"), 1) and late.residual == (D("0.00"), 0)
    assert late.status is ReconStatus.EXPLAINED  # a rounded gap of 0 would say MATCHED
    # the relative tolerance times a 38-digit canonical amount, exactly: 10^-6 of TOP is
    # 99999999999999999999999999999.999999999, which 28 digits would round up to 10^29
    rel = Tolerance(relative=D("0.000001"))
    tight = reconcile_row((D("99999899999999999999999999999999999.999"), 1), (TOP, 1),
                          tolerance=rel)
    assert tight.residual == (D("100000000000000000000000000000.000"), 0)
    assert tight.status is ReconStatus.UNEXPLAINED
    within = reconcile_row((D("99999900000000000000000000000000000.000"), 1), (TOP, 1),
                           tolerance=rel)
    assert within.residual == (D("99999999999999999999999999999.999"), 0)
    assert within.status is ReconStatus.EXPLAINED


def test_the_reference_sums_38_digit_totals_exactly() -> None:
    from reckon.eventtime import EventTimeRules
    from reckon.reference import Event, canonical_totals

    rules = EventTimeRules.parse(window="10s", watermark_bound="3s")
    half = D("49999999999999999999999999999999999.999")
    events = [Event(f"e{i}", "k", half, 1_000_000 * i, 1_000_000 * i, currency="KWD")
              for i in range(2)]
    sums, _ = canonical_totals(events, rules)
    (row,) = sums.values()
    assert row.total == D("99999999999999999999999999999999999.998") and row.count == 2


def test_a_storys_provisional_history_adds_38_digit_deltas_exactly() -> None:
    from types import SimpleNamespace

    from audits.chapters import history_of

    deltas = [SimpleNamespace(query_id="q", batch_id=b, processed_at=b, total_amount=amount,
                              event_count=1, revised=0, currency="KWD")
              for b, amount in enumerate((TOP, D("-0.001"), BOTTOM))]
    told = history_of(deltas, {}, None, window_end=10**9, allowed_lateness=0)
    assert [h.total_amount for h in told] == [
        TOP, D("99999999999999999999999999999999999.998"), D("-0.001")]


# ----------------------------------------------------------------------------- reports


def _big_breaks() -> list:
    from reports.context import BreakLine

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for i, (code, gap) in enumerate((("USD", WHOLE), ("JPY", NEG_WHOLE), ("KWD", TOP),
                                     ("KWD", BOTTOM))):
        out.append(BreakLine(
            t0 + timedelta(seconds=10 * i), t0 + timedelta(seconds=10 * i + 10), f"m-{i}",
            code, ReconStatus.UNEXPLAINED.value, D("0.000"), gap, gap, 1, D("0.000"),
            D("0.000"), gap, "nothing explains it", "open", 0))
    return out


def test_the_report_roll_ups_add_38_digit_gaps_exactly() -> None:
    from reports.summary import summarise_breaks

    rows = summarise_breaks(_big_breaks() * 2).by_cause
    got = {(r.currency, r.gap, r.residual) for r in rows}
    assert got == {("USD", TWICE_WHOLE, TWICE_WHOLE), ("JPY", NEG_TWICE_WHOLE, NEG_TWICE_WHOLE),
                   ("KWD", D("0.000"), D("0.000"))}


def test_the_report_html_and_csv_show_every_digit(tmp_path: Path) -> None:
    from reports.render import render_context
    from tests.test_report_render import _ctx, _summary

    with money_context():  # _summary quantizes to the stored scale
        big = (_summary("USD", {"UNEXPLAINED": 1}, f"0 {WHOLE} {WHOLE} 0 0 {WHOLE}",
                        (0, 1, 0, 0)),
               _summary("JPY", {"UNEXPLAINED": 1}, f"{WHOLE} 0 {NEG_WHOLE} 0 0 {NEG_WHOLE}",
                        (1, 0, 0, 0)),
               _summary("KWD", {"UNEXPLAINED": 2}, f"0 {TOP} {TOP} 0 0 {TOP}", (0, 2, 0, 0)))
    base = _ctx()
    lines = tuple(_big_breaks())
    ctx = dataclasses.replace(
        base, headline=dataclasses.replace(base.headline, currencies=big, unexplained_count=4),
        breaks=lines, all_breaks=lines, breaks_total=len(lines), gap_series=(),
        attribution=())
    result = render_context(ctx, tmp_path / "r")
    html = unescape(Path(result.html_path).read_text())
    grouped = "12,345,678,901,234,567,890,123,456,789,012,345"
    nines = "99,999,999,999,999,999,999,999,999,999,999,999.999"
    for text in (f"USD {grouped}.00", f"-JPY {grouped}", f"KWD {nines}", f"-{nines}"):
        assert text in html, text
    csvs = "".join(Path(p).read_text() for p in result.csv_paths)
    for text in (f"{WHOLE}.00", f"{NEG_WHOLE}", f"{TOP}", f"{BOTTOM}"):
        assert re.search(rf"(?<![\d.]){re.escape(text)}(?![\d])", csvs), text


# ----------------------------------------------------------------------------- workbench


@pytest.fixture()
def big_db(tmp_path: Path) -> Iterator:
    """The workbench's sample day, plus a run (2026-01-02) and breaks whose amounts are
    DECIMAL(38,3)'s extremes and 35-digit whole amounts, and the report database tests'
    ``make_run`` (its EUR residual has 37 digits) on 2026-01-03."""
    from datetime import date

    from audits.records import BreakRow
    from reports.db.repository import ReportDB
    from tests.test_report_db import make_currency, make_run
    from tests.test_workbench import PASSWORD
    from workbench.auth import add_user
    from workbench.sample import sample_day

    day = date(2026, 1, 2)
    with ReportDB(f"sqlite:///{tmp_path / 'reckon.db'}") as db:
        sample_day(db, date(2026, 1, 1), breaks=6, reconciler="alice")
        currencies = (
            make_currency("KWD", provisional_total=BOTTOM, canonical_total=TOP,
                          gap_total=TOP, late_total=D(0), duplicate_total=BOTTOM,
                          residual_total=TOP),
            dataclasses.replace(make_currency("EUR", provisional_total=WHOLE,
                                              canonical_total=D(0), gap_total=NEG_WHOLE,
                                              residual_total=NEG_WHOLE), currency="USD"),
            make_currency("JPY", provisional_total=D(0), canonical_total=WHOLE,
                          gap_total=WHOLE, late_total=D(0), residual_total=WHOLE))
        db.record_audit_run(make_run("run-big", day, currencies=currencies), [])
        db.record_audit_run(make_run("run-pg", date(2026, 1, 3)), [])
        start = datetime(2026, 1, 2, tzinfo=UTC)
        db.write_breaks("run-big", [BreakRow(
            run_id="run-big", day=day, window_start=start + timedelta(seconds=10 * i),
            window_end=start + timedelta(seconds=10 * i + 10), key=f"m-{i}", currency=code,
            status="UNEXPLAINED", provisional_amount=D(0), canonical_amount=gap,
            gap_amount=gap, gap_count=1, late_amount=D(0), late_count=0,
            duplicate_amount=D(0), duplicate_count=0, residual_amount=gap, residual_count=1,
            explanation="nothing explains it")
            for i, (code, gap) in enumerate((("USD", WHOLE), ("JPY", NEG_WHOLE), ("KWD", TOP),
                                             ("KWD", BOTTOM)))])
        add_user(db, "bob", "reviewer", PASSWORD)
        yield db


def test_the_workbench_shows_38_digit_runs_and_breaks(big_db, tmp_path: Path) -> None:
    from tests.signers import workbench_trust
    from tests.test_workbench import _client
    from workbench.app import create_app

    app = create_app(big_db, trust=workbench_trust(big_db), secret=b"s" * 32,
                     warehouse=tmp_path)
    bob = _client(app, "bob")
    grouped = "12,345,678,901,234,567,890,123,456,789,012,345"
    nines = "99,999,999,999,999,999,999,999,999,999,999,999.999"
    days = bob.get("/")
    assert days.status_code == 200, days.text
    page = unescape(days.text)
    cells = re.findall(r'<td class="num">([^<]*)</td>', page)
    assert cells.count(nines) == 2 and cells.count(f"-{grouped}.00") == 2
    assert cells.count(grouped) == 2
    assert "12,345,678,901,234,567,890,123,456,789,012,345.67" in cells  # make_run's EUR
    listed = bob.get("/day/2026-01-02/breaks")
    assert listed.status_code == 200, listed.text
    text = unescape(listed.text)
    for amount in (f"{grouped}.00", f"-{grouped}", nines, f"-{nines}"):
        assert amount in text, amount
    by_gap = bob.get("/day/2026-01-02/breaks?sort=gap&min_gap=KWD=1")
    assert by_gap.status_code == 200, by_gap.text
    assert nines in unescape(by_gap.text)
    exported = bob.get("/day/2026-01-02/breaks.csv")
    assert exported.status_code == 200, exported.text
    for amount in (f"{WHOLE}.00", f"{NEG_WHOLE}", f"{TOP}", f"{BOTTOM}"):
        assert amount in exported.text, amount
    assert bob.get("/period?start=2026-01-01&end=2026-01-31").status_code == 200
    assert bob.get("/day/2026-01-02/breaks.pdf").status_code == 200  # with its totals
    # a bulk action's confirmation totals each currency's gaps: KWD's extremes cancel out
    from tests.test_workbench import _bulk_form

    form = _bulk_form(listed.text, "bulk")
    confirm = bob.post("/day/2026-01-02/bulk", data={**form, "action": "accept",
                                                     "note": "agreed"})
    assert confirm.status_code == 200, confirm.text
    totals = re.findall(r'<tr><td>([A-Z]{3})</td><td class="num">(\d+)</td>'
                        r'<td class="num">([^<]+)</td></tr>', unescape(confirm.text))
    assert totals == [("JPY", "1", f"-{grouped}"), ("KWD", "2", "0.000"),
                      ("USD", "1", f"{grouped}.00")]
