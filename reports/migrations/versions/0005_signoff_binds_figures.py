"""A sign-off entry binds what was signed: the run's figures per currency, its status counts,
the table versions it read and its report's SHA-256, as canonical JSON inside the entry's hash.
Entries written before this revision bound only the run id: null.

Revision ID: 0005_signoff_binds_figures
Revises: 0004_currency_grain
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_signoff_binds_figures"
down_revision: str | None = "0004_currency_grain"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("signoff_log", sa.Column("signed", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("signoff_log") as batch:
        batch.drop_column("signed")
