"""The JVM-free read path: the warehouse's Delta tables in DuckDB, through delta-rs.

``reckon sql`` (its default engine), ``app.read.open`` and any reader that only reads use
this module: each Delta table is loaded by ``deltalake`` (delta-rs) as an Arrow dataset and
registered in an in-memory DuckDB connection under its own name. No pyspark is imported, no
JVM starts, so a count answers in about a second where Spark needs most of a minute::

    reckon sql --warehouse wh "SELECT status, count(*) FROM reconciliation GROUP BY status"
    reckon sql --warehouse wh "SELECT * FROM provisional_deltas VERSION AS OF 3"

Safe by construction, in this order: the query passes ``reckon.sql_guard.check_read_only`` (the
Spark path's refusals, on tokens), the words this dialect adds (ATTACH, PRAGMA, INSTALL, ...),
then DuckDB's own parser (``json_serialize_sql``): one SELECT, tables only by a warehouse
name (an unknown one is named with the list of tables, before any table is loaded), no
file-reading table function, no variable. The connection then has external access off, no
Python replacement scans, no extension loading, and its configuration locked once the
tables are registered; a query runs at most ``sql_timeout`` and returns at most ``--limit``
rows (``sql_max_rows`` at most).

provisional_totals is derived on read by ``provisional_sql``: the Spark fold
(``spark.provisional.read_provisional``) in DuckDB SQL, built from the same core rules
(``reckon.eventtime``'s ``ends_passed``, ``is_open``, ``is_beyond_allowed_lateness``); the two are
compared on streamed warehouses (tests/test_duck.py).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
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
from reckon.sql_guard import QueryResult, Token, check_read_only, unquote
from storage import table_names as tb

__all__ = ["SqlExpr", "check_duck_sql", "connect", "open_warehouse", "provisional_sql",
           "run_duck_query"]

#: Statements and functions DuckDB has beyond Spark's: refused on tokens before parsing.
DUCK_FORBIDDEN = frozenset({"ATTACH", "DETACH", "PRAGMA", "INSTALL", "EXPORT", "IMPORT",
                            "CHECKPOINT", "FORCE", "GETVARIABLE", "VARIABLE"})
#: Table functions a query may call: they compute rows from values, never read anything.
SAFE_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
#: Scalar functions that read files, run SQL given as text or read session variables.
_READING_FUNCTION = re.compile(
    r"(read_|parquet_|sniff_|glob|getvariable|query|json_execute_serialized_sql|"
    r"iceberg_|delta_|sqlite_|postgres_|mysql_|load_|install_)", re.IGNORECASE)


class SqlExpr:
    """SQL text that composes through Python's operators, so a core rule written once on
    numbers (``reckon.eventtime.is_open``, ``ends_passed``) also writes its SQL.

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
         epoch_us(watermark) AS wm FROM {_ident(progress)}),
folded AS (
  SELECT window_start, key, currency, max(window_end) AS window_end,
         max(window_date) AS window_date,
         CAST(sum(total_amount) AS DECIMAL(38, 3)) AS total_amount,
         CAST(sum(event_count) AS BIGINT) AS event_count,
         CAST(sum(revised) AS INTEGER) AS revision,
         min({{'pt': processed_at, 'query_id': query_id, 'batch_id': batch_id}}) AS first,
         max({{'pt': processed_at, 'query_id': query_id, 'batch_id': batch_id}}).batch_id
           AS last_batch_id
  FROM {_ident(deltas)} GROUP BY window_start, key, currency),
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


def _ident(name: str) -> str:
    """A relation name quoted as DuckDB reads an identifier."""
    return '"' + name.replace('"', '""') + '"'


# ---------------------------------------------------------------------------------- checks


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


def _rewrite_time_travel(tokens: Sequence[Token]) -> tuple[str, list[TableRef]]:
    """Join ``tokens`` into DuckDB SQL, a warehouse table's ``VERSION AS OF n`` /
    ``TIMESTAMP AS OF '...'`` (or ``FOR SYSTEM_VERSION|SYSTEM_TIME AS OF``) replaced by
    the name of that version's relation (``"late_events@v3"``); return the references.

    >>> text, refs = _rewrite_time_travel(check_read_only("SELECT * FROM t1"))
    >>> text, refs
    ('SELECT * FROM t1', [])
    """
    out = [t.text for t in tokens]
    sig_idx = [i for i, t in enumerate(tokens) if t.kind not in ("ws", "comment")]
    sig = [tokens[i] for i in sig_idx]
    refs: list[TableRef] = []

    def upper_at(k: int) -> str:
        return sig[k].upper if 0 <= k < len(sig) else ""

    for k, tok in enumerate(sig):
        if tok.kind == "word" and tok.upper in ("HISTORY", "DETAIL") \
                and upper_at(k - 1) in ("DESCRIBE", "DESC"):
            raise UsageError(f"DESCRIBE {tok.upper} needs Delta's own catalog: run it with "
                             "`reckon sql --engine spark`")
        if tok.kind == "word" and tok.upper == "TABLE_CHANGES":
            raise UsageError("table_changes() reads Delta's change feed: run it with "
                             "`reckon sql --engine spark`")
        if tok.kind not in ("word", "quoted") or upper_at(k - 1) == "." or upper_at(k + 1) == ".":
            continue
        name = unquote(tok).lower()
        if name not in tb.TABLES:
            continue
        at = k + 1
        if upper_at(at) == "FOR" and upper_at(at + 1) in ("SYSTEM_VERSION", "SYSTEM_TIME"):
            kind, at = ("VERSION" if upper_at(at + 1) == "SYSTEM_VERSION" else "TIMESTAMP"), at + 1
        elif upper_at(at) in ("VERSION", "TIMESTAMP"):
            kind = upper_at(at)
        else:
            continue
        if upper_at(at + 1) != "AS" or upper_at(at + 2) != "OF" or at + 3 >= len(sig):
            continue
        value = sig[at + 3]
        if kind == "VERSION" and value.kind == "number" and value.text.isdigit():
            ref = TableRef(name=name, version=int(value.text))
        elif kind == "TIMESTAMP" and value.kind == "string":
            ref = TableRef(name=name, timestamp=value.text[1:-1])
        else:
            raise UsageError(f"{name} {kind} AS OF {value.text}: give a version number "
                             "(VERSION AS OF 3) or a quoted timestamp (TIMESTAMP AS OF "
                             "'2026-03-01 10:00:00')")
        refs.append(ref)
        out[sig_idx[k]] = _ident(ref.alias)
        for j in range(k + 1, at + 4):
            out[sig_idx[j]] = ""
    return "".join(out), refs


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _duck_errors_one_line(call: Any, *args: Any) -> Any:
    """``call(*args)``, a DuckDB error (a parse error, most often) turned into one line."""
    import duckdb

    try:
        return call(*args)
    except duckdb.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"query failed: {first}") from None


def _parsed(conn: Any, text: str) -> dict[str, Any]:
    """DuckDB's parse tree of ``text`` (one statement); a parse error is one line."""
    tree = json.loads(conn.execute("SELECT json_serialize_sql(?)", [text]).fetchall()[0][0])
    if tree.get("error"):
        raise UsageError(f"query failed: {tree.get('error_message', 'cannot be parsed')}")
    return dict(tree)


def check_duck_sql(conn: Any, sql: str) -> tuple[str, list[str], list[TableRef]]:
    """Check ``sql`` for this engine and return (DuckDB SQL, warehouse tables read,
    time-travel references). Raises UsageError, one line, on anything not a read of the
    warehouse's tables; reads no table.

    Example: ``check_duck_sql(conn, "SELECT count(*) FROM reconcilation")`` raises "query
    failed: no table named reconcilation in a reckon warehouse (tables: canonical_totals,
    ...)".
    """
    tokens = check_read_only(sql)
    for tok in tokens:
        if tok.kind == "word" and tok.upper in DUCK_FORBIDDEN:
            raise UsageError(f"query contains {tok.upper}: `reckon sql` is read-only (no "
                             "attaches, pragmas, extensions, exports or variables)")
        if tok.kind == "punct" and tok.text in ("$", "?"):
            raise UsageError(f"query has a parameter ({tok.text}): `reckon sql` substitutes "
                             "nothing; write the value in the query")
    text, refs = _rewrite_time_travel(tokens)
    statements = _duck_errors_one_line(conn.extract_statements, text)
    if len(statements) != 1:
        raise UsageError("query has more than one statement: `reckon sql` runs exactly one")
    kind = str(statements[0].type).rsplit(".", 1)[-1]
    if kind not in ("SELECT", "EXPLAIN"):
        raise UsageError(f"query is a {kind} statement: `reckon sql` runs only read-only "
                         "queries (SELECT, WITH, VALUES, SHOW, DESCRIBE, EXPLAIN)")
    body = text.strip()
    if kind == "EXPLAIN":
        body = re.sub(r"^\s*EXPLAIN(\s+ANALYZE)?", "", body, flags=re.IGNORECASE)
    tables = _check_tree(_parsed(conn, body), {r.alias for r in refs})
    return text, tables, refs


def _check_tree(tree: dict[str, Any], travelled: set[str]) -> list[str]:
    """The warehouse tables the parse tree reads; refuses file readers, qualified or
    unknown names (a CTE's name is its own)."""
    ctes: set[str] = set()
    for node in _walk(tree):
        for entry in (node.get("cte_map") or {}).get("map", []) or []:
            ctes.add(str(entry.get("key", "")).lower())
    known = set(tb.TABLES) | {tb.PROVISIONAL_TOTALS}
    read: list[str] = []
    unknown: list[str] = []
    for node in _walk(tree):
        kind = node.get("type")
        if kind == "TABLE_FUNCTION":
            func = str((node.get("function") or {}).get("function_name", "")).lower()
            if func not in SAFE_TABLE_FUNCTIONS:
                raise UsageError(f"query calls {func}(): `reckon sql` reads the warehouse "
                                 "tables only, never files, other databases or SQL text")
        elif node.get("class") == "FUNCTION" and _READING_FUNCTION.match(
                str(node.get("function_name", ""))):
            raise UsageError(f"query calls {node['function_name']}(): `reckon sql` reads the "
                             "warehouse tables only")
        elif kind == "BASE_TABLE":
            name = str(node.get("table_name", ""))
            if node.get("schema_name") or node.get("catalog_name") or node.get("at_clause"):
                raise UsageError(f"query reads {name} through a schema, catalog or AT clause: "
                                 "name a warehouse table alone (time travel: VERSION AS OF 3)")
            lower = name.lower()
            if lower in travelled or name in travelled or lower in ctes:
                continue
            (read if lower in known else unknown).append(lower)
    if unknown:
        raise UsageError(f"query failed: no table named {', '.join(unknown)} in a reckon "
                         f"warehouse (tables: {', '.join(sorted(known))})")
    return sorted(set(read))


# ---------------------------------------------------------------------------------- engine


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


def _load(warehouse: Path, ref: TableRef) -> Any:
    """The Arrow dataset of one table (at a version or timestamp for time travel)."""
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


def readable_tables(warehouse: Path) -> list[str]:
    """The tables of ``warehouse`` a query can read, sorted: those with a Delta log, and
    provisional_totals when its deltas exist."""
    present = [t for t in tb.TABLES if tb.table_exists(warehouse, t)]
    derived = [tb.PROVISIONAL_TOTALS] if tb.PROVISIONAL_DELTAS in present else []
    return sorted([*present, *derived])


def register(conn: Any, warehouse: Path, tables: Sequence[str],
             refs: Sequence[TableRef] = ()) -> list[str]:
    """Register ``tables`` (and the time-travel ``refs``) that exist in ``warehouse``;
    provisional_totals as its fold over the deltas and the progress. Returns the names."""
    from storage.spec_log import rules_in_force

    present = [t for t in tb.TABLES if tb.table_exists(warehouse, t)]
    wanted = set(tables)
    missing = sorted(wanted - set(readable_tables(warehouse)))
    if missing:
        raise UsageError(f"query failed: this warehouse has no {', '.join(missing)} yet "
                         f"(tables here: {', '.join(readable_tables(warehouse)) or 'none'})")
    if tb.PROVISIONAL_TOTALS in wanted:
        wanted |= {tb.PROVISIONAL_DELTAS, tb.WATERMARK_PROGRESS}
    for name in present:
        if name in wanted:
            conn.register(name, _load(warehouse, TableRef(name=name)))
    for ref in refs:
        conn.register(ref.alias, _load(warehouse, ref))
    if tb.PROVISIONAL_TOTALS in wanted and tb.PROVISIONAL_DELTAS in present:
        if tb.WATERMARK_PROGRESS not in present:  # no batch recorded yet: no watermark
            conn.sql(_NO_PROGRESS).create_view(tb.WATERMARK_PROGRESS)
        # the view's text holds only the rules' integers, never a value from the query
        conn.sql(provisional_sql(rules_in_force(warehouse))).create_view(tb.PROVISIONAL_TOTALS)
        present.append(tb.PROVISIONAL_TOTALS)
    return [t for t in present if t in wanted]


_NO_PROGRESS = ("SELECT NULL::VARCHAR AS query_id, NULL::BIGINT AS batch_id, NULL::TIMESTAMPTZ "
                "AS processed_at, NULL::TIMESTAMPTZ AS watermark_before, NULL::TIMESTAMPTZ AS "
                "watermark WHERE false")


def open_warehouse(warehouse: str | Path) -> Any:
    """A read-only DuckDB connection with every table of ``warehouse`` registered (and
    provisional_totals derived): the notebook's entry point (``app.read.open``).

    >>> con = open_warehouse("warehouse")                                  # doctest: +SKIP
    >>> con.sql("SELECT status, count(*) FROM reconciliation GROUP BY 1").df()  # doctest: +SKIP
    """
    wh = _warehouse_dir(warehouse)
    conn = connect()
    register(conn, wh, readable_tables(wh))
    lock(conn)
    return conn


def _warehouse_dir(warehouse: str | Path) -> Path:
    wh = Path(warehouse).expanduser().resolve()
    if not wh.is_dir():
        raise UsageError(f"--warehouse={str(wh)!r} is not valid: no such directory")
    return wh


def run_duck_query(warehouse: str | Path, sql: str, limit: int = 1000, *,
                   timeout_s: float = 60.0, max_rows: int = 1_000_000) -> QueryResult:
    """Check, register what the query reads, lock, run with a time limit; fetch at most
    ``limit`` rows (+1 to know whether there were more)."""
    if limit < 1:
        raise UsageError(f"--limit={limit} is not valid: give a positive number of rows")
    if limit > max_rows:
        raise UsageError(f"--limit={limit} is above sql_max_rows={max_rows}: ask for fewer "
                         "rows, aggregate, or raise sql_max_rows (RECKON_SQL_MAX_ROWS)")
    conn = connect()
    text, tables, refs = check_duck_sql(conn, sql)
    wh = _warehouse_dir(warehouse)
    if re.match(r"\s*SHOW\b", text, re.IGNORECASE):  # SHOW TABLES lists every table
        tables = readable_tables(wh)
    names = register(conn, wh, sorted({*tables, *(r.name for r in refs)}), refs)
    lock(conn)
    columns, rows = _run_with_timeout(conn, text, limit + 1, timeout_s)
    return QueryResult(columns=columns, rows=tuple(rows[:limit]), truncated=len(rows) > limit,
                       limit=limit, tables=tuple(names))


def _run_with_timeout(conn: Any, text: str, fetch: int, timeout_s: float
                      ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """Run ``text`` in a thread; interrupt it after ``timeout_s`` (DuckDB has no statement
    timeout of its own). A DuckDB error is one line."""
    import duckdb

    box: dict[str, Any] = {}

    def work() -> None:
        try:
            cursor = conn.execute(text)
            box["columns"] = tuple(d[0] for d in cursor.description or ())
            box["rows"] = cursor.fetchmany(fetch)
            conn.abort()  # the rows past the cap are never computed
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=work, name="reckon-sql", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        conn.interrupt()
        thread.join()
        raise UsageError(f"query ran longer than sql_timeout={timeout_s:g}s and was stopped: "
                         "narrow it (WHERE window_date = '...') or raise sql_timeout "
                         "(RECKON_SQL_TIMEOUT)")
    error = box.get("error")
    if isinstance(error, duckdb.Error):
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise UsageError(f"query failed: {first}") from None
    if error is not None:
        raise error
    return box["columns"], list(box["rows"])
