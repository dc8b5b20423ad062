"""A run's review state read from the report database: its decisions in the sign-off log and
its reconciler, handed to the one rule (reckon.signoff.review_state). Every view (workbench,
report, approval record, CLI, export) reads states here; no view counts decisions itself.

Example:
    >>> review_words(review_states(db, ["nightly-2026-01-01"], 2)["nightly-2026-01-01"])
    ... # doctest: +SKIP
    'Awaiting sign-off: 1 of 2 approvals (bob)'
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from reckon.signoff import DECISIONS, ReviewState, review_state
from reports.db.models import AUDIT_RUNS, SIGNOFF_LOG
from reports.db.repository import ReportDB

__all__ = ["RunDecision", "review_states", "run_decisions"]


@dataclass(frozen=True)
class RunDecision:
    """One decision of the sign-off log on a run (a break action is not one), as read."""

    seq: int
    at: datetime
    run_id: str
    by: str
    decision: str
    note: str
    entry_hash: str


def run_decisions(conn: sa.Connection, run_ids: Collection[str]) -> dict[str, list[RunDecision]]:
    """The decisions on each of ``run_ids`` (break actions left out), oldest first."""
    log = SIGNOFF_LOG
    out: dict[str, list[RunDecision]] = {run_id: [] for run_id in run_ids}
    if not out:
        return out
    rows = conn.execute(sa.select(log.c.seq, log.c.at, log.c.run_id, log.c.by, log.c.decision,
                                  log.c.note, log.c.entry_hash)
                        .where(log.c.run_id.in_(list(out)), log.c.decision.in_(DECISIONS))
                        .order_by(log.c.seq)).all()
    for r in rows:
        out[r.run_id].append(RunDecision(seq=int(r.seq), at=r.at, run_id=r.run_id, by=r.by,
                                         decision=r.decision, note=r.note,
                                         entry_hash=r.entry_hash))
    return out


def review_states(db: ReportDB, run_ids: Collection[str], required_approvers: int = 1
                  ) -> dict[str, ReviewState]:
    """The review state of each known run of ``run_ids`` (reckon.signoff.review_state over its
    log entries, its reconciler and its row count: a run of no rows has nothing to sign); an
    unknown run id is left out."""
    runs = AUDIT_RUNS
    with db.ready().connect() as conn:
        known = conn.execute(sa.select(runs.c.run_id, runs.c.reconciler, runs.c.rows)
                             .where(runs.c.run_id.in_(list(run_ids)))).all()
        decided = run_decisions(conn, [r.run_id for r in known])
    return {r.run_id: review_state([(e.by, e.decision) for e in decided[r.run_id]],
                                   reconciler=str(r.reconciler), required=required_approvers,
                                   rows=int(r.rows))
            for r in known}
