"""An audit run keeps the material_gap it was audited under (the workbench's issue 61).

``audit_runs.material_gap``: the minimum absolute gap per currency (code -> exact amount
text, reckon.materiality) in force when the run was audited; ``{}`` when materiality was off.
The report, the workbench's list and exports and ``reckon breaks list`` mark the run's breaks
by it, so they agree however the setting changes later. Runs recorded before keep null: their
views fall back to the setting as it is now (the only rule there is for them).

Revision ID: 0017_run_material_gap
Revises: 0016_exports_logged
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017_run_material_gap"
down_revision: str | None = "0016_exports_logged"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("audit_runs", sa.Column(
        "material_gap", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
        nullable=True))


def downgrade() -> None:
    """A plain ``ALTER TABLE ... DROP COLUMN`` (SQLite has it since 3.35), not a batch copy:
    SQLite's copy-and-move drops ``audit_runs``, which breaks, reviews and the sign-off log
    reference, and with foreign keys on (reckon's engine) that DROP failed once any run had
    a break."""
    import sqlite3

    if op.get_bind().dialect.name == "sqlite" and sqlite3.sqlite_version_info < (3, 35):
        with op.batch_alter_table("audit_runs") as batch:  # an old SQLite: no DROP COLUMN
            batch.drop_column("material_gap")
        return
    op.drop_column("audit_runs", "material_gap")
