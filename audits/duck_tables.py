"""DuckDB over the warehouse's Delta tables, through delta-rs: the connection, its lock, a
table loaded (at a version for time travel) and SQL text that composes from the core's rules.

Why here, below reports/: the audits compute the day's lateness what-ifs on DuckDB when they
record a run (``audits.bound_whatif_duck``, ``audits.day_whatif``), and the audits may not import
reports/ (docs/code-map.md's layers). ``reports.duck`` (``reckon sql``) builds its checked,
read-only query path on these same pieces and re-exports them. No pyspark, no JVM.

Example::

    conn = connect()
    conn.register("event_log", load_table(Path("wh"), TableRef(name="event_log")))
    lock(conn)  # no file or network access from here on
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reckon.errors import UsageError
from reckon.eventtime import (
    EventTimeRules,
    WindowStatus,
    ends_passed,
    is_beyond_allowed_lateness,
    is_open,
)
from storage import table_names as tb

__all__ = ["SqlExpr", "TableRef", "connect", "load_table", "lock", "provisional_sql", "quoted"]


class SqlExpr:
    """SQL text that composes through Python's operators, so a core rule written once on
    numbers (``reckon.eventtime.is_open``, ``ends_passed``) also writes its SQL.

    >>> from reckon.eventtime import ends_passed, is_open
    >>> str(is_open(SqlExpr("end_us"), SqlExpr("wm")))
    '(end_us > wm)'
    >>> str(ends_passed(SqlExpr("a"), SqlExpr("b"), 10)[1])
    '(b - (((b % 10) + 10) % 10))'
    """

    def __init__(self, text: str | int) -> None:
        self.text = str(text)

    def __str__(self) -> str:
        return self.text

    def _op(self, op: str, other: object, flip: bool = False) -> SqlExpr:
        left, right = (other, self) if flip else (self, other)
        return SqlExpr(f"({left} {op} {right})")

    def __add__(self, o: object) -> SqlExpr:
        return self._op("+", o)

    def __radd__(self, o: object) -> SqlExpr:
        return self._op("+", o, flip=True)

    def __sub__(self, o: object) -> SqlExpr:
        return self._op("-", o)

    def __rsub__(self, o: object) -> SqlExpr:
        return self._op("-", o, flip=True)

    def __mod__(self, o: object) -> SqlExpr:
        return self._op("%", o)  # truncating, as Spark's: the core rule allows for it

    def __gt__(self, o: object) -> SqlExpr:  # type: ignore[override]
        return self._op(">", o)

    def __le__(self, o: object) -> SqlExpr:  # type: ignore[override]
        return self._op("<=", o)


@dataclass(frozen=True)
class TableRef:
    """One table a query reads: its warehouse name and, for time travel, the version or
    timestamp asked for; ``alias`` is the relation name it is registered under."""

    name: str
    version: int | None = None
    timestamp: str | None = None

    @property
    def alias(self) -> str:
        if self.version is not None:
            return f"{self.name}@v{self.version}"
        if self.timestamp is not None:
            return f"{self.name}@{self.timestamp}"
        return self.name


def connect() -> Any:
    """A fresh in-memory DuckDB connection that reaches nothing outside itself once
    ``lock`` runs: no extension installs or loads, no Python variables as tables."""
    import duckdb

    conn = duckdb.connect(":memory:", config={
        "autoinstall_known_extensions": False, "autoload_known_extensions": False,
        "python_enable_replacements": False, "python_scan_all_frames": False})
    conn.execute("SET TimeZone = 'UTC'")  # timestamps shown in UTC, as reckon's Spark does
    return conn


def lock(conn: Any) -> None:
    """External access off (no file, no network) and the configuration locked: after this
    no statement can turn either back on. Run after the tables are registered."""
    conn.execute("SET allowed_directories = []")
    conn.execute("SET allowed_paths = []")
    conn.execute("SET enable_external_access = false")
    conn.execute("SET lock_configuration = true")


def load_table(warehouse: Path, ref: TableRef) -> Any:
    """The Arrow dataset of one table (at a version or timestamp for time travel); a table
    delta-rs cannot open is one line (``UsageError``).

    Example: ``conn.register("event_log", load_table(wh, TableRef("event_log", version=3)))``.
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    path = tb.table_path(warehouse, ref.name)
    try:
        table = DeltaTable(path, version=ref.version)
        if ref.timestamp is not None:
            table.load_as_version(_as_of(ref.timestamp))
    except (DeltaError, OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"cannot read {ref.alias}: {first}") from None
    return table.to_pyarrow_dataset()


def _as_of(text: str) -> datetime:
    """A ``TIMESTAMP AS OF`` literal, UTC unless it says otherwise (as reckon's Spark
    session reads it)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"TIMESTAMP AS OF {text!r} is not valid: write "
                         "'2026-03-01 10:00:00' (UTC)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def quoted(name: str) -> str:
    """A relation name quoted as DuckDB reads an identifier.

    >>> quoted('a"b')
    '"a""b"'
    """
    return '"' + name.replace('"', '""') + '"'


def _status_sql(end_us: SqlExpr, watermark: SqlExpr, allowed_lateness: int) -> str:
    """OPEN / CLOSED / FINAL under the newest watermark: ``spark.rules.status_col``'s split,
    from the same core predicates (no watermark yet: every window is OPEN)."""
    return (f"CASE WHEN {watermark} IS NULL OR {is_open(end_us, watermark)} "
            f"THEN '{WindowStatus.OPEN.value}' "
            f"WHEN {is_beyond_allowed_lateness(end_us, watermark, allowed_lateness)} "
            f"THEN '{WindowStatus.FINAL.value}' ELSE '{WindowStatus.CLOSED.value}' END")


def _passing_sql(step: int, shift: int) -> str:
    """Each window end in [lowest, highest] and the first batch whose watermark reached
    ``end + shift``: ``spark.provisional._passing`` (a batch passes the ends in
    ``(wmb - shift, wm - shift]``, a query's first batch every end up to its watermark)."""
    first, top = ends_passed(SqlExpr(f"(wmb - {shift})"), SqlExpr(f"(wm - {shift})"), step)
    # ends are positive (event times are after the epoch): a truncating // rounds up here
    bottom = f"greatest({first}, (b.lo + {step - 1}) // {step} * {step})"
    top_end = f"least({top}, b.hi)"
    return (f"SELECT end_us, min({{'pt': pt, 'batch_id': batch_id, 'wm': wm}}) AS passed "
            f"FROM (SELECT unnest(CASE WHEN {bottom} <= {top_end} THEN "
            f"generate_series({bottom}, {top_end}, {step}) END) AS end_us, pt, batch_id, wm "
            f"FROM progress, bounds b WHERE wm IS NOT NULL) GROUP BY end_us")


def _when_passed(passed: str) -> str:
    """The batch that moved a window on (``spark.provisional._when_passed``): the one that
    passed its end, or the window's first batch when that came before its first events."""
    return (f"CASE WHEN {passed} IS NULL THEN NULL WHEN {passed}.pt >= r.first_pt "
            f"THEN {passed} ELSE fp.first_row END")


def provisional_sql(rules: EventTimeRules, deltas: str = tb.PROVISIONAL_DELTAS,
                    progress: str = tb.WATERMARK_PROGRESS) -> str:
    """provisional_totals, folded from the relations ``deltas`` and ``progress`` by the
    rule of ``spark.provisional.read_provisional`` (its docstring says why each step):
    one row per (window_start, key, currency), its status under the newest watermark, and
    the batches that closed and finalised it.

    >>> "GROUP BY window_start, key, currency" in provisional_sql(rules)  # doctest: +SKIP
    True
    """
    step, allowed_lateness = rules.windows.step, rules.allowed_lateness
    wm = SqlExpr("(SELECT max(wm) FROM progress)")
    closed, final = _when_passed("c.passed"), _when_passed("f.passed")
    return f"""
WITH progress AS (
  SELECT query_id, batch_id, processed_at AS pt, epoch_us(watermark_before) AS wmb,
         epoch_us(watermark) AS wm FROM {quoted(progress)}),
folded AS (
  SELECT window_start, key, currency, max(window_end) AS window_end,
         max(window_date) AS window_date,
         CAST(sum(total_amount) AS DECIMAL(38, 3)) AS total_amount,
         CAST(sum(event_count) AS BIGINT) AS event_count,
         CAST(sum(revised) AS INTEGER) AS revision,
         min({{'pt': processed_at, 'query_id': query_id, 'batch_id': batch_id}}) AS first,
         max({{'pt': processed_at, 'query_id': query_id, 'batch_id': batch_id}}).batch_id
           AS last_batch_id
  FROM {quoted(deltas)} GROUP BY window_start, key, currency),
r0 AS (
  SELECT *, first.batch_id AS first_batch_id, first.query_id AS first_query_id,
         first.pt AS first_pt, epoch_us(window_end) AS end_us FROM folded),
bounds AS (SELECT min(end_us) AS lo, max(end_us) AS hi FROM r0),
closes AS ({_passing_sql(step, 0)}),
finals AS ({_passing_sql(step, allowed_lateness)}),
at_first AS (SELECT query_id, batch_id, {{'pt': pt, 'batch_id': batch_id, 'wm': wm}}
             AS first_row FROM progress)
SELECT r.window_start, r.window_end, r.key, r.currency, r.total_amount, r.event_count,
       {_status_sql(SqlExpr("r.end_us"), wm, allowed_lateness)} AS status,
       r.revision, r.first_batch_id, r.last_batch_id,
       ({closed}).pt AS closed_at, ({closed}).batch_id AS closed_batch_id,
       make_timestamp(({closed}).wm)::TIMESTAMPTZ AS watermark_at_close,
       ({final}).pt AS finalized_at, ({final}).batch_id AS finalized_batch_id,
       r.window_date
FROM r0 r
LEFT JOIN at_first fp ON fp.query_id = r.first_query_id AND fp.batch_id = r.first_batch_id
LEFT JOIN closes c ON c.end_us = r.end_us
LEFT JOIN finals f ON f.end_us = r.end_us"""
