"""The JVM-free check's reads of one day: delta-rs partitions, provisional_totals by DuckDB.

``audits.quality_local`` validates a small day without Spark; this is its ``DayReads``. Every
read names the day's partitions (``partition_rows`` from the Delta statistics first, so the
caller can refuse a day bigger than its bound before anything is read), at the version the
check pinned. provisional_totals is folded from the day's deltas by ``reports.duck``'s
``provisional_sql``, the Spark fold's twin; the watermark rows it needs are scanned by DuckDB
from the Delta files (only those after the day's start, as ``spark.provisional`` reads them).

>>> reads = DeltaDayReads("warehouse")                                      # doctest: +SKIP
>>> reads.partition_rows("event_log", "event_date", [date(2026, 1, 1)], 3)  # doctest: +SKIP
9
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from audits.duck_tables import connect, provisional_sql
from audits.quality_local import UnreadableVersion
from reckon.eventtime import EventTimeRules
from reckon.timeutil import day_bounds
from storage import commits
from storage import table_names as tb

__all__ = ["DeltaDayReads"]

Row = dict[str, Any]


def _rows(table: Any) -> list[Row]:
    """An Arrow table as dicts, timestamps as integer microseconds (UTC)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns: dict[str, list[Any]] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_timestamp(column.type):
            column = pc.cast(pc.cast(column, pa.timestamp("us", tz="UTC")), pa.int64())
        columns[name] = column.to_pylist()
    return [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(),
                                                                       strict=True)]


class DeltaDayReads:
    """``audits.quality_local.DayReads`` on a warehouse's Delta tables through delta-rs."""

    def __init__(self, warehouse: str | Path) -> None:
        self.warehouse = Path(warehouse)

    def _table(self, table: str, version: int) -> Any:
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError

        try:
            return DeltaTable(tb.table_path(self.warehouse, table), version=version)
        except (DeltaError, OSError, ValueError) as exc:
            raise UnreadableVersion(f"{table} version {version}: {exc}") from None

    def version(self, table: str) -> int | None:
        return commits.current_version(self.warehouse, table)

    def partition_rows(self, table: str, column: str, days: Sequence[date],
                       version: int) -> int | None:
        """The rows of ``days``' partitions by the files' ``numRecords`` (None: a file of
        them has none, or the log cannot be read here: Spark decides)."""
        try:
            actions = self._table(table, version).get_add_actions(flatten=True)
        except UnreadableVersion:
            return None
        wanted = {d.isoformat() for d in days}
        total = 0
        partitions = actions.column(f"partition.{column}").to_pylist()
        for day, count in zip(partitions, actions.column("num_records").to_pylist(),
                              strict=True):
            if str(day) in wanted:
                if count is None:
                    return None
                total += int(count)
        return total

    def rows(self, table: str, column: str, days: Sequence[date], version: int) -> list[Row]:
        from deltalake.exceptions import DeltaError

        delta = self._table(table, version)
        try:
            arrow = delta.to_pyarrow_table(partitions=[(column, "in",
                                                        [d.isoformat() for d in days])])
        except (DeltaError, OSError) as exc:  # a data file of that version is gone
            raise UnreadableVersion(f"{table} version {version}: {exc}") from None
        return _rows(arrow)

    def provisional_day(self, rules: EventTimeRules, day: date, version: int) -> list[Row]:
        """provisional_totals of the windows starting on ``day`` (``spark.provisional
        .read_day``): the day's deltas at ``version`` folded with the watermark rows after the
        day's start, at the progress table's newest version."""
        from spark.tables import SCHEMAS

        start, end = day_bounds(day)
        deltas = self._table(tb.PROVISIONAL_DELTAS, version).to_pyarrow_table(
            partitions=[("window_date", "=", day.isoformat())])
        conn = connect()
        conn.register("deltas_day", deltas)
        conn.execute(f"CREATE VIEW {tb.PROVISIONAL_DELTAS} AS SELECT * FROM deltas_day WHERE "
                     f"epoch_us(window_start) >= {start} AND epoch_us(window_start) < {end}")
        conn.execute(f"CREATE VIEW {tb.WATERMARK_PROGRESS} AS {self._progress_sql(conn, start)}")
        names = ", ".join(f.name for f in SCHEMAS[tb.PROVISIONAL_TOTALS].fields)
        folded = conn.sql(f"SELECT {names} FROM ({provisional_sql(rules)})").arrow()
        folded = folded.read_all() if hasattr(folded, "read_all") else folded  # a reader
        conn.close()
        return _rows(folded)

    def _progress_sql(self, conn: Any, start: int) -> str:
        """The batches whose watermark passed the day's start (none without the table)."""
        version = self.version(tb.WATERMARK_PROGRESS)
        if version is None:
            return ("SELECT NULL::VARCHAR AS query_id, NULL::BIGINT AS batch_id, "
                    "NULL::TIMESTAMPTZ AS processed_at, NULL::TIMESTAMPTZ AS watermark_before, "
                    "NULL::TIMESTAMPTZ AS watermark WHERE false")
        conn.register("progress_all",
                      self._table(tb.WATERMARK_PROGRESS, version).to_pyarrow_dataset())
        return ("SELECT query_id, batch_id, processed_at, watermark_before, watermark FROM "
                f"progress_all WHERE epoch_us(watermark) > {start}")

    def replay_versions(self, day: date, replay_ids: Sequence[str]) -> dict[str, int | None]:
        """replay_runs' pinned event_log version of each replay of ``day``."""
        version = self.version(tb.REPLAY_RUNS)
        if version is None:
            return dict.fromkeys(replay_ids)
        conn = connect()
        conn.register("runs", self._table(tb.REPLAY_RUNS, version).to_pyarrow_dataset())
        found = dict(conn.execute(
            "SELECT replay_id, event_log_version FROM runs WHERE window_date = ? AND "
            "list_contains(?, replay_id)", [day, list(replay_ids)]).fetchall())
        conn.close()
        return {i: None if found.get(i) is None else int(found[i]) for i in replay_ids}
