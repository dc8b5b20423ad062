"""Initial schema: audit runs, breaks and their review, attribution, data-quality results,
reports and the hash-chained sign-off log.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-22

Column types are spelled out here (not imported from reports/db/) so that this revision keeps
meaning what it meant when later revisions change the models. Money is NUMERIC(38,2) on
PostgreSQL and TEXT on SQLite (exact; SQLite's NUMERIC would round through a float).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _money() -> sa.types.TypeEngine:
    return sa.Numeric(38, 2).with_variant(sa.Text(), "sqlite")


def _ratio() -> sa.types.TypeEngine:
    return sa.Numeric().with_variant(sa.Text(), "sqlite")


def _ts() -> sa.types.TypeEngine:
    return sa.DateTime(timezone=True)


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _id() -> sa.types.TypeEngine:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "audit_runs",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("started_at", _ts(), nullable=False),
        sa.Column("duration_seconds", sa.Double(), nullable=False),
        sa.Column("reconciler", sa.String(200), nullable=False),
        sa.Column("params", _json(), nullable=False),
        sa.Column("status_counts", _json(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("provisional_total", _money(), nullable=False),
        sa.Column("canonical_total", _money(), nullable=False),
        sa.Column("gap_total", _money(), nullable=False),
        sa.Column("late_total", _money(), nullable=False),
        sa.Column("duplicate_total", _money(), nullable=False),
        sa.Column("residual_total", _money(), nullable=False),
        sa.Column("unexplained", sa.BigInteger(), nullable=False),
        sa.Column("table_versions", _json(), nullable=False),
        sa.Column("completeness", _ratio(), nullable=True),
        sa.Column("is_current", sa.Boolean(), nullable=False),
        sa.Column("recorded_at", _ts(), nullable=False),
    )
    op.create_index("ix_audit_runs_day_kind", "audit_runs", ["day", "kind"])
    op.create_index("uq_audit_runs_current", "audit_runs", ["day", "kind"], unique=True,
                    postgresql_where=sa.text("is_current"), sqlite_where=sa.text("is_current"))

    op.create_table(
        "breaks",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("window_start", _ts(), nullable=False),
        sa.Column("window_end", _ts(), nullable=False),
        sa.Column("key", sa.String(400), nullable=False),
        sa.Column("status", sa.String(40), nullable=False),
        sa.Column("provisional_amount", _money(), nullable=True),
        sa.Column("canonical_amount", _money(), nullable=True),
        sa.Column("gap_amount", _money(), nullable=False),
        sa.Column("gap_count", sa.BigInteger(), nullable=False),
        sa.Column("late_amount", _money(), nullable=False),
        sa.Column("late_count", sa.BigInteger(), nullable=False),
        sa.Column("duplicate_amount", _money(), nullable=False),
        sa.Column("duplicate_count", sa.BigInteger(), nullable=False),
        sa.Column("residual_amount", _money(), nullable=False),
        sa.Column("residual_count", sa.BigInteger(), nullable=False),
        sa.Column("explanation", sa.Text(), nullable=False),
        sa.UniqueConstraint("run_id", "day", "window_start", "key",
                            name="uq_breaks_run_identity"),
    )
    op.create_index("ix_breaks_identity", "breaks", ["day", "window_start", "key"])

    op.create_table(
        "break_reviews",
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("window_start", _ts(), primary_key=True),
        sa.Column("key", sa.String(400), primary_key=True),
        sa.Column("review_status", sa.String(20), nullable=False),
        sa.Column("last_status", sa.String(40), nullable=False),
        sa.Column("first_seen_at", _ts(), nullable=False),
        sa.Column("last_seen_run_id", sa.String(200), nullable=False),
        sa.Column("updated_at", _ts(), nullable=False),
        sa.CheckConstraint("review_status IN ('open', 'explained', 'accepted', 'resolved')",
                           name="ck_break_reviews_status"),
    )

    op.create_table(
        "late_attribution",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("dimension", sa.String(40), nullable=False),
        sa.Column("value", sa.String(400), nullable=False),
        sa.Column("late_events", sa.BigInteger(), nullable=False),
        sa.Column("late_amount", _money(), nullable=False),
        sa.Column("all_events", sa.BigInteger(), nullable=False),
        sa.Column("late_share", _ratio(), nullable=False),
        sa.Column("event_share", _ratio(), nullable=False),
        sa.Column("lift", _ratio(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["audit_runs.run_id"],
                                name="fk_late_attribution_run"),
    )
    op.create_index("ix_late_attribution_run_id", "late_attribution", ["run_id"])

    op.create_table(
        "check_runs",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("started_at", _ts(), nullable=False),
        sa.Column("duration_seconds", sa.Double(), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("blocking_failures", sa.Integer(), nullable=False),
        sa.Column("warnings", sa.Integer(), nullable=False),
        sa.Column("suites", sa.Integer(), nullable=False),
        sa.Column("expectations", sa.Integer(), nullable=False),
        sa.Column("data_docs_path", sa.Text(), nullable=False),
        sa.Column("is_current", sa.Boolean(), nullable=False),
        sa.Column("recorded_at", _ts(), nullable=False),
    )
    op.create_index("ix_check_runs_day", "check_runs", ["day"])
    op.create_index("uq_check_runs_current", "check_runs", ["day"], unique=True,
                    postgresql_where=sa.text("is_current"), sqlite_where=sa.text("is_current"))

    op.create_table(
        "expectation_results",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("table", sa.String(200), nullable=False),
        sa.Column("expectation", sa.String(200), nullable=False),
        sa.Column("column", sa.String(200), nullable=True),
        sa.Column("severity", sa.String(20), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("unexpected_count", sa.BigInteger(), nullable=True),
        sa.Column("sample", sa.Text(), nullable=False),
        sa.Column("kwargs", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["check_runs.run_id"],
                                name="fk_expectation_results_run"),
    )
    op.create_index("ix_expectation_results_run_id", "expectation_results", ["run_id"])

    op.create_table(
        "reports",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("audit_run_id", sa.String(200), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.Column("html_path", sa.Text(), nullable=False),
        sa.Column("pdf_path", sa.Text(), nullable=False),
        sa.Column("csv_paths", _json(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.UniqueConstraint("audit_run_id", "html_path", "sha256", name="uq_reports_content"),
    )
    op.create_index("ix_reports_day", "reports", ["day"])

    op.create_table(
        "signoff_log",
        sa.Column("seq", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("at", _ts(), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("by", sa.String(200), nullable=False),
        sa.Column("decision", sa.String(20), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("entry_hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("entry_hash", name="uq_signoff_log_entry_hash"),
        sa.CheckConstraint("decision IN ('approved', 'rejected', 'accepted', 'resolved')",
                           name="ck_signoff_log_decision"),
        sa.ForeignKeyConstraint(["run_id"], ["audit_runs.run_id"], name="fk_signoff_log_run"),
    )
    op.create_index("ix_signoff_log_run_id", "signoff_log", ["run_id"])


def downgrade() -> None:
    for index, table in (("ix_signoff_log_run_id", "signoff_log"),
                         ("ix_reports_day", "reports"),
                         ("ix_expectation_results_run_id", "expectation_results"),
                         ("uq_check_runs_current", "check_runs"),
                         ("ix_check_runs_day", "check_runs"),
                         ("ix_late_attribution_run_id", "late_attribution"),
                         ("ix_breaks_identity", "breaks"),
                         ("uq_audit_runs_current", "audit_runs"),
                         ("ix_audit_runs_day_kind", "audit_runs")):
        op.drop_index(index, table_name=table)
    for table in ("signoff_log", "reports", "expectation_results", "check_runs",
                  "late_attribution", "break_reviews", "breaks", "audit_runs"):
        op.drop_table(table)
