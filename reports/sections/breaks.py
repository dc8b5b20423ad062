"""The report's sections on breaks: the break summary (rolled up four ways), every break,
the gap over the day, and who is late (attribution).

Each section's body (blocks) and CSV rows are built here from the ``ReportContext``;
``SECTIONS`` lists them in report order.
"""

from __future__ import annotations

from typing import Any

from audits.records import AttributionRow
from reckon.materiality import is_material, material_words
from reports import formatting as fmt
from reports.context import BreakLine, ReportContext
from reports.sections.blocks import Block, Columns, Note, Section, Table
from reports.summary import BreakSummary, summarise_breaks

__all__ = ["SECTIONS", "break_summary"]


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
#: The column a material break is marked in (reckon.materiality's words, as breaks.csv's
#: ``material`` column and the workbench write them: ``material`` or ``-``), before the
#: explanation; only while the run has a material_gap.
_MATERIAL_COLUMN = "material"

# mm, at 6 pt with 0.5 mm padding, on a landscape page (277 mm inside the margins): one line
# holds each of "23:51:20\u201323:51:30Z", "merchant-0001", "1,234,567.89" (provisional,
# canonical), "-12,345.67" (gap, late, residual), "1,234.56" duplicated,
# "MISSING_IN_CANONICAL", "explained", "999" days, "material" and every header word; the
# explanation gets the rest, so a demo break's ("late side output explains 1 event (JPY
# 4,583)") is one line too: the list is one line a break
_BREAK_WIDTHS = (22.6, 17.5, 11.6, 15.2, 15.2, 12.6, 12.6, 10.8, 12.6, 26.9, 11.6, 9.6)
_MATERIAL_WIDTH = 11.1
_LANDSCAPE_WIDTH = 277.0


def _break_table_shape(marked: bool) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """The break list's header and PDF widths, with the material column when ``marked``.

    >>> header, widths = _break_table_shape(True)
    >>> header[-2:], round(sum(widths), 1)
    (('material', 'explanation'), 277.0)
    """
    extra = ((_MATERIAL_COLUMN,), (_MATERIAL_WIDTH,)) if marked else ((), ())
    fixed = (*_BREAK_WIDTHS, *extra[1])
    return ((*_BREAK_COLUMNS[:-1], *extra[0], _BREAK_COLUMNS[-1]),
            (*fixed, round(_LANDSCAPE_WIDTH - sum(fixed), 1)))


def _material(ctx: ReportContext, b: BreakLine) -> bool | None:
    """Whether ``b`` is material under the report's ``material_gap`` (reckon.materiality)."""
    return is_material(b.gap_amount, b.currency, dict(ctx.material_gap))


def _materiality_note(ctx: ReportContext) -> str:
    """``; 3 material (absolute gap at least EUR 1,000.00, JPY 100,000; ...)`` or nothing."""
    if not ctx.material_gap:
        return ""
    n = sum(1 for b in (ctx.all_breaks or ctx.breaks) if _material(ctx, b))
    rule = ", ".join(fmt.money(v, code) for code, v in ctx.material_gap)
    return (f"; {n} material (absolute gap at least {rule}; any other currency: every "
            "break), marked in the material column")


def _breaks_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    capped = ctx.breaks_total > ctx.breaks_shown
    note = Note(f"Showing {ctx.breaks_shown} of {ctx.breaks_total} breaks of "
                f"{ctx.day.isoformat()} (every non-MATCHED row; windows in UTC)"
                f"{_materiality_note(ctx)}"
                f"{'; all of them are in ' if capped else ''}",
                link=("breaks.csv", "breaks.csv") if capped else None, tail=".")
    if not ctx.breaks:
        return (note,)
    marked = bool(ctx.material_gap)
    header, widths = _break_table_shape(marked)
    rows = tuple((fmt.window(b.window_start, b.window_end, ctx.day), b.key, b.currency,
                  *(fmt.amount(v, b.currency) for v in (
                      b.provisional_amount, b.canonical_amount, b.gap_amount, b.late_amount,
                      b.duplicate_amount, b.residual_amount)),
                  b.status, b.review_status, "-" if b.age_days is None else str(b.age_days),
                  *((material_words(_material(ctx, b)),) if marked else ()), b.explanation)
                 for b in ctx.breaks)
    return (note, Table(header, rows, numeric=frozenset({3, 4, 5, 6, 7, 8, 11}),
                        widths=widths, size=6, pad=0.5, status_col=9, landscape=True))


def _breaks_rows(ctx: ReportContext) -> list[tuple[Any, ...]]:
    return [(b.window_start, b.window_end, b.key, b.currency, b.status,
             fmt.exact(b.provisional_amount, b.currency),
             fmt.exact(b.canonical_amount, b.currency), fmt.exact(b.gap_amount, b.currency),
             b.gap_count, fmt.exact(b.late_amount, b.currency),
             fmt.exact(b.duplicate_amount, b.currency),
             fmt.exact(b.residual_amount, b.currency), b.review_status, b.age_days,
             b.explanation, material_words(_material(ctx, b)))
            for b in (ctx.all_breaks or ctx.breaks)]


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


# ----------------------------------------------------------------------------- the list

SECTIONS: tuple[Section, ...] = (
    Section("break-summary", "Break summary", "break_summary.csv",
            ("dimension", "group", "currency", "breaks", "gap_amount", "residual_amount"),
            _break_summary_rows, _break_summary_body),
    Section("breaks", "Breaks", "breaks.csv",
            ("window_start", "window_end", "key", "currency", "status", "provisional_amount",
             "canonical_amount", "gap_amount", "gap_count", "late_amount", "duplicate_amount",
             "residual_amount", "review_status", "age_days", "explanation", "material"),
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
)
