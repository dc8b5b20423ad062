"""The day's report: rendered from a typed context (no Spark), it opens in a real headless
Chromium, its PDF renders with poppler and carries the headline figures, and its CSVs are
byte-identical on a re-run. One Spark test renders a real warehouse (stream + replay + audit)."""

from __future__ import annotations

import csv
import dataclasses
import re
import shutil
import subprocess
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from html import unescape
from pathlib import Path

import pytest

from reckon.reconcile import ReconStatus
from reports.context import (
    BreakLine,
    CurveLine,
    GapPoint,
    Headline,
    HistogramBucket,
    QualitySummary,
    ReportContext,
    WatermarkPoint,
)
from reports.records import AttributionRow
from reports.render import render_context

DAY = date(2026, 1, 1)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
D = Decimal


def _ctx(breaks: int = 3, cap: int = 200) -> ReportContext:
    lines = tuple(BreakLine(
        T0 + timedelta(seconds=10 * i), T0 + timedelta(seconds=10 * i + 10), f"merchant-{i % 4}",
        ReconStatus.UNEXPLAINED.value if i == 1 else ReconStatus.EXPLAINED.value,
        D("100.00"), D("112.50"), D("12.50"), 1, D("12.50") if i != 1 else D("0.00"),
        D("0.00"), D("0.00") if i != 1 else D("12.50"),
        "late events" if i != 1 else "nothing explains it", "open", i % 3)
        for i in range(breaks))
    return ReportContext(
        day=DAY, audit_run_id="audit-2026-01-01-abc123", audit_kind="nightly",
        audit_started_at=datetime(2026, 1, 2, 3, 0, 0, tzinfo=UTC), reconciler="ops-bot",
        configuration=(("grace", "0s"), ("lateness", "3s"), ("tolerance_abs", "0.00"),
                       ("window", "10s")),
        table_versions=(("canonical_totals", 4), ("provisional_totals", 57)),
        headline=Headline(rows=1234, provisional_total=D("1234567.89"),
                          canonical_total=D("1234605.39"), gap_total=D("37.50"),
                          late_total=D("25.00"), duplicate_total=D("0.00"),
                          residual_total=D("12.50"), unexplained_amount=D("12.50"),
                          unexplained_count=1, completeness=D("0.998765")),
        status_counts=(("MATCHED", 1231), ("EXPLAINED", 2), ("UNEXPLAINED", 1),
                       ("MISSING_IN_STREAM", 0), ("MISSING_IN_CANONICAL", 0)),
        breaks=lines[:cap], breaks_total=len(lines), all_breaks=lines, breaks_cap=cap,
        attribution=(
            AttributionRow("partition", "0", 1, D("12.50"), 600, D("0.5"), D("0.486"),
                           D("1.03")),
            AttributionRow("partition", "3", 1, D("12.50"), 34, D("0.5"), D("0.028"),
                           D("17.86")),
            AttributionRow("source", "pos", 2, D("25.00"), 900, D("1"), D("0.73"), D("1.37"))),
        gap_series=tuple(GapPoint(T0 + timedelta(minutes=10 * i), 60, D("1000.00"),
                                  D("1000.00") + (D("12.50") if i in (2, 5) else 0),
                                  D("12.50") if i in (2, 5) else D("0.00"),
                                  D("12.50") if i == 2 else D("0.00"),
                                  D("12.50") if i == 5 else D("0.00"), int(i == 5))
                         for i in range(12)),
        gap_bucket_seconds=600,
        lateness_histogram=tuple(HistogramBucket(lo, hi, n, late) for lo, hi, n, late in (
            (0, 1, 1100, 0), (1, 2, 90, 0), (2, 5, 30, 1), (5, 10, 10, 1), (10, 30, 4, 0),
            (30, 60, 0, 0), (60, 300, 0, 0), (300, None, 0, 0))),
        lateness_curve=tuple(CurveLine(D(b), c, a, d, lat) for b, c, a, d, lat in (
            ("0", 0.91, 1120, 114, 0.1), ("1", 0.985, 1215, 19, 1.1), ("3", 0.998765, 1232, 2, 3.1),
            ("5", 0.9992, 1233, 1, 5.1), ("10", 1.0, 1234, 0, 10.1))),
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


def test_headline_section_snapshot(tmp_path):
    result = render_context(_ctx(), tmp_path / "r")
    html = Path(result.html_path).read_text()
    figures = re.findall(r'data-name="([a-z_]+)"><div class="label">([^<]+)</div>'
                         r'<div class="value">([^<]+)</div>', _headline_section(html))
    assert figures == [
        ("provisional_total", "Provisional total (stream)", "1,234,567.89"),
        ("canonical_total", "Canonical total (replay)", "1,234,605.39"),
        ("gap_total", "Gap", "37.50"),
        ("late_total", "Explained by late events", "25.00"),
        ("duplicate_total", "Explained by duplicates", "0.00"),
        ("unexplained", "Unexplained", "12.50 in 1 row"),
        ("completeness", "Completeness", "0.998765"),
        ("rows", "Rows reconciled", "1234"),
    ]
    assert '<span class="verdict bad" id="verdict">1 unexplained break</span>' in html
    # with a tolerance, EXPLAINED rows may keep residuals: shown, so that the figures add up
    tolerant = dataclasses.replace(_ctx(), headline=dataclasses.replace(
        _ctx().headline, residual_total=D("12.53")))
    html_t = Path(render_context(tolerant, tmp_path / "t").html_path).read_text()
    assert re.findall(r'data-name="([a-z_]+)"><div class="label">([^<]+)</div>'
                      r'<div class="value">([^<]+)</div>', _headline_section(html_t))[5:7] == [
        ("unexplained", "Unexplained", "12.50 in 1 row"),
        ("tolerated_residual", "Residual within tolerance", "0.03")]
    assert "tolerated_residual,0.03\n" in (tmp_path / "t" / "summary.csv").read_text()
    # reviewers' order: configuration, counts, breaks, then the rest
    order = [html.index(f'<section id="{s}">') for s in
             ("headline", "configuration", "counts", "breaks", "gap", "attribution",
              "lateness", "watermark", "quality", "files")]
    assert order == sorted(order)
    # self-contained: nothing loaded from elsewhere
    assert "<script" not in html and not re.search(r'(src|href)="https?:|url\(https?:', html)
    assert html.count("<svg") == 4 and "<link" not in html


def test_breaks_are_capped_with_the_total_shown_and_csv_has_all(tmp_path):
    result = render_context(_ctx(breaks=7, cap=5), tmp_path / "r")
    html = Path(result.html_path).read_text()
    assert "Showing 5 of 7 breaks" in html and "breaks.csv" in html
    section = re.search(r'<section id="breaks">(.*?)</section>', html, re.S).group(1)
    assert section.count("<tr><td>") == 5
    with open(Path(result.out_dir) / "breaks.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 7
    assert rows[1]["status"] == "UNEXPLAINED" and rows[1]["residual_amount"] == "12.50"
    assert rows[0]["window_start"] == "2026-01-01T00:00:00Z"


def test_csvs_and_html_are_byte_identical_on_a_rerun(tmp_path):
    first = render_context(_ctx(), tmp_path / "a")
    second = render_context(_ctx(), tmp_path / "b")
    names = sorted(Path(p).name for p in first.csv_paths)
    assert names == ["attribution.csv", "breaks.csv", "configuration.csv", "gap_by_window.csv",
                     "lateness_curve.csv", "lateness_histogram.csv", "status_counts.csv",
                     "summary.csv", "watermark_progress.csv"]
    for a, b in zip(first.csv_paths, second.csv_paths, strict=True):
        assert Path(a).read_bytes() == Path(b).read_bytes(), a
    assert Path(first.html_path).read_bytes() == Path(second.html_path).read_bytes()
    assert first.sha256 == second.sha256
    again = render_context(_ctx(), tmp_path / "a")  # in place: same bytes, same hash
    assert again.sha256 == first.sha256
    summary = (Path(first.out_dir) / "summary.csv").read_text()
    assert "provisional_total,1234567.89\n" in summary and "completeness,0.998765\n" in summary
    curve = (Path(first.out_dir) / "lateness_curve.csv").read_text().splitlines()
    assert curve[0] == ("bound_seconds,completeness,admitted,dropped,avg_emit_latency_seconds,"
                        "configured,recommended")
    assert curve[3] == "3,0.998765,1232,2,3.1,true,false"


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (scripts/setup.sh --test-services installs it)")
    return path


def _png_stats(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct colours in a coarse sample) of a PNG."""
    from matplotlib import image

    img = image.imread(str(path))
    h, w = img.shape[:2]
    sample = img[:: max(1, h // 200), :: max(1, w // 200), :3].reshape(-1, 3)
    return w, h, len({tuple((px * 15).round().astype(int)) for px in sample})


def test_html_opens_in_headless_chromium(tmp_path):
    chromium = _need("chromium")
    result = render_context(_ctx(), tmp_path / "r")
    shot = tmp_path / "report.png"
    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--screenshot={shot}", "--window-size=1280,2000",
         Path(result.html_path).as_uri()],
        capture_output=True, text=True, timeout=180)
    assert shot.is_file(), proc.stderr[-2000:]
    width, height, colours = _png_stats(shot)
    assert (width, height) == (1280, 2000)
    assert shot.stat().st_size > 50_000 and colours > 20  # text, tables and charts: not blank
    shutil.copy(shot, Path(result.out_dir) / "screenshot.png")
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          Path(result.html_path).as_uri()],
                         capture_output=True, text=True, timeout=180).stdout
    assert "1,234,567.89" in dom and "1,234,605.39" in dom


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
    for figure in ("1,234,567.89", "1,234,605.39", "37.50", "25.00", "12.50 in 1 row",
                   "0.998765", "1 unexplained break", "audit-2026-01-01-abc123",
                   "UNEXPLAINED"):
        assert figure in text, figure


# ----------------------------------------------------------------------------- Spark tier


def test_render_day_from_a_real_warehouse(spark, streamed_scenario, tmp_path):
    """Stream the worked example (grace 0: two late events), replay, audit, then render the
    day: the report shows the audit's figures and is recorded with its HTML's SHA-256."""
    import hashlib

    from audits.audit import audit_day
    from reports.db import ReportDB
    from reports.render import render_day
    from spark.replay import replay_day
    from tests.scenarios import SCENARIOS
    from tests.streamkit import copy_warehouse, stream_settings

    case = next(c for c in SCENARIOS if c.name == "worked example, grace 0")
    streamed = streamed_scenario(case.name).warehouse_path
    warehouse = copy_warehouse(streamed, tmp_path)  # replay, audit and render write to it
    settings = stream_settings(warehouse, **case.rules)
    replay_day(spark, settings, DAY)
    audit = audit_day(spark, settings, DAY, kind="nightly")

    result = render_day(spark, settings, DAY)
    assert Path(result.out_dir) == warehouse.resolve() / "reports" / "2026-01-01"
    html = Path(result.html_path).read_text()
    head = _headline_section(html)
    assert f">{audit.provisional_total}<" in head and f">{audit.canonical_total}<" in head
    assert audit.gap_total == "2.00" and audit.late_total == "2.00"
    assert ">2.00<" in head
    rec = ReportDB.from_settings(settings).current_report(DAY)
    assert rec is not None and rec.sha256 == result.sha256
    assert rec.sha256 == hashlib.sha256(Path(result.html_path).read_bytes()).hexdigest()
    hist = (Path(result.out_dir) / "lateness_histogram.csv").read_text().splitlines()
    late_total = sum(int(line.split(",")[3]) for line in hist[1:])
    assert late_total == 2
    before = {p: Path(p).read_bytes() for p in result.csv_paths}
    again = render_day(spark, settings, DAY)
    assert again.sha256 == result.sha256
    assert all(Path(p).read_bytes() == data for p, data in before.items())


def test_watermark_series_runs_until_the_batch_that_closed_the_day(spark, tmp_path):
    """The report's watermark chart shows the day's batches up to the first whose watermark
    passed the end of the day's last window plus grace (hopping 10 s every 5 s, grace 2 s:
    the last window ends 00:00:05, so the day closes at 00:00:07), and nothing after it."""
    from reckon.config import load_settings
    from reports.context import _watermarks
    from tests.test_progress import _append_progress

    wh = tmp_path / "wh"
    settings = load_settings(env={}, warehouse=str(wh), window="10s", slide="5s", grace="2s",
                             shuffle_partitions=2)
    midnight = T0 + timedelta(days=1)
    marks = [T0 - timedelta(seconds=1), midnight - timedelta(seconds=10),
             midnight + timedelta(seconds=3), midnight + timedelta(seconds=8),
             midnight + timedelta(seconds=20)]
    for batch_id, mark in enumerate(marks):
        _append_progress(spark, wh, batch_id, mark)
    series = _watermarks(spark, settings, DAY, lateness_us=0)
    assert sorted({p.batch_id for p in series if p.partition is None}) == [1, 2, 3]


def test_a_failed_breaks_insert_leaves_the_previous_audit_current(spark, streamed_scenario,
                                                                  tmp_path):
    """A run becomes current only once its breaks are stored: when the report database
    refuses them (a trigger aborts every insert, as a full disk would), the audit fails and the
    day's current run is still the previous one, with its breaks listed."""
    import sqlite3

    from audits.audit import audit_day
    from reports.db import ReportDB
    from spark.replay import replay_day
    from tests.scenarios import SCENARIOS
    from tests.streamkit import copy_warehouse, stream_settings

    case = next(c for c in SCENARIOS if c.name == "worked example, grace 0")
    warehouse = copy_warehouse(streamed_scenario(case.name).warehouse_path, tmp_path)
    settings = stream_settings(warehouse, **case.rules)
    replay_day(spark, settings, DAY)
    first = audit_day(spark, settings, DAY, kind="nightly")
    assert first.breaks_recorded > 0  # the two late events' windows
    db = ReportDB.from_settings(settings)
    with sqlite3.connect(settings.report_db.removeprefix("sqlite:///")) as conn:
        conn.execute("CREATE TRIGGER refuse_breaks BEFORE INSERT ON breaks "
                     "BEGIN SELECT RAISE(ABORT, 'no space left for breaks'); END")
    with pytest.raises(Exception, match="no space left for breaks"):
        audit_day(spark, settings, DAY, kind="nightly")
    current = db.current_audit_run(DAY)
    assert current is not None and current.run_id == first.run_id
    assert len(db.audit_runs(DAY)) == 1
    assert len(db.breaks(first.run_id)) == first.breaks_recorded


def test_the_report_refuses_rows_another_audit_run_replaced(spark, streamed_scenario, tmp_path):
    """An ad hoc audit of the day replaces the day's reconciliation rows while the nightly run
    stays current: the nightly report would take its headline from one run and its
    unexplained amount and gap chart from the other, so it refuses and names the re-run."""
    from audits.audit import audit_day
    from reckon.errors import UsageError
    from reports.context import build_context
    from spark.replay import replay_day
    from tests.scenarios import SCENARIOS
    from tests.streamkit import copy_warehouse, stream_settings

    case = next(c for c in SCENARIOS if c.name == "worked example, grace 0")
    warehouse = copy_warehouse(streamed_scenario(case.name).warehouse_path, tmp_path)
    settings = stream_settings(warehouse, **case.rules)
    replay_day(spark, settings, DAY)
    nightly = audit_day(spark, settings, DAY, kind="nightly")
    assert build_context(spark, settings, DAY).audit_run_id == nightly.run_id
    adhoc = audit_day(spark, settings, DAY, kind="adhoc")
    with pytest.raises(UsageError) as err:
        build_context(spark, settings, DAY)
    message = str(err.value)
    assert adhoc.run_id in message and nightly.run_id in message
    assert "reckon audit --date 2026-01-01 --kind nightly" in message
    again = audit_day(spark, settings, DAY, kind="nightly")
    assert build_context(spark, settings, DAY).audit_run_id == again.run_id


def test_the_report_says_whether_the_day_is_signed_off_and_when_a_re_audit_undid_it(tmp_path):
    from reports.context import Signoff

    def signoff_line(ctx: ReportContext) -> str:
        result = render_context(ctx, tmp_path / str(len(list(tmp_path.iterdir()))))
        html = Path(result.html_path).read_text()
        found = re.search(r'<p class="signoff[^"]*" id="signoff">([^<]*)</p>', html)
        assert found is not None
        return unescape(found.group(1))

    ctx = _ctx()
    assert signoff_line(ctx) == "Sign-off: Not signed off yet."
    at = datetime(2026, 1, 2, 9, 30, tzinfo=UTC)
    signed = dataclasses.replace(ctx, signoffs=(
        Signoff(ctx.audit_run_id, "approved", "bob", at, D("37.50"), 1),))
    assert signoff_line(signed) == "Sign-off: Approved by bob at 2026-01-02T09:30:00Z."
    unchanged = dataclasses.replace(ctx, superseded_signoff=Signoff(
        "audit-old", "approved", "bob", at, D("37.50"), 1))
    assert signoff_line(unchanged) == (
        "Sign-off: Run audit-old of this day was approved by bob at 2026-01-02T09:30:00Z; this "
        "audit replaced it (the gap and the unexplained count are unchanged): the day needs a "
        "new sign-off.")
    changed = dataclasses.replace(ctx, superseded_signoff=Signoff(
        "audit-old", "accepted", "bob", at, D("30.00"), 0))
    assert "(gap 30.00 -> 37.50, unexplained breaks 0 -> 1)" in signoff_line(changed)


def test_a_signed_off_report_is_kept_when_a_re_audit_renders_into_its_folder(tmp_path):
    """After a sign-off, any new rendering into the folder (of the same run, whose report now
    says "Approved by ...", or of the run that replaced it) first copies the signed bytes to
    signed/<run>/, recorded there with their hash, once."""
    from dataclasses import replace

    from reports.db import ReportDB
    from reports.records import ReportRecord
    from reports.render import keep_signed_report
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
        db.append_signoff(signed_ctx.audit_run_id, "bob", "approved", "ties out")
        kept = keep_signed_report(db, folder, signed_ctx.audit_run_id)  # its own re-render
        assert kept == folder / "signed" / signed_ctx.audit_run_id
        assert (kept / "report.html").read_bytes() == signed_bytes
        assert sorted(p.name for p in kept.iterdir()) == sorted(
            ["report.html", "report.pdf", *(Path(p).name for p in first.csv_paths)])
        assert (folder / "report.html").is_file()  # the run's own files are rewritten in place
        moved = db.report_at(str(kept / "report.html"))
        assert moved is not None and moved.sha256 == first.sha256
        assert moved.audit_run_id == signed_ctx.audit_run_id
        assert all(Path(p).parent == kept for p in moved.csv_paths)
        assert keep_signed_report(db, folder, signed_ctx.audit_run_id) is None  # kept once
        assert keep_signed_report(db, folder, "audit-new") is None
        render_context(replace(signed_ctx, audit_run_id="audit-new"), folder)
        assert (kept / "report.html").read_bytes() == signed_bytes  # untouched by the new one
