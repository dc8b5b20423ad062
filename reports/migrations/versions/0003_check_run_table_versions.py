"""A check run records the Delta version of each table it checked.

The audit run already names the versions it read; a data-quality run names its own, so a
reviewer can tell whether the rows GX passed are the rows the report shows. Runs recorded
before this revision checked unknown versions: an empty object.

Revision ID: 0003_check_run_table_versions
Revises: 0002_break_review_figures
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_check_run_table_versions"
down_revision: str | None = "0002_break_review_figures"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("check_runs", sa.Column(
        "table_versions", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
        nullable=False, server_default=sa.text("'{}'")))


def downgrade() -> None:
    with op.batch_alter_table("check_runs") as batch:
        batch.drop_column("table_versions")
