"""The writes Spark's executors make: an audit run's breaks (with their review status) and
its break stories (with their contributing inputs).

Why its own module: these functions run in a fresh Python worker that has only the database
URL, never a ``ReportDB``; they are module-level so that Spark pickles them by reference
(audits/ledger.py hands them to the audit as its writers). Each is idempotent (a retried
task writes nothing twice), safe when partitions write at once, and writes in chunks of
:data:`BREAK_CHUNK_ROWS`, one transaction per chunk.

Example:
    >>> insert_breaks("sqlite:///reckon.db", "audit-2026-01-01-abc", rows)  # doctest: +SKIP
    42
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from audits.records import BreakRow, BreakStory
from reckon.errors import invalid
from reports.db.engine import insert_for, migrated_worker_engine, write_tx
from reports.db.models import BREAK_INPUTS, BREAK_REVIEWS, BREAK_STORIES, BREAKS

__all__ = ["BREAK_CHUNK_ROWS", "insert_break_stories", "insert_breaks"]

BREAK_CHUNK_ROWS = 5000


def _now() -> datetime:
    return datetime.now(UTC)


def _break_values(run_id: str, row: BreakRow) -> dict[str, Any]:
    if row.run_id != run_id:
        raise invalid("BreakRow.run_id", row.run_id, f"the run being written ({run_id!r})")
    values = {f.name: getattr(row, f.name) for f in fields(BreakRow)}
    # the absolute gap the workbench filters and sorts by (exact: Decimal's abs of an amount
    # that fits DECIMAL(38,3) is exact at 80 digits)
    values["gap_magnitude"] = Decimal(values["gap_amount"]).copy_abs()
    return values


def _identity(values: dict[str, Any]) -> tuple[date, datetime, str, str]:
    return values["day"], values["window_start"].astimezone(UTC), values["key"], values["currency"]


def _write_break_chunk(conn: Connection, run_id: str, chunk: list[dict[str, Any]],
                       now: datetime) -> int:
    insert = insert_for(conn.dialect.name)
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
    window_start, key, currency) is unique) and safe when partitions write concurrently. Rows
    are written in chunks of :data:`BREAK_CHUNK_ROWS`, one transaction per chunk.

    Review rules per identity (day, window_start, key, currency): a new identity gets
    ``first_seen_at = now`` and review status 'explained' when its status is EXPLAINED, else 'open'; a known one
    keeps ``first_seen_at`` and its review status, except that 'explained' now unexplained
    becomes 'open' again, and so does 'accepted' or 'resolved' when the break's status,
    residual amount or residual count differs from the audit it was last seen in (the decision
    was made on those figures).
    """
    moment = now or _now()
    engine = migrated_worker_engine(url)
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


def _story_chunk(conn: Connection, chunk: list[BreakStory]) -> None:
    insert = insert_for(conn.dialect.name)
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
    engine = migrated_worker_engine(url)
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
