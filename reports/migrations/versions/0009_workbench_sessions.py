"""Workbench sessions kept server-side, and failed logins for the login throttle.

* ``workbench_sessions``: one row per login, keyed by the SHA-256 of the random token its
  cookie holds. Logging out revokes the row and ``reckon users disable`` revokes all of the
  user's rows, so a copied cookie stops working at once (before, a session was a signed
  cookie only, valid until it expired).
* ``workbench_login_failures``: a row per failed login (name tried, client address, time);
  the workbench refuses further attempts for a name from an address, or from an address,
  after too many recent failures (workbench.auth.LoginThrottle).

On PostgreSQL the workbench's role keeps both tables: it reads and writes sessions and
failures (it still may not write ``workbench_users``).

Revision ID: 0009_workbench_sessions
Revises: 0008_break_stories
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_workbench_sessions"
down_revision: str | None = "0008_break_stories"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_GRANTS = """
GRANT SELECT, INSERT, UPDATE ON workbench_sessions TO reckon_workbench;
GRANT SELECT, INSERT, DELETE ON workbench_login_failures TO reckon_workbench;
GRANT USAGE, SELECT ON SEQUENCE workbench_login_failures_id_seq TO reckon_workbench;
"""


def upgrade() -> None:
    op.create_table(
        "workbench_sessions",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_workbench_sessions_name", "workbench_sessions", ["name"])
    op.create_table(
        "workbench_login_failures",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True,
                  autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("address", sa.String(100), nullable=False),
    )
    op.create_index("ix_workbench_login_failures_name", "workbench_login_failures",
                    ["name", "address", "at"])
    op.create_index("ix_workbench_login_failures_address", "workbench_login_failures",
                    ["address", "at"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_GRANTS)


def downgrade() -> None:
    op.drop_table("workbench_login_failures")
    op.drop_table("workbench_sessions")
