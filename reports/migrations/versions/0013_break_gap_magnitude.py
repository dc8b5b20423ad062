"""Each break keeps its absolute gap as an exact, ordered column (the workbench's issue 61).

``breaks.gap_magnitude`` is ``abs(gap_amount)``: ``NUMERIC(38,3)`` on PostgreSQL, and on
SQLite TEXT zero-padded to 39 characters (reports.db.types.Magnitude), whose byte order is the
numeric order (``gap_amount``'s own text, ``9.000`` after ``10.000``, is not). With the index
``ix_breaks_magnitude (run_id, day, currency, gap_magnitude, window_start, key)`` the
workbench's minimum-gap filter (per currency, in that currency's units) and its sort by
absolute gap, largest first, are one index range per currency, however large the day.

Existing rows are filled in SQL, exactly (PostgreSQL ``abs``; SQLite strips the sign from the
stored text, which always has 3 places, and pads it). On PostgreSQL the column is covered by
the table-level grants of migrations 0006 and 0007 (the reconciler inserts breaks).

Revision ID: 0013_break_gap_magnitude
Revises: 0012_signed_signoffs
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Context, Decimal

import sqlalchemy as sa
from alembic import op

revision: str = "0013_break_gap_magnitude"
down_revision: str | None = "0012_signed_signoffs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_WIDTH = 39  # reports.db.types.MAGNITUDE_CHARS


def upgrade() -> None:
    conn = op.get_bind()
    postgres = conn.dialect.name == "postgresql"
    column_type = sa.Numeric(38, 3) if postgres else sa.Text()
    op.add_column("breaks", sa.Column("gap_magnitude", column_type, nullable=True))
    if postgres:
        conn.execute(sa.text("UPDATE breaks SET gap_magnitude = abs(gap_amount)"))
        op.alter_column("breaks", "gap_magnitude", nullable=False,
                        existing_type=column_type)
    else:
        _fill_sqlite(conn)
        with op.batch_alter_table("breaks", recreate="always") as batch:
            batch.alter_column("gap_magnitude", nullable=False, existing_type=column_type)
    op.create_index("ix_breaks_magnitude", "breaks",
                    ["run_id", "day", "currency", "gap_magnitude", "window_start", "key"])


def _fill_sqlite(conn: sa.Connection) -> None:
    """``gap_magnitude`` of every break on SQLite: in SQL for text of exactly 3 places (what
    reports.db.types.Money writes), in Python, exactly, for any other text a row holds."""
    conn.execute(sa.text("UPDATE breaks SET gap_magnitude = substr(:zeros || "
                         "ltrim(gap_amount, '-'), :start) "
                         "WHERE gap_amount GLOB '*[0-9].[0-9][0-9][0-9]' "
                         "AND ltrim(gap_amount, '-') NOT GLOB '*[^0-9.]*'"),
                 {"zeros": "0" * _WIDTH, "start": -_WIDTH})
    others = conn.execute(sa.text("SELECT id, gap_amount FROM breaks "
                                  "WHERE gap_magnitude IS NULL")).all()
    for row in others:
        magnitude = Decimal(str(row.gap_amount)).copy_abs().quantize(
            Decimal("0.001"), context=Context(prec=80))
        conn.execute(sa.text("UPDATE breaks SET gap_magnitude = :m WHERE id = :id"),
                     {"m": str(magnitude).rjust(_WIDTH, "0"), "id": row.id})


def downgrade() -> None:
    op.drop_index("ix_breaks_magnitude", table_name="breaks")
    with op.batch_alter_table("breaks") as batch:
        batch.drop_column("gap_magnitude")
