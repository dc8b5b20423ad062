"""The report database's tables as SQLAlchemy models, and a typed handle on each table.

Why its own module: the schema is what Alembic's migrations build (reports/migrations; its
env.py compares against ``Base.metadata``), and every reader and writer names its tables
through the handles here (``AUDIT_RUNS``, ``BREAKS``, ...), so a newcomer finds every column
in one place. History is never deleted: a new audit run of a (day, kind) makes the older ones
``is_current = False``.

Example:
    >>> sorted(BREAK_REVIEWS.primary_key.columns.keys())
    ['currency', 'day', 'key', 'window_start']
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from reckon.signoff import BREAK_REVIEW_STATUSES, decision_constraint, review_status_constraint
from reports.db.types import (
    ExactDecimal,
    FloatText,
    Magnitude,
    Money,
    UTCDateTime,
    id_type,
    json_type,
)

__all__ = [
    "AUDIT_RUNS",
    "AUDIT_RUN_CURRENCIES",
    "AUDIT_WHATIFS",
    "AUDIT_WHATIF_POINTS",
    "BREAKS",
    "BREAK_INPUTS",
    "BREAK_REVIEWS",
    "BREAK_STORIES",
    "CHECK_RUNS",
    "EXPECTATION_RESULTS",
    "LATE_ATTRIBUTION",
    "REPORTS",
    "REVIEW_STATUSES",
    "SIGNER_KEYS",
    "SIGNOFF_LOG",
    "WORKBENCH_LOGIN_FAILURES",
    "WORKBENCH_SESSIONS",
    "WORKBENCH_USERS",
    "AttributionRowModel",
    "AuditRunCurrencyModel",
    "AuditRunModel",
    "AuditWhatIfModel",
    "AuditWhatIfPointModel",
    "Base",
    "BreakInputModel",
    "BreakModel",
    "BreakReviewModel",
    "BreakStoryModel",
    "CheckRunModel",
    "ExpectationResultModel",
    "ReportModel",
    "SignoffModel",
    "WorkbenchLoginFailureModel",
    "WorkbenchSessionModel",
    "WorkbenchUserModel",
]

#: The review status of a break identity (break_reviews.review_status), in workflow order
#: (reckon.signoff owns them).
REVIEW_STATUSES = BREAK_REVIEW_STATUSES


class Base(DeclarativeBase):
    """Declarative base of the report database (Alembic's migrations build the same schema)."""


class AuditRunModel(Base):
    __tablename__ = "audit_runs"
    __table_args__ = (
        sa.Index("ix_audit_runs_day_kind", "day", "kind"),
        # at most one current run per (day, kind), enforced by the database
        sa.Index("uq_audit_runs_current", "day", "kind", unique=True,
                 postgresql_where=sa.text("is_current"), sqlite_where=sa.text("is_current")),
    )

    run_id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    day: Mapped[date] = mapped_column(sa.Date)
    kind: Mapped[str] = mapped_column(sa.String(40))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    duration_seconds: Mapped[float] = mapped_column(sa.Double())
    reconciler: Mapped[str] = mapped_column(sa.String(200))
    params: Mapped[dict[str, Any]] = mapped_column(json_type())
    status_counts: Mapped[dict[str, int]] = mapped_column(json_type())
    rows: Mapped[int] = mapped_column(sa.BigInteger())
    unexplained: Mapped[int] = mapped_column(sa.BigInteger())
    table_versions: Mapped[dict[str, int]] = mapped_column(json_type())
    completeness: Mapped[Decimal | None] = mapped_column(ExactDecimal(), nullable=True)
    is_current: Mapped[bool] = mapped_column(sa.Boolean())
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # the material_gap it was audited under (migration 0017; null: recorded before)
    material_gap: Mapped[dict[str, str] | None] = mapped_column(json_type(), nullable=True)


class AuditRunCurrencyModel(Base):
    """One currency's figures in one audit run (audits.records.CurrencySummary): the only
    place a run's money is kept, so no figure ever adds two currencies."""

    __tablename__ = "audit_run_currencies"

    run_id: Mapped[str] = mapped_column(
        sa.String(200), sa.ForeignKey("audit_runs.run_id", name="fk_audit_run_currencies_run"),
        primary_key=True)
    currency: Mapped[str] = mapped_column(sa.String(3), primary_key=True)
    rows: Mapped[int] = mapped_column(sa.BigInteger())
    status_counts: Mapped[dict[str, int]] = mapped_column(json_type())
    unexplained: Mapped[int] = mapped_column(sa.BigInteger())
    provisional_total: Mapped[Decimal] = mapped_column(Money())
    canonical_total: Mapped[Decimal] = mapped_column(Money())
    gap_total: Mapped[Decimal] = mapped_column(Money())
    late_total: Mapped[Decimal] = mapped_column(Money())
    duplicate_total: Mapped[Decimal] = mapped_column(Money())
    residual_total: Mapped[Decimal] = mapped_column(Money())
    tolerated_total: Mapped[Decimal] = mapped_column(Money())
    provisional_events: Mapped[int] = mapped_column(sa.BigInteger())
    canonical_events: Mapped[int] = mapped_column(sa.BigInteger())
    late_events: Mapped[int] = mapped_column(sa.BigInteger())
    duplicate_events: Mapped[int] = mapped_column(sa.BigInteger())
    completeness: Mapped[Decimal | None] = mapped_column(ExactDecimal(), nullable=True)


class BreakModel(Base):
    """One break of one run. No foreign key to audit_runs: Spark executors may write breaks
    before the driver records the run."""

    __tablename__ = "breaks"
    __table_args__ = (
        sa.UniqueConstraint("run_id", "day", "window_start", "key", "currency",
                            name="uq_breaks_run_identity"),
        sa.Index("ix_breaks_identity", "day", "window_start", "key", "currency"),
        # the workbench's materiality filter and its sort by absolute gap: one range of this
        # index per currency, read backwards (largest first); migration 0013
        sa.Index("ix_breaks_magnitude", "run_id", "day", "currency", "gap_magnitude",
                 "window_start", "key"),
    )

    id: Mapped[int] = mapped_column(id_type(), primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(sa.String(200))
    day: Mapped[date] = mapped_column(sa.Date)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime())
    window_end: Mapped[datetime] = mapped_column(UTCDateTime())
    key: Mapped[str] = mapped_column(sa.String(400))
    currency: Mapped[str] = mapped_column(sa.String(3))
    status: Mapped[str] = mapped_column(sa.String(40))
    provisional_amount: Mapped[Decimal | None] = mapped_column(Money(), nullable=True)
    canonical_amount: Mapped[Decimal | None] = mapped_column(Money(), nullable=True)
    gap_amount: Mapped[Decimal] = mapped_column(Money())
    # abs(gap_amount), exact and ordered as a number on both backends (types.Magnitude)
    gap_magnitude: Mapped[Decimal] = mapped_column(Magnitude())
    gap_count: Mapped[int] = mapped_column(sa.BigInteger())
    late_amount: Mapped[Decimal] = mapped_column(Money())
    late_count: Mapped[int] = mapped_column(sa.BigInteger())
    duplicate_amount: Mapped[Decimal] = mapped_column(Money())
    duplicate_count: Mapped[int] = mapped_column(sa.BigInteger())
    residual_amount: Mapped[Decimal] = mapped_column(Money())
    residual_count: Mapped[int] = mapped_column(sa.BigInteger())
    explanation: Mapped[str] = mapped_column(sa.Text())


class BreakReviewModel(Base):
    """Review status of a break identity (day, window_start, key, currency) across re-audits."""

    __tablename__ = "break_reviews"
    __table_args__ = (
        sa.CheckConstraint(review_status_constraint(), name="ck_break_reviews_status"),
        # "my breaks" and "overdue" (the workbench's views)
        sa.Index("ix_break_reviews_assignee", "assignee", "due_on"),
        sa.Index("ix_break_reviews_due", "due_on"),
    )

    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(400), primary_key=True)
    currency: Mapped[str] = mapped_column(sa.String(3), primary_key=True)
    review_status: Mapped[str] = mapped_column(sa.String(20))
    last_status: Mapped[str] = mapped_column(sa.String(40))
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_seen_run_id: Mapped[str] = mapped_column(sa.String(200))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # the figures of the last audit that saw the break: a decision covers these numbers only
    last_residual_amount: Mapped[Decimal | None] = mapped_column(Money(), nullable=True)
    last_residual_count: Mapped[int | None] = mapped_column(sa.BigInteger(), nullable=True)
    # who is to review it and by when (a 'break-assigned' log entry sets both; migration 0015)
    assignee: Mapped[str | None] = mapped_column(sa.String(200), nullable=True)
    due_on: Mapped[date | None] = mapped_column(sa.Date, nullable=True)


class BreakStoryModel(Base):
    """A break's story as ``reckon explain`` tells it (audits/break_story.py), recorded by the audit
    from the table versions it read: the workbench shows it without Spark."""

    __tablename__ = "break_stories"

    run_id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(400), primary_key=True)
    currency: Mapped[str] = mapped_column(sa.String(3), primary_key=True)
    lines: Mapped[list[str]] = mapped_column(json_type())
    evidence: Mapped[list[dict[str, Any]]] = mapped_column(json_type())
    events: Mapped[int] = mapped_column(sa.BigInteger())


class BreakInputModel(Base):
    """An input (partition or source) that contributed to a break (audits.break_story.inputs_of).
    The key leads with (run_id, dimension, value) and then the break list's order, so a page of
    a run's breaks filtered to one input is one range of this index."""

    __tablename__ = "break_inputs"
    __table_args__ = (
        # a page's rows read their inputs by cell
        sa.Index("ix_break_inputs_cell", "run_id", "day", "window_start", "key", "currency"),
    )

    run_id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    dimension: Mapped[str] = mapped_column(sa.String(20), primary_key=True)
    value: Mapped[str] = mapped_column(sa.String(400), primary_key=True)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(400), primary_key=True)
    currency: Mapped[str] = mapped_column(sa.String(3), primary_key=True)
    late_count: Mapped[int] = mapped_column(sa.BigInteger())
    duplicate_count: Mapped[int] = mapped_column(sa.BigInteger())
    event_count: Mapped[int] = mapped_column(sa.BigInteger())


class AttributionRowModel(Base):
    __tablename__ = "late_attribution"

    id: Mapped[int] = mapped_column(id_type(), primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(
        sa.String(200), sa.ForeignKey("audit_runs.run_id", name="fk_late_attribution_run"),
        index=True)
    dimension: Mapped[str] = mapped_column(sa.String(40))
    value: Mapped[str] = mapped_column(sa.String(400))
    late_events: Mapped[int] = mapped_column(sa.BigInteger())
    # currency -> exact amount (decimal text): never one sum over currencies
    late_amounts: Mapped[dict[str, str]] = mapped_column(json_type())
    all_events: Mapped[int] = mapped_column(sa.BigInteger())
    late_share: Mapped[Decimal] = mapped_column(ExactDecimal())
    event_share: Mapped[Decimal] = mapped_column(ExactDecimal())
    lift: Mapped[Decimal | None] = mapped_column(ExactDecimal(), nullable=True)


class AuditWhatIfModel(Base):
    """The lateness what-ifs recorded with an audit run (audits/day_whatif.py): one row a run,
    its points in ``audit_whatif_points``. A run recorded before migration 0018 has none, and
    the report says so rather than compute them from a warehouse the run never saw."""

    __tablename__ = "audit_whatifs"

    run_id: Mapped[str] = mapped_column(
        sa.String(200), sa.ForeignKey("audit_runs.run_id", name="fk_audit_whatifs_run"),
        primary_key=True)
    configured_bound_seconds: Mapped[Decimal | None] = mapped_column(ExactDecimal(),
                                                                     nullable=True)
    recommended_bound_seconds: Mapped[Decimal | None] = mapped_column(ExactDecimal(),
                                                                      nullable=True)
    target_completeness: Mapped[Decimal | None] = mapped_column(ExactDecimal(), nullable=True)
    batch_curve_note: Mapped[str | None] = mapped_column(sa.Text(), nullable=True)
    # reckon.whatif_inputs.PerInputRecommendation.to_json_dict as JSON text (decimals as
    # text, ratios as exact float reprs), None: one source or no events
    per_source: Mapped[str | None] = mapped_column(sa.Text(), nullable=True)
    per_source_batches_note: Mapped[str | None] = mapped_column(sa.Text(), nullable=True)
    configured_policy: Mapped[str | None] = mapped_column(sa.Text(), nullable=True)


class AuditWhatIfPointModel(Base):
    """One point of a recorded what-if curve: ``curve`` is ``per_event``, ``per_batch`` or
    ``per_source_batches`` (then ``label`` names its row), ``seq`` its place in the curve."""

    __tablename__ = "audit_whatif_points"

    run_id: Mapped[str] = mapped_column(
        sa.String(200), sa.ForeignKey("audit_whatifs.run_id", name="fk_audit_whatif_points_run"),
        primary_key=True)
    curve: Mapped[str] = mapped_column(sa.String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(sa.Integer(), primary_key=True, autoincrement=False)
    label: Mapped[str] = mapped_column(sa.String(200))
    bound_seconds: Mapped[Decimal] = mapped_column(ExactDecimal())
    completeness: Mapped[float] = mapped_column(FloatText())
    admitted: Mapped[int] = mapped_column(sa.BigInteger())
    dropped: Mapped[int] = mapped_column(sa.BigInteger())
    avg_emit_latency: Mapped[float | None] = mapped_column(FloatText(), nullable=True)


class CheckRunModel(Base):
    __tablename__ = "check_runs"
    __table_args__ = (
        sa.Index("ix_check_runs_day", "day"),
        sa.Index("uq_check_runs_current", "day", unique=True,
                 postgresql_where=sa.text("is_current"), sqlite_where=sa.text("is_current")),
    )

    run_id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    day: Mapped[date] = mapped_column(sa.Date)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    duration_seconds: Mapped[float] = mapped_column(sa.Double())
    success: Mapped[bool] = mapped_column(sa.Boolean())
    blocking_failures: Mapped[int] = mapped_column(sa.Integer())
    warnings: Mapped[int] = mapped_column(sa.Integer())
    suites: Mapped[int] = mapped_column(sa.Integer())
    expectations: Mapped[int] = mapped_column(sa.Integer())
    data_docs_path: Mapped[str] = mapped_column(sa.Text())
    # Delta table -> version checked; '{}' for runs recorded before it was kept
    table_versions: Mapped[dict[str, int]] = mapped_column(json_type(),
                                                           server_default=sa.text("'{}'"))
    # reckon.quality_verdict's words for the day and per suite ('' / '{}': recorded before)
    verdict: Mapped[str] = mapped_column(sa.Text(), server_default=sa.text("''"))
    suite_verdicts: Mapped[dict[str, str]] = mapped_column(json_type(),
                                                           server_default=sa.text("'{}'"))
    is_current: Mapped[bool] = mapped_column(sa.Boolean())
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ExpectationResultModel(Base):
    __tablename__ = "expectation_results"

    id: Mapped[int] = mapped_column(id_type(), primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(
        sa.String(200), sa.ForeignKey("check_runs.run_id", name="fk_expectation_results_run"),
        index=True)
    suite: Mapped[str] = mapped_column(sa.String(200))
    table: Mapped[str] = mapped_column(sa.String(200))
    expectation: Mapped[str] = mapped_column(sa.String(200))
    column: Mapped[str | None] = mapped_column(sa.String(200), nullable=True)
    severity: Mapped[str] = mapped_column(sa.String(20))
    success: Mapped[bool] = mapped_column(sa.Boolean())
    unexpected_count: Mapped[int | None] = mapped_column(sa.BigInteger(), nullable=True)
    sample: Mapped[str] = mapped_column(sa.Text())
    kwargs: Mapped[str] = mapped_column(sa.Text())


class ReportModel(Base):
    __tablename__ = "reports"
    __table_args__ = (
        sa.UniqueConstraint("audit_run_id", "html_path", "sha256", name="uq_reports_content"),
        sa.Index("ix_reports_day", "day"),
    )

    id: Mapped[int] = mapped_column(id_type(), primary_key=True, autoincrement=True)
    day: Mapped[date] = mapped_column(sa.Date)
    audit_run_id: Mapped[str] = mapped_column(sa.String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    html_path: Mapped[str] = mapped_column(sa.Text())
    pdf_path: Mapped[str] = mapped_column(sa.Text())
    csv_paths: Mapped[list[str]] = mapped_column(json_type())
    sha256: Mapped[str] = mapped_column(sa.String(64))


class SignoffModel(Base):
    """Append-only, hash-chained sign-off log (see reports.review)."""

    __tablename__ = "signoff_log"
    __table_args__ = (
        sa.UniqueConstraint("entry_hash", name="uq_signoff_log_entry_hash"),
        sa.CheckConstraint(decision_constraint(), name="ck_signoff_log_decision"),
    )

    seq: Mapped[int] = mapped_column(sa.BigInteger(), primary_key=True, autoincrement=False)
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    run_id: Mapped[str] = mapped_column(
        sa.String(200), sa.ForeignKey("audit_runs.run_id", name="fk_signoff_log_run"), index=True)
    by: Mapped[str] = mapped_column(sa.String(200))
    decision: Mapped[str] = mapped_column(sa.String(20))
    note: Mapped[str] = mapped_column(sa.Text())
    prev_hash: Mapped[str] = mapped_column(sa.String(64))
    entry_hash: Mapped[str] = mapped_column(sa.String(64))
    # what was signed, as canonical JSON (reports.review.signed_figures), inside the hash;
    # null on entries written before migration 0005
    signed: Mapped[str | None] = mapped_column(sa.Text(), nullable=True)
    # the signer's ed25519 signature of entry_hash and the id of the key that made it
    # (reckon.signing); null on entries written before migration 0012
    key_id: Mapped[str | None] = mapped_column(sa.String(16), nullable=True)
    signature: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)


class SignerKeyModel(Base):
    """A signer's public key, registered by the administrator (reports.signer_keys): the
    registration is signed by the administrator's key pinned in ``signoff_admin_key``."""

    __tablename__ = "signer_keys"
    __table_args__ = (
        sa.CheckConstraint("scope IN ('self', 'workbench', 'revoked')",
                           name="ck_signer_keys_scope"),
    )

    seq: Mapped[int] = mapped_column(sa.BigInteger(), primary_key=True, autoincrement=False)
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    name: Mapped[str] = mapped_column(sa.String(200))
    public_key: Mapped[str] = mapped_column(sa.String(100))
    key_id: Mapped[str] = mapped_column(sa.String(16), index=True)
    scope: Mapped[str] = mapped_column(sa.String(20))
    admin_key_id: Mapped[str] = mapped_column(sa.String(16))
    signature: Mapped[str] = mapped_column(sa.String(128))
    # a revocation (scope 'revoked'): the last log seq the key may have signed
    through_seq: Mapped[int | None] = mapped_column(sa.BigInteger(), nullable=True)


class WorkbenchUserModel(Base):
    """A person who may log in to the workbench (workbench/auth.py): a scrypt password hash,
    never the password, and one role (reconciler, reviewer or auditor)."""

    __tablename__ = "workbench_users"
    __table_args__ = (
        sa.CheckConstraint("role IN ('reconciler', 'reviewer', 'auditor')",
                           name="ck_workbench_users_role"),
    )

    name: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    password_hash: Mapped[str] = mapped_column(sa.String(300))
    role: Mapped[str] = mapped_column(sa.String(20))
    enabled: Mapped[bool] = mapped_column(sa.Boolean())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class WorkbenchSessionModel(Base):
    """A workbench login, server-side (workbench/auth.py): the cookie holds a random token,
    this row its SHA-256. Logging out revokes the row; disabling a user revokes all of theirs,
    so a copied cookie stops working at once."""

    __tablename__ = "workbench_sessions"
    __table_args__ = (sa.Index("ix_workbench_sessions_name", "name"),)

    token_hash: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class WorkbenchLoginFailureModel(Base):
    """A failed workbench login: who was tried, from which address, when. The login throttle
    counts the recent ones (workbench/auth.py ``LoginThrottle``)."""

    __tablename__ = "workbench_login_failures"
    __table_args__ = (
        sa.Index("ix_workbench_login_failures_name", "name", "address", "at"),
        sa.Index("ix_workbench_login_failures_address", "address", "at"),
    )

    id: Mapped[int] = mapped_column(id_type(), primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    name: Mapped[str] = mapped_column(sa.String(200))
    address: Mapped[str] = mapped_column(sa.String(100))


# Typed handles on the tables, for SQLAlchemy Core statements.
AUDIT_RUNS: sa.Table = Base.metadata.tables["audit_runs"]
AUDIT_RUN_CURRENCIES: sa.Table = Base.metadata.tables["audit_run_currencies"]
BREAKS: sa.Table = Base.metadata.tables["breaks"]
BREAK_REVIEWS: sa.Table = Base.metadata.tables["break_reviews"]
BREAK_STORIES: sa.Table = Base.metadata.tables["break_stories"]
BREAK_INPUTS: sa.Table = Base.metadata.tables["break_inputs"]
LATE_ATTRIBUTION: sa.Table = Base.metadata.tables["late_attribution"]
AUDIT_WHATIFS: sa.Table = Base.metadata.tables["audit_whatifs"]
AUDIT_WHATIF_POINTS: sa.Table = Base.metadata.tables["audit_whatif_points"]
CHECK_RUNS: sa.Table = Base.metadata.tables["check_runs"]
EXPECTATION_RESULTS: sa.Table = Base.metadata.tables["expectation_results"]
REPORTS: sa.Table = Base.metadata.tables["reports"]
SIGNOFF_LOG: sa.Table = Base.metadata.tables["signoff_log"]
SIGNER_KEYS: sa.Table = Base.metadata.tables["signer_keys"]
WORKBENCH_USERS: sa.Table = Base.metadata.tables["workbench_users"]
WORKBENCH_SESSIONS: sa.Table = Base.metadata.tables["workbench_sessions"]
WORKBENCH_LOGIN_FAILURES: sa.Table = Base.metadata.tables["workbench_login_failures"]
