"""How Spark runs a nightly step's expressions: compiled to Java, or interpreted on a small day.

Why: Spark generates Java source for every query plan and compiles it with Janino before the
first row moves. On a big day that code pays back many times; on a small one (the demo's 5,000
events, a quiet day) the compiling is most of the step: a `reckon audit` of a few rows in a
fresh JVM spent 42 CPU s with generated code and 34 interpreted, a `reckon check` 38 and 32.
Spark keeps both paths equal by contract (its own suites run each query both ways), so the
answer never changes, only the cost. The day's size comes from the event log's Delta
statistics (the rows of the day's partitions), read without Spark; a day whose size the log
cannot tell keeps Spark's default.

Example::

    with execution_for_days(spark, warehouse, [date(2026, 1, 1)], max_rows=200_000):
        audit_day(spark, config, date(2026, 1, 1))
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from storage import table_names as tb

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["INTERPRETED_EXPRESSIONS", "day_rows", "execution_for_days", "interpreted_pays"]

#: The SQL settings that make Spark interpret expressions: no whole-stage code generation,
#: and the expression factories' interpreted implementations.
INTERPRETED_EXPRESSIONS = {"spark.sql.codegen.wholeStage": "false",
                           "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def interpreted_pays(rows: int | None, max_rows: int) -> bool:
    """Whether a step over ``rows`` events runs interpreted: known, and at most ``max_rows``
    (the ``interpreted_max_rows`` setting; 0 turns interpreting off).

    >>> interpreted_pays(5_000, 200_000), interpreted_pays(None, 200_000)
    (True, False)
    >>> interpreted_pays(200_001, 200_000), interpreted_pays(0, 0)
    (False, False)
    """
    return max_rows > 0 and rows is not None and rows <= max_rows


def day_rows(warehouse: str | Path, days: Iterable[date]) -> int | None:
    """The event log's rows of ``days`` from its Delta statistics (delta-rs reads the log and
    its checkpoints; no Spark): 0 without an event log, None when a file of those days has no
    row count."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    if not tb.table_exists(warehouse, tb.EVENT_LOG):
        return 0
    wanted = {d.isoformat() for d in days}
    try:
        actions = DeltaTable(str(tb.table_path(warehouse, tb.EVENT_LOG))).get_add_actions(
            flatten=True)
    except (DeltaError, OSError, ValueError):  # a store delta-rs cannot read here: Spark decides
        return None
    partitions = actions.column("partition.event_date").to_pylist()
    counts = actions.column("num_records").to_pylist()  # null: a file written without stats
    total = 0
    for day, count in zip(partitions, counts, strict=True):
        if str(day) in wanted:
            if count is None:
                return None
            total += int(count)
    return total


@contextlib.contextmanager
def execution_for_days(spark: SparkSession, warehouse: str | Path, days: Iterable[date], *,
                       max_rows: int) -> Iterator[bool]:
    """Run the block interpreted when ``days`` hold at most ``max_rows`` events
    (``interpreted_pays``), then put the session's settings back as they were; yields whether
    it interprets. The session's own choice stands for a big day."""
    from spark.session import session_conf

    if not interpreted_pays(day_rows(warehouse, days) if max_rows else None, max_rows):
        yield False
        return
    with session_conf(spark, INTERPRETED_EXPRESSIONS):
        yield True
