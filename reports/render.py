"""Render a day's reconciliation report: one HTML file, a PDF of the same content, and CSVs.

``render_day`` builds the typed context (reports/context.py: the only step that reads the
warehouse, through DuckDB, and the report database), then ``render_context`` writes, into
``<warehouse>/reports/<day>/`` by default:

The sections are declared once, in ``reports.sections.SECTIONS`` (id, title, blocks built
from the context, the CSV it writes, the charts beside it), and every format iterates that list:

- ``report.html``: self-contained (CSS inline, charts as inline SVG), the Jinja2 template
  drawing each section's blocks; no rendering timestamp, only the audit run's own time, so the
  same inputs give the same bytes (its SHA-256 goes into the report database);
- ``report.pdf``: fpdf2, the same sections and blocks (charts as PNG images beside their
  section), as a document: every page numbered ("page n of N"), table headings repeated on
  each page, amounts right-aligned in their currency's digits, the approval block last;
- one CSV per section (``summary.csv``, ``configuration.csv``, ``status_counts.csv``,
  ``break_summary.csv``, ``breaks.csv`` with every break, ``gap_by_window.csv``,
  ``attribution.csv``, ``lateness_histogram.csv``, ``lateness_curve.csv``,
  ``watermark_progress.csv``, ``quality.csv``, ``approval.csv``): exact decimal text, stable
  order, ``\\n`` line ends: byte-identical on a re-run.

Nothing here reads the warehouse or the report database except ``render_day``, which asks
reports/context.py for the context first; ``render_context`` only draws.

Money is per currency (docs/decisions/0001-money-per-currency.md): the headline has one group
of figures per currency, every table and CSV holding an amount has a ``currency`` column (in
``summary.csv``, ``status_counts.csv`` and ``attribution.csv`` an empty currency marks a
figure over every currency, which is always a count, never an amount), amounts are written
with their currency's own ISO 4217 digits (``reckon.money``: ``EUR 1,234.50``, ``JPY 1,235``,
``KWD 0.125`` on the page; ``1234.50``, ``1235``, ``0.125`` in a CSV), and the gap chart has
one panel per currency. No amount of one currency is ever added to another's.

Files are written to a temporary name and renamed, so a re-run replaces them atomically.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from audits.bound_whatif_batches import CURVES_NOTE, PER_BATCH, PER_EVENT
from reckon.engine_config import ReportConfig
from reckon.errors import LayoutError
from reports import formatting as fmt
from reports.approval_record import APPROVAL_FILES, write_approval_record
from reports.charts import CHART_NAMES, Chart, render_charts
from reports.context import ReportContext, build_context
from reports.sections import SECTIONS, Laid, lay_out
from reports.sections.approval import signoff_text
from reports.sections.blocks import STATUSES, Block, Columns, Heading, Items, Note, Table

__all__ = ["CURVES_NOTE", "PER_BATCH", "PER_EVENT", "SECTIONS", "ReportResult",
           "keep_data_docs", "keep_signed_report", "publish_report", "render_context",
           "render_day",
           "signoff_text", "write_csvs"]

TEMPLATES = Path(__file__).resolve().parent / "templates"

# a percentage as the report writes it, under its old name (tests compare with it)
_percent = fmt.percent


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


def _check_figures(ctx: ReportContext) -> None:
    """A context with rows but no per-currency figures (a run recorded before money was kept
    per currency) is refused: no figure is made up for it."""
    h = ctx.headline
    if h.rows and not h.currencies:
        raise LayoutError(
            f"audit run {ctx.audit_run_id} of {ctx.day} has no per-currency figures (recorded "
            f"before money was kept per currency): re-audit the day (`reckon audit --date "
            f"{ctx.day}`), then render the report again")


def _write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- CSV


def write_csvs(ctx: ReportContext, out: Path) -> list[Path]:
    """One CSV per section (``Section.csv``), in report order."""
    paths = []
    for section in SECTIONS:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(section.csv_header)
        writer.writerows([fmt.cell(v) for v in row] for row in section.csv_rows(ctx))
        path = out / section.csv
        _write_bytes(path, buf.getvalue().encode("utf-8"))
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------- HTML


def render_html(ctx: ReportContext, laid: Sequence[Laid], charts: Sequence[Chart],
                csv_names: Sequence[str]) -> str:
    """The sections as one self-contained page (CSS inline, charts as inline SVG)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)),
                      autoescape=select_autoescape(["html", "j2"]), undefined=StrictUndefined,
                      keep_trailing_newline=True)
    env.filters.update(ts=fmt.ts)
    return env.get_template("report.html.j2").render(
        ctx=ctx, h=ctx.headline, signoff=signoff_text(ctx), sections=list(laid),
        statuses=STATUSES, charts={**dict.fromkeys(CHART_NAMES), **{c.name: c for c in charts}},
        csv_names=list(csv_names))


# ----------------------------------------------------------------------------- PDF


def _font_path() -> str:
    import matplotlib

    return str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")


def _document(ctx: ReportContext) -> Any:
    """An A4 fpdf2 document whose every page says what it is and "page n of N"."""
    from fpdf import FPDF

    title = f"Reconciliation report {ctx.day.isoformat()}, audit run {ctx.audit_run_id}"

    class _Document(FPDF):
        def footer(self) -> None:  # every page: what it is and where in it
            self.set_y(-10)
            self.set_font("DejaVu", "", 7)
            self.set_text_color(91, 103, 115)
            self.cell(0, 5, f"{title}   ·   page {self.page_no()} of {{nb}}", align="R")
            self.set_text_color(0, 0, 0)

    pdf = _Document(orientation="P", unit="mm", format="A4")
    pdf.set_creation_date(ctx.audit_started_at.astimezone(UTC))
    pdf.set_title(f"Reconciliation report {ctx.day.isoformat()}")
    pdf.set_author(ctx.reconciler)
    pdf.add_font("DejaVu", "", _font_path())
    pdf.add_font("DejaVu", "B", _font_path().replace("DejaVuSans.ttf", "DejaVuSans-Bold.ttf"))
    pdf.set_auto_page_break(True, margin=14)
    pdf.add_page()
    return pdf


def _pdf_front(pdf: Any, ctx: ReportContext) -> None:
    """Title, run, verdict and sign-off state, as the HTML's header."""
    pdf.set_font("DejaVu", "B", 16)
    pdf.cell(0, 9, f"Reconciliation report - {ctx.day.isoformat()}", new_x="LMARGIN",
             new_y="NEXT")
    _pdf_text(pdf, f"Audit run {ctx.audit_run_id} ({ctx.audit_kind}), started "
                   f"{fmt.ts(ctx.audit_started_at)} by {ctx.reconciler}")
    n = ctx.headline.unexplained_count
    pdf.set_font("DejaVu", "B", 10)
    pdf.set_text_color(*((46, 125, 50) if n == 0 else (179, 38, 30)))
    pdf.cell(0, 6, "No unexplained breaks" if n == 0 else
             f"{n} unexplained break{'s' if n != 1 else ''}", new_x="LMARGIN", new_y="NEXT")
    pdf.set_text_color(*((179, 38, 30) if ctx.superseded_signoff else (0, 0, 0)))
    _pdf_text(pdf, "Sign-off: " + signoff_text(ctx))
    pdf.set_text_color(0, 0, 0)


def _pdf_text(pdf: Any, text: str, bold: bool = False, size: float = 8) -> None:
    pdf.set_font("DejaVu", "B" if bold else "", size)
    pdf.multi_cell(0, size * 0.55 if bold else 4, text, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("DejaVu", "", 8)


def _pdf_table(pdf: Any, t: Table) -> None:
    """Headings repeated on every page; the numeric columns right-aligned."""
    from fpdf.fonts import FontFace

    pdf.set_font("DejaVu", "", t.size)
    align = tuple("RIGHT" if i in t.numeric else "LEFT" for i in range(len(t.header)))
    head = FontFace(emphasis="BOLD", fill_color=(236, 240, 244))
    with pdf.table(col_widths=t.widths, headings_style=head, line_height=t.size * 0.55,
                   text_align=align, first_row_as_headings=True,  # type: ignore[arg-type]
                   repeat_headings=1,
                   padding=None if t.pad is None else (0, t.pad)) as table:
        table.row(list(t.header))
        for r in t.rows:
            table.row(list(r))
    pdf.ln(1)


def _pdf_block(pdf: Any, b: Block) -> None:
    if isinstance(b, Note):
        _pdf_text(pdf, b.plain)
    elif isinstance(b, Heading):
        _pdf_text(pdf, b.text, bold=True, size=9)
    elif isinstance(b, Table):
        _pdf_table(pdf, b)
    elif isinstance(b, Columns):
        for t in b.tables:
            _pdf_table(pdf, t)
    elif isinstance(b, Items):
        _pdf_text(pdf, b.caption, bold=True, size=9)
        for i, line in enumerate(b.items, 1):
            _pdf_text(pdf, f"{i}. {line}")
    else:  # the headline's figures: one row per figure, the currency beside it
        _pdf_table(pdf, Table(("currency", "figure", "value"), tuple(
            (g.currency or "all", f.label, _with_detail(f.value, f.detail))
            for g in b.groups for f in g.figures), widths=(22, 60, 108), size=8.5))


def _with_detail(value: str, detail: str | None) -> str:
    """A headline figure and its detail on one PDF line, the detail in parentheses unless it
    opens with its own.

    >>> _with_detail("3,670", "(window, key, currency) rows"), _with_detail("EUR 1.00", "2 events")
    ('3,670 (window, key, currency) rows', 'EUR 1.00 (2 events)')
    """
    if not detail:
        return value
    return f"{value} {detail}" if detail.startswith("(") else f"{value} ({detail})"


def render_pdf(ctx: ReportContext, laid: Sequence[Laid], charts: Sequence[Chart],
               path: Path) -> None:
    """The same sections as the HTML, as a document: every page numbered, table headings
    repeated on each page, amounts right-aligned, each chart beside its section."""
    pdf = _document(ctx)
    _pdf_front(pdf, ctx)
    drawn = {c.name: c for c in charts}
    turned = False
    for s in laid:
        turned = _turn_for(pdf, s.blocks, turned)
        beside = [drawn[name] for name in s.charts if name in drawn]
        short = all(isinstance(b, Note) for b in s.blocks)  # a heading, a note and a chart
        if beside and short and not _fits(pdf, 25 + _chart_height(beside[0])):
            pdf.add_page()  # keep the heading with its chart
        pdf.ln(3)
        _pdf_text(pdf, s.heading, bold=True, size=12)
        for b in s.blocks:
            _pdf_block(pdf, b)
        for chart in beside:
            if not _fits(pdf, _chart_height(chart)):  # a chart is not split over pages
                pdf.add_page()
            pdf.image(io.BytesIO(chart.png), w=_CHART_WIDTH)
        _pdf_text(pdf, f"As CSV: {s.section.csv}")
    _write_bytes(path, bytes(pdf.output()))


_CHART_WIDTH = 180  # mm: the page's width inside its margins


def _is_landscape(blocks: Sequence[Block]) -> bool:
    """Whether a section holds a table drawn on landscape pages (the break list)."""
    tables = [t for b in blocks for t in (b.tables if isinstance(b, Columns) else (b,))]
    return any(isinstance(t, Table) and t.landscape for t in tables)


def _turn_for(pdf: Any, blocks: Sequence[Block], turned: bool) -> bool:
    """Start a landscape page for a section with a landscape table, and a portrait one for
    the first section after it; returns whether the pages are now landscape. A wide table
    on its own pages keeps one line a row; the sections around it stay portrait, charts at
    their width.

    Example: the break list of 108 breaks fits two landscape pages at one line a break."""
    wide = _is_landscape(blocks)
    if wide != turned:
        pdf.add_page(orientation="L" if wide else "P")
    return wide


def _chart_height(chart: Chart) -> float:
    """The chart's height in mm at ``_CHART_WIDTH``, from its PNG header (width, height)."""
    width, height = (int.from_bytes(chart.png[i:i + 4], "big") for i in (16, 20))
    return _CHART_WIDTH * height / width


def _fits(pdf: Any, height: float) -> bool:
    return bool(pdf.get_y() + height <= pdf.h - pdf.b_margin)


# ----------------------------------------------------------------------------- entry points


def render_context(ctx: ReportContext, out: str | Path) -> ReportResult:
    """Write the report files for ``ctx`` into ``out`` (created if needed). No Spark, no DB."""
    _check_figures(ctx)
    folder = Path(out).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    csvs = write_csvs(ctx, folder)
    charts = render_charts(ctx)
    laid = lay_out(ctx, fmt.relative_link(ctx.data_docs, folder))
    html = render_html(ctx, laid, charts, [p.name for p in csvs]).encode("utf-8")
    html_path, pdf_path = folder / "report.html", folder / "report.pdf"
    _write_bytes(html_path, html)
    render_pdf(ctx, laid, charts, pdf_path)
    return ReportResult(ctx.day, ctx.audit_run_id, str(folder), str(html_path), str(pdf_path),
                        tuple(str(p) for p in csvs), hashlib.sha256(html).hexdigest())


def keep_signed_report(db: Any, out: str | Path, run_id: str) -> Path | None:
    """Before ``run_id``'s report is rendered into ``out``: if the report there belongs to a
    run someone decided on (approved, rejected: each decision binds the report's SHA-256; for
    another run, or this one: a re-render has other bytes), copy its files and its approval
    record (reports.approval_record) to ``out/signed/<run>/`` and record them there (same
    SHA-256), once per run, so a signed report is never lost. Copied and recorded before the
    working files go, so a crash leaves a duplicate, never a gap. The copy's Data Docs link
    is made to work from where the copy lives (``keep_data_docs``). Returns the new folder,
    or None when nothing needed keeping."""
    import shutil
    from dataclasses import replace

    from reports.review_state import review_states

    folder = Path(out).expanduser().resolve()
    html = folder / "report.html"
    previous = db.report_at(str(html)) if html.is_file() else None
    reviewed = previous is not None and review_states(
        db, [previous.audit_run_id]).get(previous.audit_run_id)
    if previous is None or not reviewed or not reviewed.decisions:
        return None
    dest = folder / "signed" / previous.audit_run_id
    if dest.exists() or hashlib.sha256(html.read_bytes()).hexdigest() != previous.sha256:
        return None  # kept already, or not the bytes that were recorded (and signed)
    dest.mkdir(parents=True)
    sources = [Path(p) for p in (previous.html_path, previous.pdf_path, *previous.csv_paths)]
    sources = [p for p in sources if p.is_file() and p.parent == folder]
    records = [folder / name for name in APPROVAL_FILES if (folder / name).is_file()]
    for source in sources + records:
        shutil.copy2(source, dest / source.name)

    def moved(path: str) -> str:
        return str(dest / Path(path).name) if Path(path) in sources else path

    keep_data_docs(dest / html.name, folder)
    db.record_report(replace(previous, html_path=moved(previous.html_path),
                             pdf_path=moved(previous.pdf_path),
                             csv_paths=[moved(p) for p in previous.csv_paths]))
    if previous.audit_run_id != run_id:  # this run's own files are rewritten in place
        for source in sources + records:
            source.unlink()
    return dest


_DATA_DOCS_LINK = re.compile(r'Great Expectations Data Docs: <a href="([^"]+)">')


def keep_data_docs(copy: Path, folder: Path) -> Path | None:
    """Make the Data Docs link of ``copy`` (a signed report kept under ``folder``) resolve.

    The signed bytes cannot change (their SHA-256 is what was signed), and the link, relative
    to the report folder, points elsewhere from ``folder/signed/<run>/``. So the site it
    pointed to is copied to where the link lands from the copy, when that lies inside
    ``folder`` (``signed/data_docs/`` by default): zip the day's folder and every signed copy
    still opens its Data Docs. Copied over on each keep (a newer site holds the older runs'
    validations too). Returns the index now reachable from the copy, or None.

    Example: for ``reports/2026-01-01/signed/R/report.html`` linking ``../data_docs/
    index.html``, ``reports/data_docs/`` is copied to ``reports/2026-01-01/signed/data_docs/``.
    """
    import shutil
    from html import unescape
    from urllib.parse import unquote

    found = _DATA_DOCS_LINK.search(copy.read_text(encoding="utf-8"))
    if found is None:
        return None
    href = unquote(unescape(found.group(1)))
    source, target = (folder / href).resolve(), (copy.parent / href).resolve()
    site, into = source.parent, target.parent
    if (not source.is_file() or not into.is_relative_to(folder) or into in (folder, copy.parent)
            or folder.is_relative_to(site)):
        return None  # nothing to copy, or it would land outside the folder or over the report
    shutil.copytree(site, into, dirs_exist_ok=True)
    return target


def render_day(config: ReportConfig, day: date,
               out: str | Path | None = None) -> ReportResult:
    """Build the context of ``day``, render it (default folder <warehouse>/reports/<day>/) and
    record the report, with the SHA-256 of its HTML, in the report database. A signed-off
    report of another run in that folder is kept aside first (``keep_signed_report``).
    Starts no JVM and imports no engine: the context is read through DuckDB
    (reports/context.py); the caller (app.pipeline.run_report) has refused a warehouse of an
    earlier layout.

    ``day`` is a date: the app layer parses ``--date`` once (``reckon.timeutil.parse_date``),
    e.g. ``render_day(settings.report_config(), date(2026, 1, 1))``."""
    from reports.db.repository import ReportDB

    warehouse = config.whatif.warehouse
    ctx = build_context(config, day)
    folder = Path(out) if out else warehouse / "reports" / day.isoformat()
    db = ReportDB.from_settings(config)  # the database at config.report_db
    return publish_report(db, ctx, folder, config.required_approvers)


def publish_report(db: Any, ctx: ReportContext, folder: str | Path,
                   required_approvers: int = 1) -> ReportResult:
    """Render ``ctx`` into ``folder`` and record it (no Spark): a reviewed report of another
    run there (or this run's, about to get other bytes) is kept aside first
    (``keep_signed_report``), the new one recorded with its HTML's SHA-256, and its approval
    record written beside it (reports.approval_record).

    Example: ``publish_report(db, ctx, warehouse / "reports" / "2026-01-01")``."""
    from reports.records import ReportRecord

    keep_signed_report(db, folder, ctx.audit_run_id)
    result = render_context(ctx, folder)
    db.record_report(ReportRecord(
        day=ctx.day, audit_run_id=ctx.audit_run_id, created_at=datetime.now(UTC),
        html_path=result.html_path, pdf_path=result.pdf_path,
        csv_paths=list(result.csv_paths), sha256=result.sha256))
    write_approval_record(db, ctx.audit_run_id, required_approvers)
    return result
