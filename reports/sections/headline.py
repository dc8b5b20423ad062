"""The report's first sections, the run's figures: the headline (per currency, never added
across currencies), the configuration it ran with, and the rows per status.

Each section's body (blocks) and CSV rows are built here from the ``ReportContext``;
``SECTIONS`` lists them in report order.
"""

from __future__ import annotations

from typing import Any

from audits.records import CurrencySummary
from reckon.vocabulary import STORED_KEYS
from reports import formatting as fmt
from reports.context import ReportContext, unexplained_amount
from reports.sections.blocks import (
    Block,
    Columns,
    Figure,
    Figures,
    Group,
    Items,
    Note,
    Section,
    Table,
)
from reports.sections.bound_whatif import curve_summary_rows

__all__ = ["SECTIONS", "headline_groups", "status_table"]




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
    rows += curve_summary_rows(ctx)
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


# the page names a setting as the CLI and README do; configuration.csv, the audit run's
# parameters and the recorded spec keep the key the warehouse records (reckon.vocabulary
# STORED_KEYS), which CSV readers and old warehouses use
_SETTING_LABELS = {key: name.replace("_", " ") for name, key in STORED_KEYS.items()}


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


# ----------------------------------------------------------------------------- the list

SECTIONS: tuple[Section, ...] = (
    Section("headline", "Headline", "summary.csv", ("currency", "figure", "value"),
            _summary_rows, _headline_body,
            aside=lambda _ctx: "amounts per currency, never added across currencies"),
    Section("configuration", "Configuration", "configuration.csv", ("setting", "value"),
            _configuration_rows, _configuration_body),
    Section("counts", "Row counts and statuses", "status_counts.csv",
            ("currency", "status", "rows"), _status_rows, _counts_body),
)
