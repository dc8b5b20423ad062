"""Engines, write transactions and migrations of the report database.

Why its own module: every writer, the driver's ``ReportDB`` and the executors' writers alike,
must open the database the same way (SQLite behaving like a server: WAL, a busy timeout,
``BEGIN IMMEDIATE`` for writers) and take the same locks in the same order (``write_tx``),
and the schema is brought to Alembic's head the same way everywhere (``migrate_engine``).

Example:
    >>> engine = make_engine("sqlite://")
    >>> with write_tx(engine) as conn:
    ...     conn.exec_driver_sql("SELECT 1").scalar_one()
    1
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool, StaticPool

from reckon.errors import ReckonError, UsageError

__all__ = ["alembic_config", "enable_wal", "insert_for", "make_engine", "migrate_engine",
           "migrated_worker_engine", "note_migrated", "write_tx"]

_REPORTS_DIR = Path(__file__).resolve().parent.parent  # alembic.ini and migrations/


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)  # exact, as text
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} {value!r} is not JSON-serialisable")


def _json_dumps(value: Any) -> str:
    return json.dumps(value, default=_json_default, sort_keys=True)


def make_engine(url: str, *, pooled: bool = True) -> Engine:
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
            enable_wal(cursor)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get("reckon_write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")


def enable_wal(cursor: Any, *, timeout: float = 60.0) -> None:
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


# Per-process caches for the executor writes (reports/db/executor_writes.py), which run in
# Spark's Python workers with only a URL.
_ENGINES: dict[tuple[int, str], Engine] = {}
_MIGRATED: set[tuple[int, str]] = set()
_CACHE_LOCK = threading.Lock()


def _worker_engine(url: str) -> Engine:
    key = (os.getpid(), url)
    with _CACHE_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = make_engine(url, pooled=False)
    return engine


def alembic_config(connection: Connection) -> Any:
    """Alembic's configuration over an open ``connection`` (migrations/env.py runs on it, in
    the caller's serialised transaction), with the migrations found beside alembic.ini."""
    from alembic.config import Config

    cfg = Config(str(_REPORTS_DIR / "alembic.ini"))
    cfg.set_main_option("script_location", str(_REPORTS_DIR / "migrations"))
    cfg.attributes["connection"] = connection
    return cfg


def migrate_engine(engine: Engine) -> None:
    """``alembic upgrade head`` inside one serialised transaction, so that two processes
    migrating the same database at once do not race (the second finds the schema at head)."""
    from alembic import command

    with engine.connect() as conn:
        conn = conn.execution_options(reckon_write=True)
        with conn.begin():
            if conn.dialect.name == "postgresql":
                # a fixed application lock id: 'reckon-db' in ASCII
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(0x7265636B6F6E6462)))
            command.upgrade(alembic_config(conn), "head")


def insert_for(dialect_name: str) -> Any:
    """The dialect's INSERT (it has ON CONFLICT); a backend reckon does not support is refused."""
    if dialect_name == "postgresql":
        return pg.insert
    if dialect_name == "sqlite":
        return sqlite_dialect.insert
    raise UsageError(f"report database backend {dialect_name!r} is not supported: "
                     "use sqlite:///FILE or postgresql+psycopg://...")


def migrated_worker_engine(url: str) -> Engine:
    """The worker's engine for ``url``, its schema migrated once per process (a Spark Python
    worker writes many chunks; checking the schema for each would cost a query each)."""
    engine = _worker_engine(url)
    key = (os.getpid(), url)
    if key not in _MIGRATED:
        migrate_engine(engine)
        _MIGRATED.add(key)
    return engine


def note_migrated(url: str) -> None:
    """Remember that this process migrated ``url`` (``ReportDB.migrate`` did): the executor
    writes in this process need not check the schema again."""
    _MIGRATED.add((os.getpid(), url))
