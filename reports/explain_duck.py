"""`reckon explain` without a JVM: the same reads as audits/explain_spark.py, through DuckDB.

Why: a postmortem asks about one key's window, a few rows of a handful of tables; starting
Spark for them took most of two minutes on the demo warehouse. Here each table is opened by
delta-rs (``reports.duck``) as an Arrow dataset and DuckDB reads only the window's rows (the
filters on the partition column and the key reach the scan), so the whole command answers in
about a second. Every rule stays where it lives:

* the story is told by ``audits.chapters.chapter_of`` (and ``history_of``,
  ``watermarks_before_of``, ``exact_amounts``), the builder the Spark path and the audit use;
* the rules are the warehouse's recorded ones, ``storage.spec_log.rules_in_force`` (no pyspark);
* the provisional row is folded by ``reports.duck.provisional_sql``, the Spark fold's twin,
  over this window's deltas only.

The filters, columns, orders (Spark's ascending order puts nulls first: said here with
``NULLS FIRST``) and row caps are those of audits/explain_spark.py, so both engines tell the same
story; tests/test_explain_duck.py compares them on streamed warehouses. Example::

    story = explain_window_duck(Path("wh"), settings.event_time_rules(), "merchant-x", t)
    print("\\n".join(story.lines))
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from audits.chapters import (
    ProvisionalVersion,
    QuarantinedRow,
    WindowChapter,
    WindowReads,
    chapter_of,
    exact_amounts,
    history_of,
    watermarks_before_of,
)
from audits.window_story import WindowStory, no_events_error, untold
from reckon.errors import UsageError
from reckon.eventtime import EventTimeRules
from reckon.timeutil import from_micros
from reports.duck import _NO_PROGRESS, TableRef, _load, connect, provisional_sql
from storage import table_names as tb

__all__ = ["explain_window_duck"]

_TABLES = (tb.EVENT_LOG, tb.LATE_EVENTS, tb.QUARANTINE, tb.PROVISIONAL_DELTAS,
           tb.WATERMARK_PROGRESS, tb.CANONICAL_TOTALS, tb.RECONCILIATION)


def _at(micros: int) -> datetime:
    return from_micros(micros)


def _day(micros: int) -> date:
    return from_micros(micros).date()


def _rows(conn: Any, sql: str, params: list[Any]) -> list[Any]:
    """The rows of ``sql`` as objects with the columns as attributes (what Spark's Row gives
    audits/explain_spark.py, so ``chapter_of`` reads both alike). Every value is a bound
    parameter: the text only ever names tables (``tb``'s constants) and placeholders."""
    cursor = conn.execute(sql, params)
    names = [d[0] for d in cursor.description or ()]
    return [SimpleNamespace(**dict(zip(names, row, strict=True))) for row in cursor.fetchall()]


def _currency_sql(currency: str | None, column: str = "currency") -> tuple[str, list[Any]]:
    return ("", []) if currency is None else (f" AND {column} = ?", [currency])


def _events(conn: Any, key: str, start: int, end: int, currency: str | None) -> list[Any]:
    cur, args = _currency_sql(currency)
    return _rows(conn, f"""
        SELECT event_id, epoch_us(event_time) AS event_time,
               epoch_us(arrival_time) AS arrival_time, "partition", "offset", input_file,
               batch_id, amount, currency, source, is_duplicate
        FROM {tb.EVENT_LOG}
        WHERE event_date >= ? AND event_date <= ? AND key = ?{cur}
          AND event_time >= ? AND event_time < ?
        ORDER BY arrival_time NULLS FIRST, "partition" NULLS FIRST, input_file NULLS FIRST,
                 "offset" NULLS FIRST, event_id NULLS FIRST
        LIMIT 100000""", [_day(start), _day(end - 1), key, *args, _at(start), _at(end)])


def _late(conn: Any, key: str, start: int) -> dict[tuple[Any, ...], Any]:
    rows = _rows(conn, f"""
        SELECT event_id, epoch_us(watermark) AS watermark, lateness_seconds, batch_id,
               epoch_us(arrival_time) AS arrival_time, "partition", "offset", input_file
        FROM {tb.LATE_EVENTS}
        WHERE window_date = ? AND key = ? AND window_start = ? LIMIT 100000""",
                 [_day(start), key, _at(start)])
    return {(r.event_id, r.batch_id, r.partition, r.offset, r.input_file): r for r in rows}


def _quarantined(conn: Any, key: str, start: int, end: int,
                 currency: str | None) -> list[QuarantinedRow]:
    """Spark's ``get_json_object`` is NULL on a payload that is not JSON; DuckDB's
    ``json_extract_string`` raises, so the payload is checked first."""
    field = "CASE WHEN json_valid(payload) THEN json_extract_string(payload, '{}') END"
    named = f"coalesce({field.format('$.currency')}, '')"
    cur, args = _currency_sql(currency, named)
    rows = _rows(conn, f"""
        SELECT reason, detail, event_id, epoch_us(event_time) AS event_time,
               epoch_us(arrival_time) AS arrival_time, "partition", "offset", batch_id,
               origin, {named} AS currency
        FROM {tb.QUARANTINE}
        WHERE event_time IS NOT NULL AND event_time >= ? AND event_time < ?
          AND {field.format('$.key')} = ?{cur}
        ORDER BY arrival_time NULLS FIRST, "partition" NULLS FIRST, "offset" NULLS FIRST
        LIMIT 1000""", [_at(start), _at(end), key, *args])
    return [QuarantinedRow(r.reason, r.detail, r.event_id, r.event_time, r.arrival_time,
                           r.partition, r.offset, r.batch_id, r.origin, r.currency)
            for r in rows]


_Provisional = tuple[dict[str, dict[str, Any]], dict[str, list[ProvisionalVersion]]]


def _provisional(conn: Any, key: str, start: int, rules: EventTimeRules,
                 currency: str | None) -> _Provisional:
    """Per currency: the current provisional row and its history. The fold
    (``provisional_sql``) runs over this window's deltas only (a temporary table of a few
    rows): a row's fold reads its own deltas and the batches' watermarks, nothing else."""
    cur, args = _currency_sql(currency)
    _rows(conn, f"""CREATE TEMP TABLE window_deltas AS SELECT * FROM {tb.PROVISIONAL_DELTAS}
                    WHERE window_date = ? AND window_start = ? AND key = ?{cur}""",
          [_day(start), _at(start), key, *args])
    now = _rows(conn, f"""
        SELECT currency, total_amount, event_count, status, revision, last_batch_id,
               closed_batch_id, finalized_batch_id, epoch_us(closed_at) AS closed_at,
               epoch_us(watermark_at_close) AS watermark_at_close,
               epoch_us(finalized_at) AS finalized_at
        FROM ({provisional_sql(rules, deltas='window_deltas')}) LIMIT 1000""", [])
    current = {r.currency: {k: v for k, v in vars(r).items() if k != "currency"} for r in now}
    deltas = _rows(conn, """
        SELECT currency, batch_id, query_id, epoch_us(processed_at) AS processed_at,
               total_amount, event_count, revised
        FROM window_deltas ORDER BY processed_at LIMIT 10000""", [])
    after = {(r.query_id, r.batch_id): r.watermark for r in _rows(conn, f"""
        SELECT query_id, batch_id, epoch_us(watermark) AS watermark
        FROM {tb.WATERMARK_PROGRESS} WHERE list_contains(?::BIGINT[], batch_id)""",
        [sorted({d.batch_id for d in deltas})])
        if (r.query_id, r.batch_id) in {(d.query_id, d.batch_id) for d in deltas}}
    history = {code: history_of([d for d in deltas if d.currency == code], after,
                                current.get(code), start + rules.windows.size, rules.allowed_lateness)
               for code in sorted({d.currency for d in deltas})}
    return current, history


def _watermarks_before(conn: Any, batch_ids: set[int]) -> dict[int, int | None]:
    """``watermark_before`` of each batch (audits/explain_spark.py ``_watermarks_before``)."""
    if not batch_ids:
        return {}
    rows = _rows(conn, f"""
        SELECT DISTINCT batch_id, epoch_us(watermark_before) AS watermark_before
        FROM {tb.WATERMARK_PROGRESS} WHERE list_contains(?::BIGINT[], batch_id)""",
                 [sorted(batch_ids)])
    return watermarks_before_of((r.batch_id, r.watermark_before) for r in rows)


def _per_currency(conn: Any, table: str, key: str, start: int, cols: list[str],
                  currency: str | None, order: str | None = None
                  ) -> dict[str, dict[str, Any]]:
    """The row of each currency (the greatest ``order`` first), amounts in its own digits."""
    cur, args = _currency_sql(currency)
    by = f" ORDER BY {order} DESC" if order else ""
    out: dict[str, dict[str, Any]] = {}
    for r in _rows(conn, f"""SELECT currency, {', '.join(cols)} FROM {table}
                             WHERE window_date = ? AND key = ? AND window_start = ?{cur}
                             {by} LIMIT 1000""", [_day(start), key, _at(start), *args]):
        row = {k: v for k, v in vars(r).items() if k != "currency"}
        out.setdefault(r.currency, exact_amounts(row, r.currency))
    return out


_RECON_COLS = ["status", "gap_amount", "gap_count", "late_amount", "late_count",
               "duplicate_amount", "duplicate_count", "residual_amount", "residual_count",
               "audit_run_id"]


def _read_window(conn: Any, present: set[str], key: str, start: int, end: int,
                 rules: EventTimeRules, currency: str | None) -> WindowReads:
    """Every read of one window, each skipped (empty) when its table does not exist yet."""
    has = present.__contains__
    current, history = (_provisional(conn, key, start, rules, currency)
                        if has(tb.PROVISIONAL_DELTAS) else ({}, {}))
    conn.execute("DROP TABLE IF EXISTS window_deltas")
    events = _events(conn, key, start, end, currency)
    before = _watermarks_before(conn, {r.batch_id for r in events if r.batch_id is not None})
    canonical = (_per_currency(conn, tb.CANONICAL_TOTALS, key, start,
                               ["total_amount", "event_count", "replay_id"], currency)
                 if has(tb.CANONICAL_TOTALS) else {})
    recon = (_per_currency(conn, tb.RECONCILIATION, key, start, _RECON_COLS, currency,
                           order="audit_run_id") if has(tb.RECONCILIATION) else {})
    late = _late(conn, key, start) if has(tb.LATE_EVENTS) else {}
    quarantined = _quarantined(conn, key, start, end, currency) if has(tb.QUARANTINE) else []
    return WindowReads(events, late, before, current, history, canonical, recon, quarantined)


def _open(wh: Path) -> tuple[Any, set[str]]:
    """A locked DuckDB connection with the story's tables that exist registered (an empty
    watermark_progress when no batch recorded one: every watermark unknown)."""
    conn = connect()
    present = {t for t in _TABLES if tb.table_exists(wh, t)}
    for name in sorted(present):
        conn.register(name, _load(wh, TableRef(name=name)))
    if tb.WATERMARK_PROGRESS not in present:
        conn.sql(_NO_PROGRESS).create_view(tb.WATERMARK_PROGRESS)
    conn.execute("SET enable_external_access = false")
    return conn, present


def explain_window_duck(wh: Path, configured: EventTimeRules, key: str, instant: int,
                        currency: str | None = None) -> WindowStory:
    """``audits.explain_spark.explain_window`` on DuckDB: the same ``WindowStory``, every window
    containing ``instant`` for ``key`` told by ``chapter_of`` under the rules in force.

    >>> explain_window_duck(Path("wh"), rules, "merchant-x", t).lines[0]  # doctest: +SKIP
    'window [2026-01-01T10:00:00Z, 2026-01-01T10:05:00Z) key merchant-x, currency EUR: ...'
    """
    from storage.spec_log import rules_in_force

    if not tb.table_exists(wh, tb.EVENT_LOG):
        raise UsageError(f"--warehouse={str(wh)!r} is not valid: it has no event_log table "
                         "(run `reckon stream` first)")
    rules = rules_in_force(wh, configured)
    conn, present = _open(wh)
    chapters: list[WindowChapter] = []
    for window in rules.windows.assign(instant):
        reads = _read_window(conn, present, key, window.start, window.end, rules, currency)
        chapters.extend(chapter_of(reads, key, window.start, window.end, code, rules)
                        for code in sorted(reads.currencies() or {currency or ""}))
    if all(untold(ch) for ch in chapters) and not _key_on_day(conn, key, instant, currency):
        raise no_events_error(key, instant, currency)
    return WindowStory(key, instant, rules.to_config(), tuple(chapters), currency)


def _key_on_day(conn: Any, key: str, instant: int, currency: str | None) -> bool:
    """Whether ``key`` (in ``currency``) has any event on the day of ``instant``."""
    cur, args = _currency_sql(currency)
    return bool(_rows(conn, f"SELECT 1 AS found FROM {tb.EVENT_LOG} WHERE event_date = ? "
                            f"AND key = ?{cur} LIMIT 1", [_day(instant), key, *args]))
