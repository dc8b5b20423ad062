"""A check run keeps its quality verdict.

* ``check_runs.verdict`` and ``check_runs.suite_verdicts``: the day's verdict and each suite's,
  in reckon.quality_verdict's words (``passed (no events)``, ``passed with 1 warning``,
  ``FAILED (2 blocking)``), decided once when the checks run, so that Data Docs, the report
  and the quality gate show the same. Runs recorded before: ``''`` and ``{}`` (their views
  fall back to ``success``).

Revision ID: 0011_quality_verdict_paths
Revises: 0009_workbench_sessions
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011_quality_verdict_paths"
down_revision: str | None = "0009_workbench_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("check_runs", sa.Column("verdict", sa.Text(), nullable=False,
                                          server_default=sa.text("''")))
    op.add_column("check_runs", sa.Column(
        "suite_verdicts", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
        nullable=False, server_default=sa.text("'{}'")))


def downgrade() -> None:
    with op.batch_alter_table("check_runs") as batch:
        batch.drop_column("suite_verdicts")
        batch.drop_column("verdict")
