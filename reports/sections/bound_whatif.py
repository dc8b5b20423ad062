"""The report's sections on event time: the lateness distribution, the bound what-if
curves, the bounds per source, and the watermark's progress (which input held it back).

Each section's body (blocks) and CSV rows are built here from the ``ReportContext``;
``SECTIONS`` lists them in report order. ``curve_summary_rows`` gives summary.csv the curves
it lists (the headline's CSV).
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

from audits.bound_whatif_batches import (
    BEST_PER_BATCH_ROWS,
    CURVES_NOTE,
    PER_BATCH,
    PER_EVENT,
    PER_SOURCE_ROWS,
    no_batch_curve,
)
from reckon.timeutil import MICROS_PER_SECOND, format_duration
from reports import formatting as fmt
from reports.context import CurveLine, ReportContext
from reports.sections.blocks import Block, Heading, Note, Section, Table

__all__ = ["SECTIONS", "curve_notes", "curve_summary_rows", "curves"]

_CSV_GRANULARITY = {PER_BATCH: "per_batch", PER_EVENT: "per_event"}  # lateness_curve.csv


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
    """The bound what-if curves, labelled, per batch first (what the stream did): every
    format lists them in this order. ``curves(ctx)[0][0] == PER_BATCH``."""
    return [(PER_BATCH, ctx.lateness_curve_batches), (PER_EVENT, ctx.lateness_curve)]


def curve_notes(ctx: ReportContext) -> list[str]:
    """What the report says under the curves: why they differ, and why the per-batch one is
    missing when it is (every format alike); for a run recorded without its what-ifs, only
    that line (``ReportContext.whatif_note``)."""
    if ctx.whatif_note:  # the run was recorded without its what-ifs: say so, nothing else
        return [ctx.whatif_note]
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
    if ctx.whatif_note:
        return (Note(ctx.whatif_note),)
    if not (ctx.lateness_curve or ctx.lateness_curve_batches):
        return (Note("No bound what-if for this day."),
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


def curve_summary_rows(ctx: ReportContext) -> list[tuple[str, str, Any]]:
    """summary.csv's rows on the curves (currency ''): which curves the report has, then
    the notes under them."""
    rows: list[tuple[str, str, Any]] = [
        ("", f"lateness_curve_{_CSV_GRANULARITY[label]}", label) for label, _ in curves(ctx)]
    return rows + [("", "lateness_curves_note", note) for note in curve_notes(ctx)]


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
    if ctx.whatif_note:
        return (Note(ctx.whatif_note),)
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


# ----------------------------------------------------------------------------- the list

SECTIONS: tuple[Section, ...] = (
    Section("lateness", "Lateness distribution", "lateness_histogram.csv",
            ("from_seconds", "to_seconds", "events", "late_events"),
            lambda ctx: [(b.lo_seconds, b.hi_seconds, b.events, b.late_events)
                         for b in ctx.lateness_histogram],
            _histogram_body, charts=("lateness_histogram",)),
    Section("lateness-curve", "Bound what-if", "lateness_curve.csv",
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
)
