"""The report's sections, declared once: HTML, PDF and CSV all iterate ``SECTIONS``.

Each ``Section`` names its HTML id, its title, the CSV file it writes (header and rows: exact
decimal text), the charts drawn beside it, and its body: a few blocks (``Note``, ``Table``,
``Figures``, ``Items``, ``Columns``, ``Heading``) built from the already-computed
``ReportContext``, with amounts formatted in their currency's digits. reports/render.py only
draws blocks, so a section cannot exist in one format and not in another, and nothing here
reads Spark or the report database.

Example: ``[s.csv for s in SECTIONS][:3] == ["summary.csv", "configuration.csv",
"status_counts.csv"]``; ``lay_out(ctx)`` gives each section's heading and blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from audits.lateness_batches import (
    BEST_PER_BATCH_ROWS,
    CURVES_NOTE,
    PER_BATCH,
    PER_EVENT,
    PER_SOURCE_ROWS,
    no_batch_curve,
)
from audits.records import AttributionRow, CurrencySummary
from reckon.config import RENAMED
from reckon.reconcile import ReconStatus
from reckon.timeutil import MICROS_PER_SECOND, format_duration
from reports import formatting as fmt
from reports.context import CurveLine, ReportContext, Signoff, unexplained_amount
from reports.summary import BreakSummary, summarise_breaks

__all__ = ["SECTIONS", "Columns", "Figure", "Figures", "Group", "Heading", "Items", "Laid",
           "Note", "Section", "Table", "approval_rows", "break_summary", "curve_notes",
           "curves", "lay_out", "signoff_text"]

STATUSES = frozenset(s.value for s in ReconStatus)  # cells styled by status in HTML
_CSV_GRANULARITY = {PER_BATCH: "per_batch", PER_EVENT: "per_event"}  # lateness_curve.csv


# ----------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class Note:
    """A sentence; ``strong`` is a bold lead-in, ``link`` (href, label) sits between ``text``
    and ``tail`` (a relative link, so the folder can be mailed)."""

    text: str
    strong: str = ""
    link: tuple[str, str] | None = None
    tail: str = ""
    id: str = ""
    css: str = "note"

    @property
    def plain(self) -> str:
        """The sentence as the PDF prints it (the link's label in place of the link)."""
        return f"{self.strong}{self.text}{self.link[1] if self.link else ''}{self.tail}"


@dataclass(frozen=True)
class Heading:
    """A sub-heading inside a section (h3)."""

    text: str


@dataclass(frozen=True)
class Table:
    """A table of display text. ``numeric`` columns are right-aligned in both formats;
    ``widths`` (mm) and ``size`` (pt) are the PDF's; ``row_heads``: the first cell of a row
    is its heading; ``marked`` rows (the configured bound) are highlighted in HTML."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: frozenset[int] = frozenset()
    widths: tuple[float, ...] | None = None
    size: float = 8
    css: str = ""
    data: tuple[tuple[str, str], ...] = ()   # HTML data-* attributes: (name, value)
    row_heads: bool = False
    status_col: int | None = None            # cells holding a ReconStatus, coloured in HTML
    marked: frozenset[int] = frozenset()
    pad: float | None = None                 # PDF cell padding left and right, mm (None: 1)


@dataclass(frozen=True)
class Figure:
    name: str
    label: str
    value: str
    detail: str = ""
    bad: bool = False


@dataclass(frozen=True)
class Group:
    """The headline figures of one currency (``currency`` '': counts over every currency)."""

    currency: str
    title: str
    figures: tuple[Figure, ...]


@dataclass(frozen=True)
class Figures:
    """The headline: one group of figures per currency, never added across currencies."""

    groups: tuple[Group, ...]


@dataclass(frozen=True)
class Items:
    """A numbered list under its own sub-heading."""

    caption: str
    items: tuple[str, ...]
    id: str = ""


@dataclass(frozen=True)
class Columns:
    """Tables side by side in HTML; one after the other in the PDF."""

    tables: tuple[Table, ...]


Block = Note | Heading | Table | Figures | Items | Columns


@dataclass(frozen=True)
class Section:
    """One section of the report, in every format: ``id`` (HTML), ``title`` (HTML and PDF
    heading; ``aside`` adds a parenthesis computed from the context), the CSV file it
    writes (``csv``, ``csv_header``, ``csv_rows``), the charts beside it, and its ``body``
    (blocks built from the context; ``data_docs``: the relative link to the GX Data Docs)."""

    id: str
    title: str
    csv: str
    csv_header: tuple[str, ...]
    csv_rows: Callable[[ReportContext], Iterable[Sequence[Any]]]
    body: Callable[[ReportContext, str | None], tuple[Block, ...]]
    charts: tuple[str, ...] = ()
    aside: Callable[[ReportContext], str] | None = None

    def heading(self, ctx: ReportContext) -> str:
        """'Breaks (3 of 3 shown; all in breaks.csv)', the same in HTML and PDF."""
        return self.title if self.aside is None else f"{self.title} ({self.aside(ctx)})"


@dataclass(frozen=True)
class Laid:
    """A section as both page formats draw it: its heading, blocks and chart names."""

    section: Section
    heading: str
    blocks: tuple[Block, ...]
    charts: tuple[str, ...]


def lay_out(ctx: ReportContext, data_docs: str | None = None) -> tuple[Laid, ...]:
    """Every section's heading and blocks, in report order (HTML and PDF draw these)."""
    return tuple(Laid(s, s.heading(ctx), s.body(ctx, data_docs), s.charts) for s in SECTIONS)


# ----------------------------------------------------------------------------- sign-off


def _gap_changes(prior: Signoff, ctx: ReportContext) -> list[str]:
    """What changed between the signed run and this one: each currency whose gap differs
    (compared per currency, never summed), then the unexplained count."""
    now = {c.currency: c.gap_total for c in ctx.headline.currencies}
    changes = []
    for code in sorted(set(prior.gap_totals) | set(now)):
        before, after = prior.gap_totals.get(code), now.get(code)
        if before != after:
            changes.append(f"gap {fmt.money(before, code) if before is not None else 'no ' + code}"
                           f" -> {fmt.money(after, code) if after is not None else 'no ' + code}")
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
                f"{fmt.ts(prior.at)}; this audit replaced it ({change}): the day needs a new "
                "sign-off.")
    if not ctx.signoffs:
        return "Not signed off yet."
    return "; ".join(f"{e.decision.capitalize()} by {e.by} at {fmt.ts(e.at)}"
                     for e in ctx.signoffs) + "."


def approval_rows(ctx: ReportContext) -> list[tuple[str, str]]:
    """The approval block: what was prepared, by whom and when, who decided what and when,
    and the state of the sign-off (every format alike)."""
    rows = [("Audit run", f"{ctx.audit_run_id} ({ctx.audit_kind})"),
            ("Prepared by", f"{ctx.reconciler}, audit started {fmt.ts(ctx.audit_started_at)}")]
    rows += [(f"{e.decision.capitalize()} by", f"{e.by} at {fmt.ts(e.at)}")
             for e in ctx.signoffs]
    if not ctx.signoffs:
        rows.append(("Reviewed and signed off by", "-"))
    rows.append(("State", signoff_text(ctx)))
    rows.append(("Integrity", "report.html's SHA-256 is recorded with the run in the report "
                              "database; each sign-off binds it and the run's figures "
                              "(`reckon verify-log` checks both)"))
    return rows


# ----------------------------------------------------------------------------- headline


def _currency_figures(c: CurrencySummary) -> tuple[Figure, ...]:
    """One currency's headline: its own sums, in its own digits."""
    code, n = c.currency, c.unexplained
    figures = [
        Figure("provisional_total", "Provisional total (stream)",
               fmt.money(c.provisional_total, code), fmt.plural(c.provisional_events, "event")),
        Figure("canonical_total", "Canonical total (replay)", fmt.money(c.canonical_total, code),
               fmt.plural(c.canonical_events, "event")),
        Figure("gap_total", "Gap", fmt.money(c.gap_total, code)),
        Figure("late_total", "Explained by late events", fmt.money(c.late_total, code),
               fmt.plural(c.late_events, "event")),
        Figure("duplicate_total", "Explained by duplicates", fmt.money(c.duplicate_total, code),
               fmt.plural(c.duplicate_events, "copy", "copies")),
        Figure("unexplained", "Unexplained",
               f"{fmt.money(unexplained_amount(c), code)} in {fmt.plural(n, 'row')}", bad=n > 0),
        Figure("completeness", "Completeness", fmt.percent(c.completeness)),
        Figure("rows", "Rows reconciled", f"{c.rows:,}"),
    ]
    # residuals that a tolerance let pass on EXPLAINED rows: shown, so that the figures add up
    # (gap = late - duplicates + unexplained + this); none with the default tolerance of 0
    if c.tolerated_total:
        figures.insert(6, Figure("tolerated_residual", "Residual within tolerance",
                                 fmt.money(c.tolerated_total, code)))
    return tuple(figures)


def headline_groups(ctx: ReportContext) -> tuple[Group, ...]:
    """Counts over every currency first (they may be added), then one group per currency."""
    h = ctx.headline
    codes = ", ".join(c.currency for c in h.currencies) or "none"
    counts = Group("", "All currencies (counts)", (
        Figure("rows", "Rows reconciled", f"{h.rows:,}", "(window, key, currency) rows"),
        Figure("unexplained_rows", "Unexplained rows", f"{h.unexplained_count:,}",
               bad=h.unexplained_count > 0),
        Figure("completeness", "Completeness", fmt.percent(h.completeness)),
        Figure("currencies", "Currencies", codes)))
    return (counts, *(Group(c.currency, c.currency, _currency_figures(c))
                      for c in h.currencies))


def _headline_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    quiet = () if ctx.headline.currencies else (Note(
        " on this day: neither the stream nor the replay has a total for it, so there is "
        "nothing to reconcile (a quiet day, or one before the stream started).",
        strong="No events", id="no-events"),)
    return (Figures(headline_groups(ctx)), *quiet, Note(
        "Per currency: gap = canonical - provisional; residual = gap - late + duplicate "
        "over-count. Amounts are exact, in each currency's own ISO 4217 decimal places, and "
        "amounts of different currencies are never added; counts (rows, events) may be. "
        "Completeness is the share of canonical events the stream counted once."))


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
    return rows + [row for c in h.currencies for row in _currency_rows(c)]


def _currency_rows(c: CurrencySummary) -> list[tuple[str, str, Any]]:
    """One currency's rows of summary.csv, amounts exact in its own digits."""
    code = c.currency
    return [(code, name, value) for name, value in (
        ("rows", c.rows), ("provisional_events", c.provisional_events),
        ("canonical_events", c.canonical_events), ("late_events", c.late_events),
        ("duplicate_events", c.duplicate_events),
        ("provisional_total", fmt.exact(c.provisional_total, code)),
        ("canonical_total", fmt.exact(c.canonical_total, code)),
        ("gap_total", fmt.exact(c.gap_total, code)),
        ("late_total", fmt.exact(c.late_total, code)),
        ("duplicate_total", fmt.exact(c.duplicate_total, code)),
        ("residual_total", fmt.exact(c.residual_total, code)),
        ("tolerated_residual", fmt.exact(c.tolerated_total, code)),
        ("unexplained_amount", fmt.exact(unexplained_amount(c), code)),
        ("unexplained_count", c.unexplained), ("completeness", c.completeness))]


# ----------------------------------------------------------------------------- configuration


# the page names a setting as the CLI and README do; configuration.csv and the recorded spec
# keep the field's key (``lateness``, ``grace``), which CSV readers and old warehouses use
_SETTING_LABELS = {key: name.replace("_", " ") for name, key in RENAMED.items()}


def _setting_label(key: str) -> str:
    """A configuration row's name on the page.

    >>> _setting_label("lateness"), _setting_label("window")
    ('watermark bound (recorded as lateness)', 'window')
    """
    return f"{_SETTING_LABELS[key]} (recorded as {key})" if key in _SETTING_LABELS else key


def _configuration_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    tables = Columns((
        Table(("setting", "value"), tuple((_setting_label(k), v) for k, v in ctx.configuration),
              widths=(60, 120), css="kv", row_heads=True),
        Table(("Delta table", "version read"), tuple((k, str(v)) for k, v in ctx.table_versions),
              numeric=frozenset({1}), widths=(60, 120), css="kv")))
    if not ctx.spec_versions:
        return (tables,)
    spec: tuple[Block, ...] = (Items("Event-time spec of the warehouse", ctx.spec_versions,
                                     "spec-versions"),)
    if len(ctx.spec_versions) > 1:
        spec += (Note("The spec changed: late events were judged by the version in force when "
                      "they came. Window, slide, clock skew and dedup horizon never change in a "
                      "warehouse, so canonical totals are comparable across versions."),)
    return (tables, *spec)


def _configuration_rows(ctx: ReportContext) -> list[tuple[str, Any]]:
    return [*ctx.configuration, *((f"version:{k}", v) for k, v in ctx.table_versions)]


# ----------------------------------------------------------------------------- counts


def status_table(ctx: ReportContext) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Rows per status, over every currency and per currency (counts only)."""
    cur = ctx.headline.currencies
    header = ("status", "all currencies", *(c.currency for c in cur))
    rows = [("(window, key, currency) rows", f"{ctx.headline.rows:,}",
             *(f"{c.rows:,}" for c in cur))]
    rows += [(status, f"{n:,}", *(f"{int(c.status_counts.get(status, 0)):,}" for c in cur))
             for status, n in ctx.status_counts]
    return header, rows


def _counts_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    header, rows = status_table(ctx)
    n = len(header)
    return (Table(header, tuple(rows), numeric=frozenset(range(1, n)),
                  widths=(2.5, *[1] * (n - 1)), css="kv", row_heads=True, status_col=0),)


def _status_rows(ctx: ReportContext) -> list[tuple[str, str, int]]:
    """status_counts.csv: (currency, status, rows); currency '' = over every currency."""
    rows = [("", status, n) for status, n in ctx.status_counts]
    for c in ctx.headline.currencies:
        rows += [(c.currency, status, int(c.status_counts.get(status, 0)))
                 for status, _ in ctx.status_counts]
    return rows


# ----------------------------------------------------------------------------- breaks


def break_summary(ctx: ReportContext) -> BreakSummary:
    """Every break of the run rolled up by cause, key, age and review status."""
    return summarise_breaks(ctx.all_breaks or ctx.breaks, [s for s, _n in ctx.status_counts])


def _break_summary_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    summary = break_summary(ctx)
    if not summary.total:
        return (Note("No breaks: every (window, key, currency) row matched."),)
    tables = tuple(
        Table((f"by {dimension}", "currency", "breaks", "gap", "residual"),
              tuple((r.group, r.currency, str(r.breaks), fmt.amount(r.gap, r.currency),
                     fmt.amount(r.residual, r.currency)) for r in rows),
              numeric=frozenset({2, 3, 4}), widths=(60, 20, 20, 40, 40), size=7.5,
              css="summary", data=(("dimension", dimension),),
              status_col=0 if dimension == "cause" else None)
        for dimension, rows in summary.sections())
    return (Note(f"{fmt.plural(summary.total, 'break')} (every non-MATCHED row), rolled up "
                 "four ways. Amounts per currency, in its own digits; never added across "
                 "currencies."), Columns(tables))


def _break_summary_rows(ctx: ReportContext) -> list[tuple[Any, ...]]:
    return [(dimension, r.group, r.currency, r.breaks, fmt.exact(r.gap, r.currency),
             fmt.exact(r.residual, r.currency))
            for dimension, rows in break_summary(ctx).sections() for r in rows]


_BREAK_COLUMNS = ("window (UTC)", "key", "currency", "provisional", "canonical", "gap", "late",
                  "dup.", "residual", "status", "review", "age (d)", "explanation")


# mm of the portrait page's 190, at 6 pt with 0.5 mm padding: one line holds each of
# "23:51:20\u201323:51:30Z", "merchant-0001", "1,234,567.89" (provisional, canonical),
# "-12,345.67" (gap, late, residual), "1,234.56" duplicated, "MISSING_IN_CANONICAL",
# "explained", "999" days and every header word; the explanation wraps between words
_BREAK_WIDTHS = (22.6, 17.5, 11.6, 15.2, 15.2, 12.6, 12.6, 10.8, 12.6, 26.9, 11.6, 5.6, 15.2)


def _breaks_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    capped = ctx.breaks_total > ctx.breaks_shown
    note = Note(f"Showing {ctx.breaks_shown} of {ctx.breaks_total} breaks of "
                f"{ctx.day.isoformat()} (every non-MATCHED row; windows in UTC)"
                f"{'; all of them are in ' if capped else ''}",
                link=("breaks.csv", "breaks.csv") if capped else None, tail=".")
    if not ctx.breaks:
        return (note,)
    rows = tuple((fmt.window(b.window_start, b.window_end, ctx.day), b.key, b.currency,
                  *(fmt.amount(v, b.currency) for v in (
                      b.provisional_amount, b.canonical_amount, b.gap_amount, b.late_amount,
                      b.duplicate_amount, b.residual_amount)),
                  b.status, b.review_status, "-" if b.age_days is None else str(b.age_days),
                  b.explanation) for b in ctx.breaks)
    return (note, Table(_BREAK_COLUMNS, rows, numeric=frozenset({3, 4, 5, 6, 7, 8, 11}),
                        widths=_BREAK_WIDTHS, size=6, pad=0.5, status_col=9))


def _breaks_rows(ctx: ReportContext) -> list[tuple[Any, ...]]:
    return [(b.window_start, b.window_end, b.key, b.currency, b.status,
             fmt.exact(b.provisional_amount, b.currency),
             fmt.exact(b.canonical_amount, b.currency), fmt.exact(b.gap_amount, b.currency),
             b.gap_count, fmt.exact(b.late_amount, b.currency),
             fmt.exact(b.duplicate_amount, b.currency),
             fmt.exact(b.residual_amount, b.currency), b.review_status, b.age_days,
             b.explanation) for b in (ctx.all_breaks or ctx.breaks)]


# ----------------------------------------------------------------------------- gap


def _gap_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    if not ctx.gap_series:
        return (Note("No reconciliation rows to draw for this day."),)
    return (Note(f"Rows per bucket of {ctx.gap_bucket_seconds} s, one panel per currency: "
                 "amounts of different currencies are never drawn on one axis."),)


def _gap_rows(ctx: ReportContext) -> list[tuple[Any, ...]]:
    return [(p.bucket_start, ctx.gap_bucket_seconds, p.currency, p.windows,
             fmt.exact(p.provisional_amount, p.currency),
             fmt.exact(p.canonical_amount, p.currency), fmt.exact(p.gap_amount, p.currency),
             fmt.exact(p.late_amount, p.currency), fmt.exact(p.residual_amount, p.currency),
             p.unexplained) for p in ctx.gap_series]


# ----------------------------------------------------------------------------- attribution


def _attribution_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    if not ctx.attribution:
        return (Note("No attribution rows for this run."),)
    rows = tuple((a.dimension, a.value, str(a.late_events), fmt.amounts(a.late_amounts),
                  str(a.all_events), fmt.percent(a.late_share, 2),
                  fmt.percent(a.event_share, 2), "-" if a.lift is None else str(a.lift))
                 for a in ctx.attribution)
    return (Table(("dimension", "value", "late events", "late amounts (per currency)",
                   "all events", "late share", "event share", "lift"), rows,
                  numeric=frozenset(range(2, 8)), widths=(24, 22, 16, 50, 18, 20, 20, 20),
                  size=7),)


def _attribution_rows(ctx: ReportContext) -> list[tuple[Any, ...]]:
    """attribution.csv: per value, one row of counts (currency '': counts over every
    currency) followed by one row per currency with that currency's late amount."""
    out: list[tuple[Any, ...]] = []
    for a in ctx.attribution:
        out.append(_attribution_counts(a))
        out += [(a.dimension, a.value, code, None, None, None, None, None, fmt.exact(v, code))
                for code, v in sorted(a.late_amounts.items())]
    return out


def _attribution_counts(a: AttributionRow) -> tuple[Any, ...]:
    return (a.dimension, a.value, "", a.late_events, a.all_events, a.late_share,
            a.event_share, a.lift, None)


# ----------------------------------------------------------------------------- lateness


def _histogram_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    if not ctx.lateness_histogram:
        return (Note("No arrival delays recorded for this day."),)
    return (Note("Events by arrival delay (arrival - event time), and late events by how far "
                 "past their window's close they came."),
            Table(("delay", "events", "late events"),
                  tuple((b.label, str(b.events), str(b.late_events))
                        for b in ctx.lateness_histogram),
                  numeric=frozenset({1, 2}), widths=(40, 40, 40), css="kv"))


def curves(ctx: ReportContext) -> list[tuple[str, tuple[CurveLine, ...]]]:
    """The lateness what-if curves, labelled, per batch first (what the stream did): every
    format lists them in this order. ``curves(ctx)[0][0] == PER_BATCH``."""
    return [(PER_BATCH, ctx.lateness_curve_batches), (PER_EVENT, ctx.lateness_curve)]


def curve_notes(ctx: ReportContext) -> list[str]:
    """What the report says under the curves: why they differ, and why the per-batch one is
    missing when it is (every format alike)."""
    notes = [CURVES_NOTE] if ctx.lateness_curve or ctx.lateness_curve_batches else []
    if ctx.batch_curve_note:
        notes.append(no_batch_curve(ctx.batch_curve_note))
    return notes


def _curve_table(ctx: ReportContext, label: str, points: tuple[CurveLine, ...]) -> Table:
    rows = tuple((str(p.bound_seconds), fmt.percent(p.completeness), str(p.admitted),
                  str(p.dropped), "-" if p.avg_emit_latency is None else
                  f"{p.avg_emit_latency:.3f}") for p in points)
    return Table(("bound L (s)", "completeness", "counted", "dropped", "avg emit latency (s)"),
                 rows, numeric=frozenset(range(5)), css="curve",
                 data=(("granularity", _CSV_GRANULARITY[label]),),
                 marked=frozenset(i for i, p in enumerate(points)
                                  if p.bound_seconds == ctx.configured_bound_seconds))


def _curve_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    if not (ctx.lateness_curve or ctx.lateness_curve_batches):
        return (Note("No lateness analysis for this day."),
                *(Note(n) for n in curve_notes(ctx)))
    rec = ctx.recommended_bound_seconds
    out: list[Block] = [Note(
        f"Configured bound L = {ctx.configured_bound_seconds} s; recommended "
        f"{f'{rec} s' if rec is not None else 'none (no candidate reaches the target)'} for "
        f"target completeness {fmt.percent(ctx.target_completeness, 2)}."),
        *(Note(n, css="note curve-note") for n in curve_notes(ctx))]
    for label, points in curves(ctx):
        out += [Heading(f"Completeness {label}"),
                _curve_table(ctx, label, points) if points else Note("Not available.")]
    return tuple(out)


def _curve_rows(ctx: ReportContext) -> list[tuple[Any, ...]]:
    return [(_CSV_GRANULARITY[label], p.bound_seconds, p.completeness, p.admitted, p.dropped,
             p.avg_emit_latency, p.bound_seconds == ctx.configured_bound_seconds,
             label == PER_EVENT and p.bound_seconds == ctx.recommended_bound_seconds)
            for label, points in curves(ctx) for p in points]


# ----------------------------------------------------------------------------- per source


def _per_source_rows(ctx: ReportContext) -> list[tuple[str, str, str, str, str, str]]:
    """The bounds per source (issue 41): each source's bound and events, then the day judged
    under them, under the best single bound, under one bound with inputs by partition and (per
    micro-batch only) as the stream was configured (what, bound, completeness or events and
    avg emit latency in seconds per event, then the same per micro-batch)."""
    rec = ctx.per_source
    if rec is None:
        return []
    rows = [(f"source {b.unit}", format_duration(b.bound), f"{b.events} events", "", "", "")
            for b in rec.bounds]
    single = rec.single or rec.single_fallback
    compare: list[tuple[str, str, str, Any]] = [
        (PER_SOURCE_ROWS[0], "bounds per source", "", rec.per_input),
        (PER_SOURCE_ROWS[1], "one bound" + ("" if rec.single else " (misses the target)"),
         format_duration(single.bound), single)]
    if rec.by_partition is not None:
        compare.append((PER_SOURCE_ROWS[2], "one bound, inputs by partition",
                        format_duration(rec.by_partition.bound), rec.by_partition))
    batches = dict(ctx.per_source_batches)
    for row in BEST_PER_BATCH_ROWS.values():
        if row in batches:
            compare.append((row, row, format_duration(int(batches[row].bound_seconds
                                                          * MICROS_PER_SECOND)), None))
    if PER_SOURCE_ROWS[3] in batches:
        compare.append((PER_SOURCE_ROWS[3], "the stream as configured",
                        ctx.configured_policy or "", None))
    return rows + [(what, bound, *_ratio_latency(pt), *_ratio_latency(batches.get(key)))
                   for key, what, bound, pt in compare]


def _ratio_latency(point: Any) -> tuple[str, str]:
    """A point's completeness and average emit latency as the table shows them ("" without a
    point, "-" without a window emitted)."""
    if point is None:
        return "", ""
    return (f"{point.completeness:.4%}",
            "-" if point.avg_emit_latency is None else f"{point.avg_emit_latency:.3f}")


def _per_source_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    rec = ctx.per_source
    if rec is None:
        return (Note("One source, or no events, this day: no bound per source to recommend."),)
    note = (f"A bound per source for target completeness {rec.target}, recommended from the "
            "day's own events (per event, inputs by partition and source, as a stream already "
            "running), against the best single bound"
            + ("." if rec.reached else ": no candidate combination reaches the target."))
    batches = ("Per micro-batch: the day's batches as the stream ran them, replayed under "
               "each row's bounds (what a stream with those bounds, reading the same batches, "
               "would have counted and when it would have emitted each window; the last row "
               "is what this stream did). The stream judges each batch against the watermark "
               "the previous one left, so it drops fewer events than the per-event what-if "
               "at the same bounds, and a smaller single bound may reach the target: the "
               "best per micro-batch is the single bound to compare a stream's bounds per "
               "source with."
               if ctx.per_source_batches else
               f"Per micro-batch: not available ({ctx.per_source_batches_note or 'no batches'}).")
    return (Note(note), Note(batches),
            Table(("", "bound", "completeness / events", "avg emit latency (s)",
                   "per micro-batch: completeness", "per micro-batch: avg emit latency (s)"),
                  tuple(_per_source_rows(ctx)), numeric=frozenset({1, 2, 3, 4, 5}),
                  css="per-source", row_heads=True))


# ----------------------------------------------------------------------------- watermark


def _watermark_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    batches = len({w.batch_id for w in ctx.watermark_series})
    if not batches:
        return (Note("No watermark progress recorded for this day."),)
    if any(w.partition is None for w in ctx.watermark_series) and (
            not _day_events(ctx) or not _batches_in_day(ctx)):
        return (Note(_no_batch_of_the_day(ctx)),)
    notes = [Note(f"{fmt.plural(batches, 'batch', 'batches')} of the stream, up to the one "
                  "that closed the day: each partition's watermark against the global one (the "
                  "lowest active partition holds it).")]
    held = _held_back_note(ctx)
    return tuple(notes + ([Note(held)] if held else []))


def _day_events(ctx: ReportContext) -> int:
    """The day's events, stream's and replay's: 0 on a quiet day."""
    return sum(c.provisional_events + c.canonical_events for c in ctx.headline.currencies)


def _batches_in_day(ctx: ReportContext) -> int:
    """How many batches shown left the global watermark inside the day; the rest is the batch
    that closed it. 0 on a day the watermark jumped over."""
    end = datetime.combine(ctx.day + timedelta(days=1), time(), UTC)
    return len({w.batch_id for w in ctx.watermark_series if w.partition is None
                and w.watermark is not None and w.watermark < end})


def _no_batch_of_the_day(ctx: ReportContext) -> str:
    """The watermark section of a day without events, or one no batch's watermark stopped
    in: say so, and which batch took the watermark past the day, rather than describe the
    batches of a later day as this day's.

    Example: "The stream processed no batch of this day (it archived no events of it): batch
    7, of a later day, took the watermark past it (to 2026-11-26T23:50:01Z)."
    """
    closing = max((w for w in ctx.watermark_series if w.partition is None),
                  key=lambda w: (w.processed_at, w.batch_id))
    to = fmt.ts(closing.watermark)
    if not _day_events(ctx):
        return ("The stream processed no batch of this day (it archived no events of it): "
                f"batch {closing.batch_id}, of a later day, took the watermark past it (to "
                f"{to}).")
    return (f"No batch of the stream left its watermark inside this day: batch "
            f"{closing.batch_id} took it past the day (to {to}).")


def _held_back_note(ctx: ReportContext) -> str | None:
    """Which input held the global watermark back in most of the batches shown, and the
    largest hold: the first question when windows closed late. None when the progress table
    predates the record (or nothing held it)."""
    holds = [w for w in ctx.watermark_series if w.partition is None and w.held_by]
    if not holds:
        return None
    counts: dict[str, int] = {}
    for w in holds:
        counts[str(w.held_by)] = counts.get(str(w.held_by), 0) + 1
    top, times = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    most = max((w.held_back_seconds for w in holds if w.held_by == top
                and w.held_back_seconds is not None), default=None)
    shown = len({w.batch_id for w in ctx.watermark_series if w.partition is None})
    return (f"Held back most by {top}: in {times} of the {shown} batches shown"
            + ("" if most is None else f", by up to {fmt.seconds(most)} s") + ".")


def _watermark_rows(ctx: ReportContext) -> list[tuple[Any, ...]]:
    return [(w.batch_id, w.processed_at, "global" if w.partition is None else w.partition,
             w.watermark, w.idle, w.held_by, w.held_back_seconds)
            for w in ctx.watermark_series]


# ----------------------------------------------------------------------------- quality, approval


def _quality_body(ctx: ReportContext, docs: str | None) -> tuple[Block, ...]:
    q = ctx.quality
    check = Note("No data-quality check run for this day.") if q is None else Note(
        f"Check run {q.run_id}: {'passed' if q.success else 'FAILED'}, {q.blocking_failures} "
        f"blocking failure(s), {q.warnings} warning(s) over {q.expectations} expectations in "
        f"{q.suites} suites.", css="")
    if docs is None:
        return (check,)
    return (check, Note("Great Expectations Data Docs: ", link=(docs, docs), id="data-docs",
                        tail=" (a relative link: keep the reports folder together)", css=""))


def _quality_rows(ctx: ReportContext) -> list[tuple[str, Any]]:
    q = ctx.quality
    if q is None:
        return [("check_run_id", None)]
    return [("check_run_id", q.run_id), ("success", q.success),
            ("blocking_failures", q.blocking_failures), ("warnings", q.warnings),
            ("expectations", q.expectations), ("suites", q.suites)]


def _approval_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    return (Table(("step", "detail"), tuple(approval_rows(ctx)), widths=(45, 135),
                  css="kv approval", row_heads=True),)


# ----------------------------------------------------------------------------- the list

SECTIONS: tuple[Section, ...] = (
    Section("headline", "Headline", "summary.csv", ("currency", "figure", "value"),
            _summary_rows, _headline_body,
            aside=lambda _ctx: "amounts per currency, never added across currencies"),
    Section("configuration", "Configuration", "configuration.csv", ("setting", "value"),
            _configuration_rows, _configuration_body),
    Section("counts", "Row counts and statuses", "status_counts.csv",
            ("currency", "status", "rows"), _status_rows, _counts_body),
    Section("break-summary", "Break summary", "break_summary.csv",
            ("dimension", "group", "currency", "breaks", "gap_amount", "residual_amount"),
            _break_summary_rows, _break_summary_body),
    Section("breaks", "Breaks", "breaks.csv",
            ("window_start", "window_end", "key", "currency", "status", "provisional_amount",
             "canonical_amount", "gap_amount", "gap_count", "late_amount", "duplicate_amount",
             "residual_amount", "review_status", "age_days", "explanation"),
            _breaks_rows, _breaks_body,
            aside=lambda ctx: f"{ctx.breaks_shown} of {ctx.breaks_total} shown; all in "
                              "breaks.csv"),
    Section("gap", "Gap over the day", "gap_by_window.csv",
            ("bucket_start", "bucket_seconds", "currency", "windows", "provisional_amount",
             "canonical_amount", "gap_amount", "late_amount", "residual_amount",
             "unexplained_rows"), _gap_rows, _gap_body, charts=("gap_by_window",)),
    Section("attribution", "Who is late", "attribution.csv",
            ("dimension", "value", "currency", "late_events", "all_events", "late_share",
             "event_share", "lift", "late_amount"), _attribution_rows, _attribution_body),
    Section("lateness", "Lateness distribution", "lateness_histogram.csv",
            ("from_seconds", "to_seconds", "events", "late_events"),
            lambda ctx: [(b.lo_seconds, b.hi_seconds, b.events, b.late_events)
                         for b in ctx.lateness_histogram],
            _histogram_body, charts=("lateness_histogram",)),
    Section("lateness-curve", "Lateness what-if", "lateness_curve.csv",
            ("granularity", "bound_seconds", "completeness", "admitted", "dropped",
             "avg_emit_latency_seconds", "configured", "recommended"),
            _curve_rows, _curve_body, charts=("lateness_curve",)),
    Section("bounds-per-source", "Bounds per source", "bounds_per_source.csv",
            ("what", "bound", "completeness_or_events", "avg_emit_latency_seconds",
             "per_batch_completeness", "per_batch_avg_emit_latency_seconds"),
            _per_source_rows, _per_source_body),
    Section("watermark", "Watermark progress", "watermark_progress.csv",
            ("batch_id", "processed_at", "partition", "watermark", "idle", "held_by",
             "held_back_seconds"), _watermark_rows,
            _watermark_body, charts=("watermark_progress",)),
    Section("quality", "Data quality", "quality.csv", ("figure", "value"), _quality_rows,
            _quality_body),
    Section("approval", "Approval", "approval.csv", ("step", "detail"),
            lambda ctx: approval_rows(ctx), _approval_body),
)
