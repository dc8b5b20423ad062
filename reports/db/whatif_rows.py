"""An audit run's lateness what-ifs (``audits.day_whatif.DayWhatIf``) as rows of
``audit_whatifs`` and ``audit_whatif_points``, and back.

Why its own module: the repository (reports/db/repository.py) is the one door, and it writes
these rows in the transaction that records the run, so a run never becomes current without
the what-ifs it was audited with; the mapping itself (which curve a point belongs to, the
per-source JSON) is detail the door need not show. Every value reads back equal to what was
written: bounds and targets exact Decimals, ratios the same floats (their ``repr``), the
per-source recommendation through its own JSON.

Example:
    >>> with engine.begin() as conn:  # doctest: +SKIP
    ...     write_whatif(conn, "audit-2026-01-01-x", whatif)
    ...     read_whatif(conn, "audit-2026-01-01-x") == whatif
    True
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from audits.day_whatif import CurveLine, DayWhatIf
from reckon.whatif_inputs import PerInputRecommendation
from reports.db.models import AUDIT_WHATIF_POINTS, AUDIT_WHATIFS

__all__ = ["PER_BATCH_CURVE", "PER_EVENT_CURVE", "PER_SOURCE_CURVE", "read_whatif",
           "write_whatif"]

PER_EVENT_CURVE = "per_event"
PER_BATCH_CURVE = "per_batch"
PER_SOURCE_CURVE = "per_source_batches"


def _point_rows(run_id: str, whatif: DayWhatIf) -> list[dict[str, Any]]:
    """Every point of every curve, in its curve's order (``seq``)."""
    curves: list[tuple[str, list[tuple[str, CurveLine]]]] = [
        (PER_EVENT_CURVE, [("", p) for p in whatif.curve]),
        (PER_BATCH_CURVE, [("", p) for p in whatif.batch_curve]),
        (PER_SOURCE_CURVE, list(whatif.per_source_batches))]
    return [{"run_id": run_id, "curve": curve, "seq": seq, "label": label,
             "bound_seconds": p.bound_seconds, "completeness": float(p.completeness),
             "admitted": int(p.admitted), "dropped": int(p.dropped),
             "avg_emit_latency": None if p.avg_emit_latency is None
             else float(p.avg_emit_latency)}
            for curve, points in curves for seq, (label, p) in enumerate(points)]


def write_whatif(conn: sa.Connection, run_id: str, whatif: DayWhatIf) -> None:
    """Insert ``whatif`` as the what-ifs of ``run_id`` (inside the caller's transaction)."""
    rec = whatif.per_source
    conn.execute(sa.insert(AUDIT_WHATIFS).values(
        run_id=run_id, configured_bound_seconds=whatif.configured_bound_seconds,
        recommended_bound_seconds=whatif.recommended_bound_seconds,
        target_completeness=whatif.target_completeness,
        batch_curve_note=whatif.batch_curve_note,
        per_source=None if rec is None else json.dumps(rec.to_json_dict(), sort_keys=True),
        per_source_batches_note=whatif.per_source_batches_note,
        configured_policy=whatif.configured_policy))
    points = _point_rows(run_id, whatif)
    if points:
        conn.execute(sa.insert(AUDIT_WHATIF_POINTS), points)


def read_whatif(conn: sa.Connection, run_id: str) -> DayWhatIf | None:
    """The what-ifs recorded with ``run_id``, or None for a run recorded without them."""
    w, p = AUDIT_WHATIFS, AUDIT_WHATIF_POINTS
    row = conn.execute(sa.select(w).where(w.c.run_id == run_id)).first()
    if row is None:
        return None
    curves: dict[str, list[tuple[str, CurveLine]]] = {}
    for r in conn.execute(sa.select(p).where(p.c.run_id == run_id)
                          .order_by(p.c.curve, p.c.seq)):
        curves.setdefault(r.curve, []).append((r.label, CurveLine(
            bound_seconds=r.bound_seconds, completeness=r.completeness, admitted=int(r.admitted),
            dropped=int(r.dropped), avg_emit_latency=r.avg_emit_latency)))
    return DayWhatIf(
        curve=tuple(line for _, line in curves.get(PER_EVENT_CURVE, ())),
        configured_bound_seconds=row.configured_bound_seconds,
        recommended_bound_seconds=row.recommended_bound_seconds,
        target_completeness=row.target_completeness,
        batch_curve=tuple(line for _, line in curves.get(PER_BATCH_CURVE, ())),
        batch_curve_note=row.batch_curve_note,
        per_source=None if row.per_source is None
        else PerInputRecommendation.from_json_dict(json.loads(row.per_source)),
        per_source_batches=tuple(curves.get(PER_SOURCE_CURVE, ())),
        per_source_batches_note=row.per_source_batches_note,
        configured_policy=row.configured_policy)
