"""A break may be rejected and reopened, each with a reason (the workbench's issue 61).

* The sign-off log takes two more break actions: ``break-rejected`` (a reviewer disputes a
  break's explanation or its acceptance) and ``break-reopened`` (the break is open again),
  each with its reason as the entry's note, the break named in it as for every break action.
* ``break_reviews.review_status`` takes ``rejected``: a rejected break stays rejected through
  re-audits and a run's acceptance (which closes only *open* breaks) until someone reopens,
  accepts or resolves it.

Only the two CHECK constraints change (SQLite copies each table, rows kept as they are).
PostgreSQL's triggers (migrations 0006, 0007) check the signer and the four-eyes rule, never
the decision, and the reviewer and workbench roles may already update a review's status
(``GRANT UPDATE (review_status, updated_at)``), so they stand as they are.

Revision ID: 0014_break_reject_reopen
Revises: 0013_break_gap_magnitude
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_break_reject_reopen"
down_revision: str | None = "0013_break_gap_magnitude"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_DECISIONS = ("decision IN ('approved', 'rejected', 'accepted', 'resolved', 'reopened', "
                  "'break-comment', 'break-accepted', 'break-resolved')")
_NEW_DECISIONS = ("decision IN ('approved', 'rejected', 'accepted', 'resolved', 'reopened', "
                  "'break-comment', 'break-accepted', 'break-resolved', 'break-rejected', "
                  "'break-reopened')")
_OLD_STATUSES = "review_status IN ('open', 'explained', 'accepted', 'resolved')"
_NEW_STATUSES = "review_status IN ('open', 'explained', 'accepted', 'resolved', 'rejected')"


def _check(table: str, name: str, condition: str) -> None:
    """Replace one CHECK (SQLite copies the table; rows are kept as they are)."""
    with op.batch_alter_table(table, recreate="auto") as batch:
        batch.drop_constraint(name, type_="check")
        batch.create_check_constraint(name, condition)


def upgrade() -> None:
    _check("signoff_log", "ck_signoff_log_decision", _NEW_DECISIONS)
    _check("break_reviews", "ck_break_reviews_status", _NEW_STATUSES)


def downgrade() -> None:
    """Refused while the log holds a break rejection or reopen (the log is append-only) or a
    break is rejected."""
    conn = op.get_bind()
    held = conn.execute(sa.text("SELECT count(*) FROM signoff_log WHERE decision IN "
                                "('break-rejected', 'break-reopened')")).scalar_one()
    rejected = conn.execute(sa.text("SELECT count(*) FROM break_reviews "
                                    "WHERE review_status = 'rejected'")).scalar_one()
    if held or rejected:
        raise RuntimeError(f"cannot downgrade below 0014: the sign-off log holds {held} break "
                           f"rejection or reopen entr(y/ies) and {rejected} break(s) are "
                           "rejected, which the older checks would refuse; stay at 0014")
    _check("break_reviews", "ck_break_reviews_status", _OLD_STATUSES)
    _check("signoff_log", "ck_signoff_log_decision", _OLD_DECISIONS)
