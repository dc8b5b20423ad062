"""The report database: audit runs, breaks and their review status, attribution, data-quality
results, rendered reports and the hash-chained sign-off log.

One schema, two backends: a SQLite file inside the warehouse by default (``Settings.report_db``)
and PostgreSQL (``postgresql+psycopg://...``) when grown up. The schema is owned by Alembic
(``reports/migrations``); :meth:`ReportDB.migrate` runs ``upgrade head`` and every public method
makes sure it ran once per instance.

Exactness rules, identical on both backends:

* Money is ``Decimal`` stored as ``NUMERIC(38,2)`` on PostgreSQL and as TEXT on SQLite (SQLite's
  NUMERIC affinity would round through a float). A value with more than 2 decimal places is
  refused, never rounded. Ratios (shares, lift, completeness) are unconstrained NUMERIC / TEXT.
* Times are aware UTC datetimes at microsecond precision; a naive datetime is taken as local
  time (what PySpark returns), as in :func:`reckon.timeutil.to_micros`.
* History is never deleted: a new audit run of a (day, kind) makes the older ones
  ``is_current = False``.

All SQL goes through SQLAlchemy constructs with bound parameters.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields
from datetime import UTC, date, datetime
from decimal import Context, Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.pool import NullPool, StaticPool

from audits.ledger import AuditRecorder
from audits.records import (
    AttributionRow,
    AuditRun,
    BreakRow,
    BreakStory,
    CheckRun,
    CurrencySummary,
    ExpectationResult,
)
from reckon.errors import ReckonError, UsageError, invalid
from reckon.identity import os_principal
from reckon.signoff import SIGNING_DECISIONS, decision_constraint
from reports.records import ReportRecord

__all__ = [
    "AUDIT_RUNS",
    "AUDIT_RUN_CURRENCIES",
    "BREAKS",
    "BREAK_CHUNK_ROWS",
    "BREAK_INPUTS",
    "BREAK_REVIEWS",
    "BREAK_STORIES",
    "CHECK_RUNS",
    "EXPECTATION_RESULTS",
    "LATE_ATTRIBUTION",
    "REPORTS",
    "REVIEW_STATUSES",
    "SIGNOFF_LOG",
    "WORKBENCH_LOGIN_FAILURES",
    "WORKBENCH_SESSIONS",
    "WORKBENCH_USERS",
    "AttributionRowModel",
    "AuditRunCurrencyModel",
    "AuditRunModel",
    "Base",
    "BreakInputModel",
    "BreakModel",
    "BreakReviewModel",
    "BreakStoryModel",
    "CheckRunModel",
    "ExactDecimal",
    "ExpectationResultModel",
    "Money",
    "ReportDB",
    "ReportModel",
    "SignoffModel",
    "UTCDateTime",
    "WorkbenchLoginFailureModel",
    "WorkbenchSessionModel",
    "WorkbenchUserModel",
    "audit_recorder",
    "insert_break_stories",
    "insert_breaks",
    "write_tx",
]

BREAK_CHUNK_ROWS = 5000
REVIEW_STATUSES = ("open", "explained", "accepted", "resolved")
_STORED = Decimal("0.001")  # the stored scale: every accepted currency's minor unit fits
_MONEY_LIMIT = Decimal(10) ** 35  # DECIMAL(38,3): 35 digits before the point
_EXACT = Context(prec=80)  # the default 28 digits cannot quantize DECIMAL(38,3) values
_PACKAGE_DIR = Path(__file__).resolve().parent


# ----------------------------------------------------------------------------- column types


def _to_decimal(value: Any, what: str) -> Decimal:
    if isinstance(value, float):
        raise invalid(what, value, "a Decimal (or int / str); floats are not exact")
    try:
        return value if isinstance(value, Decimal) else Decimal(str(value))
    except InvalidOperation:
        raise invalid(what, value, "a decimal number") from None


class Money(sa.types.TypeDecorator[Decimal]):
    """Exact money: ``NUMERIC(38,3)`` on PostgreSQL, TEXT elsewhere; always returns Decimal
    with 3 places (the stored scale; the row's currency says how many are its own: format with
    reckon.money). More than 3 decimal places is an error (nothing is rounded silently). A
    Money column always sits next to a currency column: amounts are never summed across
    currencies here."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(sa.Numeric(38, 3, asdecimal=True))
        return dialect.type_descriptor(sa.Text())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        number = _to_decimal(value, "money")
        stored = number.quantize(_STORED, context=_EXACT)
        if stored != number:
            raise invalid("money", value, "an amount with at most 3 decimal places")
        if stored.copy_abs() >= _MONEY_LIMIT:  # exact: abs() rounds to 28 digits
            raise invalid("money", value, "an amount that fits DECIMAL(38,3)")
        return stored if dialect.name == "postgresql" else str(stored)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        return Decimal(str(value)).quantize(_STORED, context=_EXACT)


class ExactDecimal(sa.types.TypeDecorator[Decimal]):
    """An exact ratio or share: unconstrained NUMERIC on PostgreSQL, TEXT elsewhere."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(sa.Numeric(asdecimal=True))
        return dialect.type_descriptor(sa.Text())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        number = _to_decimal(value, "decimal")
        return number if dialect.name == "postgresql" else str(number)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        return None if value is None else Decimal(str(value))


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out (TIMESTAMPTZ on PostgreSQL, naive UTC
    text on SQLite). A naive input is taken as local time, like PySpark's TIMESTAMP values."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise invalid("timestamp", value, "a datetime")
        moment = value.astimezone(UTC)
        return moment if dialect.name == "postgresql" else moment.replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _json_type() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(pg.JSONB(), "postgresql")


def _id_type() -> sa.types.TypeEngine[int]:
    # SQLite only auto-increments an INTEGER PRIMARY KEY (the rowid alias), not BIGINT.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


# ----------------------------------------------------------------------------- models


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
    params: Mapped[dict[str, Any]] = mapped_column(_json_type())
    status_counts: Mapped[dict[str, int]] = mapped_column(_json_type())
    rows: Mapped[int] = mapped_column(sa.BigInteger())
    unexplained: Mapped[int] = mapped_column(sa.BigInteger())
    table_versions: Mapped[dict[str, int]] = mapped_column(_json_type())
    completeness: Mapped[Decimal | None] = mapped_column(ExactDecimal(), nullable=True)
    is_current: Mapped[bool] = mapped_column(sa.Boolean())
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime())


class AuditRunCurrencyModel(Base):
    """One currency's figures in one audit run (audits.records.CurrencySummary): the only
    place a run's money is kept, so no figure ever adds two currencies."""

    __tablename__ = "audit_run_currencies"

    run_id: Mapped[str] = mapped_column(
        sa.String(200), sa.ForeignKey("audit_runs.run_id", name="fk_audit_run_currencies_run"),
        primary_key=True)
    currency: Mapped[str] = mapped_column(sa.String(3), primary_key=True)
    rows: Mapped[int] = mapped_column(sa.BigInteger())
    status_counts: Mapped[dict[str, int]] = mapped_column(_json_type())
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
    )

    id: Mapped[int] = mapped_column(_id_type(), primary_key=True, autoincrement=True)
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
        sa.CheckConstraint("review_status IN ('open', 'explained', 'accepted', 'resolved')",
                           name="ck_break_reviews_status"),
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


class BreakStoryModel(Base):
    """A break's story as ``reckon explain`` tells it (audits/break_story.py), recorded by the audit
    from the table versions it read: the workbench shows it without Spark."""

    __tablename__ = "break_stories"

    run_id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(400), primary_key=True)
    currency: Mapped[str] = mapped_column(sa.String(3), primary_key=True)
    lines: Mapped[list[str]] = mapped_column(_json_type())
    evidence: Mapped[list[dict[str, Any]]] = mapped_column(_json_type())
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

    id: Mapped[int] = mapped_column(_id_type(), primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(
        sa.String(200), sa.ForeignKey("audit_runs.run_id", name="fk_late_attribution_run"),
        index=True)
    dimension: Mapped[str] = mapped_column(sa.String(40))
    value: Mapped[str] = mapped_column(sa.String(400))
    late_events: Mapped[int] = mapped_column(sa.BigInteger())
    # currency -> exact amount (decimal text): never one sum over currencies
    late_amounts: Mapped[dict[str, str]] = mapped_column(_json_type())
    all_events: Mapped[int] = mapped_column(sa.BigInteger())
    late_share: Mapped[Decimal] = mapped_column(ExactDecimal())
    event_share: Mapped[Decimal] = mapped_column(ExactDecimal())
    lift: Mapped[Decimal | None] = mapped_column(ExactDecimal(), nullable=True)


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
    table_versions: Mapped[dict[str, int]] = mapped_column(_json_type(),
                                                           server_default=sa.text("'{}'"))
    is_current: Mapped[bool] = mapped_column(sa.Boolean())
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ExpectationResultModel(Base):
    __tablename__ = "expectation_results"

    id: Mapped[int] = mapped_column(_id_type(), primary_key=True, autoincrement=True)
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

    id: Mapped[int] = mapped_column(_id_type(), primary_key=True, autoincrement=True)
    day: Mapped[date] = mapped_column(sa.Date)
    audit_run_id: Mapped[str] = mapped_column(sa.String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    html_path: Mapped[str] = mapped_column(sa.Text())
    pdf_path: Mapped[str] = mapped_column(sa.Text())
    csv_paths: Mapped[list[str]] = mapped_column(_json_type())
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

    id: Mapped[int] = mapped_column(_id_type(), primary_key=True, autoincrement=True)
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
CHECK_RUNS: sa.Table = Base.metadata.tables["check_runs"]
EXPECTATION_RESULTS: sa.Table = Base.metadata.tables["expectation_results"]
REPORTS: sa.Table = Base.metadata.tables["reports"]
SIGNOFF_LOG: sa.Table = Base.metadata.tables["signoff_log"]
WORKBENCH_USERS: sa.Table = Base.metadata.tables["workbench_users"]
WORKBENCH_SESSIONS: sa.Table = Base.metadata.tables["workbench_sessions"]
WORKBENCH_LOGIN_FAILURES: sa.Table = Base.metadata.tables["workbench_login_failures"]


# ----------------------------------------------------------------------------- engines


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)  # exact, as text
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} {value!r} is not JSON-serialisable")


def _json_dumps(value: Any) -> str:
    return json.dumps(value, default=_json_default, sort_keys=True)


def _make_engine(url: str, *, pooled: bool = True) -> Engine:
    """An engine with the SQLite settings that make it behave like a server: foreign keys on,
    WAL (readers do not block the writer), a busy timeout, and transactions we BEGIN ourselves
    so that writers can take ``BEGIN IMMEDIATE``."""
    parsed = sa.make_url(url)
    kwargs: dict[str, Any] = {"json_serializer": _json_dumps}
    is_sqlite = parsed.get_backend_name() == "sqlite"
    in_memory = is_sqlite and parsed.database in (None, "", ":memory:")
    if in_memory:
        kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
    elif not pooled:
        kwargs["poolclass"] = NullPool
    if is_sqlite and not in_memory:
        kwargs["connect_args"] = {"timeout": 60, "check_same_thread": False}
    engine = sa.create_engine(url, **kwargs)
    if is_sqlite:
        _install_sqlite_hooks(engine, wal=not in_memory)
    return engine


def _install_sqlite_hooks(engine: Engine, *, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # pysqlite must not BEGIN on its own
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA busy_timeout = 60000")
        if wal:
            _enable_wal(cursor)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get("reckon_write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")


def _enable_wal(cursor: Any, *, timeout: float = 60.0) -> None:
    """Switch the file to WAL (a persistent property of the file). SQLite answers the switch
    with "database is locked" at once, without its busy handler, while another connection is
    making the same switch; so a file already in WAL is left alone and the switch is retried."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
                return
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.25)


# The tables whose writers are serialised on PostgreSQL, each by a transaction-level advisory
# lock with a fixed id ('reckon' + a table number). Advisory locks need no privilege on the
# table, so a reviewer role that may only INSERT into signoff_log can still take them.
_PG_LOCK_IDS = {"audit_runs": 0x7265636B6F6E0001, "check_runs": 0x7265636B6F6E0002,
                "signoff_log": 0x7265636B6F6E0003}


@contextlib.contextmanager
def write_tx(engine: Engine, *lock_tables: str) -> Iterator[Connection]:
    """A write transaction, serialised against other writers of ``lock_tables``: SQLite takes
    the database write lock up front (BEGIN IMMEDIATE); PostgreSQL takes each table's advisory
    lock, in the order given (readers go on, other writers of those tables wait for the
    commit). Public because every module that writes the report database must take the same
    locks in the same order, or two writers interleave (reports.review appends the sign-off
    log with it). Lock tables are keys of ``_PG_LOCK_IDS``; a rollback on any exception.

    Example::

        with write_tx(db.ready(), "signoff_log", "audit_runs") as conn:
            conn.execute(SIGNOFF_LOG.insert().values(...))
    """
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(reckon_write=True)
            if conn.dialect.name == "postgresql":
                # the advisory lock's SELECT takes the snapshot before it waits: only READ
                # COMMITTED lets the next statements see what the lock's last holder committed
                conn = conn.execution_options(isolation_level="READ COMMITTED")
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    for table in lock_tables:
                        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(
                            _PG_LOCK_IDS[table])))
                yield conn
    except sa.exc.StatementError as exc:
        # a column type refused a value (e.g. money with 3 decimals): surface reckon's error
        if isinstance(exc.orig, ReckonError):
            raise exc.orig from None
        raise


# Per-process caches for insert_breaks, which runs in Spark's Python workers with only a URL.
_ENGINES: dict[tuple[int, str], Engine] = {}
_MIGRATED: set[tuple[int, str]] = set()
_CACHE_LOCK = threading.Lock()


def _worker_engine(url: str) -> Engine:
    key = (os.getpid(), url)
    with _CACHE_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = _make_engine(url, pooled=False)
    return engine


def _alembic_config(connection: Connection) -> Any:
    from alembic.config import Config

    cfg = Config(str(_PACKAGE_DIR / "alembic.ini"))
    cfg.set_main_option("script_location", str(_PACKAGE_DIR / "migrations"))
    cfg.attributes["connection"] = connection
    return cfg


def _migrate_engine(engine: Engine) -> None:
    """``alembic upgrade head`` inside one serialised transaction, so that two processes
    migrating the same database at once do not race (the second finds the schema at head)."""
    from alembic import command

    with engine.connect() as conn:
        conn = conn.execution_options(reckon_write=True)
        with conn.begin():
            if conn.dialect.name == "postgresql":
                # a fixed application lock id: 'reckon-db' in ASCII
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(0x7265636B6F6E6462)))
            command.upgrade(_alembic_config(conn), "head")


def _now() -> datetime:
    return datetime.now(UTC)


# ----------------------------------------------------------------------------- breaks


def _break_values(run_id: str, row: BreakRow) -> dict[str, Any]:
    if row.run_id != run_id:
        raise invalid("BreakRow.run_id", row.run_id, f"the run being written ({run_id!r})")
    return {f.name: getattr(row, f.name) for f in fields(BreakRow)}


def _insert_for(dialect_name: str) -> Any:
    if dialect_name == "postgresql":
        return pg.insert
    if dialect_name == "sqlite":
        return sqlite_dialect.insert
    raise UsageError(f"report database backend {dialect_name!r} is not supported: "
                     "use sqlite:///FILE or postgresql+psycopg://...")


def _identity(values: dict[str, Any]) -> tuple[date, datetime, str, str]:
    return values["day"], values["window_start"].astimezone(UTC), values["key"], values["currency"]


def _write_break_chunk(conn: Connection, run_id: str, chunk: list[dict[str, Any]],
                       now: datetime) -> int:
    insert = _insert_for(conn.dialect.name)
    breaks = BREAKS
    # same identity order in every writer: concurrent (or speculative) tasks cannot deadlock
    chunk = sorted(chunk, key=_identity)
    # plain executemany (no RETURNING): psycopg pipelines it, several times faster than the
    # multi-row VALUES statements SQLAlchemy builds when RETURNING is asked for
    conn.execute(insert(breaks).on_conflict_do_nothing(
        index_elements=["run_id", "day", "window_start", "key", "currency"]), chunk)
    # one review row per identity (a repeated identity: the last row wins)
    identities: dict[tuple[date, datetime, str, str], dict[str, Any]] = {}
    for v in chunk:
        identities[_identity(v)] = {
            "day": v["day"], "window_start": v["window_start"], "key": v["key"],
            "currency": v["currency"],
            "review_status": "explained" if v["status"] == "EXPLAINED" else "open",
            "last_status": v["status"], "first_seen_at": now, "last_seen_run_id": run_id,
            "updated_at": now, "last_residual_amount": v["residual_amount"],
            "last_residual_count": v["residual_count"],
        }
    reviews_rows = list(identities.values())  # already in identity order
    reviews = BREAK_REVIEWS
    stmt = insert(reviews)
    stmt = stmt.on_conflict_do_update(
        index_elements=["day", "window_start", "key", "currency"],
        set_={
            # 'explained' that became unexplained re-opens; so does a decision (accepted,
            # resolved) once the break's status or residual is no longer the one it was made
            # on; every other status is kept
            "review_status": sa.case(
                (sa.and_(reviews.c.review_status == "explained",
                         stmt.excluded.review_status == "open"), "open"),
                (sa.and_(sa.or_(reviews.c.review_status == "accepted",
                                reviews.c.review_status == "resolved"),  # no IN: executemany
                         reviews.c.last_residual_amount.is_not(None),
                         sa.or_(reviews.c.last_status != stmt.excluded.last_status,
                                reviews.c.last_residual_amount
                                != stmt.excluded.last_residual_amount,
                                reviews.c.last_residual_count
                                != stmt.excluded.last_residual_count)), "open"),
                else_=reviews.c.review_status),
            "last_status": stmt.excluded.last_status,
            "last_residual_amount": stmt.excluded.last_residual_amount,
            "last_residual_count": stmt.excluded.last_residual_count,
            "last_seen_run_id": stmt.excluded.last_seen_run_id,
            "updated_at": stmt.excluded.updated_at,
        },
    )
    conn.execute(stmt, reviews_rows)
    return len(chunk)


def insert_breaks(url: str, run_id: str, rows: Iterable[BreakRow], *,
                  now: datetime | None = None) -> int:
    """Write one audit run's breaks and upsert their review status; return the rows handed in
    (each is now stored exactly once, whether this call or an earlier attempt wrote it).

    Module-level on purpose: Spark calls it from ``foreachPartition`` in a fresh Python worker
    that has only the URL. Idempotent (a retried task writes nothing twice: (run_id, day,
    window_start, key, currency) is unique) and safe when partitions write concurrently. Rows are written
    in chunks of :data:`BREAK_CHUNK_ROWS`, one transaction per chunk.

    Review rules per identity (day, window_start, key, currency): a new identity gets ``first_seen_at =
    now`` and review status 'explained' when its status is EXPLAINED, else 'open'; a known one
    keeps ``first_seen_at`` and its review status, except that 'explained' now unexplained
    becomes 'open' again, and so does 'accepted' or 'resolved' when the break's status,
    residual amount or residual count differs from the audit it was last seen in (the decision
    was made on those figures).
    """
    moment = now or _now()
    engine = _migrated_worker_engine(url)
    total = 0
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(_break_values(run_id, row))
        if len(chunk) >= BREAK_CHUNK_ROWS:
            with write_tx(engine) as conn:
                total += _write_break_chunk(conn, run_id, chunk, moment)
            chunk = []
    if chunk:
        with write_tx(engine) as conn:
            total += _write_break_chunk(conn, run_id, chunk, moment)
    return total


def _migrated_worker_engine(url: str) -> Engine:
    """The worker's engine for ``url``, its schema migrated once per process (a Spark Python
    worker writes many chunks; checking the schema for each would cost a query each)."""
    engine = _worker_engine(url)
    key = (os.getpid(), url)
    if key not in _MIGRATED:
        _migrate_engine(engine)
        _MIGRATED.add(key)
    return engine


def _story_chunk(conn: Connection, chunk: list[BreakStory]) -> None:
    insert = _insert_for(conn.dialect.name)
    chunk = sorted(chunk, key=lambda s: (s.day, s.window_start, s.key, s.currency))
    stories = [{"run_id": s.run_id, "day": s.day, "window_start": s.window_start, "key": s.key,
                "currency": s.currency, "lines": list(s.lines), "evidence": list(s.evidence),
                "events": s.events} for s in chunk]
    conn.execute(insert(BREAK_STORIES).on_conflict_do_nothing(
        index_elements=["run_id", "day", "window_start", "key", "currency"]), stories)
    inputs = [{"run_id": s.run_id, "day": s.day, "window_start": s.window_start, "key": s.key,
               "currency": s.currency, "dimension": i.dimension, "value": i.value,
               "late_count": i.late_count, "duplicate_count": i.duplicate_count,
               "event_count": i.event_count} for s in chunk for i in s.inputs]
    if inputs:
        conn.execute(insert(BREAK_INPUTS).on_conflict_do_nothing(
            index_elements=["run_id", "dimension", "value", "day", "window_start", "key",
                            "currency"]), inputs)


def insert_break_stories(url: str, run_id: str, stories: Iterable[BreakStory]) -> int:
    """Write one audit run's break stories and their contributing inputs; return the stories
    handed in. Like :func:`insert_breaks`: module-level (Spark's Python workers call it with
    the URL only), idempotent (a retried task writes nothing twice), in chunks of
    :data:`BREAK_CHUNK_ROWS` stories, one transaction each."""
    engine = _migrated_worker_engine(url)
    total = 0
    chunk: list[BreakStory] = []
    for story in stories:
        if story.run_id != run_id:
            raise invalid("BreakStory.run_id", story.run_id,
                          f"the run being written ({run_id!r})")
        chunk.append(story)
        if len(chunk) >= BREAK_CHUNK_ROWS:
            with write_tx(engine) as conn:
                _story_chunk(conn, chunk)
            total, chunk = total + len(chunk), []
    if chunk:
        with write_tx(engine) as conn:
            _story_chunk(conn, chunk)
        total += len(chunk)
    return total


# ----------------------------------------------------------------------------- record mapping

_R = TypeVar("_R")


def _record_values(record: Any, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(record) if f.name not in exclude}


def _to_record(cls: type[_R], model: Any) -> _R:
    return cls(**{f.name: getattr(model, f.name) for f in fields(cls)})  # type: ignore[arg-type]


def _age_days(first_seen: datetime, now: datetime) -> int:
    return max(0, (now - first_seen).days)


# ----------------------------------------------------------------------------- the database


class ReportDB:
    """The report database behind one SQLAlchemy URL. Cheap to construct; the schema is
    migrated (Alembic ``upgrade head``) on first use."""

    def __init__(self, url: str) -> None:
        if not url or "://" not in url:
            raise invalid("url", url, "a SQLAlchemy URL such as sqlite:///path/reckon.db or "
                                      "postgresql+psycopg://user@host/db")
        self.url = url
        self.engine = _make_engine(url)
        _insert_for(self.engine.dialect.name)  # reject unsupported backends now
        self._migrated = False
        self._migrate_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Any) -> ReportDB:
        """The database of ``settings.report_db``; creates the SQLite file's folder."""
        url = settings.report_db
        parsed = sa.make_url(url)
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "",
                                                                             ":memory:"):
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        return cls(url)

    def __repr__(self) -> str:
        return f"ReportDB({self.engine.url.render_as_string(hide_password=True)!r})"

    def close(self) -> None:
        """Release pooled connections."""
        self.engine.dispose()

    def __enter__(self) -> ReportDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ schema
    def migrate(self) -> None:
        """Bring the schema to Alembic's head. Idempotent; safe in concurrent processes."""
        with self._migrate_lock:
            try:
                _migrate_engine(self.engine)
            except sa.exc.DBAPIError as exc:
                orig = exc.orig
                if (getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)) != "42501":
                    raise
                raise UsageError(
                    "the report database's schema is behind this reckon and this role may not "
                    "migrate it: run any reckon command (e.g. `reckon verify-log`) once as the "
                    "database's owner, then try again") from None
            self._migrated = True
        _MIGRATED.add((os.getpid(), self.url))  # insert_breaks in this process need not check

    def ready(self) -> Engine:
        """The engine, after making sure the schema is migrated (once per instance)."""
        if not self._migrated:
            self.migrate()
        return self.engine

    def principal(self) -> str:
        """Who this session acts as: on PostgreSQL the role it logged in as (``session_user``,
        which ``SET ROLE`` does not change; the database's triggers check the same name),
        elsewhere the OS account (reckon.identity.os_principal). An audit records it as its
        reconciler; a sign-off is made by it."""
        engine = self.ready()
        if engine.dialect.name != "postgresql":
            return os_principal()
        with engine.connect() as conn:
            return str(conn.execute(sa.text("SELECT session_user")).scalar_one())

    # ------------------------------------------------------------------ audit runs
    def record_audit_run(self, run: AuditRun, attribution: Sequence[AttributionRow]) -> None:
        """Store a run and its attribution in one transaction. The run becomes current for its
        (day, kind) unless a run that started later is already recorded (a delayed retry of an
        old run never displaces a newer one); older runs stay as history. Recording the same
        run_id again changes nothing."""
        engine = self.ready()
        runs = AUDIT_RUNS
        with write_tx(engine, runs.name) as conn:
            if conn.execute(sa.select(runs.c.run_id).where(runs.c.run_id == run.run_id)).first():
                return
            newer = conn.execute(sa.select(runs.c.run_id).where(
                runs.c.day == run.day, runs.c.kind == run.kind,
                runs.c.started_at > run.started_at).limit(1)).first()
            current = newer is None
            if current:
                conn.execute(sa.update(runs).where(runs.c.day == run.day, runs.c.kind == run.kind,
                                                   runs.c.is_current.is_(True))
                             .values(is_current=False))
            values = _record_values(run, exclude=("is_current", "currencies"))
            conn.execute(sa.insert(runs).values(**values, is_current=current,
                                                recorded_at=_now()))
            if run.currencies:
                conn.execute(sa.insert(AUDIT_RUN_CURRENCIES),
                             [{**_record_values(c), "run_id": run.run_id}
                              for c in run.currencies])
            if attribution:
                conn.execute(sa.insert(LATE_ATTRIBUTION),
                             [{**_record_values(a), "run_id": run.run_id} for a in attribution])

    def _audit_runs(self, stmt: sa.Select[Any]) -> list[AuditRun]:
        c = AUDIT_RUN_CURRENCIES
        with self.ready().connect() as conn:
            rows = list(conn.execute(stmt))
            by_run: dict[str, list[CurrencySummary]] = {}
            ids = [r.run_id for r in rows]
            for i in range(0, len(ids), 500):  # bounded IN lists
                for r in conn.execute(sa.select(c).where(c.c.run_id.in_(ids[i:i + 500]))
                                      .order_by(c.c.run_id, c.c.currency)):
                    by_run.setdefault(r.run_id, []).append(_to_record(CurrencySummary, r))
        runs = []
        for r in rows:
            fields_ = {f.name: getattr(r, f.name) for f in fields(AuditRun)
                       if f.name != "currencies"}
            runs.append(AuditRun(**fields_, currencies=tuple(by_run.get(r.run_id, ()))))
        return runs

    def current_audit_run(self, day: date, kind: str = "nightly") -> AuditRun | None:
        t = AUDIT_RUNS
        runs = self._audit_runs(sa.select(t).where(t.c.day == day, t.c.kind == kind,
                                                   t.c.is_current.is_(True)))
        return runs[0] if runs else None

    def audit_runs(self, day: date | None = None) -> list[AuditRun]:
        """Every recorded run (of ``day`` when given), newest first (history included)."""
        t = AUDIT_RUNS
        stmt = sa.select(t).order_by(t.c.started_at.desc(), t.c.recorded_at.desc())
        if day is not None:
            stmt = stmt.where(t.c.day == day)
        return self._audit_runs(stmt)

    def get_audit_run(self, run_id: str) -> AuditRun | None:
        t = AUDIT_RUNS
        runs = self._audit_runs(sa.select(t).where(t.c.run_id == run_id))
        return runs[0] if runs else None

    def attribution(self, run_id: str) -> list[AttributionRow]:
        t = LATE_ATTRIBUTION
        with self.ready().connect() as conn:
            rows = conn.execute(sa.select(t).where(t.c.run_id == run_id).order_by(t.c.id))
            out = []
            for r in rows:
                values = {f.name: getattr(r, f.name) for f in fields(AttributionRow)}
                values["late_amounts"] = {code: Decimal(str(amount)) for code, amount
                                          in sorted((r.late_amounts or {}).items())}
                out.append(AttributionRow(**values))
            return out

    # ------------------------------------------------------------------ breaks
    def write_breaks(self, run_id: str, rows: Iterable[BreakRow], *,
                     now: datetime | None = None) -> int:
        """Driver-side :func:`insert_breaks` (same rules)."""
        self.ready()
        return insert_breaks(self.url, run_id, rows, now=now)

    def write_break_stories(self, run_id: str, stories: Iterable[BreakStory]) -> int:
        """Driver-side :func:`insert_break_stories`."""
        self.ready()
        return insert_break_stories(self.url, run_id, stories)

    def breaks(self, run_id: str) -> list[BreakRow]:
        t = BREAKS
        with self.ready().connect() as conn:
            rows = conn.execute(sa.select(t).where(t.c.run_id == run_id)
                                .order_by(t.c.day, t.c.window_start, t.c.key, t.c.currency))
            return [_to_record(BreakRow, r) for r in rows]

    def list_breaks(self, day: date | None = None, review_status: str | None = None, *,
                    kind: str | None = None, now: datetime | None = None) -> list[dict[str, Any]]:
        """Breaks of the current audit runs (of every kind unless ``kind`` is given) with their
        review status and ``age_days`` = whole days since the identity was first seen."""
        if review_status is not None and review_status not in REVIEW_STATUSES:
            raise invalid("review_status", review_status, "one of " + ", ".join(REVIEW_STATUSES))
        moment = now or _now()
        b, r, a = BREAKS, BREAK_REVIEWS, AUDIT_RUNS
        stmt = (
            sa.select(b, a.c.kind, r.c.review_status, r.c.first_seen_at, r.c.last_seen_run_id,
                      r.c.updated_at.label("review_updated_at"))
            .join(a, sa.and_(a.c.run_id == b.c.run_id, a.c.is_current.is_(True)))
            .join(r, sa.and_(r.c.day == b.c.day, r.c.window_start == b.c.window_start,
                             r.c.key == b.c.key, r.c.currency == b.c.currency))
            .order_by(b.c.day, b.c.window_start, b.c.key, b.c.currency, a.c.kind)
        )
        if day is not None:
            stmt = stmt.where(b.c.day == day)
        if kind is not None:
            stmt = stmt.where(a.c.kind == kind)
        if review_status is not None:
            stmt = stmt.where(r.c.review_status == review_status)
        with self.ready().connect() as conn:
            out = []
            for row in conn.execute(stmt).mappings():
                item = dict(row)
                item.pop("id", None)
                item["age_days"] = _age_days(item["first_seen_at"], moment)
                out.append(item)
            return out

    def signoffs_of_day(self, day: date, kind: str = "nightly") -> list[dict[str, Any]]:
        """The sign-off log's entries on every audit run of ``day`` (``kind``), oldest first,
        each with its run's figures (``gap_totals``: currency -> gap) and whether the run is
        current."""
        log, runs, cur = SIGNOFF_LOG, AUDIT_RUNS, AUDIT_RUN_CURRENCIES
        stmt = (sa.select(log.c.seq, log.c.at, log.c.run_id, log.c.by, log.c.decision,
                          runs.c.is_current, runs.c.unexplained, runs.c.started_at)
                .join(runs, runs.c.run_id == log.c.run_id)
                .where(runs.c.day == day, runs.c.kind == kind).order_by(log.c.seq))
        with self.ready().connect() as conn:
            entries = [dict(row) for row in conn.execute(stmt).mappings()]
            gaps: dict[str, dict[str, Decimal]] = {}
            for run_id in {e["run_id"] for e in entries}:
                gaps[run_id] = {r.currency: r.gap_total for r in conn.execute(
                    sa.select(cur.c.currency, cur.c.gap_total).where(cur.c.run_id == run_id)
                    .order_by(cur.c.currency))}
        for entry in entries:
            entry["gap_totals"] = gaps.get(entry["run_id"], {})
        return entries

    # ------------------------------------------------------------------ data quality
    def record_check_run(self, run: CheckRun, results: Sequence[ExpectationResult]) -> None:
        """Store a check run and its results in one transaction; newest (by started_at) is
        current for its day; the same run_id again changes nothing."""
        engine = self.ready()
        runs = CHECK_RUNS
        with write_tx(engine, runs.name) as conn:
            if conn.execute(sa.select(runs.c.run_id).where(runs.c.run_id == run.run_id)).first():
                return
            newer = conn.execute(sa.select(runs.c.run_id).where(
                runs.c.day == run.day, runs.c.started_at > run.started_at).limit(1)).first()
            current = newer is None
            if current:
                conn.execute(sa.update(runs).where(runs.c.day == run.day,
                                                   runs.c.is_current.is_(True))
                             .values(is_current=False))
            conn.execute(sa.insert(runs).values(**_record_values(run), is_current=current,
                                                recorded_at=_now()))
            for result in results:
                if result.run_id != run.run_id:
                    raise invalid("ExpectationResult.run_id", result.run_id,
                                  f"the check run being recorded ({run.run_id!r})")
            if results:
                conn.execute(sa.insert(EXPECTATION_RESULTS),
                             [_record_values(x) for x in results])

    def current_check_run(self, day: date) -> CheckRun | None:
        t = CHECK_RUNS
        with self.ready().connect() as conn:
            row = conn.execute(sa.select(t).where(t.c.day == day,
                                                  t.c.is_current.is_(True))).first()
            return None if row is None else _to_record(CheckRun, row)

    def expectation_results(self, run_id: str) -> list[ExpectationResult]:
        t = EXPECTATION_RESULTS
        with self.ready().connect() as conn:
            rows = conn.execute(sa.select(t).where(t.c.run_id == run_id).order_by(t.c.id))
            return [_to_record(ExpectationResult, r) for r in rows]

    # ------------------------------------------------------------------ reports
    def record_report(self, rec: ReportRecord) -> None:
        """Store a rendered report; recording the same (run, HTML path, sha256) again is a
        no-op."""
        engine = self.ready()
        t = REPORTS
        insert = _insert_for(engine.dialect.name)
        values = _record_values(rec)
        values["csv_paths"] = list(rec.csv_paths)
        with write_tx(engine) as conn:
            conn.execute(insert(t).values(**values).on_conflict_do_nothing(
                index_elements=["audit_run_id", "html_path", "sha256"]))

    def _newest_report(self, where: sa.ColumnElement[bool]) -> ReportRecord | None:
        """The newest report matching ``where`` (by created_at, then recording order)."""
        t = REPORTS
        with self.ready().connect() as conn:
            row = conn.execute(sa.select(t).where(where)
                               .order_by(t.c.created_at.desc(), t.c.id.desc()).limit(1)).first()
            return None if row is None else _to_record(ReportRecord, row)

    def report_at(self, html_path: str) -> ReportRecord | None:
        """The newest report recorded with this HTML path, or None."""
        return self._newest_report(REPORTS.c.html_path == html_path)

    def is_signed_off(self, run_id: str) -> bool:
        """Whether the sign-off log holds a signing decision (reckon.signoff) on ``run_id``."""
        t = SIGNOFF_LOG
        with self.ready().connect() as conn:
            return conn.execute(sa.select(t.c.seq).where(
                t.c.run_id == run_id, t.c.decision.in_(SIGNING_DECISIONS)).limit(1)).first() \
                is not None

    def current_report(self, day: date) -> ReportRecord | None:
        """The newest report of ``day`` (by created_at, then recording order)."""
        return self._newest_report(REPORTS.c.day == day)


def audit_recorder(settings: Any) -> AuditRecorder:
    """How an audit records into ``settings.report_db``: this database on the driver, and
    the module-level writers its executors call with the URL (audits/ledger.py says why the
    audit is handed them instead of opening the database itself).

    Example:
        >>> audit_day(spark, settings, day, recorder=audit_recorder(settings))  # doctest: +SKIP
    """
    return AuditRecorder(ledger=ReportDB.from_settings(settings), write_breaks=insert_breaks,
                         write_stories=insert_break_stories)
