"""Render a day's reconciliation report: one HTML file, a PDF of the same content, and CSVs.

``render_day`` builds the typed context (reports/context.py: the only step that reads Spark and
the report database), then ``render_context`` writes, into ``<warehouse>/reports/<day>/`` by
default:

- ``report.html``: self-contained (CSS inline, charts as inline SVG), rendered from the Jinja2
  template over the context; no rendering timestamp, only the audit run's own time, so the same
  inputs give the same bytes (its SHA-256 goes into the report database);
- ``report.pdf``: fpdf2, the same sections (headline, tables, charts as PNG images);
- one CSV per table shown (``summary.csv``, ``status_counts.csv``, ``breaks.csv`` with every
  break, ``attribution.csv``, ``gap_by_window.csv``, ``lateness_histogram.csv``,
  ``lateness_curve.csv``, ``watermark_progress.csv``, ``configuration.csv``): exact decimal
  text, stable order, ``\\n`` line ends: byte-identical on a re-run.

Files are written to a temporary name and renamed, so a re-run replaces them atomically.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from reckon.config import Settings
from reckon.timeutil import format_micros, parse_date, to_micros
from reports.charts import Chart, render_charts
from reports.context import ReportContext, build_context

__all__ = ["ReportResult", "cmd_report", "keep_signed_report", "render_context", "render_day",
           "signoff_text", "write_csvs"]

TEMPLATES = Path(__file__).resolve().parent / "templates"


@dataclass(frozen=True)
class ReportResult:
    day: date
    audit_run_id: str
    out_dir: str
    html_path: str
    pdf_path: str
    csv_paths: tuple[str, ...]
    sha256: str                      # of report.html

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["day"] = self.day.isoformat()
        d["csv_paths"] = list(self.csv_paths)
        return d


# ----------------------------------------------------------------------------- formatting


def _ts(value: datetime | None) -> str:
    return "-" if value is None else format_micros(to_micros(value))


def _hms(value: datetime | None) -> str:
    return "-" if value is None else _ts(value)[11:]


def _money(value: Decimal | None) -> str:
    """Exact, two decimals, thousands separated: 1234.5 -> '1,234.50'."""
    return "-" if value is None else f"{Decimal(value).quantize(Decimal('0.01')):,f}"


def _text(value: Any) -> str:
    """CSV cell: exact Decimal text, ISO-8601 Z times, empty for null."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return _ts(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


@dataclass(frozen=True)
class _Figure:
    name: str
    label: str
    value: str
    bad: bool = False


def signoff_text(ctx: ReportContext) -> str:
    """The day's sign-off state in one sentence (HTML and PDF): the decisions on this run, or
    that a run someone signed off was replaced by this one and what changed."""
    prior = ctx.superseded_signoff
    if prior is not None:
        h = ctx.headline
        if (prior.gap_total, prior.unexplained) == (h.gap_total, h.unexplained_count):
            change = "the gap and the unexplained count are unchanged"
        else:
            change = (f"gap {_money(prior.gap_total)} -> {_money(h.gap_total)}, unexplained "
                      f"breaks {prior.unexplained} -> {h.unexplained_count}")
        return (f"Run {prior.run_id} of this day was {prior.decision} by {prior.by} at "
                f"{_ts(prior.at)}; this audit replaced it ({change}): the day needs a new "
                "sign-off.")
    if not ctx.signoffs:
        return "Not signed off yet."
    return "; ".join(f"{e.decision.capitalize()} by {e.by} at {_ts(e.at)}"
                     for e in ctx.signoffs) + "."


def _headline(ctx: ReportContext) -> list[_Figure]:
    h = ctx.headline
    # residuals that a tolerance let pass on EXPLAINED rows: shown so that the figures add up
    # (gap = late - duplicates + unexplained + this); none with the default tolerance of 0
    tolerated = h.residual_total - h.unexplained_amount
    figures = [
        _Figure("provisional_total", "Provisional total (stream)", _money(h.provisional_total)),
        _Figure("canonical_total", "Canonical total (replay)", _money(h.canonical_total)),
        _Figure("gap_total", "Gap", _money(h.gap_total)),
        _Figure("late_total", "Explained by late events", _money(h.late_total)),
        _Figure("duplicate_total", "Explained by duplicates", _money(h.duplicate_total)),
        _Figure("unexplained", "Unexplained",
                f"{_money(h.unexplained_amount)} in {h.unexplained_count} "
                f"row{'' if h.unexplained_count == 1 else 's'}",
                bad=h.unexplained_count > 0),
        _Figure("completeness", "Completeness",
                "-" if h.completeness is None else f"{h.completeness}"),
        _Figure("rows", "Rows reconciled", str(h.rows)),
    ]
    if tolerated:
        figures.insert(6, _Figure("tolerated_residual", "Residual within tolerance",
                                  _money(tolerated)))
    return figures


# ----------------------------------------------------------------------------- CSV


def _tables(ctx: ReportContext) -> list[tuple[str, Sequence[str], Iterable[Sequence[Any]]]]:
    h = ctx.headline
    return [
        ("summary.csv", ("figure", "value"), [
            ("day", ctx.day), ("audit_run_id", ctx.audit_run_id), ("audit_kind", ctx.audit_kind),
            ("audit_started_at", ctx.audit_started_at), ("rows", h.rows),
            ("provisional_total", h.provisional_total), ("canonical_total", h.canonical_total),
            ("gap_total", h.gap_total), ("late_total", h.late_total),
            ("duplicate_total", h.duplicate_total), ("residual_total", h.residual_total),
            ("unexplained_amount", h.unexplained_amount),
            ("unexplained_count", h.unexplained_count),
            ("tolerated_residual", h.residual_total - h.unexplained_amount),
            ("completeness", h.completeness),
            ("breaks_total", ctx.breaks_total)]),
        ("configuration.csv", ("setting", "value"),
         [*ctx.configuration, *((f"version:{k}", v) for k, v in ctx.table_versions)]),
        ("status_counts.csv", ("status", "rows"), ctx.status_counts),
        ("breaks.csv", ("window_start", "window_end", "key", "status", "provisional_amount",
                        "canonical_amount", "gap_amount", "gap_count", "late_amount",
                        "duplicate_amount", "residual_amount", "review_status", "age_days",
                        "explanation"),
         [(b.window_start, b.window_end, b.key, b.status, b.provisional_amount,
           b.canonical_amount, b.gap_amount, b.gap_count, b.late_amount, b.duplicate_amount,
           b.residual_amount, b.review_status, b.age_days, b.explanation)
          for b in (ctx.all_breaks or ctx.breaks)]),
        ("attribution.csv", ("dimension", "value", "late_events", "late_amount", "all_events",
                             "late_share", "event_share", "lift"),
         [(a.dimension, a.value, a.late_events, a.late_amount, a.all_events, a.late_share,
           a.event_share, a.lift) for a in ctx.attribution]),
        ("gap_by_window.csv", ("bucket_start", "bucket_seconds", "windows",
                               "provisional_amount", "canonical_amount", "gap_amount",
                               "late_amount", "residual_amount", "unexplained_rows"),
         [(p.bucket_start, ctx.gap_bucket_seconds, p.windows, p.provisional_amount,
           p.canonical_amount, p.gap_amount, p.late_amount, p.residual_amount, p.unexplained)
          for p in ctx.gap_series]),
        ("lateness_histogram.csv", ("from_seconds", "to_seconds", "events", "late_events"),
         [(b.lo_seconds, b.hi_seconds, b.events, b.late_events)
          for b in ctx.lateness_histogram]),
        ("lateness_curve.csv", ("bound_seconds", "completeness", "admitted", "dropped",
                                "avg_emit_latency_seconds", "configured", "recommended"),
         [(p.bound_seconds, p.completeness, p.admitted, p.dropped, p.avg_emit_latency,
           p.bound_seconds == ctx.configured_bound_seconds,
           p.bound_seconds == ctx.recommended_bound_seconds) for p in ctx.lateness_curve]),
        ("watermark_progress.csv", ("batch_id", "processed_at", "partition", "watermark"),
         [(w.batch_id, w.processed_at, "global" if w.partition is None else w.partition,
           w.watermark) for w in ctx.watermark_series]),
    ]


def _write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_csvs(ctx: ReportContext, out: Path) -> list[Path]:
    """One CSV per table of the report, in report order."""
    paths = []
    for name, header, rows in _tables(ctx):
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([_text(v) for v in row] for row in rows)
        path = out / name
        _write_bytes(path, buf.getvalue().encode("utf-8"))
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------- HTML


def render_html(ctx: ReportContext, charts: Sequence[Chart], csv_names: Sequence[str]) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)),
                      autoescape=select_autoescape(["html", "j2"]), undefined=StrictUndefined,
                      keep_trailing_newline=True)
    env.filters.update(ts=_ts, hms=_hms, money=_money,
                       fileurl=lambda p: Path(p).resolve().as_uri())
    return env.get_template("report.html.j2").render(
        ctx=ctx, h=ctx.headline, headline=_headline(ctx), signoff=signoff_text(ctx),
        charts={c.name: c for c in charts}, csv_names=list(csv_names))


# ----------------------------------------------------------------------------- PDF


def _font_path() -> str:
    import matplotlib

    return str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")


def render_pdf(ctx: ReportContext, charts: Sequence[Chart], path: Path) -> None:
    """The report's content as a PDF: headline, configuration, counts, breaks (same cap),
    attribution, the lateness curve table, and the charts as images."""
    from fpdf import FPDF
    from fpdf.fonts import FontFace

    pdf = FPDF(orientation="P", unit="mm", format="A4")
    pdf.set_creation_date(ctx.audit_started_at.astimezone(UTC))
    pdf.set_title(f"Reconciliation report {ctx.day.isoformat()}")
    pdf.set_author(ctx.reconciler)
    pdf.add_font("DejaVu", "", _font_path())
    pdf.add_font("DejaVu", "B", _font_path().replace("DejaVuSans.ttf", "DejaVuSans-Bold.ttf"))
    pdf.set_auto_page_break(True, margin=12)
    pdf.add_page()
    head = FontFace(emphasis="BOLD", fill_color=(236, 240, 244))

    def heading(text: str) -> None:
        pdf.ln(3)
        pdf.set_font("DejaVu", "B", 12)
        pdf.cell(0, 7, text, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("DejaVu", "", 8)

    def table(header: Sequence[str], rows: Iterable[Sequence[Any]],
              widths: Sequence[int] | None = None, size: float = 8) -> None:
        pdf.set_font("DejaVu", "", size)
        with pdf.table(col_widths=widths, headings_style=head, line_height=size * 0.55,
                       text_align="LEFT", first_row_as_headings=True) as t:
            t.row(list(header))
            for r in rows:
                t.row([str(v) for v in r])

    pdf.set_font("DejaVu", "B", 16)
    pdf.cell(0, 9, f"Reconciliation report - {ctx.day.isoformat()}", new_x="LMARGIN",
             new_y="NEXT")
    pdf.set_font("DejaVu", "", 8)
    pdf.multi_cell(0, 4, f"Audit run {ctx.audit_run_id} ({ctx.audit_kind}), started "
                         f"{_ts(ctx.audit_started_at)} by {ctx.reconciler}",
                   new_x="LMARGIN", new_y="NEXT")
    n = ctx.headline.unexplained_count
    pdf.set_font("DejaVu", "B", 10)
    pdf.set_text_color(*((46, 125, 50) if n == 0 else (179, 38, 30)))
    pdf.cell(0, 6, "No unexplained breaks" if n == 0 else
             f"{n} unexplained break{'s' if n != 1 else ''}", new_x="LMARGIN", new_y="NEXT")
    pdf.set_text_color(*((179, 38, 30) if ctx.superseded_signoff else (0, 0, 0)))
    pdf.set_font("DejaVu", "", 8)
    pdf.multi_cell(0, 4, "Sign-off: " + signoff_text(ctx), new_x="LMARGIN", new_y="NEXT")
    pdf.set_text_color(0, 0, 0)

    heading("Headline")
    table(("figure", "value"), [(f.label, f.value) for f in _headline(ctx)], (70, 110), 9)
    heading("Configuration")
    table(("setting", "value"), ctx.configuration, (60, 120))
    table(("Delta table", "version read"), ctx.table_versions, (60, 120))
    heading("Row counts and statuses")
    table(("status", "rows"), [("(window, key) rows", ctx.headline.rows), *ctx.status_counts],
          (60, 120))
    heading(f"Breaks ({ctx.breaks_shown} of {ctx.breaks_total} shown; all in breaks.csv)")
    if ctx.breaks:
        table(("window (UTC)", "key", "provisional", "canonical", "gap", "late", "residual",
               "status", "review", "age"),
              [(f"{_ts(b.window_start)}", b.key, _money(b.provisional_amount),
                _money(b.canonical_amount), _money(b.gap_amount), _money(b.late_amount),
                _money(b.residual_amount), b.status, b.review_status,
                "-" if b.age_days is None else b.age_days) for b in ctx.breaks],
              (34, 20, 18, 18, 16, 16, 16, 24, 14, 10), 6.5)
    heading("Who is late")
    if ctx.attribution:
        table(("dimension", "value", "late", "late amount", "all", "late share", "event share",
               "lift"),
              [(a.dimension, a.value, a.late_events, _money(a.late_amount), a.all_events,
                a.late_share, a.event_share, "-" if a.lift is None else a.lift)
               for a in ctx.attribution], size=7)
    if ctx.lateness_curve:
        heading("Lateness what-if")
        pdf.multi_cell(0, 4, f"Configured bound L = {ctx.configured_bound_seconds} s; recommended "
                             f"{ctx.recommended_bound_seconds if ctx.recommended_bound_seconds is not None else 'none'}"
                             f" s for target completeness {ctx.target_completeness}.",
                       new_x="LMARGIN", new_y="NEXT")
        table(("bound L (s)", "completeness", "counted", "dropped", "avg emit latency (s)"),
              [(p.bound_seconds, f"{p.completeness:.6f}", p.admitted, p.dropped,
                "-" if p.avg_emit_latency is None else f"{p.avg_emit_latency:.3f}")
               for p in ctx.lateness_curve])
    for chart in charts:
        if pdf.get_y() + 85 > pdf.h - pdf.b_margin:  # keep a chart with its heading
            pdf.add_page()
        heading(chart.title)
        pdf.image(io.BytesIO(chart.png), w=180)
    heading("Data quality")
    q = ctx.quality
    pdf.multi_cell(0, 4, "No data-quality check run for this day." if q is None else
                   f"Check run {q.run_id}: {'passed' if q.success else 'FAILED'}, "
                   f"{q.blocking_failures} blocking failure(s), {q.warnings} warning(s) over "
                   f"{q.expectations} expectations in {q.suites} suites."
                   + (f" Data Docs: {ctx.data_docs}" if ctx.data_docs else ""),
                   new_x="LMARGIN", new_y="NEXT")
    _write_bytes(path, bytes(pdf.output()))


# ----------------------------------------------------------------------------- entry points


def render_context(ctx: ReportContext, out: str | Path) -> ReportResult:
    """Write the report files for ``ctx`` into ``out`` (created if needed). No Spark, no DB."""
    folder = Path(out).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    csvs = write_csvs(ctx, folder)
    charts = render_charts(ctx)
    html = render_html(ctx, charts, [p.name for p in csvs]).encode("utf-8")
    html_path, pdf_path = folder / "report.html", folder / "report.pdf"
    _write_bytes(html_path, html)
    render_pdf(ctx, charts, pdf_path)
    return ReportResult(ctx.day, ctx.audit_run_id, str(folder), str(html_path), str(pdf_path),
                        tuple(str(p) for p in csvs), hashlib.sha256(html).hexdigest())


def keep_signed_report(db: Any, out: str | Path, run_id: str) -> Path | None:
    """Before ``run_id``'s report is rendered into ``out``: if the report there belongs to a
    run that was signed off (another run, or this one: a re-render after the sign-off says
    "Approved by ..." and so has other bytes), copy its files to ``out/signed/<run>/`` and
    record them there (same SHA-256), once per run, so a signed report is never lost. Copied
    and recorded before the working files go, so a crash leaves a duplicate, never a gap.
    Returns the new folder, or None when nothing needed keeping."""
    import shutil
    from dataclasses import replace

    folder = Path(out).expanduser().resolve()
    html = folder / "report.html"
    previous = db.report_at(str(html)) if html.is_file() else None
    if previous is None or not db.is_signed_off(previous.audit_run_id):
        return None
    dest = folder / "signed" / previous.audit_run_id
    if dest.exists() or hashlib.sha256(html.read_bytes()).hexdigest() != previous.sha256:
        return None  # kept already, or not the bytes that were recorded (and signed)
    dest.mkdir(parents=True)
    sources = [Path(p) for p in (previous.html_path, previous.pdf_path, *previous.csv_paths)]
    sources = [p for p in sources if p.is_file() and p.parent == folder]
    for source in sources:
        shutil.copy2(source, dest / source.name)

    def moved(path: str) -> str:
        return str(dest / Path(path).name) if Path(path) in sources else path

    db.record_report(replace(previous, html_path=moved(previous.html_path),
                             pdf_path=moved(previous.pdf_path),
                             csv_paths=[moved(p) for p in previous.csv_paths]))
    if previous.audit_run_id != run_id:  # this run's own files are rewritten in place
        for source in sources:
            source.unlink()
    return dest


def render_day(spark: Any, settings: Settings, day: date | str,
               out: str | Path | None = None) -> ReportResult:
    """Build the context of ``day``, render it (default folder <warehouse>/reports/<day>/) and
    record the report, with the SHA-256 of its HTML, in the report database. A signed-off
    report of another run in that folder is kept aside first (``keep_signed_report``)."""
    from reports.db import ReportDB
    from reports.records import ReportRecord

    the_day = day if isinstance(day, date) else parse_date(day, "--date")
    ctx = build_context(spark, settings, the_day)
    folder = Path(out) if out else settings.warehouse_path / "reports" / the_day.isoformat()
    db = ReportDB.from_settings(settings)
    keep_signed_report(db, folder, ctx.audit_run_id)
    result = render_context(ctx, folder)
    db.record_report(ReportRecord(
        day=the_day, audit_run_id=ctx.audit_run_id, created_at=datetime.now(UTC),
        html_path=result.html_path, pdf_path=result.pdf_path,
        csv_paths=list(result.csv_paths), sha256=result.sha256))
    return result


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    """`reckon report --warehouse WH --date D --out DIR`."""
    from spark.session import get_spark

    day = parse_date(args.date, "--date")
    spark = get_spark(settings, app_name="reckon-report")
    result = render_day(spark, settings, day, args.out)
    print(f"report for {day}: {result.html_path} (sha256 {result.sha256}), {result.pdf_path}, "
          f"{len(result.csv_paths)} CSV files in {result.out_dir}")
    return 0
