"""The day's lateness what-ifs, computed once when an audit run is recorded and stored with it.

Why here and not at render time: a report is what finance signs, so every figure in it must be
one the signed audit run saw. Computing the what-ifs while rendering meant that a stream still
appending stragglers (or a re-streamed warehouse) changed the curves of a run already audited.
So the audit computes them as it records its run (``audits.audit_record.record_run``, side by
side with the late attribution), reading the event log and watermark progress at the versions
the audit itself read (the event log its replay pinned), and the report database keeps them
keyed by the run's id; ``reports/context.py`` only reads them back.

What is computed is what the report's what-if sections show: the per-event curve with the
configured, recommended and target values (``audits.bound_whatif_duck.analyze_day_duck``), the
per-batch curve or the one line saying why not (``audits.bound_whatif_batches``), the bounds per
source (``analyze_inputs_duck``) and the same comparison per micro-batch with the policy the
day's batches ran with (``per_source_batches``, ``whatif_of_day``). All on DuckDB over delta-rs:
no JVM, no pyspark imported by this module.

Example::

    whatif = day_whatif(settings.whatif_config(), date(2026, 1, 1), pinned={"event_log": 12})
    whatif.recommended_bound_seconds  # Decimal('5')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from reckon.engine_config import WhatIfConfig
from reckon.errors import UsageError
from reckon.timeutil import MICROS_PER_SECOND
from reckon.whatif_inputs import PerInputRecommendation
from storage import table_names as tb

__all__ = ["CurveLine", "DayWhatIf", "curve_line", "day_whatif", "exact_seconds"]


@dataclass(frozen=True)
class CurveLine:
    """One bound of a what-if curve as the report shows it: the bound in exact seconds, the
    completeness (a ratio for choosing a bound, never money: a float, stored as its exact
    ``repr``), the (event, window) pairs counted and dropped, and the average emit latency in
    seconds (None when no window closed).

    Example: ``CurveLine(Decimal("3"), 0.995, 995, 5, 1.25)``."""

    bound_seconds: Decimal
    completeness: float
    admitted: int
    dropped: int
    avg_emit_latency: float | None


@dataclass(frozen=True)
class DayWhatIf:
    """The what-ifs of one audit run's day, as recorded with the run.

    ``curve``: per event (as if every event moved the watermark); ``batch_curve``: per
    micro-batch, as the stream ran, or empty with ``batch_curve_note`` saying why;
    ``configured``/``recommended``/``target``: the per-event curve's bound in force, the
    smallest bound reaching the target (None: none does) and the target; ``per_source``: a
    bound per source against the best single bound (None: one source or no events);
    ``per_source_batches``: that comparison per micro-batch, by row name
    (``audits.bound_whatif_batches.PER_SOURCE_ROWS``), or empty with ``per_source_batches_note``;
    ``configured_policy``: ``describe()`` of the watermark policy the day's batches ran with.

    Example: ``DayWhatIf(batch_curve_note="the warehouse has no event_log")`` is a day of a
    warehouse the stream never wrote."""

    curve: tuple[CurveLine, ...] = ()
    configured_bound_seconds: Decimal | None = None
    recommended_bound_seconds: Decimal | None = None
    target_completeness: Decimal | None = None
    batch_curve: tuple[CurveLine, ...] = ()
    batch_curve_note: str | None = None
    per_source: PerInputRecommendation | None = None
    per_source_batches: tuple[tuple[str, CurveLine], ...] = ()
    per_source_batches_note: str | None = None
    configured_policy: str | None = None


def exact_seconds(us: int) -> Decimal:
    """Microseconds as exact seconds without trailing zeros.

    >>> exact_seconds(3_000_000), exact_seconds(1_500_000)
    (Decimal('3'), Decimal('1.5'))
    """
    return (Decimal(us) / Decimal(MICROS_PER_SECOND)).normalize() + Decimal(0)


def curve_line(point: Any) -> CurveLine:
    """A ``reckon.whatif.CurvePoint`` (bound in microseconds) as a ``CurveLine``.

    >>> from reckon.whatif import CurvePoint
    >>> curve_line(CurvePoint(2_000_000, 0.5, 1, 1, None)).bound_seconds
    Decimal('2')
    """
    return CurveLine(bound_seconds=exact_seconds(point.bound), completeness=point.completeness,
                     admitted=point.admitted, dropped=point.dropped,
                     avg_emit_latency=point.avg_emit_latency)


def day_whatif(config: WhatIfConfig, day: date,
               pinned: Mapping[str, int | None] | None = None) -> DayWhatIf:
    """Every what-if of ``day`` the report shows, read through DuckDB at the ``pinned``
    versions (table -> Delta version; a table not named, or None, is read at its newest).

    Example: ``day_whatif(config, day, {"event_log": 12, "watermark_progress": 40})``."""
    from audits.bound_whatif_duck import DuckReads

    if not tb.table_exists(config.warehouse, tb.EVENT_LOG):
        return DayWhatIf(batch_curve_note=f"the warehouse has no {tb.EVENT_LOG}",
                         configured_policy=config.rules.watermark.describe())
    reads = DuckReads(config.warehouse, versions=pinned)
    curve = _per_event(reads, config, day)
    batch_curve, batch_note = _per_batch(reads, config, day)
    per_source = _per_source(reads, config, day)
    by_batch, by_batch_note, policy = _per_source_batches(reads, config, day, per_source)
    return DayWhatIf(curve=curve["curve"], configured_bound_seconds=curve["configured"],
                     recommended_bound_seconds=curve["recommended"],
                     target_completeness=curve["target"], batch_curve=batch_curve,
                     batch_curve_note=batch_note, per_source=per_source,
                     per_source_batches=by_batch, per_source_batches_note=by_batch_note,
                     configured_policy=policy)


def _per_event(reads: Any, config: WhatIfConfig, day: date) -> dict[str, Any]:
    """The per-event curve and its configured, recommended and target values (all empty on
    a day without events)."""
    from audits.bound_whatif_duck import analyze_day_duck

    try:
        analysis = analyze_day_duck(reads, config, day)
    except UsageError:  # no events that day
        return {"curve": (), "configured": None, "recommended": None, "target": None}
    rec = analysis.recommended
    return {"curve": tuple(curve_line(p) for p in analysis.points),
            "configured": exact_seconds(analysis.configured_bound),
            "recommended": None if rec is None else exact_seconds(rec.bound),
            "target": analysis.target}


def _per_batch(reads: Any, config: WhatIfConfig, day: date
               ) -> tuple[tuple[CurveLine, ...], str | None]:
    """The per-batch curve, or no points and the one line that says why (no archived events
    that day, batches of several stream queries)."""
    from audits.bound_whatif_batches import analyze_day_batches

    try:
        curve = analyze_day_batches(reads, config, day)
    except UsageError as exc:
        return (), str(exc)
    return tuple(curve_line(p) for p in curve.points), None


def _per_source(reads: Any, config: WhatIfConfig, day: date) -> PerInputRecommendation | None:
    """Bounds per source for the day (issue 41), or None for a day of one source or none."""
    from audits.bound_whatif_duck import analyze_inputs_duck

    try:
        rec = analyze_inputs_duck(reads, config, day)
    except UsageError:  # no events that day
        return None
    return rec if len(rec.bounds) > 1 else None


def _per_source_batches(reads: Any, config: WhatIfConfig, day: date,
                        rec: PerInputRecommendation | None
                        ) -> tuple[tuple[tuple[str, CurveLine], ...], str | None, str]:
    """The per-source comparison per micro-batch, or nothing and the one line that says why;
    and the policy its "the stream as configured" row is: the one the day's batches ran with
    (``whatif_of_day``), not a spec changed since."""
    from audits.bound_whatif_batches import per_source_batches, whatif_of_day

    if rec is None:
        return (), None, config.rules.watermark.describe()
    ran = whatif_of_day(reads, config, day)
    points, why_not = per_source_batches(reads, ran, day, rec)
    return (tuple((name, curve_line(p)) for name, p in points.items()), why_not,
            ran.rules.watermark.describe())
