"""DuckDB over the warehouse's Delta tables, through delta-rs: the connection, its lock, a
table loaded (at a version for time travel) and SQL text that composes from the core's rules.

Why here, below reports/: the audits compute the day's lateness what-ifs on DuckDB when they
record a run (``audits.lateness_duck``, ``audits.day_whatif``), and the audits may not import
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
from spark import table_names as tb

__all__ = ["SqlExpr", "TableRef", "connect", "load_table", "lock"]


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
