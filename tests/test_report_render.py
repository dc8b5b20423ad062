"""The day's report: rendered from a typed context (no Spark), it opens in a real headless
Chromium, its PDF renders with poppler and carries the headline figures, and its CSVs are
byte-identical on a re-run. Money is per currency: a day with EUR, JPY and KWD has three
headline groups, each amount in its currency's own digits, and no figure adds two currencies.
One Spark test renders a real warehouse (stream + replay + audit)."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import itertools
import json
import re
import shutil
import subprocess
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from html import unescape
from pathlib import Path

import pytest

from audits.records import AttributionRow, CurrencySummary
from reckon.config import Settings
from reckon.errors import LayoutError
from reckon.money import format_money
from reckon.reconcile import ReconStatus
from reckon.signoff import review_state
from reckon.timeutil import from_micros
from reports.context import (
    BreakLine,
    CurveLine,
    GapPoint,
    Headline,
    HistogramBucket,
    QualitySummary,
    ReportContext,
    Signoff,
    WatermarkPoint,
    whatif_note,
)
from reports.render import render_context
from tests.browser import chromium as _chromium
from tests.browser import need as _need
from tests.browser import png_stats as _png_stats

DAY = date(2026, 1, 1)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
D = Decimal
STATUSES = [s.value for s in ReconStatus]


def _summary(code: str, rows: dict[str, int], amounts: str, events: tuple[int, int, int, int],
             tolerated: str = "0", completeness: str | None = "0.999") -> CurrencySummary:
    """One currency's figures; ``amounts``: 'provisional canonical gap late duplicate
    residual', at the stored scale 3 as the report DB returns them."""
    p, c, gap, late, dup, res = (D(a).quantize(D("0.001")) for a in amounts.split())
    counts = {s: rows.get(s, 0) for s in STATUSES}
    return CurrencySummary(
        currency=code, rows=sum(counts.values()), status_counts=counts,
        unexplained=sum(counts[s.value] for s in (ReconStatus.UNEXPLAINED,
                                                  ReconStatus.MISSING_IN_STREAM,
                                                  ReconStatus.MISSING_IN_CANONICAL)),
        provisional_total=p, canonical_total=c, gap_total=gap, late_total=late,
        duplicate_total=dup, residual_total=res, tolerated_total=D(tolerated).quantize(
            D("0.001")), provisional_events=events[0], canonical_events=events[1],
        late_events=events[2], duplicate_events=events[3],
        completeness=None if completeness is None else D(completeness))


CURRENCIES = (
    _summary("EUR", {"MATCHED": 998, "EXPLAINED": 1, "UNEXPLAINED": 1},
             "1234567.89 1234605.39 37.50 25.00 0 12.50", (5000, 5003, 2, 0), "0", "0.9994"),
    _summary("JPY", {"MATCHED": 199, "EXPLAINED": 1}, "3211000 3212200 1200 1200 0 0",
             (800, 801, 1, 0), "0", "0.99875"),
    _summary("KWD", {"MATCHED": 32, "EXPLAINED": 2}, "1000.5 1000.625 0.125 0.25 0.125 0",
             (60, 60, 1, 1), "0", "1"),
)
# the per-currency amounts for the figures of a break: provisional, canonical, gap
_BREAK_AMOUNTS = {"EUR": ("100.00", "112.50", "12.50"), "JPY": ("1000", "2200", "1200"),
                  "KWD": ("1.000", "1.125", "0.125")}


def _break(i: int) -> BreakLine:
    """Break i: windows of 10 s, currencies in turn (so one (window, key) can break in two
    currencies: i and i+1 share a key when i is even); break 1 is the unexplained one."""
    code = ("EUR", "JPY", "KWD")[i % 3]
    p, c, gap = (D(a).quantize(D("0.001")) for a in _BREAK_AMOUNTS[code])
    bad = i == 1
    return BreakLine(
        T0 + timedelta(seconds=10 * (i // 2)), T0 + timedelta(seconds=10 * (i // 2) + 10),
        f"merchant-{(i // 2) % 4}", code,
        ReconStatus.UNEXPLAINED.value if bad else ReconStatus.EXPLAINED.value,
        p, c, gap, 1, D("0.000") if bad else gap, D("0.000"), gap if bad else D("0.000"),
        "nothing explains it" if bad else "late events", "open", i % 3)


def _ctx(breaks: int = 3, cap: int = 200) -> ReportContext:
    lines = tuple(_break(i) for i in range(breaks))
    totals = {s: sum(c.status_counts[s] for c in CURRENCIES) for s in STATUSES}
    return ReportContext(
        day=DAY, audit_run_id="audit-2026-01-01-abc123", audit_kind="nightly",
        audit_started_at=datetime(2026, 1, 2, 3, 0, 0, tzinfo=UTC), reconciler="ops-bot",
        configuration=(("grace", "0s"), ("lateness", "3s"), ("tolerance_abs", "0.00"),
                       ("window", "10s")),
        table_versions=(("canonical_totals", 4), ("provisional_totals", 57)),
        headline=Headline(rows=1234, unexplained_count=1, completeness=D("0.998765"),
                          currencies=CURRENCIES),
        status_counts=tuple((s, totals[s]) for s in STATUSES),
        breaks=lines[:cap], breaks_total=len(lines), all_breaks=lines, breaks_cap=cap,
        attribution=(
            AttributionRow("partition", "0", 2, {"EUR": D("12.500"), "JPY": D("1200.000")},
                           600, D("0.5"), D("0.486"), D("1.03")),
            AttributionRow("partition", "3", 1, {"KWD": D("0.125")}, 34, D("0.25"),
                           D("0.028"), D("8.93")),
            AttributionRow("currency", "JPY", 1, {"JPY": D("1200.000")}, 801, D("0.25"),
                           D("0.13"), D("1.92")),
            AttributionRow("source", "pos", 0, {}, 900, D("0"), D("0.73"), D("0"))),
        gap_series=tuple(
            GapPoint(T0 + timedelta(minutes=10 * i), code, 60, D(p) * 10,
                     D(p) * 10 + (D(gap) if i in (2, 5) else 0),
                     D(gap) if i in (2, 5) else D("0.000"),
                     D(gap) if i == 2 else D("0.000"),
                     D(gap) if i == 5 and code == "EUR" else D("0.000"),
                     int(i == 5 and code == "EUR"))
            for code, (p, _, gap) in sorted(_BREAK_AMOUNTS.items()) for i in range(12)),
        gap_bucket_seconds=600,
        lateness_histogram=tuple(HistogramBucket(lo, hi, n, late) for lo, hi, n, late in (
            (0, 1, 1100, 0), (1, 2, 90, 0), (2, 5, 30, 1), (5, 10, 10, 1), (10, 30, 4, 0),
            (30, 60, 0, 0), (60, 300, 0, 0), (300, None, 0, 0))),
        # 81,000 pairs; per batch at the configured 3 s: 100 late, the headline's 0.998765
        lateness_curve_batches=tuple(CurveLine(D(b), a / 81_000, a, 81_000 - a, lat)
                                     for b, a, lat in (("0", 73_710, 0.1), ("1", 79_785, 1.1),
                                                       ("3", 80_900, 3.1), ("5", 80_935, 5.1),
                                                       ("10", 81_000, 10.1))),
        lateness_curve=tuple(CurveLine(D(b), a / 81_000, a, 81_000 - a, lat)
                             for b, a, lat in (("0", 64_800, 0.1), ("1", 76_950, 1.1),
                                               ("3", 80_604, 3.1), ("5", 80_919, 5.1),
                                               ("10", 81_000, 10.1))),
        configured_bound_seconds=D("3"), recommended_bound_seconds=D("5"),
        target_completeness=D("0.999"),
        watermark_series=tuple(
            p for b in range(40) for p in (
                WatermarkPoint(b, T0 + timedelta(seconds=5 * b), None,
                               T0 + timedelta(seconds=30 * b)),
                WatermarkPoint(b, T0 + timedelta(seconds=5 * b), 0,
                               T0 + timedelta(seconds=30 * b + 2)),
                WatermarkPoint(b, T0 + timedelta(seconds=5 * b), 1,
                               T0 + timedelta(seconds=30 * b)))),
        quality=QualitySummary("check-1", True, 0, 1, 3, 24),
        data_docs=None)


def _headline_section(html: str) -> str:
    m = re.search(r'<section id="headline">(.*?)</section>', html, re.S)
    assert m, "the report has a headline section"
    return m.group(1)


def _groups(html: str) -> dict[str, list[tuple[str, str, str]]]:
    """currency ('' = counts over every currency) -> [(name, label, value)] of the headline."""
    groups = re.findall(r'<div class="figures" data-currency="([A-Z]*)">(.*?)\n</div>',
                        _headline_section(html), re.S)
    return {code: re.findall(r'data-name="([a-z_]+)"><div class="label">([^<]+)</div>'
                             r'<div class="value">([^<]+)</div>', body)
            for code, body in groups}


def _cross_currency_sums() -> set[str]:
    """Every way of adding one figure over two or three currencies, as the page or a CSV
    could write it: none of these may appear anywhere."""
    names = ("provisional_total", "canonical_total", "gap_total", "late_total",
             "duplicate_total", "residual_total")
    out: set[str] = set()
    for name in names:
        for n in (2, 3):
            for combo in itertools.combinations(CURRENCIES, n):
                total = sum((getattr(c, name) for c in combo), D(0))
                if total and len({getattr(c, name) for c in combo} - {D(0)}) > 1:
                    for places in ("0.01", "0.001"):
                        q = total.quantize(D(places))
                        out |= {f"{q:,f}", f"{q:f}"}
    return out


def test_headline_has_one_group_per_currency_in_its_own_digits(tmp_path):
    result = render_context(_ctx(), tmp_path / "r")
    html = Path(result.html_path).read_text()
    groups = _groups(html)
    assert list(groups) == ["", "EUR", "JPY", "KWD"]
    assert groups[""] == [
        ("rows", "Rows reconciled", "1,234"), ("unexplained_rows", "Unexplained rows", "1"),
        ("completeness", "Completeness", "99.8765%"),
        ("currencies", "Currencies", "EUR, JPY, KWD")]
    assert groups["EUR"] == [
        ("provisional_total", "Provisional total (stream)", "EUR 1,234,567.89"),
        ("canonical_total", "Canonical total (replay)", "EUR 1,234,605.39"),
        ("gap_total", "Gap", "EUR 37.50"),
        ("late_total", "Explained by late events", "EUR 25.00"),
        ("duplicate_total", "Explained by duplicates", "EUR 0.00"),
        ("unexplained", "Unexplained", "EUR 12.50 in 1 row"),
        ("completeness", "Completeness", "99.9400%"),
        ("rows", "Rows reconciled", "1,000"),
    ]
    assert [v for _, _, v in groups["JPY"][:6]] == [
        "JPY 3,211,000", "JPY 3,212,200", "JPY 1,200", "JPY 1,200", "JPY 0", "JPY 0 in 0 rows"]
    assert [v for _, _, v in groups["KWD"][:6]] == [
        "KWD 1,000.500", "KWD 1,000.625", "KWD 0.125", "KWD 0.250", "KWD 0.125",
        "KWD 0.000 in 0 rows"]
    assert "5,003 events" in _headline_section(html) and "1 copy" in _headline_section(html)
    assert '<span class="verdict bad" id="verdict">1 unexplained break</span>' in html
    # with a tolerance, EXPLAINED rows may keep residuals: shown per currency, so that the
    # figures add up
    kwd = dataclasses.replace(CURRENCIES[2], residual_total=D("0.003"),
                              tolerated_total=D("0.003"))
    tolerant = dataclasses.replace(_ctx(), headline=dataclasses.replace(
        _ctx().headline, currencies=(*CURRENCIES[:2], kwd)))
    html_t = Path(render_context(tolerant, tmp_path / "t").html_path).read_text()
    assert _groups(html_t)["KWD"][5:7] == [
        ("unexplained", "Unexplained", "KWD 0.000 in 0 rows"),
        ("tolerated_residual", "Residual within tolerance", "KWD 0.003")]
    assert all(name != "tolerated_residual" for name, _, _ in _groups(html_t)["EUR"])
    assert "KWD,tolerated_residual,0.003\n" in (tmp_path / "t" / "summary.csv").read_text()
    # reviewers' order: configuration, counts, breaks, then the rest
    order = [html.index(f'<section id="{s}">') for s in
             ("headline", "configuration", "counts", "breaks", "gap", "attribution",
              "lateness", "watermark", "quality", "files")]
    assert order == sorted(order)
    # self-contained: nothing loaded from elsewhere
    assert "<script" not in html and not re.search(r'(src|href)="https?:|url\(https?:', html)
    assert html.count("<svg") == 4 and "<link" not in html


def test_no_amount_of_two_currencies_is_added_anywhere(tmp_path):
    result = render_context(_ctx(breaks=6), tmp_path / "r")
    texts = {Path(result.html_path).name: Path(result.html_path).read_text()}
    texts |= {Path(p).name: Path(p).read_text() for p in result.csv_paths}
    sums = _cross_currency_sums()
    assert "4,446,568.39" in sums and "1237.625" in sums  # the old headline's kind of figure
    for name, text in texts.items():
        found = sorted(s for s in sums if re.search(rf"(?<![\d.,]){re.escape(s)}(?![\d])", text))
        assert found == [], f"{name} shows a cross-currency sum: {found}"
    # every amount of the headline is in its group's currency; the counts group has none
    for code, figures in _groups(texts["report.html"]).items():
        money = [v for name, _, v in figures
                 if name.endswith("_total") or name in ("unexplained", "tolerated_residual")]
        assert all(v.startswith(f"{code} ") for v in money) and (bool(money) == bool(code))


def test_summary_status_and_attribution_csvs_are_per_currency(tmp_path):
    out = Path(render_context(_ctx(), tmp_path / "r").out_dir)

    def rows(name: str) -> list[dict[str, str]]:
        with open(out / name, newline="") as fh:
            return list(csv.DictReader(fh))

    summary = {(r["currency"], r["figure"]): r["value"] for r in rows("summary.csv")}
    assert summary[("", "rows")] == "1234" and summary[("", "unexplained_count")] == "1"
    assert summary[("", "currencies")] == "EUR JPY KWD"
    assert not any(code == "" and name.endswith(("_total", "_amount", "_residual"))
                   for code, name in summary if name != "breaks_total")  # counts only there
    assert summary[("", "breaks_total")] == "3"
    assert (summary[("EUR", "provisional_total")], summary[("JPY", "gap_total")],
            summary[("KWD", "canonical_total")], summary[("KWD", "duplicate_total")]) == (
        "1234567.89", "1200", "1000.625", "0.125")
    assert summary[("EUR", "unexplained_amount")] == "12.50"
    assert summary[("JPY", "late_events")] == "1" and summary[("EUR", "completeness")] == "0.9994"
    statuses = {(r["currency"], r["status"]): int(r["rows"]) for r in rows("status_counts.csv")}
    assert statuses[("", "MATCHED")] == 1229 and statuses[("JPY", "MATCHED")] == 199
    assert statuses[("", "EXPLAINED")] == sum(statuses[(c, "EXPLAINED")]
                                              for c in ("EUR", "JPY", "KWD"))  # counts add
    attribution = [(r["dimension"], r["value"], r["currency"], r["late_events"],
                    r["late_amount"]) for r in rows("attribution.csv")]
    assert attribution[:3] == [("partition", "0", "", "2", ""),
                               ("partition", "0", "EUR", "", "12.50"),
                               ("partition", "0", "JPY", "", "1200")]
    assert ("partition", "3", "KWD", "", "0.125") in attribution
    assert ("source", "pos", "", "0", "") in attribution
    gap = rows("gap_by_window.csv")
    assert {r["currency"] for r in gap} == {"EUR", "JPY", "KWD"}
    assert [r["gap_amount"] for r in gap if r["currency"] == "JPY"][2] == "1200"
    html = (out / "report.html").read_text()
    section = re.search(r'<section id="attribution">(.*?)</section>', html, re.S).group(1)
    assert "EUR 12.50; JPY 1,200" in section and "KWD 0.125" in section
    counts = re.search(r'<section id="counts">(.*?)</section>', html, re.S).group(1)
    assert re.findall(r"<th[^>]*>([^<]+)</th>", counts)[:5] == [
        "status", "all currencies", "EUR", "JPY", "KWD"]


def test_breaks_are_capped_with_the_total_shown_and_csv_has_all(tmp_path):
    result = render_context(_ctx(breaks=7, cap=5), tmp_path / "r")
    html = Path(result.html_path).read_text()
    assert "Showing 5 of 7 breaks" in html and "breaks.csv" in html
    section = re.search(r'<section id="breaks">(.*?)</section>', html, re.S).group(1)
    assert section.count("<tr><td>") == 5
    # a currency column, each amount in its currency's digits
    assert "<td>merchant-0</td><td>EUR</td><td class=\"num\">100.00</td>" in section
    assert "<td>merchant-0</td><td>JPY</td><td class=\"num\">1,000</td>" in section
    assert "<td>KWD</td><td class=\"num\">1.000</td><td class=\"num\">1.125</td>" in section
    with open(Path(result.out_dir) / "breaks.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 7
    assert rows[1]["status"] == "UNEXPLAINED" and rows[1]["residual_amount"] == "1200"
    assert (rows[1]["currency"], rows[1]["key"], rows[1]["window_start"]) == (
        "JPY", "merchant-0", "2026-01-01T00:00:00Z")
    assert (rows[0]["currency"], rows[0]["gap_amount"], rows[0]["provisional_amount"]) == (
        "EUR", "12.50", "100.00")
    assert (rows[2]["currency"], rows[2]["gap_amount"], rows[2]["late_amount"]) == (
        "KWD", "0.125", "0.125")


def test_csvs_and_html_are_byte_identical_on_a_rerun(tmp_path):
    first = render_context(_ctx(), tmp_path / "a")
    second = render_context(_ctx(), tmp_path / "b")
    names = sorted(Path(p).name for p in first.csv_paths)
    assert names == ["approval.csv", "attribution.csv", "bounds_per_source.csv",
                     "break_summary.csv", "breaks.csv",
                     "configuration.csv", "gap_by_window.csv",
                     "lateness_curve.csv", "lateness_histogram.csv", "quality.csv",
                     "status_counts.csv", "summary.csv", "watermark_progress.csv"]
    for a, b in zip(first.csv_paths, second.csv_paths, strict=True):
        assert Path(a).read_bytes() == Path(b).read_bytes(), a
    assert Path(first.html_path).read_bytes() == Path(second.html_path).read_bytes()
    assert first.sha256 == second.sha256
    again = render_context(_ctx(), tmp_path / "a")  # in place: same bytes, same hash
    assert again.sha256 == first.sha256
    summary = (Path(first.out_dir) / "summary.csv").read_text()
    assert summary.startswith("currency,figure,value\n,day,2026-01-01\n")
    assert "EUR,provisional_total,1234567.89\n" in summary and ",completeness,0.998765\n" in summary
    curve = (Path(first.out_dir) / "lateness_curve.csv").read_text().splitlines()
    assert curve[0] == ("granularity,bound_seconds,completeness,admitted,dropped,"
                        "avg_emit_latency_seconds,configured,recommended")
    assert curve[3] == "per_batch,3,0.9987654320987654,80900,100,3.1,true,false"
    assert curve[8] == "per_event,3,0.9951111111111111,80604,396,3.1,true,false"
    assert curve[9] == "per_event,5,0.999,80919,81,5.1,false,true"  # recommended
    rolled = (Path(first.out_dir) / "break_summary.csv").read_text().splitlines()
    assert rolled[0] == "dimension,group,currency,breaks,gap_amount,residual_amount"
    assert "cause,UNEXPLAINED,JPY,1,1200,1200" in rolled  # JPY's own digits, JPY only
    assert "cause,EXPLAINED,KWD,1,0.125,0.000" in rolled


def test_the_gap_chart_has_one_panel_per_currency():
    from matplotlib.figure import Figure

    from reports.charts import GAP_PANELS, _gap, _gap_currencies, render_charts

    fig = Figure()
    assert _gap(_ctx(), fig)
    assert [ax.get_ylabel() for ax in fig.axes] == ["amount (EUR)", "amount (JPY)",
                                                    "amount (KWD)"]
    jpy_gap = next(line for line in fig.axes[1].get_lines()
                   if line.get_label().startswith("gap"))
    assert max(jpy_gap.get_ydata()) == 1200.0  # the panel holds JPY only
    # many currencies: GAP_PANELS panels, those with unexplained rows among them
    codes = ["AUD", "CAD", "CHF", "EUR", "GBP", "JPY", "KWD", "NOK", "SEK"]
    pts = tuple(GapPoint(T0, code, 5, D("1"), D("2"), D("1"), D("1"), D("0"),
                         int(code in ("SEK", "NOK"))) for code in codes)
    shown = _gap_currencies(pts)
    assert len(shown) == GAP_PANELS and {"SEK", "NOK"} <= set(shown)
    assert shown == sorted(shown)
    many = dataclasses.replace(_ctx(), gap_series=pts)
    assert any(c.name == "gap_by_window" for c in render_charts(many))


def test_a_run_without_per_currency_figures_is_refused_not_made_up(tmp_path):
    """A run recorded before money was kept per currency (migration 0004 dropped its
    cross-currency totals): its rows are known, its money is not. Refused, with the fix."""
    from reports.context import headline_from_run
    from tests.test_report_db import make_run

    old = make_run("audit-old", currencies=())
    with pytest.raises(LayoutError) as err:
        headline_from_run(old)
    message = str(err.value)
    assert "\n" not in message and "`reckon audit --date 2026-01-01`" in message
    assert "audit-old" in message
    legacy = dataclasses.replace(_ctx(), headline=Headline(1234, 1, None, ()))
    with pytest.raises(LayoutError, match=r"re-audit the day \(`reckon audit --date "
                                          r"2026-01-01`\)"):
        render_context(legacy, tmp_path / "r")
    assert not (tmp_path / "r").exists()  # nothing written
    # a day without any row has no money to show, and says so
    empty = dataclasses.replace(_ctx(breaks=0), headline=Headline(0, 0, None, ()),
                                status_counts=tuple((s, 0) for s in STATUSES),
                                attribution=(), gap_series=())
    html = Path(render_context(empty, tmp_path / "e").html_path).read_text()
    assert "No events</strong> on this day" in html
    assert list(_groups(html)) == [""]
    assert headline_from_run(make_run("audit-empty", rows=0, currencies=())).currencies == ()


def test_html_opens_in_headless_chromium_offline(tmp_path):
    """What a reviewer sees in a browser with the network off: the headline per currency, the
    break summary before the list, charts, the approval block, percentages; not a blank page."""
    chromium = _need("chromium")
    signed = dataclasses.replace(_ctx(), signoffs=(
        Signoff("audit-2026-01-01-abc123", "approved", "fin-reviewer",
                datetime(2026, 1, 2, 9, 30, tzinfo=UTC), {"EUR": D("37.50")}, 1),))
    result = render_context(signed, tmp_path / "r")
    shot = tmp_path / "report.png"
    proc = _chromium(chromium, f"--screenshot={shot}", "--window-size=1280,2000",
                     Path(result.html_path).as_uri())
    assert shot.is_file(), proc.stderr[-2000:]
    width, height, colours = _png_stats(shot)
    assert (width, height) == (1280, 2000)
    assert shot.stat().st_size > 50_000 and colours > 20  # text, tables and charts: not blank
    shutil.copy(shot, Path(result.out_dir) / "screenshot.png")
    dom = _chromium(chromium, "--dump-dom", Path(result.html_path).as_uri()).stdout
    assert "EUR 1,234,567.89" in dom and "EUR 1,234,605.39" in dom
    assert "JPY 1,200" in dom and "KWD 0.125" in dom and "99.8765%" in dom
    assert dom.index('id="break-summary"') < dom.index('id="breaks"')
    assert 'data-dimension="cause"' in dom and 'data-dimension="age"' in dom
    assert dom.count("<svg") >= 3  # the charts are inline: nothing to fetch
    approval = re.search(r'<section id="approval">(.*?)</section>', dom, re.S)
    assert approval and "ops-bot" in approval.group(1)
    assert "fin-reviewer at 2026-01-02T09:30:00" in approval.group(1)
    assert '<a href="breaks.csv">' in dom  # relative: the folder can be zipped and mailed


def test_the_break_summary_rolls_breaks_up_per_currency_never_across():
    from reports.summary import OTHER_KEYS, TOP_KEYS, summarise_breaks

    lines = [_break(i) for i in range(30)]
    summary = summarise_breaks(lines, STATUSES)
    assert summary.total == 30
    cause = {(r.group, r.currency): r for r in summary.by_cause}
    # break 1 (JPY) is the unexplained one; the rest are explained, 10 per currency
    assert cause[("UNEXPLAINED", "JPY")].breaks == 1
    assert cause[("EXPLAINED", "EUR")].breaks == 10 and cause[("EXPLAINED", "JPY")].breaks == 9
    assert cause[("EXPLAINED", "EUR")].gap == D("125.000")  # 10 x EUR 12.50, EUR only
    assert [r.group for r in summary.by_cause][:1] == ["EXPLAINED"]  # ReconStatus order
    assert all(r.currency in ("EUR", "JPY", "KWD") for r in summary.by_cause)
    # every break is in exactly one row of each roll-up, in its own currency
    for _dimension, rows in summary.sections():
        assert sum(r.breaks for r in rows) == 30
        for code in ("EUR", "JPY", "KWD"):
            assert sum((r.gap for r in rows if r.currency == code), D(0)) == \
                sum((b.gap_amount for b in lines if b.currency == code), D(0))
    ages = {r.group for r in summary.by_age}
    assert ages == {"new today", "1-2 days"}  # _break ages are 0, 1, 2
    keys = [r.group for r in summary.by_key]
    assert len(set(keys) - {OTHER_KEYS}) <= TOP_KEYS
    many = summarise_breaks([dataclasses.replace(_break(i), key=f"k{i:02d}")
                             for i in range(15)], STATUSES)
    assert OTHER_KEYS in {r.group for r in many.by_key}
    assert sum(r.breaks for r in many.by_key if r.group == OTHER_KEYS) == 15 - TOP_KEYS


def test_a_rejected_break_is_its_own_review_group_after_the_closed_ones():
    """Issue 61: a break a reviewer rejected shows as 'rejected' in the report's review
    roll-up (after open, explained, accepted, resolved), as in the workbench and the CLI."""
    from reports.summary import summarise_breaks

    lines = [dataclasses.replace(_break(i), review_status=status) for i, status in
             enumerate(("rejected", "open", "accepted", "rejected"))]
    groups = [(r.group, r.currency, r.breaks) for r in summarise_breaks(lines).by_review]
    assert groups == [("open", "JPY", 1), ("accepted", "KWD", 1), ("rejected", "EUR", 2)]


def test_pdf_renders_and_carries_the_headline(tmp_path):
    pdftoppm, pdftotext = _need("pdftoppm"), _need("pdftotext")
    result = render_context(_ctx(), tmp_path / "r")
    subprocess.run([pdftoppm, "-png", "-r", "50", result.pdf_path, str(tmp_path / "page")],
                   check=True, timeout=120)
    pages = sorted(tmp_path.glob("page*.png"))
    assert len(pages) >= 2
    assert _png_stats(pages[0])[2] > 5
    text = subprocess.run([pdftotext, "-layout", result.pdf_path, "-"], check=True,
                          capture_output=True, text=True, timeout=120).stdout
    for figure in ("EUR 1,234,567.89", "EUR 1,234,605.39", "EUR 37.50", "EUR 25.00",
                   "EUR 12.50 in 1 row", "JPY 3,211,000", "JPY 1,200", "KWD 0.125",
                   "KWD 1,000.625", "99.8765%", "1 unexplained break",
                   "audit-2026-01-01-abc123", "UNEXPLAINED", "EUR 12.50; JPY 1,200"):
        assert figure in text, figure
    assert "4,446,568.39" not in text and "4446568.39" not in text  # no cross-currency sum
    # a figure whose detail has its own parentheses is not wrapped twice
    assert "1,234 (window, key, currency) rows" in text and "((" not in text
    # a document: every page numbered, the summary before the list, the approval block
    assert text.count(" of ") >= len(pages) and f"page {len(pages)} of {len(pages)}" in text
    assert "page 1 of" in text
    assert text.index("Break summary") < text.index("Breaks (3 of 3 shown")
    assert "Approval" in text and "Prepared by" in text
    assert "Awaiting sign-off: 0 of 1 approvals when this report was rendered" in text
    assert "Approval record: approval.html" in text


def test_configuration_names_settings_as_the_cli_does_and_the_csv_keeps_keys(tmp_path):
    """The page said "lateness 3s" and "grace 0s", names the CLI and README no longer use;
    configuration.csv keeps the recorded keys its readers look up."""
    result = render_context(_ctx(), tmp_path / "r")
    html = unescape(Path(result.html_path).read_text())
    labels = ("watermark bound (recorded as lateness)",
              "allowed lateness (recorded as grace)")  # vocabulary: keep
    for label in labels:
        assert label in html, label
    assert not re.search(r">\s*(lateness|grace)\s*<", html)  # vocabulary: keep
    text = " ".join(subprocess.run([_need("pdftotext"), result.pdf_path, "-"], check=True,
                                   capture_output=True, text=True, timeout=120).stdout.split())
    assert "watermark bound (recorded as lateness) 3s" in text
    assert "allowed lateness (recorded as grace) 0s" in text  # vocabulary: keep
    rows = list(csv.reader(io.StringIO((Path(result.out_dir) / "configuration.csv").read_text())))
    assert rows[0] == ["setting", "value"]
    assert ["grace", "0s"] in rows and ["lateness", "3s"] in rows and ["window", "10s"] in rows


def _page_words(result) -> tuple[str, str]:
    html = " ".join(unescape(re.sub(r"<[^>]+>", " ", Path(result.html_path).read_text())).split())
    text = " ".join(subprocess.run([_need("pdftotext"), result.pdf_path, "-"], check=True,
                                   capture_output=True, text=True, timeout=120).stdout.split())
    return html, text


def test_a_quiet_days_watermark_section_says_no_batch_of_this_day(tmp_path):
    """2026-11-25 had no events; its section said "1 batch of the stream, up to the one that
    closed the day ... by up to 1.968662 s" about the first batch of 2026-11-26."""
    later = T0 + timedelta(days=1, hours=23, minutes=50)
    series = (WatermarkPoint(7, later, None, later + timedelta(seconds=1),
                             held_by="partition 3", held_back_seconds=D("1.968662")),
              WatermarkPoint(7, later, 3, later + timedelta(seconds=1)))
    # the next day's first batch can leave the watermark (its events less the bound) in the
    # quiet day: still no batch of this day
    early = (WatermarkPoint(6, T0 + timedelta(days=1), None, T0 + timedelta(hours=23, minutes=59,
                                                                           seconds=57)),)
    quiet = dataclasses.replace(_ctx(), watermark_series=early + series, headline=Headline(
        rows=0, unexplained_count=0, completeness=None, currencies=()))
    html, text = _page_words(render_context(quiet, tmp_path / "quiet"))
    sentence = ("The stream processed no batch of this day (it archived no events of it): "
                "batch 7, of a later day, took the watermark past it (to 2026-01-02T23:50:01Z).")
    for page in (html, text):
        assert sentence in page
        assert "up to the one that closed the day" not in page and "Held back" not in page
    busy = dataclasses.replace(_ctx(), watermark_series=series)
    html, _ = _page_words(render_context(busy, tmp_path / "busy"))
    assert ("No batch of the stream left its watermark inside this day: batch 7 took it past "
            "the day (to 2026-01-02T23:50:01Z).") in html


def test_held_back_seconds_are_written_to_a_tenth_not_a_microsecond(tmp_path):
    base = _ctx()
    series = tuple(dataclasses.replace(w, held_by="partition 3",
                                       held_back_seconds=D("1.968662") if w.batch_id == 3
                                       else D("0.5"))
                   if w.partition is None else w for w in base.watermark_series)
    html, text = _page_words(render_context(dataclasses.replace(base, watermark_series=series),
                                            tmp_path / "r"))
    for page in (html, text):
        assert "Held back most by partition 3: in 40 of the 40 batches shown, by up to 2 s." \
            in page
        assert "1.968662" not in page


def test_the_pdf_break_list_keeps_every_word_and_figure_on_one_line(tmp_path):
    """At 6 pt on a portrait page the list broke "merchant-0" / "001", "explain" / "ed" and
    "2026-11-26T23:51:20" / "Z \u2013 23:51:30Z". The window cell is its times of day (the day
    is in the title); breaks.csv keeps the full timestamps."""
    from reports import formatting as fmt

    wide = dataclasses.replace(
        _break(0), window_start=T0 + timedelta(hours=23, minutes=51, seconds=20),
        window_end=T0 + timedelta(hours=23, minutes=51, seconds=30), key="merchant-0001",
        status=ReconStatus.MISSING_IN_CANONICAL.value, review_status="explained", age_days=123,
        provisional_amount=D("1234567.89"), canonical_amount=D("1234567.89"),
        gap_amount=D("-12345.67"), late_amount=D("12345.67"), duplicate_amount=D("1234.56"),
        residual_amount=D("-12345.67"), explanation="late side output explains 1 event")
    ctx = dataclasses.replace(_ctx(), breaks=(wide, *_ctx().breaks), all_breaks=(wide,))
    result = render_context(ctx, tmp_path / "r")
    text = subprocess.run([_need("pdftotext"), "-layout", result.pdf_path, "-"], check=True,
                          capture_output=True, text=True, timeout=120).stdout
    row = next(line for line in text.splitlines() if "23:51:20" in line)
    for cell in ("23:51:20\u201323:51:30Z", "merchant-0001", "EUR", "1,234,567.89",
                 "-12,345.67", "12,345.67", "1,234.56", "MISSING_IN_CANONICAL", "explained",
                 "123"):
        assert cell in row.split(), (cell, row)
    header = next(line for line in text.splitlines() if line.startswith("window (UTC)"))
    for word in ("key", "currency", "provisional", "canonical", "residual", "status",
                 "review", "explanation"):
        assert word in header.split(), (word, header)
    assert "2026-01-01T23:51:20Z,2026-01-01T23:51:30Z,merchant-0001" in (
        Path(result.out_dir) / "breaks.csv").read_text()
    late_start = datetime(2025, 12, 31, 23, 59, 55, tzinfo=UTC)
    assert fmt.window(late_start, T0 + timedelta(seconds=5), DAY) == \
        "2025-12-31T23:59:55Z\u201300:00:05Z"


# ----------------------------------------------------------------------------- Spark tier


#: Streamed once a session (two late events: their windows are the day's breaks).
WORKED_GRACE_0 = "worked example, allowed lateness 0"


@pytest.fixture(scope="module")
def replayed_worked_example(spark, streamed_scenario,
                            tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The worked example (allowed lateness 0) streamed and its day replayed, once for the tests that
    audit it: each starts from the same replay, so each copies this warehouse and audits (and
    renders) its own copy; the replay itself is not what they assert."""
    from spark.replay import replay_day
    from tests.streamkit import copy_warehouse

    streamed = streamed_scenario(WORKED_GRACE_0).warehouse_path
    warehouse = copy_warehouse(streamed, tmp_path_factory.mktemp("replayed-worked"))
    replay_day(spark, _worked_settings(warehouse).replay_config(), DAY)
    return warehouse


def _worked_settings(warehouse: Path) -> Settings:
    """The settings the worked example (allowed lateness 0) was streamed with, on ``warehouse``."""
    from tests.scenarios import SCENARIOS
    from tests.streamkit import stream_settings

    case = next(c for c in SCENARIOS if c.name == WORKED_GRACE_0)
    return stream_settings(warehouse, **case.rules)


def test_render_day_from_a_real_warehouse(spark, replayed_worked_example, tmp_path, caplog):
    """Stream the worked example (allowed lateness 0: two late events), replay, audit, then render the
    day: the report shows the audit's figures and is recorded with its HTML's SHA-256."""
    import hashlib

    from audits.audit import audit_day
    from reports.db.repository import ReportDB, audit_recorder
    from reports.render import render_day
    from tests.streamkit import copy_warehouse

    # audit and render write to it
    warehouse = copy_warehouse(replayed_worked_example, tmp_path)
    settings = _worked_settings(warehouse)
    audit = audit_day(spark, settings.audit_config(), DAY, kind="nightly", recorder=audit_recorder(settings))

    result = render_day(settings.report_config(), DAY)
    assert Path(result.out_dir) == warehouse.resolve() / "reports" / "2026-01-01"
    html = Path(result.html_path).read_text()
    [usd] = audit.currencies
    assert usd["currency"] == "USD"
    assert (D(usd["gap_total"]), D(usd["late_total"])) == (D("2.00"), D("2.00"))
    figures = {name: value for name, _, value in _groups(html)["USD"]}
    assert figures["provisional_total"] == format_money(D(usd["provisional_total"]), "USD")
    assert figures["canonical_total"] == format_money(D(usd["canonical_total"]), "USD")
    assert (figures["gap_total"], figures["late_total"]) == ("USD 2.00", "USD 2.00")
    rows = list(csv.DictReader(io.StringIO((Path(result.out_dir) / "breaks.csv").read_text())))
    assert rows and {r["currency"] for r in rows} == {"USD"}
    assert all(re.fullmatch(r"-?\d+\.\d\d", r["gap_amount"]) for r in rows)  # USD: 2 places
    rec = ReportDB.from_settings(settings).current_report(DAY)
    assert rec is not None and rec.sha256 == result.sha256
    assert rec.sha256 == hashlib.sha256(Path(result.html_path).read_bytes()).hexdigest()
    record = json.loads((Path(result.out_dir) / "approval.json").read_text())  # beside it
    assert (record["run_id"], record["report_sha256"], record["words"]) == (
        audit.run_id, result.sha256, "Awaiting sign-off: 0 of 1 approvals")
    hist = (Path(result.out_dir) / "lateness_histogram.csv").read_text().splitlines()
    late_total = sum(int(line.split(",")[3]) for line in hist[1:])
    assert late_total == 2
    _assert_per_batch_row_is_the_headline(result, D(audit.completeness), late_total)
    before = {p: Path(p).read_bytes() for p in result.csv_paths}
    again = render_day(settings.report_config(), DAY)
    assert again.sha256 == result.sha256
    assert all(Path(p).read_bytes() == data for p, data in before.items())
    _assert_context_is_sparks(spark, settings, ReportDB.from_settings(settings)
                              .current_audit_run(DAY))
    _assert_cli_report_starts_no_jvm(warehouse, result)
    _assert_the_report_step_logs_no_library_chatter(settings, caplog)


def _assert_the_report_step_logs_no_library_chatter(settings, caplog) -> None:
    """The nightly DAG's report task (``pipeline.run_report``) in a fresh process: fontTools'
    INFO lines about each PDF (~75) and GX's stay out of the task log (once done by Spark's
    start, which the report no longer has)."""
    import logging

    from app import pipeline

    for name in ("fontTools", "fontTools.subset", "great_expectations"):
        logging.getLogger(name).setLevel(logging.NOTSET)  # as a new task process has them
    caplog.clear()
    with caplog.at_level(logging.INFO):
        pipeline.run_report(settings, DAY)
    chatty = [r for r in caplog.records
              if r.name.startswith(("fontTools", "great_expectations")) and r.levelno < 30]
    assert chatty == [], chatty[:3]


def _assert_cli_report_starts_no_jvm(warehouse: Path, result) -> None:
    """`reckon report` in a process of its own renders the same bytes as ``result`` (the same
    run rendered in-process into the same folder) and never starts Spark: no JVM's start-up
    lines, no py4j gateway in the process when it ends."""
    import os
    import sys

    code = ("import runpy, sys\nsys.argv = ['reckon', *sys.argv[1:]]\ntry:\n"
            "    runpy.run_module('app.cli', run_name='__main__')\n"
            "except SystemExit as exc:\n    rc = exc.code\n"
            "ctx = sys.modules.get('pyspark.context')\n"
            "print('gateway', ctx is not None and ctx.SparkContext._gateway is not None)\n"
            "sys.exit(rc)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    html = Path(result.html_path).read_bytes()
    out = subprocess.run(
        [sys.executable, "-c", code, "report", "--warehouse", str(warehouse), "--date",
         DAY.isoformat(), "--out", result.out_dir], cwd=warehouse.parent, capture_output=True,
        text=True, timeout=300, check=False,
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert out.returncode == 0, out.stderr
    assert "gateway False" in out.stdout
    assert "log4j" not in out.stderr and "Setting default log level" not in out.stderr
    assert result.sha256 in out.stdout
    assert Path(result.html_path).read_bytes() == html


def test_render_a_day_with_three_currencies_from_a_real_warehouse(spark, streamed_scenario,
                                                                 tmp_path):
    """Key m0's window holds EUR, JPY and KWD events (streamed, replayed, audited): the report
    has three headline groups in their own digits, the CSVs a currency column, no sum."""
    from audits.audit import audit_day
    from reports.db.repository import ReportDB, audit_recorder
    from reports.render import render_day
    from spark.replay import replay_day
    from tests.scenarios import SCENARIOS
    from tests.streamkit import copy_warehouse, stream_settings

    case = next(c for c in SCENARIOS if c.name.startswith("EUR, JPY and KWD"))
    warehouse = copy_warehouse(streamed_scenario(case.name).warehouse_path, tmp_path)
    settings = stream_settings(warehouse, **case.rules)
    replay_day(spark, settings.replay_config(), DAY)
    audit = audit_day(spark, settings.audit_config(), DAY, kind="nightly", recorder=audit_recorder(settings))
    assert [c["currency"] for c in audit.currencies] == ["EUR", "JPY", "KWD"]
    result = render_day(settings.report_config(), DAY)
    html = Path(result.html_path).read_text()
    groups = _groups(html)
    assert list(groups) == ["", "EUR", "JPY", "KWD"]
    assert [dict((n, v) for n, _, v in groups[c])["canonical_total"]
            for c in ("EUR", "JPY", "KWD")] == ["EUR 12.50", "JPY 1,507", "KWD 2.625"]
    summary = (Path(result.out_dir) / "summary.csv").read_text()
    assert "EUR,canonical_total,12.50\n" in summary and "JPY,canonical_total,1507\n" in summary
    assert "KWD,canonical_total,2.625\n" in summary
    for total in ("1522.125", "1,522.125", "1519.50", "1,519.50", "15.125"):
        assert total not in html and total not in summary
    gap = (Path(result.out_dir) / "gap_by_window.csv").read_text().splitlines()
    assert gap[0].split(",")[2] == "currency"
    assert sorted(line.split(",")[2] for line in gap[1:]) == ["EUR", "JPY", "KWD"]
    _assert_context_is_sparks(spark, settings, ReportDB.from_settings(settings)
                              .current_audit_run(DAY))


def test_watermark_series_runs_until_the_batch_that_closed_the_day(spark, tmp_path):
    """The report's watermark chart shows the day's batches up to the first whose watermark
    passed the end of the day's last window plus the allowed lateness (hopping 10 s every 5 s, allowed lateness 2 s:
    the last window ends 00:00:05, so the day closes at 00:00:07), and nothing after it."""
    from app.settings import load_settings
    from reports.context import _Reads, _watermarks
    from tests.test_progress import _append_progress

    wh = tmp_path / "wh"
    settings = load_settings(env={}, warehouse=str(wh), window="10s", slide="5s", allowed_lateness="2s",
                             shuffle_partitions=2)
    midnight = T0 + timedelta(days=1)
    marks = [T0 - timedelta(seconds=1), midnight - timedelta(seconds=10),
             midnight + timedelta(seconds=3), midnight + timedelta(seconds=8),
             midnight + timedelta(seconds=20)]
    for batch_id, mark in enumerate(marks):
        _append_progress(spark, wh, batch_id, mark)
    rules = settings.event_time_rules()
    rules = dataclasses.replace(rules, watermark=dataclasses.replace(rules.watermark, watermark_bound=0))
    series = _watermarks(_Reads(wh), rules, DAY)
    assert sorted({p.batch_id for p in series if p.partition is None}) == [1, 2, 3]


def test_a_failed_breaks_insert_leaves_the_previous_audit_current(spark,
                                                                  replayed_worked_example,
                                                                  tmp_path):
    """A run becomes current only once its breaks are stored: when the report database
    refuses them (a trigger aborts every insert, as a full disk would), the audit fails and the
    day's current run is still the previous one, with its breaks listed."""
    import sqlite3

    from audits.audit import audit_day
    from reports.db.repository import ReportDB, audit_recorder
    from tests.streamkit import copy_warehouse

    settings = _worked_settings(copy_warehouse(replayed_worked_example, tmp_path))
    first = audit_day(spark, settings.audit_config(), DAY, kind="nightly", recorder=audit_recorder(settings))
    assert first.breaks_recorded > 0  # the two late events' windows
    db = ReportDB.from_settings(settings)
    with sqlite3.connect(settings.report_db.removeprefix("sqlite:///")) as conn:
        conn.execute("CREATE TRIGGER refuse_breaks BEFORE INSERT ON breaks "
                     "BEGIN SELECT RAISE(ABORT, 'no space left for breaks'); END")
    with pytest.raises(Exception, match="no space left for breaks"):
        audit_day(spark, settings.audit_config(), DAY, kind="nightly", recorder=audit_recorder(settings))
    current = db.current_audit_run(DAY)
    assert current is not None and current.run_id == first.run_id
    assert len(db.audit_runs(DAY)) == 1
    assert len(db.breaks(first.run_id)) == first.breaks_recorded


def test_the_report_refuses_rows_another_audit_run_replaced(spark, replayed_worked_example,
                                                            tmp_path):
    """An ad hoc audit of the day replaces the day's reconciliation rows while the nightly run
    stays current: the nightly report would take its headline from one run and its
    unexplained amount and gap chart from the other, so it refuses and names the re-run."""
    from audits.audit import audit_day
    from reckon.errors import UsageError
    from reports.context import build_context
    from reports.db.repository import audit_recorder
    from tests.streamkit import copy_warehouse

    settings = _worked_settings(copy_warehouse(replayed_worked_example, tmp_path))
    nightly = audit_day(spark, settings.audit_config(), DAY, kind="nightly", recorder=audit_recorder(settings))
    assert build_context(settings.report_config(), DAY).audit_run_id == nightly.run_id
    adhoc = audit_day(spark, settings.audit_config(), DAY, kind="adhoc", recorder=audit_recorder(settings))
    with pytest.raises(UsageError) as err:
        build_context(settings.report_config(), DAY)
    message = str(err.value)
    assert adhoc.run_id in message and nightly.run_id in message
    assert "reckon audit --date 2026-01-01 --kind nightly" in message
    again = audit_day(spark, settings.audit_config(), DAY, kind="nightly", recorder=audit_recorder(settings))
    assert build_context(settings.report_config(), DAY).audit_run_id == again.run_id


def test_the_report_says_whether_the_day_is_signed_off_and_when_a_re_audit_undid_it(tmp_path):
    from reports.context import Signoff

    def signoff_line(ctx: ReportContext) -> str:
        result = render_context(ctx, tmp_path / str(len(list(tmp_path.iterdir()))))
        html = Path(result.html_path).read_text()
        found = re.search(r'<p class="signoff[^"]*" id="signoff">([^<]*)</p>', html)
        assert found is not None
        return unescape(found.group(1))

    ctx = _ctx()
    assert signoff_line(ctx) == (
        "Sign-off: Awaiting sign-off: 0 of 1 approvals when this report was rendered; later "
        "decisions: the approval record, approval.html.")
    at = datetime(2026, 1, 2, 9, 30, tzinfo=UTC)
    gaps = {"EUR": D("37.50"), "JPY": D("1200"), "KWD": D("0.125")}
    signed = dataclasses.replace(ctx, signoffs=(
        Signoff(ctx.audit_run_id, "approved", "bob", at, gaps, 1),
        Signoff(ctx.audit_run_id, "approved", "bob", at, gaps, 1)))
    assert signoff_line(signed) == (
        "Sign-off: Signed off: 1 of 1 approvals (bob) when this report was rendered; later "
        "decisions: the approval record, approval.html.")
    # the same gaps at the stored scale (37.500) are the same gaps; the replaced run's state
    # as it stands (a re-audit leaves it as it was)
    unchanged = dataclasses.replace(ctx, superseded_signoff=Signoff(
        "audit-old", "approved", "bob", at, {k: v.quantize(D("0.001")) for k, v in gaps.items()},
        1), superseded_review=review_state([("bob", "approved"), ("carol", "rejected")],
                                           reconciler="ops-bot"))
    assert signoff_line(unchanged) == (
        "Sign-off: Run audit-old of this day (Rejected by carol: 1 of 1 approvals (bob)) was "
        "replaced by this audit (the gap of every currency and the unexplained count are "
        "unchanged): the day needs a new sign-off.")
    # compared per currency: a changed EUR gap, a currency gone (GBP), one new (KWD); JPY
    # unchanged is not mentioned, and nothing is summed
    changed = dataclasses.replace(ctx, superseded_signoff=Signoff(
        "audit-old", "accepted", "bob", at,
        {"EUR": D("30.00"), "GBP": D("5.00"), "JPY": D("1200")}, 0))
    assert ("(gap EUR 30.00 -> EUR 37.50, gap GBP 5.00 -> no GBP, gap no KWD -> KWD 0.125, "
            "unexplained breaks 0 -> 1)") in signoff_line(changed)
    only_count = dataclasses.replace(ctx, superseded_signoff=Signoff(
        "audit-old", "approved", "bob", at, gaps, 3))
    assert "(unexplained breaks 3 -> 1)" in signoff_line(only_count)


def test_a_signed_off_report_is_kept_when_a_re_audit_renders_into_its_folder(tmp_path):
    """After a sign-off, any new rendering into the folder (of the same run, whose report now
    says "Approved by ...", or of the run that replaced it) first copies the signed bytes to
    signed/<run>/, recorded there with their hash, once."""
    from dataclasses import replace

    from reports.db.repository import ReportDB
    from reports.records import ReportRecord
    from reports.render import keep_signed_report
    from reports.review import append_signoff
    from tests.test_report_db import make_run

    folder = tmp_path / "reports" / "2026-01-01"
    signed_ctx = _ctx()
    first = render_context(signed_ctx, folder)
    record = ReportRecord(day=DAY, audit_run_id=signed_ctx.audit_run_id,
                          created_at=datetime(2026, 1, 2, 4, tzinfo=UTC),
                          html_path=first.html_path, pdf_path=first.pdf_path,
                          csv_paths=list(first.csv_paths), sha256=first.sha256)
    signed_bytes = Path(first.html_path).read_bytes()
    with ReportDB(f"sqlite:///{tmp_path / 'reckon.db'}") as db:
        db.record_audit_run(make_run(signed_ctx.audit_run_id, reconciler="ops-bot"), [])
        db.record_report(record)
        assert keep_signed_report(db, folder, "audit-new") is None  # not signed off: replaced
        append_signoff(db, signed_ctx.audit_run_id, "bob", "approved", "ties out")
        kept = keep_signed_report(db, folder, signed_ctx.audit_run_id)  # its own re-render
        assert kept == folder / "signed" / signed_ctx.audit_run_id
        assert (kept / "report.html").read_bytes() == signed_bytes
        assert sorted(p.name for p in kept.iterdir()) == sorted(  # the approval record too
            ["report.html", "report.pdf", "approval.html", "approval.json",
             *(Path(p).name for p in first.csv_paths)])
        assert json.loads((kept / "approval.json").read_text())["words"] == (
            "Signed off: 1 of 1 approvals (bob)")
        assert (folder / "report.html").is_file()  # the run's own files are rewritten in place
        moved = db.report_at(str(kept / "report.html"))
        assert moved is not None and moved.sha256 == first.sha256
        assert moved.audit_run_id == signed_ctx.audit_run_id
        assert all(Path(p).parent == kept for p in moved.csv_paths)
        assert keep_signed_report(db, folder, signed_ctx.audit_run_id) is None  # kept once
        assert keep_signed_report(db, folder, "audit-new") is None
        render_context(replace(signed_ctx, audit_run_id="audit-new"), folder)
        assert (kept / "report.html").read_bytes() == signed_bytes  # untouched by the new one


def test_links_are_relative_so_the_reports_folder_can_be_mailed(tmp_path):
    docs = tmp_path / "reports" / "data_docs" / "index.html"
    ctx = dataclasses.replace(_ctx(), data_docs=str(docs))
    html = Path(render_context(ctx, tmp_path / "reports" / "2026-01-01").html_path).read_text()
    assert '<a href="../data_docs/index.html">' in html
    assert 'Approval record: <a href="approval.html">approval.html</a>' in html  # beside it
    assert "file:" not in html and str(tmp_path) not in html


def test_the_watermark_chart_shows_who_held_the_watermark_back_and_idle_stretches():
    from reports.charts import watermark_lags

    lags, held = watermark_lags(_ctx().watermark_series)
    assert {b: lag for b, lag, _ in lags[0]} == {b: 2.0 for b in range(40)}
    assert {lag for _b, lag, _ in lags[1]} == {0.0}
    assert held == {1: 40}  # partition 1 sat on the global watermark in every batch
    # partition 1 goes idle in batches 10-19 and falls behind; partition 0 holds it then
    t = T0
    points = []
    for b in range(30):
        idle = 10 <= b < 20
        p1 = t + timedelta(seconds=30 * min(b, 10))
        p0 = t + timedelta(seconds=30 * b + 2)
        glob = p0 if idle else min(p0, p1)
        points += [WatermarkPoint(b, t, None, glob), WatermarkPoint(b, t, 0, p0),
                   WatermarkPoint(b, t, 1, p1, idle=idle)]
    lags, held = watermark_lags(points)
    # p1 holds it back while active (0-9, and 20-29 when it is stuck behind), p0 while p1 idles
    assert held == {1: 20, 0: 10}
    assert [lag for b, lag, idle in lags[1] if idle][-1] == -30 * 9 - 2.0
    assert all(idle == (10 <= b < 20) for b, _lag, idle in lags[1])


def test_percentages_never_round_up_to_complete():
    from reports.render import _percent

    assert _percent(D("0.99999996")) == "99.9999%"  # an event missing is never 100%
    assert _percent(D("0.99995"), 2) == "99.99%"
    assert _percent(D("1")) == "100.0000%" and _percent(None) == "-"
    assert _percent(D("0.998765")) == "99.8765%"


# ----------------------------------------------------------------------------- two curves


def _curve_csv(out_dir: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((Path(out_dir) / "lateness_curve.csv").read_text())))


def _html_curve(html: str, granularity: str) -> list[list[str]]:
    table = re.search(rf'<table class="curve" data-granularity="{granularity}">(.*?)</table>',
                      html, re.S)
    assert table, granularity
    return [re.findall(r'<td class="num">(.*?)</td>', row)
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1))[1:]]


def _assert_per_batch_row_is_the_headline(result, completeness: Decimal, late: int) -> None:
    """The configured bound's per-batch row, in the CSV and the HTML, is the headline."""
    [row] = [r for r in _curve_csv(result.out_dir)
             if r["granularity"] == "per_batch" and r["configured"] == "true"]
    counted, dropped = int(row["admitted"]), int(row["dropped"])
    assert dropped == late
    assert (Decimal(counted) / Decimal(counted + dropped)).quantize(Decimal("0.000001")) \
        == completeness
    html = unescape(Path(result.html_path).read_text())
    from reports.render import _percent

    [shown] = [r for r in _html_curve(html, "per_batch") if r[0] == row["bound_seconds"]]
    assert shown[1:4] == [_percent(Decimal(counted) / Decimal(counted + dropped)),
                          str(counted), str(dropped)]


def test_both_curves_are_labelled_with_why_they_differ_in_html_pdf_and_csv(tmp_path):
    from reports.render import CURVES_NOTE, PER_BATCH, PER_EVENT

    result = render_context(_ctx(), tmp_path / "r")
    html = unescape(Path(result.html_path).read_text())
    for text in (f"Completeness {PER_BATCH}", f"Completeness {PER_EVENT}", CURVES_NOTE):
        assert text in html, text
    assert html.index(PER_BATCH) < html.index(PER_EVENT)
    assert _html_curve(html, "per_batch")[2][:4] == ["3", "99.8765%", "80900", "100"]
    assert _html_curve(html, "per_event")[2][:4] == ["3", "99.5111%", "80604", "396"]
    summary = list(csv.reader(io.StringIO((Path(result.out_dir) / "summary.csv").read_text())))
    assert ["", "lateness_curve_per_batch", PER_BATCH] in summary
    assert ["", "lateness_curve_per_event", PER_EVENT] in summary
    assert ["", "lateness_curves_note", CURVES_NOTE] in summary
    _assert_per_batch_row_is_the_headline(result, D("0.998765"), 100)
    pdftotext = _need("pdftotext")
    text = " ".join(subprocess.run([pdftotext, result.pdf_path, "-"], check=True,
                                   capture_output=True, text=True, timeout=120).stdout.split())
    for words in (f"Completeness {PER_BATCH}", f"Completeness {PER_EVENT}", CURVES_NOTE):
        assert " ".join(words.split()) in text, words


def test_a_missing_per_batch_curve_says_why_in_every_format(tmp_path):
    ctx = dataclasses.replace(_ctx(), lateness_curve_batches=(),
                              batch_curve_note="batches 0..9 were written by more than one "
                                               "stream query")
    result = render_context(ctx, tmp_path / "r")
    html = unescape(Path(result.html_path).read_text())
    assert "No per-batch curve: batches 0..9 were written by more than one stream query" in html
    assert not re.search(r'data-granularity="per_batch"', html)
    assert {r["granularity"] for r in _curve_csv(result.out_dir)} == {"per_event"}
    assert "No per-batch curve: batches 0..9" in (Path(result.out_dir) / "summary.csv").read_text()



def test_a_quiet_day_says_the_stream_archived_no_events_not_an_error(tmp_path):
    """The note was the --date error's text: "No per-batch curve: date='2026-11-25' is not
    valid: a day with events the stream archived (that day has none)"."""
    from audits.bound_whatif_batches import no_batch_curve
    from reckon.errors import NoEventsError

    why = str(NoEventsError(date(2026, 11, 25), "the stream archived no events of 2026-11-25"))
    ctx = dataclasses.replace(_ctx(), lateness_curve_batches=(), batch_curve_note=why)
    result = render_context(ctx, tmp_path / "r")
    html = unescape(Path(result.html_path).read_text())
    note = "No per-batch curve: the stream archived no events of 2026-11-25."
    assert no_batch_curve(why) == note and note in html
    assert "is not valid" not in html
    assert note in (Path(result.out_dir) / "summary.csv").read_text()


# ----------------------------------------------------------------------------- one list of sections


def _words(text: str) -> str:
    return " ".join(text.split())


def test_every_section_is_in_the_html_the_pdf_and_its_csv(tmp_path, monkeypatch):
    """One list (reports.sections.SECTIONS) drives every format: each section's title is in
    the page Chromium shows offline (inside its own <section>) and in the PDF's text, and its
    CSV is written with its header. Rendering needs no Spark: it only draws the context."""
    import sys

    from reports.sections import SECTIONS

    chromium, pdftotext = _need("chromium"), _need("pdftotext")
    monkeypatch.setitem(sys.modules, "pyspark", None)  # any Spark import fails from here on
    result = render_context(_ctx(), tmp_path / "r")
    monkeypatch.undo()
    dom = unescape(_chromium(chromium, "--dump-dom", Path(result.html_path).as_uri()).stdout)
    pdf = _words(subprocess.run([pdftotext, result.pdf_path, "-"], check=True,
                                capture_output=True, text=True, timeout=120).stdout)
    assert len(SECTIONS) >= 12 and len({s.id for s in SECTIONS}) == len(SECTIONS)
    assert [Path(p).name for p in result.csv_paths] == [s.csv for s in SECTIONS]
    for s in SECTIONS:
        found = re.search(rf'<section id="{s.id}">\s*<h2>([^<]*)</h2>', dom)
        assert found and found.group(1).startswith(s.title), (s.id, s.title)
        assert _words(s.title) in pdf, s.title
        lines = (Path(result.out_dir) / s.csv).read_text().splitlines()
        assert lines[0] == ",".join(s.csv_header), s.csv
    # in report order in both: the PDF's headings come in the list's order
    assert [pdf.index(s.heading(_ctx())) for s in SECTIONS] == sorted(
        pdf.index(s.heading(_ctx())) for s in SECTIONS)
    # each chart sits in its own section, in the page and in the PDF's order
    for s in SECTIONS:
        body = re.search(rf'<section id="{s.id}">(.*?)</section>', dom, re.S).group(1)
        assert [n for n in re.findall(r'data-chart="([a-z_]+)"', body)] == list(s.charts)


def _data_docs_site(warehouse: Path) -> Path:
    """A real GX Data Docs site, its browser assets served from the site (as `reckon check`
    leaves it), at <warehouse>/reports/data_docs/index.html."""
    from audits.datadocs import localise_site
    from tests.test_datadocs import _gx_site, _jars

    site = _gx_site(warehouse)
    assert localise_site(site, _jars()).offline
    return site / "index.html"


def _data_docs_target(chromium: str, html: Path) -> Path:
    """The file the report's Data Docs link opens, as Chromium resolves it from ``html``."""
    from urllib.parse import unquote, urljoin, urlsplit

    dom = _chromium(chromium, "--dump-dom", html.as_uri()).stdout
    link = re.search(r'<p id="data-docs">[^<]*<a href="([^"]+)">', dom)
    assert link, dom[-3000:]
    assert not link.group(1).startswith(("/", "file:"))  # relative: the folder travels
    return Path(unquote(urlsplit(urljoin(html.as_uri(), unescape(link.group(1)))).path))


def test_a_signed_copy_opens_its_data_docs_from_where_it_lives(tmp_path):
    """After a sign-off the report is kept in signed/<run>/, byte for byte (its SHA-256 is
    what was signed). Opened there in offline Chromium, its Data Docs link leads to an index
    that exists and draws the checked suites; so it does from a mailed copy of the day's
    folder."""
    from reports.db.repository import ReportDB
    from reports.records import ReportRecord
    from reports.render import keep_signed_report
    from reports.review import append_signoff
    from tests.test_report_db import make_run

    chromium = _need("chromium")
    index = _data_docs_site(tmp_path / "wh")
    folder = tmp_path / "wh" / "reports" / "2026-01-01"
    ctx = dataclasses.replace(_ctx(), data_docs=str(index))
    first = render_context(ctx, folder)
    assert _data_docs_target(chromium, Path(first.html_path)) == index.resolve()
    with ReportDB(f"sqlite:///{tmp_path / 'reckon.db'}") as db:
        db.record_audit_run(make_run(ctx.audit_run_id, reconciler="ops-bot"), [])
        db.record_report(ReportRecord(
            day=DAY, audit_run_id=ctx.audit_run_id, created_at=datetime(2026, 1, 2, 4, tzinfo=UTC),
            html_path=first.html_path, pdf_path=first.pdf_path, csv_paths=list(first.csv_paths),
            sha256=first.sha256))
        append_signoff(db, ctx.audit_run_id, "bob", "approved", "ties out")
        kept = keep_signed_report(db, folder, "audit-new")
    assert kept is not None
    render_context(dataclasses.replace(ctx, audit_run_id="audit-new"), folder)
    signed = kept / "report.html"
    assert hashlib.sha256(signed.read_bytes()).hexdigest() == first.sha256  # the signed bytes
    mailed = tmp_path / "mail" / "2026-01-01"
    shutil.copytree(folder, mailed)  # the day's folder alone, as a zip would carry it
    for copy in (signed, mailed / "signed" / ctx.audit_run_id / "report.html"):
        target = _data_docs_target(chromium, copy)
        assert target.is_file() and target.is_relative_to(copy.parent.parent.parent), target
        dom = _chromium(chromium, "--dump-dom", target.as_uri()).stdout
        rows = re.findall(r"<tr[^>]*data-index[^>]*>(.*?)</tr>", dom, re.S)
        assert any("reckon_demo" in row for row in rows), dom[:2000]  # drawn, not blank
        shot = tmp_path / "docs.png"
        _chromium(chromium, f"--screenshot={shot}", "--window-size=1024,768", target.as_uri())
        assert _png_stats(shot)[2] > 10  # not a blank page


def test_bounds_per_source_show_against_the_best_single_bound_in_html_pdf_and_csv(tmp_path):
    """Issue 41: the day's bound per source, and completeness and average emit latency under
    them, under the best single bound and under one bound with inputs by partition, per event
    and per micro-batch (the stream's batches replayed under each), and per micro-batch what
    the stream as configured did."""
    from reckon.whatif import CurvePoint
    from reckon.whatif_inputs import InputBound, PerInputRecommendation

    s = 1_000_000
    rec = PerInputRecommendation(
        by_source=True, target=D("0.999"),
        bounds=(InputBound("http", 1000, 10 * s, CurvePoint(10 * s, 1.0, 1000, 0, 9.0), 0),
                InputBound("sat", 900, 0, CurvePoint(0, 1.0, 900, 0, 4.0), 0)),
        per_input=CurvePoint(5 * s, 1.0, 1900, 0, 13.5),
        single=CurvePoint(10 * s, 1.0, 1900, 0, 17.25),
        single_fallback=CurvePoint(10 * s, 1.0, 1900, 0, 17.25), reached=True,
        by_partition=CurvePoint(20 * s, 0.9995, 1899, 1, 21.0))
    from audits.bound_whatif_batches import BEST_PER_BATCH_ROWS, PER_SOURCE_ROWS
    from reports.context import CurveLine

    batches = (*zip(PER_SOURCE_ROWS[:3], (
        CurveLine(D("5"), 1.0, 1900, 0, 11.0), CurveLine(D("10"), 0.9995, 1899, 1, 15.5),
        CurveLine(D("20"), 1.0, 1900, 0, 20.0)), strict=True),
        (BEST_PER_BATCH_ROWS[True], CurveLine(D("8"), 0.999, 1898, 2, 14.0)),
        (PER_SOURCE_ROWS[3], CurveLine(D("3"), 0.95, 1805, 95, 4.25)))
    result = render_context(dataclasses.replace(
        _ctx(), per_source=rec, per_source_batches=batches,
        configured_policy="watermark bound 3s per partition"), tmp_path / "r")
    want = [["source http", "10s", "1000 events", "", "", ""],
            ["source sat", "0s", "900 events", "", "", ""],
            ["bounds per source", "", "100.0000%", "13.500", "100.0000%", "11.000"],
            ["one bound", "10s", "100.0000%", "17.250", "99.9500%", "15.500"],
            ["one bound, inputs by partition", "20s", "99.9500%", "21.000", "100.0000%",
             "20.000"],
            ["one bound, best per micro-batch", "8s", "", "", "99.9000%", "14.000"],
            ["the stream as configured", "watermark bound 3s per partition", "", "",
             "95.0000%", "4.250"]]
    rows = list(csv.reader(io.StringIO(
        (Path(result.out_dir) / "bounds_per_source.csv").read_text())))
    assert rows[1:] == want
    html = unescape(Path(result.html_path).read_text())
    table = re.search(r'<table class="per-source"[^>]*>(.*?)</table>', html, re.S).group(1)
    cells = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row) for row in table.split("<tr")[2:]]
    assert cells == want
    text = " ".join(subprocess.run([_need("pdftotext"), result.pdf_path, "-"], check=True,
                                   capture_output=True, text=True, timeout=120).stdout.split())
    assert "Bounds per source" in text and "one bound, inputs by partition" in text
    assert "Per micro-batch: the day's batches as the stream ran them" in text
    plain = Path(render_context(_ctx(), tmp_path / "plain").html_path).read_text()
    assert "no bound per source to recommend" in plain
    unbatched = render_context(dataclasses.replace(
        _ctx(), per_source=rec, per_source_batches_note="batches of two stream queries"),
        tmp_path / "u")
    assert "not available (batches of two stream queries)" in Path(unbatched.html_path).read_text()


def test_the_report_says_which_input_held_the_watermark_back_in_html_pdf_and_csv(tmp_path):
    """Issue 41: watermark_progress records which input held the global watermark back and by
    how much; the report names the one that held it most, and the CSV carries every batch's."""
    base = _ctx()
    held = {b: ("partition 1 source sat" if b % 4 else "partition 0", D(b % 7) / 2)
            for b in range(40)}
    series = tuple(dataclasses.replace(w, held_by=held[w.batch_id][0],
                                       held_back_seconds=held[w.batch_id][1])
                   if w.partition is None else w for w in base.watermark_series)
    result = render_context(dataclasses.replace(base, watermark_series=series), tmp_path / "r")
    sentence = "Held back most by partition 1 source sat: in 30 of the 40 batches shown, by up to 3 s."
    html = " ".join(unescape(re.sub(r"<[^>]+>", " ", Path(result.html_path).read_text())).split())
    assert sentence in html
    text = " ".join(subprocess.run([_need("pdftotext"), result.pdf_path, "-"], check=True,
                                   capture_output=True, text=True, timeout=120).stdout.split())
    assert sentence in text
    rows = list(csv.DictReader(io.StringIO(
        (Path(result.out_dir) / "watermark_progress.csv").read_text())))
    glob = {int(r["batch_id"]): (r["held_by"], r["held_back_seconds"]) for r in rows
            if r["partition"] == "global"}
    assert glob[5] == ("partition 1 source sat", "2.5") and glob[4][0] == "partition 0"
    assert all(r["held_by"] == "" for r in rows if r["partition"] != "global")
    plain = " ".join(re.sub(r"<[^>]+>", " ", Path(
        render_context(base, tmp_path / "plain").html_path).read_text()).split())
    assert "Held back most" not in plain


def test_the_status_counts_are_grouped_as_the_headline_writes_them():
    from reports.sections.headline import status_table

    _header, rows = status_table(_ctx())
    assert rows[0][:2] == ("(window, key, currency) rows", "1,234")


# ------------------------------------------- the DuckDB-built context against Spark's figures
# build_context reads the warehouse through DuckDB (reports/context.py). The functions below
# are the Spark reads the report ran before (kept here, as the oracle only): each piece of the
# context must be equal, value and Decimal scale alike (compared by repr), on real warehouses.


def _spark_gap(spark, settings: Settings, run, day: date) -> tuple:
    from pyspark.sql import functions as F

    from reckon.reconcile import UNEXPLAINED_STATUSES
    from reports.context import GAP_POINTS, GapPoint
    from spark import tables as tb

    recon = (tb.read_table(spark, settings.warehouse_path, tb.RECONCILIATION)
             .filter((F.col("window_date") == F.lit(day))
                     & (F.col("audit_run_id") == F.lit(run.run_id))))
    span = recon.agg(F.min(F.unix_micros("window_start")).alias("lo"),
                     F.max(F.unix_micros("window_start")).alias("hi")).collect()[0]
    window_us = settings.event_time_rules().windows.step
    width = -(-((span.hi - span.lo) // window_us + 1) // GAP_POINTS) * window_us
    bucket = (F.floor((F.unix_micros("window_start") - F.lit(span.lo)) / F.lit(width))
              * F.lit(width) + F.lit(span.lo)).cast("long")
    zero = F.lit(D("0.000"))
    rows = (recon.groupBy("currency", bucket.alias("b"))
            .agg(F.count(F.lit(1)).alias("n"),
                 F.sum(F.coalesce("provisional_amount", zero)).alias("p"),
                 F.sum(F.coalesce("canonical_amount", zero)).alias("c"),
                 F.sum("gap_amount").alias("gap"), F.sum("late_amount").alias("late"),
                 F.sum("residual_amount").alias("res"),
                 F.sum(F.when(F.col("status").isin(*[s.value for s in UNEXPLAINED_STATUSES]),
                              1).otherwise(0)).alias("u"))
            .orderBy("currency", "b").collect())
    return tuple(GapPoint(from_micros(r.b), r.currency, r.n, r.p, r.c, r.gap, r.late, r.res,
                          int(r.u)) for r in rows), width // 1_000_000


def _spark_histogram(spark, warehouse: Path, day: date) -> tuple:
    from pyspark.sql import functions as F

    from reports.context import LATENESS_BUCKETS, HistogramBucket
    from spark import tables as tb

    def bucket(seconds):
        expr = F.lit(LATENESS_BUCKETS[0])
        for edge in LATENESS_BUCKETS[1:]:
            expr = F.when(seconds >= F.lit(edge), F.lit(edge)).otherwise(expr)
        return expr

    delay = (F.unix_micros("arrival_time") - F.unix_micros("event_time")) / F.lit(1_000_000)
    events = {r.b: r.n for r in (
        tb.read_table(spark, warehouse, tb.EVENT_LOG)
        .filter((F.col("event_date") == F.lit(day))
                & ~F.coalesce(F.col("is_duplicate"), F.lit(False)))
        .groupBy(bucket(delay).alias("b")).count().withColumnRenamed("count", "n").collect())}
    late = {r.b: r.n for r in (
        tb.read_table(spark, warehouse, tb.LATE_EVENTS).filter(F.col("window_date") == F.lit(day))
        .groupBy(bucket(F.col("lateness_seconds")).alias("b")).count()
        .withColumnRenamed("count", "n").collect())} \
        if tb.table_exists(warehouse, tb.LATE_EVENTS) else {}
    edges = [*LATENESS_BUCKETS, None]
    return tuple(HistogramBucket(lo, edges[i + 1], events.get(lo, 0), late.get(lo, 0))
                 for i, lo in enumerate(LATENESS_BUCKETS))


def _spark_watermarks(spark, warehouse: Path, rules, day: date) -> tuple:
    """Every batch up to the one that closed the day (these warehouses have fewer than
    WATERMARK_POINTS of them, so none is sampled out), with its partitions' points."""

    from reckon.timeutil import day_bounds, to_micros
    from reports.context import WatermarkPoint
    from spark import tables as tb

    progress = tb.read_table(spark, warehouse, tb.WATERMARK_PROGRESS)
    final = rules.day_final_at(day)
    rows = sorted(progress.collect(), key=lambda r: (r.processed_at, r.batch_id))
    marks = [to_micros(r.watermark) for r in rows if r.watermark is not None]
    closing = min((m for m in marks if m >= final), default=None)
    out = []
    for r in rows:
        wm = None if r.watermark is None else to_micros(r.watermark)
        if wm is None or wm < day_bounds(day)[0] or \
                (wm >= final if closing is None else wm > closing):
            continue
        at = from_micros(to_micros(r.processed_at))
        held = getattr(r, "held_back_seconds", None)
        out.append(WatermarkPoint(r.batch_id, at, None, from_micros(wm),
                                  held_by=getattr(r, "held_by", None),
                                  held_back_seconds=None if held is None else D(held)))
        out += [WatermarkPoint(r.batch_id, at, p, from_micros(
                    to_micros(t) - rules.watermark.bound(p)), idle=p in set(r.idle_partitions))
                for p, t in sorted(r.partition_max_event_time.items())]
    assert len({p.batch_id for p in out}) < 300
    return tuple(out)


def _spark_whatifs(spark, settings: Settings, day: date) -> tuple:
    """The report's what-ifs as Spark computes them (audits.bound_whatif, .lateness_batches)."""
    from audits.bound_whatif import analyze_day, analyze_inputs
    from audits.bound_whatif_batches import analyze_day_batches, per_source_batches, whatif_of_day
    from audits.day_whatif import curve_line as _line
    from audits.day_whatif import exact_seconds as _seconds

    whatif = settings.whatif_config()
    analysis = analyze_day(spark, whatif, day)
    rec = analyze_inputs(spark, whatif, day)
    rec = rec if len(rec.bounds) > 1 else None
    ran = whatif_of_day(spark, whatif, day)
    by_source = () if rec is None else tuple(
        (name, _line(p)) for name, p in per_source_batches(spark, ran, day, rec)[0].items())
    return (tuple(_line(p) for p in analysis.points), _seconds(analysis.configured_bound),
            tuple(_line(p) for p in analyze_day_batches(spark, whatif, day).points),
            rec, by_source)


def _assert_context_is_sparks(spark, settings: Settings, run=None, day: date = DAY) -> None:
    """The DuckDB reads of reports/context.py equal Spark's figures on this warehouse: the gap
    series of ``run`` (when given), the histogram, the watermarks; and every what-if the audit
    records (audits/day_whatif.py, on DuckDB) is Spark's, and for ``run`` the rows the report
    reads back are exactly what it computes."""
    from audits.day_whatif import day_whatif
    from reports import context as c
    from reports.db.repository import ReportDB

    reads = c._Reads(settings.warehouse_path)
    rules, whatif = settings.event_time_rules(), settings.whatif_config()
    pairs = [(c._histogram(reads, day), _spark_histogram(spark, settings.warehouse_path, day)),
             (c._watermarks(reads, rules, day),
              _spark_watermarks(spark, settings.warehouse_path, rules, day))]
    if run is not None:
        pairs.append((c._gap_series(reads, day, run, rules.windows.step, 3),
                      _spark_gap(spark, settings, run, day)))
    ours = day_whatif(whatif, day)
    duck = (ours.curve, ours.configured_bound_seconds, ours.batch_curve, ours.per_source,
            ours.per_source_batches)
    pairs.append((duck, _spark_whatifs(spark, settings, day)))
    if run is not None:  # what the report reads is what the audit recorded, to the bit
        recorded = ReportDB.from_settings(settings).audit_whatif(run.run_id)
        assert recorded == ours and repr(recorded) == repr(ours)
    for ours, sparks in pairs:
        assert ours and ours == sparks and repr(ours) == repr(sparks)


def test_the_duckdb_context_equals_sparks_with_an_idle_partition_and_a_late_event(
        spark, streamed_scenario):
    """Two partitions, one idle for a while, a late event: the watermark series has idle
    points and the histogram a late row; DuckDB's figures are Spark's."""
    from tests.scenarios import SCENARIOS

    case = next(c for c in SCENARIOS if c.name.startswith("partition 1 goes idle"))
    _assert_context_is_sparks(spark, streamed_scenario(case.name))


# ------------------------------------------------ a report renders where Spark cannot be imported

#: A ``sitecustomize`` that makes pyspark, delta and py4j unimportable in the one process whose
#: PYTHONPATH names its folder: any import of them on the render path fails loudly there.
_NO_SPARK_SITE = '''
import sys


class _NoSpark:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("pyspark", "delta", "py4j"):
            raise ImportError(f"{name} is unimportable in this process (no-Spark render)")
        return None


sys.meta_path.insert(0, _NoSpark())
'''

#: Builds the day's context and renders every section, as ``reckon report`` does, then says
#: which Spark-ish modules got imported (none may be).
_RENDER_WITHOUT_SPARK = '''
import sys
from datetime import date

from app.settings import load_settings
from reports.context import build_context
from reports.db.repository import ReportDB
from reports.render import publish_report
from storage.spec_log import settings_for

warehouse, day, out = sys.argv[1], date.fromisoformat(sys.argv[2]), sys.argv[3]
config = settings_for(load_settings(env={}, warehouse=warehouse), "report").report_config()
publish_report(ReportDB.from_settings(config), build_context(config, day), out,
               config.required_approvers)
loaded = sorted(m for m in sys.modules if m.partition(".")[0] in ("pyspark", "delta", "py4j"))
print("spark modules:", loaded)
'''


def _without_spark(tmp_path: Path, *argv: str, code: str | None = None
                   ) -> subprocess.CompletedProcess[str]:
    """``code`` (default: the render above), or the ``reckon`` command with ``argv``, in a
    process where pyspark, delta and py4j cannot be imported."""
    import os
    import sys

    site = tmp_path / "no-spark-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_NO_SPARK_SITE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    root = Path(__file__).resolve().parent.parent
    command = [sys.executable, "-c", code or _RENDER_WITHOUT_SPARK, *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False,
                          cwd=tmp_path, env={**env, "PYTHONPATH": f"{site}{os.pathsep}{root}"})


def test_the_report_renders_every_section_without_pyspark_with_the_same_bytes(
        spark, replayed_worked_example, tmp_path):
    """Audit the worked example (its what-ifs recorded with the run), render it as usual, then
    render it again in a process where pyspark, delta and py4j are unimportable: every file
    of every section (HTML, PDF, CSV) has the same bytes, and no Spark module was imported.
    The what-if sections read the recorded rows: nothing on their path needs Spark."""
    from audits.audit import audit_day
    from reports.db.repository import audit_recorder
    from reports.render import render_day
    from tests.streamkit import copy_warehouse

    warehouse = copy_warehouse(replayed_worked_example, tmp_path)
    settings = _worked_settings(warehouse)
    audit_day(spark, settings.audit_config(), DAY, kind="nightly",
              recorder=audit_recorder(settings))
    result = render_day(settings.report_config(), DAY)
    before = {p.name: p.read_bytes() for p in Path(result.out_dir).iterdir() if p.is_file()}
    assert {"report.html", "report.pdf", "lateness_curve.csv", "bounds_per_source.csv"} <= set(
        before)
    probe = _without_spark(tmp_path, str(warehouse), DAY.isoformat(), result.out_dir)
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert "spark modules: []" in probe.stdout
    after = {p.name: p.read_bytes() for p in Path(result.out_dir).iterdir() if p.is_file()}
    assert after == before
    assert _curve_csv(result.out_dir)  # the recorded what-if is there, not the missing line


def test_reckon_report_runs_without_pyspark(spark, replayed_worked_example, tmp_path):
    """The whole ``reckon report`` command where pyspark cannot be imported: the layout check
    reads each table's columns from its Delta log against storage/layout.py, the context and
    the drawing import no engine, so a report needs no pyspark at all."""
    from audits.audit import audit_day
    from reports.db.repository import audit_recorder
    from tests.streamkit import copy_warehouse

    warehouse = copy_warehouse(replayed_worked_example, tmp_path)
    settings = _worked_settings(warehouse)
    audit_day(spark, settings.audit_config(), DAY, kind="nightly",
              recorder=audit_recorder(settings))
    cli = ("import sys\nfrom app.cli import main\n"
           "sys.exit(main(['report', *sys.argv[1:]]))")
    probe = _without_spark(tmp_path, "--warehouse", str(warehouse), "--date", DAY.isoformat(),
                           "--out", str(tmp_path / "out"), code=cli)
    assert probe.returncode == 0, probe.stderr[-2000:]


def test_a_run_recorded_without_its_what_ifs_says_so_and_renders_the_rest(tmp_path):
    """A run recorded before the what-ifs were recorded with it: both what-if sections show
    the one line naming the re-audit, summary.csv carries it, the other sections render."""
    ctx = dataclasses.replace(_ctx(), lateness_curve=(), lateness_curve_batches=(),
                              per_source=None, per_source_batches=(),
                              configured_bound_seconds=None, recommended_bound_seconds=None,
                              whatif_note=whatif_note(DAY))
    result = render_context(ctx, tmp_path / "out")
    html = Path(result.html_path).read_text()
    line = "Not recorded with this audit run; re-run `reckon audit --date 2026-01-01` to record it."
    assert html.count(line.replace("`", "&#96;")) + html.count(line) == 2
    summary = list(csv.reader(io.StringIO((Path(result.out_dir) / "summary.csv").read_text())))
    assert ["", "lateness_curves_note", line] in summary
    assert _curve_csv(result.out_dir) == []
    assert "Lateness distribution" in html and "Watermark progress" in html
