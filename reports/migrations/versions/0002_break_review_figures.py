"""A break's review remembers the figures it was last seen with.

A decision (accepted, resolved) is made on a break's numbers: when a later audit of the day
finds the same (day, window, key) with another status or residual, the decision no longer
covers it and the review opens again. Nullable: reviews recorded before this revision have no
figures, and their next audit fills them in (without reopening them).

Revision ID: 0002_break_review_figures
Revises: 0001_initial
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_break_review_figures"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("break_reviews", sa.Column(
        "last_residual_amount", sa.Numeric(38, 2).with_variant(sa.Text(), "sqlite"),
        nullable=True))
    op.add_column("break_reviews", sa.Column("last_residual_count", sa.BigInteger(),
                                             nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("break_reviews") as batch:
        batch.drop_column("last_residual_count")
        batch.drop_column("last_residual_amount")
