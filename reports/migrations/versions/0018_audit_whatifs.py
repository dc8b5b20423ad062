"""The lateness what-ifs are recorded with the audit run (issue 63).

* ``audit_whatifs``: one row per audit run: the per-event curve's configured, recommended and
  target values (exact decimals), why the per-batch curve or the per-source comparison per
  micro-batch is missing when it is, the bounds per source (their JSON, decimals as text) and
  the watermark policy the day's batches ran with.
* ``audit_whatif_points``: the curves' points, keyed (run_id, curve, seq): bounds as exact
  decimals, completeness and latency as the exact ``repr`` of their float (ratios, not money).

The audit computes them as it records its run (audits/day_whatif.py); the report and the
workbench only read them. Runs recorded before this revision have none: the report says
"not recorded with this audit run" and names the re-audit. No sequence is created (the points'
key is their own), so the reconciler role needs no new sequence grant on PostgreSQL.

Revision ID: 0018_audit_whatifs
Revises: 0017_run_material_gap
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import sqlalchemy as sa
from alembic import op

revision: str = "0018_audit_whatifs"
down_revision: str | None = "0017_run_material_gap"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_GRANTS = """
GRANT SELECT ON audit_whatifs, audit_whatif_points
  TO reckon_reconciler, reckon_reviewer, reckon_workbench;
GRANT INSERT ON audit_whatifs, audit_whatif_points TO reckon_reconciler;
"""


def _exact() -> sa.types.TypeEngine[Decimal]:
    """reports.db.types.ExactDecimal as this revision creates it (spelled out, not imported,
    so the revision stays what it was when models change)."""
    return sa.Numeric().with_variant(sa.Text(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "audit_whatifs",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("configured_bound_seconds", _exact(), nullable=True),
        sa.Column("recommended_bound_seconds", _exact(), nullable=True),
        sa.Column("target_completeness", _exact(), nullable=True),
        sa.Column("batch_curve_note", sa.Text(), nullable=True),
        sa.Column("per_source", sa.Text(), nullable=True),
        sa.Column("per_source_batches_note", sa.Text(), nullable=True),
        sa.Column("configured_policy", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["audit_runs.run_id"],
                                name="fk_audit_whatifs_run"),
    )
    op.create_table(
        "audit_whatif_points",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("curve", sa.String(40), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("label", sa.String(200), nullable=False),
        sa.Column("bound_seconds", _exact(), nullable=False),
        sa.Column("completeness", sa.Text(), nullable=False),
        sa.Column("admitted", sa.BigInteger(), nullable=False),
        sa.Column("dropped", sa.BigInteger(), nullable=False),
        sa.Column("avg_emit_latency", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["audit_whatifs.run_id"],
                                name="fk_audit_whatif_points_run"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_GRANTS)


def downgrade() -> None:
    op.drop_table("audit_whatif_points")
    op.drop_table("audit_whatifs")
