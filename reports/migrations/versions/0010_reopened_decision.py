"""The sign-off log takes ``reopened``: a reviewer withdraws their standing decision on a run.

A run's review state (reckon.signoff.review_state) is each reviewer's latest decision; a
rejection holds the run *rejected* until that reviewer approves or reopens it. ``reopened``
signs nothing and closes no break. Only the decision CHECK changes (SQLite copies the table,
rows kept as they are); PostgreSQL's triggers (migrations 0006, 0007) check the signer and the
four-eyes rule, never the decision, so they stand as they are.

Revision ID: 0010_reopened_decision
Revises: 0009_workbench_sessions
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_reopened_decision"
down_revision: str | None = "0009_workbench_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = ("decision IN ('approved', 'rejected', 'accepted', 'resolved', 'break-comment', "
        "'break-accepted', 'break-resolved')")
_NEW = ("decision IN ('approved', 'rejected', 'accepted', 'resolved', 'reopened', "
        "'break-comment', 'break-accepted', 'break-resolved')")


def _decisions(condition: str) -> None:
    """Replace the log's decision CHECK (SQLite copies the table; rows are kept as they are)."""
    with op.batch_alter_table("signoff_log", recreate="auto") as batch:
        batch.drop_constraint("ck_signoff_log_decision", type_="check")
        batch.create_check_constraint("ck_signoff_log_decision", condition)


def upgrade() -> None:
    _decisions(_NEW)


def downgrade() -> None:
    """Refused while the log holds a ``reopened`` entry: the log is append-only, and dropping
    the entry would change the state of its run (and break the hash chain)."""
    held = op.get_bind().execute(sa.text(
        "SELECT count(*) FROM signoff_log WHERE decision = 'reopened'")).scalar_one()
    if held:
        raise RuntimeError(f"cannot downgrade below 0010: the sign-off log holds {held} "
                           "'reopened' entr(y/ies), which the older check would refuse; the "
                           "log is append-only, so stay at 0010")
    _decisions(_OLD)
