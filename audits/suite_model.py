"""What a data-quality suite is: its checks, their severity, and what a check may read.

The suites themselves (one per warehouse table) are in ``audits.suites``; the validation that
runs them through Great Expectations is ``audits.quality``. Kept apart so that a reader of a
suite sees only rules, and the runner depends on the shape, not on every table's rules.

>>> Check("ExpectColumnValuesToNotBeNull", {"column": "key"}, WARNING, "key is required").severity
'warning'
>>> suite_name("event_log")
'reckon_event_log'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from reckon.engine_config import ReplayConfig
from reckon.errors import invalid
from reckon.schema import TOTAL_IDENTITY

__all__ = [
    "BLOCKING",
    "GRAIN",
    "MIN_ROWS",
    "SEVERITIES",
    "WARNING",
    "Check",
    "DayScope",
    "Derive",
    "TableSuite",
    "offending",
    "suite_name",
]

BLOCKING = "blocking"
WARNING = "warning"
SEVERITIES = (BLOCKING, WARNING)
#: What identifies a row of every per-grain table: money is kept per (window, key, currency).
GRAIN = ("window_start", *TOTAL_IDENTITY)
#: The GX expectation parameter a "the day's rows are there" check reads: the run sets it to
#: ``reckon.quality_verdict.min_rows`` of the day (1 with events, 0 on a day without), so a
#: quiet day's empty tables are vacuously fine. Its name is what Data Docs' suite page shows
#: (GX parses it as an expression: an identifier only).
MIN_ROWS = "min_rows_1_if_the_day_has_events_else_0"


def suite_name(table: str) -> str:
    """The GX suite name of a table's suite (also its Data Docs page name)."""
    return f"reckon_{table}"


@dataclass(frozen=True)
class Check:
    """One expectation: the GX expectation class name (``gxe.<kind>``), its arguments and its
    severity. ``why`` is shown in Data Docs next to the expectation."""

    kind: str
    kwargs: Mapping[str, Any]
    severity: str = BLOCKING
    why: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise invalid("severity", self.severity, f"one of {', '.join(SEVERITIES)}")

    def to_gx(self) -> Any:
        """The GX Core expectation object (severity both as GX's own and in ``meta``)."""
        import great_expectations.expectations as gxe
        from great_expectations.expectations.metadata_types import FailureSeverity

        cls = getattr(gxe, self.kind, None)
        if cls is None:
            raise invalid("Check.kind", self.kind, "a class of great_expectations.expectations")
        gx_severity = (FailureSeverity.CRITICAL if self.severity == BLOCKING
                       else FailureSeverity.WARNING)
        return cls(**dict(self.kwargs), severity=gx_severity,
                   meta={"severity": self.severity, "why": self.why})


@dataclass
class DayScope:
    """What a suite's ``derive`` may read besides the day's rows: the session, how the replay
    reads the warehouse (``replay``: the event-log comparison sums the log as the replay
    does) and the day, to read other tables day-scoped. Frames it keeps (``keep``) are
    persisted until ``release``, which the validation calls once the table is validated."""

    spark: SparkSession
    replay: ReplayConfig
    day: date
    kept: list[DataFrame] = field(default_factory=list)

    def keep(self, df: DataFrame) -> DataFrame:
        """``df`` persisted and computed now (so a read that fails, fails here)."""
        from pyspark import StorageLevel

        kept = df.persist(StorageLevel.MEMORY_AND_DISK)
        self.kept.append(kept)
        kept.count()
        return kept

    def release(self) -> None:
        for df in self.kept:
            df.unpersist()
        self.kept.clear()


Derive = Callable[[DataFrame, DayScope], DataFrame]


def _as_is(df: DataFrame, _scope: DayScope) -> DataFrame:
    return df


@dataclass(frozen=True)
class TableSuite:
    """The suite of one table. ``derive`` adds the derived columns to the day's rows (it may
    read other tables through its ``DayScope``); ``index_columns`` identify (and describe) an
    offending row in samples and errors."""

    table: str
    partition_column: str
    checks: tuple[Check, ...]
    index_columns: tuple[str, ...]
    derive: Derive = field(default=_as_is, compare=False)

    @property
    def name(self) -> str:
        return suite_name(self.table)


def offending(rule_holds: Column, value: Column) -> Column:
    """``value`` where the rule fails, else null: the column an ExpectColumnValuesToBeNull
    checks, so that GX's samples show the offending value (``audits.suites``' docstring).
    ``offending(F.col("amount") <= 100, F.col("amount"))`` is 250 on a row of 250, null on 80.
    """
    return F.when(~rule_holds, value)
