"""A break may be assigned to a user with a due date (the workbench's issue 61).

* ``break_reviews.assignee`` and ``break_reviews.due_on``: who is to review the break and by
  when, set by a ``break-assigned`` entry of the sign-off log (its note says both, so the
  hash binds them); kept through re-audits (a new audit's upsert leaves them as they are).
  Indexes ``ix_break_reviews_assignee (assignee, due_on)`` and ``ix_break_reviews_due
  (due_on)`` serve "my breaks" and "overdue".
* The log's decision CHECK takes ``break-assigned``.
* On PostgreSQL the reviewer and workbench roles may update the two columns, as they may the
  review status (migrations 0006, 0007); the triggers check signer and four eyes as before.

Revision ID: 0015_break_assignment
Revises: 0014_break_reject_reopen
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_break_assignment"
down_revision: str | None = "0014_break_reject_reopen"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = ("decision IN ('approved', 'rejected', 'accepted', 'resolved', 'reopened', "
        "'break-comment', 'break-accepted', 'break-resolved', 'break-rejected', "
        "'break-reopened')")
_NEW = ("decision IN ('approved', 'rejected', 'accepted', 'resolved', 'reopened', "
        "'break-comment', 'break-accepted', 'break-resolved', 'break-rejected', "
        "'break-reopened', 'break-assigned')")
_GRANTS = "GRANT UPDATE (assignee, due_on) ON break_reviews TO reckon_reviewer, reckon_workbench"
_REVOKES = ("REVOKE UPDATE (assignee, due_on) ON break_reviews FROM reckon_reviewer, "
            "reckon_workbench")


def _decisions(condition: str) -> None:
    with op.batch_alter_table("signoff_log", recreate="auto") as batch:
        batch.drop_constraint("ck_signoff_log_decision", type_="check")
        batch.create_check_constraint("ck_signoff_log_decision", condition)


def upgrade() -> None:
    op.add_column("break_reviews", sa.Column("assignee", sa.String(200), nullable=True))
    op.add_column("break_reviews", sa.Column("due_on", sa.Date(), nullable=True))
    op.create_index("ix_break_reviews_assignee", "break_reviews", ["assignee", "due_on"])
    op.create_index("ix_break_reviews_due", "break_reviews", ["due_on"])
    _decisions(_NEW)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_GRANTS)


def downgrade() -> None:
    """Refused while the log holds an assignment (the log is append-only)."""
    held = op.get_bind().execute(sa.text(
        "SELECT count(*) FROM signoff_log WHERE decision = 'break-assigned'")).scalar_one()
    if held:
        raise RuntimeError(f"cannot downgrade below 0015: the sign-off log holds {held} "
                           "'break-assigned' entr(y/ies); stay at 0015")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_REVOKES)
    _decisions(_OLD)
    op.drop_index("ix_break_reviews_due", table_name="break_reviews")
    op.drop_index("ix_break_reviews_assignee", table_name="break_reviews")
    with op.batch_alter_table("break_reviews") as batch:
        batch.drop_column("due_on")
        batch.drop_column("assignee")
