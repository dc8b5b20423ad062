"""Money per currency: breaks, reviews and run figures are kept per (window, key, currency).

Before this revision an audit run recorded one provisional/canonical/gap/late/duplicate/residual
total over every currency, and a break was identified by (day, window, key): sums of euros and
yen that no reviewer can sign. Now:

- ``audit_run_currencies`` holds each run's figures per currency (the only money of a run);
  the cross-currency totals of ``audit_runs`` are dropped (they were never money);
- ``breaks`` and ``break_reviews`` carry the ``currency`` of their row, and it is part of a
  break's identity; rows recorded before this revision get '' (their currency is unknown:
  they belong to a warehouse of the earlier layout, which reckon refuses to audit again);
- ``late_attribution`` keeps late amounts per currency (``late_amounts``, a JSON object of
  exact decimal text) instead of one sum;
- money is NUMERIC(38,3) on PostgreSQL (3-decimal currencies such as KWD, exactly).

Revision ID: 0004_currency_grain
Revises: 0003_check_run_table_versions
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004_currency_grain"
down_revision: str | None = "0003_check_run_table_versions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RUN_TOTALS = ("provisional_total", "canonical_total", "gap_total", "late_total",
               "duplicate_total", "residual_total")
_BREAK_MONEY = ("provisional_amount", "canonical_amount", "gap_amount", "late_amount",
                "duplicate_amount", "residual_amount")


def _money() -> sa.types.TypeEngine:
    return sa.Numeric(38, 3).with_variant(sa.Text(), "sqlite")


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "audit_run_currencies",
        sa.Column("run_id", sa.String(200),
                  sa.ForeignKey("audit_runs.run_id", name="fk_audit_run_currencies_run"),
                  primary_key=True),
        sa.Column("currency", sa.String(3), primary_key=True),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("status_counts", _json(), nullable=False),
        sa.Column("unexplained", sa.BigInteger(), nullable=False),
        *(sa.Column(name, _money(), nullable=False) for name in (*_RUN_TOTALS,
                                                                 "tolerated_total")),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in (
            "provisional_events", "canonical_events", "late_events", "duplicate_events")),
        sa.Column("completeness", sa.Numeric().with_variant(sa.Text(), "sqlite"),
                  nullable=True),
    )
    with op.batch_alter_table("audit_runs") as batch:
        for name in _RUN_TOTALS:
            batch.drop_column(name)
    with op.batch_alter_table("breaks") as batch:
        batch.add_column(sa.Column("currency", sa.String(3), nullable=False,
                                   server_default=""))
        batch.drop_constraint("uq_breaks_run_identity", type_="unique")
        batch.create_unique_constraint("uq_breaks_run_identity", [
            "run_id", "day", "window_start", "key", "currency"])
        batch.drop_index("ix_breaks_identity")
        batch.create_index("ix_breaks_identity", ["day", "window_start", "key", "currency"])
        for name in _BREAK_MONEY:
            batch.alter_column(name, type_=_money())
    with op.batch_alter_table("breaks") as batch:  # the default served the old rows only
        batch.alter_column("currency", server_default=None)
    _break_reviews_by_currency()
    with op.batch_alter_table("late_attribution") as batch:
        batch.add_column(sa.Column("late_amounts", _json(), nullable=False,
                                   server_default=sa.text("'{}'")))
        batch.drop_column("late_amount")
    with op.batch_alter_table("late_attribution") as batch:
        batch.alter_column("late_amounts", server_default=None)


def _break_reviews_by_currency() -> None:
    """break_reviews gains ``currency`` in its primary key. PostgreSQL alters the key in place;
    SQLite cannot, so the table is rebuilt explicitly (new table, copy, swap) rather than by
    batch mode's reflection, which warns when the key's columns change."""
    if op.get_context().dialect.name != "sqlite":
        op.add_column("break_reviews", sa.Column("currency", sa.String(3), nullable=False,
                                                 server_default=""))
        op.alter_column("break_reviews", "currency", server_default=None)
        op.alter_column("break_reviews", "last_residual_amount", type_=_money())
        op.drop_constraint("break_reviews_pkey", "break_reviews", type_="primary")
        op.create_primary_key("break_reviews_pkey", "break_reviews",
                              ["day", "window_start", "key", "currency"])
        return
    op.create_table(
        "_break_reviews_0004",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("key", sa.String(400), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("review_status", sa.String(20), nullable=False),
        sa.Column("last_status", sa.String(40), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_run_id", sa.String(200), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_residual_amount", _money(), nullable=True),
        sa.Column("last_residual_count", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("day", "window_start", "key", "currency",
                                name="break_reviews_pkey"),
        sa.CheckConstraint("review_status IN ('open', 'explained', 'accepted', 'resolved')",
                           name="ck_break_reviews_status"),
    )
    op.execute("INSERT INTO _break_reviews_0004 (day, window_start, key, currency, "
               "review_status, last_status, first_seen_at, last_seen_run_id, updated_at, "
               "last_residual_amount, last_residual_count) SELECT day, window_start, key, '', "
               "review_status, last_status, first_seen_at, last_seen_run_id, updated_at, "
               "last_residual_amount, last_residual_count FROM break_reviews")
    op.drop_table("break_reviews")
    op.rename_table("_break_reviews_0004", "break_reviews")


def downgrade() -> None:
    raise NotImplementedError(
        "0004_currency_grain cannot be undone: per-currency figures cannot be summed back into "
        "the cross-currency totals of the earlier layout (they were never money)")
