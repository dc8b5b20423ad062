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
from pathlib import Path
from typing import Any

from audits.duck_tables import SqlExpr, TableRef, connect, lock, provisional_sql, quoted
from audits.duck_tables import load_table as _load
from reckon.errors import UsageError
from reckon.sql_guard import QueryResult, Token, check_read_only, unquote
from storage import table_names as tb

__all__ = ["SqlExpr", "TableRef", "check_duck_sql", "connect", "lock", "open_warehouse",
           "provisional_sql", "run_duck_query"]

#: Statements and functions DuckDB has beyond Spark's: refused on tokens before parsing.
DUCK_FORBIDDEN = frozenset({"ATTACH", "DETACH", "PRAGMA", "INSTALL", "EXPORT", "IMPORT",
                            "CHECKPOINT", "FORCE", "GETVARIABLE", "VARIABLE"})
#: Table functions a query may call: they compute rows from values, never read anything.
SAFE_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
#: Scalar functions that read files, run SQL given as text or read session variables.
_READING_FUNCTION = re.compile(
    r"(read_|parquet_|sniff_|glob|getvariable|query|json_execute_serialized_sql|"
    r"iceberg_|delta_|sqlite_|postgres_|mysql_|load_|install_)", re.IGNORECASE)










# ---------------------------------------------------------------------------------- checks


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
        out[sig_idx[k]] = quoted(ref.alias)
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
