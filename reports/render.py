"""Render a day's reconciliation report: one HTML file, a PDF of the same content, and CSVs.

``render_day`` builds the typed context (reports/context.py: the only step that reads Spark and
the report database), then ``render_context`` writes, into ``<warehouse>/reports/<day>/`` by
default:

- ``report.html``: self-contained (CSS inline, charts as inline SVG), rendered from the Jinja2
  template over the context; no rendering timestamp, only the audit run's own time, so the same
  inputs give the same bytes (its SHA-256 goes into the report database);
- ``report.pdf``: fpdf2, the same sections (headline, tables, charts as PNG images), as a
  document: every page numbered ("page n of N"), table headings repeated on each page,
  amounts right-aligned in their currency's digits, the approval block last;
- one CSV per table shown (``summary.csv``, ``status_counts.csv``, ``break_summary.csv``
  (every break rolled up by cause, key, age and review status, per currency),
  ``breaks.csv`` with every break, ``attribution.csv``, ``gap_by_window.csv``, ``lateness_histogram.csv``,
  ``lateness_curve.csv``, ``watermark_progress.csv``, ``configuration.csv``): exact decimal
  text, stable order, ``\\n`` line ends: byte-identical on a re-run.

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

import argparse
import csv
import hashlib
import io
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

from reckon.config import Settings
from reckon.errors import LayoutError
from reckon.money import format_amount, format_money, quantize_to_currency
from reckon.timeutil import format_micros, parse_date, to_micros
from reports.charts import CHART_NAMES, Chart, render_charts
from reports.context import (
    CurveLine,
    ReportContext,
    Signoff,
    build_context,
    unexplained_amount,
)
from reports.records import AttributionRow, CurrencySummary
from reports.summary import BreakSummary, summarise_breaks

__all__ = ["CURVES_NOTE", "PER_BATCH", "PER_EVENT", "ReportResult", "cmd_report", "keep_signed_report", "render_context", "render_day",
           "signoff_text", "write_csvs"]

TEMPLATES = Path(__file__).resolve().parent / "templates"

#: The two lateness what-if curves, labelled as every format shows them (issue 39).
PER_BATCH = "per micro-batch, as the stream ran"
PER_EVENT = "per event, as if every event moved the watermark"
CURVES_NOTE = ("The two curves differ because the stream moves its watermark once per "
               "micro-batch, judging every event of a batch against the watermark the previous "
               "batch left, while the per-event replay moves it after every event, closing "
               "windows sooner and so dropping more at the same bound; the per-batch row at "
               "the configured bound is what the stream did, and matches the headline.")
_CSV_GRANULARITY = {PER_BATCH: "per_batch", PER_EVENT: "per_event"}  # lateness_curve.csv


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


def _money(value: Decimal | None, code: str) -> str:
    """The amount with its currency, in the currency's own digits: 'EUR 1,234.50',
    'JPY 1,235', 'KWD 0.125'; '-' for null."""
    return "-" if value is None else format_money(value, code)


def _amount(value: Decimal | None, code: str) -> str:
    """The number alone in ``code``'s digits ('1,234.50'), for a cell beside a currency
    column; '-' for null."""
    return "-" if value is None else format_amount(value, code)


def _exact(value: Decimal | None, code: str) -> Decimal | None:
    """A CSV amount: exact, with exactly ``code``'s decimal places (nothing is rounded)."""
    return None if value is None else quantize_to_currency(value, code)


def _amounts(amounts: dict[str, Decimal]) -> str:
    """Amounts of several currencies side by side, never added: 'EUR 12.50; JPY 1,200'."""
    return "; ".join(_money(v, code) for code, v in sorted(amounts.items())) or "-"


def _percent(ratio: Decimal | float | None, places: int = 4) -> str:
    """A ratio as people read it: 0.998867 -> '99.8867%'; '-' for none."""
    if ratio is None:
        return "-"
    # rounded down: 0.99999996 reads 99.9999%, never 100% while an event is missing
    scaled = (Decimal(str(ratio)) * 100).quantize(Decimal(1).scaleb(-places),
                                                   rounding=ROUND_FLOOR)
    return f"{scaled}%"


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


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
    detail: str = ""
    bad: bool = False


@dataclass(frozen=True)
class _Group:
    """The headline figures of one currency (``currency`` '': counts over every currency)."""

    currency: str
    title: str
    figures: tuple[_Figure, ...]


def _gap_changes(prior: Signoff, ctx: ReportContext) -> list[str]:
    """What changed between the signed run and this one: each currency whose gap differs
    (compared per currency, never summed), then the unexplained count."""
    now = {c.currency: c.gap_total for c in ctx.headline.currencies}
    changes = []
    for code in sorted(set(prior.gap_totals) | set(now)):
        before, after = prior.gap_totals.get(code), now.get(code)
        if before != after:
            changes.append(f"gap {_money(before, code) if before is not None else 'no ' + code}"
                           f" -> {_money(after, code) if after is not None else 'no ' + code}")
    if prior.unexplained != ctx.headline.unexplained_count:
        changes.append(f"unexplained breaks {prior.unexplained} -> "
                       f"{ctx.headline.unexplained_count}")
    return changes


def signoff_text(ctx: ReportContext) -> str:
    """The day's sign-off state in one sentence (HTML and PDF): the decisions on this run, or
    that a run someone signed off was replaced by this one and what changed."""
    prior = ctx.superseded_signoff
    if prior is not None:
        changes = _gap_changes(prior, ctx)
        change = (", ".join(changes) if changes else
                  "the gap of every currency and the unexplained count are unchanged")
        return (f"Run {prior.run_id} of this day was {prior.decision} by {prior.by} at "
                f"{_ts(prior.at)}; this audit replaced it ({change}): the day needs a new "
                "sign-off.")
    if not ctx.signoffs:
        return "Not signed off yet."
    return "; ".join(f"{e.decision.capitalize()} by {e.by} at {_ts(e.at)}"
                     for e in ctx.signoffs) + "."


def _currency_figures(c: CurrencySummary) -> tuple[_Figure, ...]:
    """One currency's headline: its own sums, in its own digits."""
    code, n = c.currency, c.unexplained
    figures = [
        _Figure("provisional_total", "Provisional total (stream)",
                _money(c.provisional_total, code), _plural(c.provisional_events, "event")),
        _Figure("canonical_total", "Canonical total (replay)", _money(c.canonical_total, code),
                _plural(c.canonical_events, "event")),
        _Figure("gap_total", "Gap", _money(c.gap_total, code)),
        _Figure("late_total", "Explained by late events", _money(c.late_total, code),
                _plural(c.late_events, "event")),
        _Figure("duplicate_total", "Explained by duplicates", _money(c.duplicate_total, code),
                _plural(c.duplicate_events, "copy", "copies")),
        _Figure("unexplained", "Unexplained",
                f"{_money(unexplained_amount(c), code)} in {_plural(n, 'row')}", bad=n > 0),
        _Figure("completeness", "Completeness", _percent(c.completeness)),
        _Figure("rows", "Rows reconciled", f"{c.rows:,}"),
    ]
    # residuals that a tolerance let pass on EXPLAINED rows: shown, so that the figures add up
    # (gap = late - duplicates + unexplained + this); none with the default tolerance of 0
    if c.tolerated_total:
        figures.insert(6, _Figure("tolerated_residual", "Residual within tolerance",
                                  _money(c.tolerated_total, code)))
    return tuple(figures)


def _headline(ctx: ReportContext) -> list[_Group]:
    """Counts over every currency first (they may be added), then one group per currency."""
    h = ctx.headline
    codes = ", ".join(c.currency for c in h.currencies) or "none"
    counts = _Group("", "All currencies (counts)", (
        _Figure("rows", "Rows reconciled", f"{h.rows:,}", "(window, key, currency) rows"),
        _Figure("unexplained_rows", "Unexplained rows", f"{h.unexplained_count:,}",
                bad=h.unexplained_count > 0),
        _Figure("completeness", "Completeness", _percent(h.completeness)),
        _Figure("currencies", "Currencies", codes)))
    return [counts, *(_Group(c.currency, c.currency, _currency_figures(c))
                      for c in h.currencies)]


def break_summary(ctx: ReportContext) -> BreakSummary:
    """Every break of the run rolled up by cause, key, age and review status."""
    return summarise_breaks(ctx.all_breaks or ctx.breaks, [s for s, _n in ctx.status_counts])


def _summary_table_rows(summary: BreakSummary) -> list[tuple[str, str, str, int, str, str]]:
    """(dimension, group, currency, breaks, gap, residual) with amounts in their digits."""
    return [(dimension, r.group, r.currency, r.breaks, _amount(r.gap, r.currency),
             _amount(r.residual, r.currency))
            for dimension, rows in summary.sections() for r in rows]


def approval_rows(ctx: ReportContext) -> list[tuple[str, str]]:
    """The approval block: what was prepared, by whom and when, who decided what and when,
    and the state of the sign-off (HTML and PDF alike)."""
    rows = [("Audit run", f"{ctx.audit_run_id} ({ctx.audit_kind})"),
            ("Prepared by", f"{ctx.reconciler}, audit started {_ts(ctx.audit_started_at)}")]
    rows += [(f"{e.decision.capitalize()} by", f"{e.by} at {_ts(e.at)}") for e in ctx.signoffs]
    if not ctx.signoffs:
        rows.append(("Reviewed and signed off by", "-"))
    rows.append(("State", signoff_text(ctx)))
    rows.append(("Integrity", "report.html's SHA-256 is recorded with the run in the report "
                              "database; each sign-off binds it and the run's figures "
                              "(`reckon verify-log` checks both)"))
    return rows


def _check_figures(ctx: ReportContext) -> None:
    """A context with rows but no per-currency figures (a run recorded before money was kept
    per currency) is refused: no figure is made up for it."""
    h = ctx.headline
    if h.rows and not h.currencies:
        raise LayoutError(
            f"audit run {ctx.audit_run_id} of {ctx.day} has no per-currency figures (recorded "
            f"before money was kept per currency): re-audit the day (`reckon audit --date "
            f"{ctx.day}`), then render the report again")


# ----------------------------------------------------------------------------- CSV


def _summary_rows(ctx: ReportContext) -> list[tuple[str, str, Any]]:
    """summary.csv: (currency, figure, value). Currency '' for the run and its counts over
    every currency; then each currency's own figures. No cross-currency amount exists."""
    h = ctx.headline
    rows: list[tuple[str, str, Any]] = [
        ("", "day", ctx.day), ("", "audit_run_id", ctx.audit_run_id),
        ("", "audit_kind", ctx.audit_kind), ("", "audit_started_at", ctx.audit_started_at),
        ("", "rows", h.rows), ("", "unexplained_count", h.unexplained_count),
        ("", "completeness", h.completeness), ("", "breaks_total", ctx.breaks_total),
        ("", "currencies", " ".join(c.currency for c in h.currencies))]
    rows += [("", f"lateness_curve_{_CSV_GRANULARITY[label]}", label)
             for label, _ in curves(ctx)]
    rows += [("", "lateness_curves_note", note) for note in curve_notes(ctx)]
    for c in h.currencies:
        code = c.currency
        rows += [(code, name, value) for name, value in (
            ("rows", c.rows), ("provisional_events", c.provisional_events),
            ("canonical_events", c.canonical_events), ("late_events", c.late_events),
            ("duplicate_events", c.duplicate_events),
            ("provisional_total", _exact(c.provisional_total, code)),
            ("canonical_total", _exact(c.canonical_total, code)),
            ("gap_total", _exact(c.gap_total, code)),
            ("late_total", _exact(c.late_total, code)),
            ("duplicate_total", _exact(c.duplicate_total, code)),
            ("residual_total", _exact(c.residual_total, code)),
            ("tolerated_residual", _exact(c.tolerated_total, code)),
            ("unexplained_amount", _exact(unexplained_amount(c), code)),
            ("unexplained_count", c.unexplained), ("completeness", c.completeness))]
    return rows


def _status_rows(ctx: ReportContext) -> list[tuple[str, str, int]]:
    """status_counts.csv: (currency, status, rows); currency '' = over every currency."""
    rows = [("", status, n) for status, n in ctx.status_counts]
    for c in ctx.headline.currencies:
        rows += [(c.currency, status, int(c.status_counts.get(status, 0)))
                 for status, _ in ctx.status_counts]
    return rows


def _attribution_rows(rows: Sequence[AttributionRow]) -> list[tuple[Any, ...]]:
    """attribution.csv: per value, one row of counts (currency '': counts over every
    currency) followed by one row per currency with that currency's late amount."""
    out: list[tuple[Any, ...]] = []
    for a in rows:
        out.append((a.dimension, a.value, "", a.late_events, a.all_events, a.late_share,
                    a.event_share, a.lift, None))
        out += [(a.dimension, a.value, code, None, None, None, None, None, _exact(v, code))
                for code, v in sorted(a.late_amounts.items())]
    return out


def _tables(ctx: ReportContext) -> list[tuple[str, Sequence[str], Iterable[Sequence[Any]]]]:
    return [
        ("summary.csv", ("currency", "figure", "value"), _summary_rows(ctx)),
        ("configuration.csv", ("setting", "value"),
         [*ctx.configuration, *((f"version:{k}", v) for k, v in ctx.table_versions)]),
        ("status_counts.csv", ("currency", "status", "rows"), _status_rows(ctx)),
        ("break_summary.csv", ("dimension", "group", "currency", "breaks", "gap_amount",
                               "residual_amount"),
         [(dimension, r.group, r.currency, r.breaks, _exact(r.gap, r.currency),
           _exact(r.residual, r.currency))
          for dimension, rows in break_summary(ctx).sections() for r in rows]),
        ("breaks.csv", ("window_start", "window_end", "key", "currency", "status",
                        "provisional_amount", "canonical_amount", "gap_amount", "gap_count",
                        "late_amount", "duplicate_amount", "residual_amount", "review_status",
                        "age_days", "explanation"),
         [(b.window_start, b.window_end, b.key, b.currency, b.status,
           _exact(b.provisional_amount, b.currency), _exact(b.canonical_amount, b.currency),
           _exact(b.gap_amount, b.currency), b.gap_count, _exact(b.late_amount, b.currency),
           _exact(b.duplicate_amount, b.currency), _exact(b.residual_amount, b.currency),
           b.review_status, b.age_days, b.explanation)
          for b in (ctx.all_breaks or ctx.breaks)]),
        ("attribution.csv", ("dimension", "value", "currency", "late_events", "all_events",
                             "late_share", "event_share", "lift", "late_amount"),
         _attribution_rows(ctx.attribution)),
        ("gap_by_window.csv", ("bucket_start", "bucket_seconds", "currency", "windows",
                               "provisional_amount", "canonical_amount", "gap_amount",
                               "late_amount", "residual_amount", "unexplained_rows"),
         [(p.bucket_start, ctx.gap_bucket_seconds, p.currency, p.windows,
           _exact(p.provisional_amount, p.currency), _exact(p.canonical_amount, p.currency),
           _exact(p.gap_amount, p.currency), _exact(p.late_amount, p.currency),
           _exact(p.residual_amount, p.currency), p.unexplained)
          for p in ctx.gap_series]),
        ("lateness_histogram.csv", ("from_seconds", "to_seconds", "events", "late_events"),
         [(b.lo_seconds, b.hi_seconds, b.events, b.late_events)
          for b in ctx.lateness_histogram]),
        ("lateness_curve.csv", ("granularity", "bound_seconds", "completeness", "admitted",
                                "dropped", "avg_emit_latency_seconds", "configured",
                                "recommended"),
         [(_CSV_GRANULARITY[label], p.bound_seconds, p.completeness, p.admitted, p.dropped,
           p.avg_emit_latency, p.bound_seconds == ctx.configured_bound_seconds,
           label == PER_EVENT and p.bound_seconds == ctx.recommended_bound_seconds)
          for label, points in curves(ctx) for p in points]),
        ("watermark_progress.csv", ("batch_id", "processed_at", "partition", "watermark",
                                    "idle"),
         [(w.batch_id, w.processed_at, "global" if w.partition is None else w.partition,
           w.watermark, w.idle) for w in ctx.watermark_series]),
    ]


def curves(ctx: ReportContext) -> list[tuple[str, tuple[CurveLine, ...]]]:
    """The lateness what-if curves, labelled, per batch first (what the stream did): every
    format lists them in this order. ``curves(ctx)[0][0] == PER_BATCH``."""
    return [(PER_BATCH, ctx.lateness_curve_batches), (PER_EVENT, ctx.lateness_curve)]


def curve_notes(ctx: ReportContext) -> list[str]:
    """What the report says under the curves: why they differ, and why the per-batch one is
    missing when it is (HTML, PDF and summary.csv alike)."""
    notes = [CURVES_NOTE] if ctx.lateness_curve or ctx.lateness_curve_batches else []
    if ctx.batch_curve_note:
        notes.append(f"No per-batch curve: {ctx.batch_curve_note}")
    return notes


def _status_table(ctx: ReportContext) -> tuple[list[str], list[list[Any]]]:
    """Rows per status, over every currency and per currency (counts only)."""
    cur = ctx.headline.currencies
    header = ["status", "all currencies", *(c.currency for c in cur)]
    rows: list[list[Any]] = [["(window, key, currency) rows", ctx.headline.rows,
                              *(c.rows for c in cur)]]
    rows += [[status, n, *(int(c.status_counts.get(status, 0)) for c in cur)]
             for status, n in ctx.status_counts]
    return header, rows


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


def _relative_link(target: str | None, out_dir: Path | None) -> str | None:
    """A link from the report folder to ``target`` that still works when the folder and its
    neighbours are zipped and mailed: relative, with forward slashes."""
    if target is None:
        return None
    from urllib.parse import quote

    if out_dir is None:
        return quote(Path(target).as_posix())
    return quote(Path(os.path.relpath(Path(target).resolve(), out_dir.resolve())).as_posix())


def render_html(ctx: ReportContext, charts: Sequence[Chart], csv_names: Sequence[str],
                out_dir: Path | None = None) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)),
                      autoescape=select_autoescape(["html", "j2"]), undefined=StrictUndefined,
                      keep_trailing_newline=True)
    env.filters.update(ts=_ts, hms=_hms, money=_money, amount=_amount, amounts=_amounts,
                       percent=_percent)
    header, rows = _status_table(ctx)
    return env.get_template("report.html.j2").render(
        ctx=ctx, h=ctx.headline, headline=_headline(ctx), signoff=signoff_text(ctx),
        status_header=header, status_rows=rows, summary=break_summary(ctx),
        approval=approval_rows(ctx), data_docs=_relative_link(ctx.data_docs, out_dir),
        charts={**dict.fromkeys(CHART_NAMES), **{c.name: c for c in charts}},
        csv_names=list(csv_names), curves=curves(ctx), curve_notes=curve_notes(ctx))


# ----------------------------------------------------------------------------- PDF


def _font_path() -> str:
    import matplotlib

    return str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")


def render_pdf(ctx: ReportContext, charts: Sequence[Chart], path: Path) -> None:
    """The report's content as a PDF: headline, configuration, counts, breaks (same cap),
    attribution, the lateness curve table, and the charts as images."""
    from fpdf import FPDF
    from fpdf.fonts import FontFace

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
    head = FontFace(emphasis="BOLD", fill_color=(236, 240, 244))

    def heading(text: str) -> None:
        pdf.ln(3)
        pdf.set_font("DejaVu", "B", 12)
        pdf.cell(0, 7, text, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("DejaVu", "", 8)

    def table(header: Sequence[str], rows: Iterable[Sequence[Any]],
              widths: Sequence[float] | None = None, size: float = 8,
              numeric: Sequence[int] | range = ()) -> None:
        """Headings repeated on every page; the ``numeric`` columns right-aligned."""
        pdf.set_font("DejaVu", "", size)
        align = tuple("RIGHT" if i in numeric else "LEFT" for i in range(len(header)))
        with pdf.table(col_widths=widths, headings_style=head, line_height=size * 0.55,
                       text_align=align, first_row_as_headings=True,  # type: ignore[arg-type]
                       repeat_headings=1) as t:
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

    heading("Headline (amounts per currency, never added across currencies)")
    table(("currency", "figure", "value"),
          [(g.currency or "all", f.label, f"{f.value} ({f.detail})" if f.detail else f.value)
           for g in _headline(ctx) for f in g.figures], (22, 60, 108), 8.5)
    heading("Configuration")
    table(("setting", "value"), ctx.configuration, (60, 120))
    table(("Delta table", "version read"), ctx.table_versions, (60, 120))
    heading("Row counts and statuses")
    header, rows = _status_table(ctx)
    table(header, rows, (2.5, *[1] * (len(header) - 1)), numeric=range(1, len(header)))
    summary = break_summary(ctx)
    heading("Break summary")
    if summary.total:
        table(("by", "group", "currency", "breaks", "gap", "residual"),
              _summary_table_rows(summary), (18, 52, 18, 18, 37, 37), 7.5, numeric=(3, 4, 5))
    else:
        pdf.multi_cell(0, 4, "No breaks: every (window, key, currency) row matched.",
                       new_x="LMARGIN", new_y="NEXT")
    heading(f"Breaks ({ctx.breaks_shown} of {ctx.breaks_total} shown; all in breaks.csv)")
    if ctx.breaks:
        table(("window (UTC)", "key", "cur.", "provisional", "canonical", "gap", "late",
               "residual", "status", "review", "age"),
              [(f"{_ts(b.window_start)}", b.key, b.currency,
                _amount(b.provisional_amount, b.currency),
                _amount(b.canonical_amount, b.currency), _amount(b.gap_amount, b.currency),
                _amount(b.late_amount, b.currency), _amount(b.residual_amount, b.currency),
                b.status, b.review_status, "-" if b.age_days is None else b.age_days)
               for b in ctx.breaks],
              (32, 18, 10, 18, 18, 16, 16, 16, 24, 14, 8), 6.5, numeric=(3, 4, 5, 6, 7, 10))
    heading("Who is late")
    if ctx.attribution:
        table(("dimension", "value", "late events", "late amounts", "all events", "late share",
               "event share", "lift"),
              [(a.dimension, a.value, a.late_events, _amounts(a.late_amounts), a.all_events,
                _percent(a.late_share, 2), _percent(a.event_share, 2),
                "-" if a.lift is None else a.lift)
               for a in ctx.attribution], (24, 22, 16, 50, 18, 20, 20, 20), 7,
              numeric=(2, 3, 4, 5, 6, 7))
    if ctx.lateness_curve or ctx.lateness_curve_batches:
        heading("Lateness what-if")
        pdf.multi_cell(0, 4, f"Configured bound L = {ctx.configured_bound_seconds} s; recommended "
                             f"{ctx.recommended_bound_seconds if ctx.recommended_bound_seconds is not None else 'none'}"
                             f" s for target completeness {_percent(ctx.target_completeness, 2)}.",
                       new_x="LMARGIN", new_y="NEXT")
        for note in curve_notes(ctx):
            pdf.multi_cell(0, 4, note, new_x="LMARGIN", new_y="NEXT")
        for label, points in curves(ctx):
            pdf.set_font("DejaVu", "B", 9)
            pdf.cell(0, 6, f"Completeness {label}" + ("" if points else ": not available"),
                     new_x="LMARGIN", new_y="NEXT")
            if not points:
                continue
            table(("bound L (s)", "completeness", "counted", "dropped", "avg emit latency (s)"),
                  [(p.bound_seconds, _percent(p.completeness), p.admitted, p.dropped,
                    "-" if p.avg_emit_latency is None else f"{p.avg_emit_latency:.3f}")
                   for p in points], numeric=(0, 1, 2, 3, 4))
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
    heading("Approval")
    table(("step", "detail"), approval_rows(ctx), (45, 135), 8)
    _write_bytes(path, bytes(pdf.output()))


# ----------------------------------------------------------------------------- entry points


def render_context(ctx: ReportContext, out: str | Path) -> ReportResult:
    """Write the report files for ``ctx`` into ``out`` (created if needed). No Spark, no DB."""
    _check_figures(ctx)
    folder = Path(out).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    csvs = write_csvs(ctx, folder)
    charts = render_charts(ctx)
    html = render_html(ctx, charts, [p.name for p in csvs], folder).encode("utf-8")
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
    from spark import tables as tb

    the_day = day if isinstance(day, date) else parse_date(day, "--date")
    # a warehouse of the earlier layout (totals that added currencies) is refused, not shown
    tb.require_layout(spark, settings.warehouse_path, tb.TABLES)
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
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        return 0
    print(f"report for {day}: {result.html_path} (sha256 {result.sha256}), {result.pdf_path}, "
          f"{len(result.csv_paths)} CSV files in {result.out_dir}")
    return 0
