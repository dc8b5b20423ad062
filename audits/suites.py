"""The data-quality suites, kept as code: one per warehouse table, each expectation with a severity.

A suite is data (``TableSuite``): the table, its day partition column, the derived columns the
expectations need (computed in Spark before validation, so that every rule is a plain column
check GX can count and sample), and ``Check`` items. Rules are not restated: lateness uses
``reckon.eventtime.is_beyond_grace``, the reconciliation invariant uses
``reckon.reconcile.residual`` / ``within_tolerance``, statuses come from their enums.

Severity: ``blocking`` fails the nightly run (``reckon check`` exits 1); ``warning`` is
recorded and shown in Data Docs but never fails it. Null rule: GX map expectations ignore nulls
in the checked column, so every column that must be present has its own not-null check.

Derived columns (all exact, microsecond based). GX keeps the bounds of its "between"
expectations as floats, so no rule on money or time compares against a GX bound: Spark
compares exactly and the derived column holds the offending value (null where the rule holds),
checked with ``ExpectColumnValuesToBeNull`` so that samples show the value:

- event_log ``amount_out_of_range``: the amount where it is outside
  ``[amount_min, amount_max]`` (DECIMAL literals).
- event_log ``skew_beyond_bound_seconds``: ``event_time - arrival_time`` (DECIMAL(20,6)
  seconds) where ``reckon.eventtime.is_future_dated`` holds, so samples
  show how far ahead each offending clock ran.
- totals and uncaught_duplicates ``window_width_error_seconds``: ``window_end - window_start``
  where it differs from the configured width.
- late_events ``beyond_grace = watermark >= window_end + grace`` (the side-output rule) and
  ``lateness_error_seconds = lateness_seconds - (watermark - window_end)`` where not 0.
- reconciliation ``invariant_holds``: where status is MATCHED or EXPLAINED, the residual
  ``(C - P) - late + duplicate`` recomputed from the row's inputs (null sides as 0, amounts and
  counts) is within the configured tolerance (exactly 0 by default, i.e.
  ``canonical = provisional + late - duplicate``); true on every other row.
  ``stored_arithmetic_holds``: the stored gap and residual equal those formulas.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from reckon.config import Settings
from reckon.errors import invalid
from reckon.eventtime import WindowStatus, is_beyond_grace, is_future_dated
from reckon.reconcile import (
    UNEXPLAINED_STATUSES,
    ReconStatus,
    Tolerance,
    residual,
    within_tolerance,
)
from spark.parse import QUARANTINE_REASONS
from spark.tables import (
    CANONICAL_TOTALS,
    EVENT_LOG,
    LATE_EVENTS,
    PROVISIONAL_TOTALS,
    QUARANTINE,
    RECONCILIATION,
    UNCAUGHT_DUPLICATES,
)

__all__ = [
    "BLOCKING",
    "SEVERITIES",
    "WARNING",
    "Check",
    "TableSuite",
    "build_suites",
    "suite_name",
]

BLOCKING = "blocking"
WARNING = "warning"
SEVERITIES = (BLOCKING, WARNING)

_US = 1_000_000
_SECONDS = "decimal(20,6)"


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


@dataclass(frozen=True)
class TableSuite:
    """The suite of one table. ``derive`` adds the derived columns to the day's rows;
    ``index_columns`` identify (and describe) an offending row in samples and errors."""

    table: str
    partition_column: str
    checks: tuple[Check, ...]
    index_columns: tuple[str, ...]
    derive: Callable[[DataFrame], DataFrame] = field(default=lambda df: df, compare=False)

    @property
    def name(self) -> str:
        return suite_name(self.table)


# ----------------------------------------------------------------------------- helpers


def _not_null(*columns: str) -> tuple[Check, ...]:
    return tuple(Check("ExpectColumnValuesToNotBeNull", {"column": c}, BLOCKING,
                       f"{c} is required") for c in columns)


def _seconds(micros: Column) -> Column:
    """Exact seconds (DECIMAL(20,6)) from integer microseconds."""
    return (micros.cast("decimal(38,0)") / F.lit(_US).cast("decimal(7,0)")).cast(_SECONDS)


def _as_seconds(micros: int) -> Decimal:
    return (Decimal(micros) / _US).quantize(Decimal("0.000001"))


def _has_rows(table: str) -> Check:
    return Check("ExpectTableRowCountToBeBetween", {"min_value": 1}, WARNING,
                 f"no {table} rows for the day: the step that writes them may not have run")


def _offending(rule_holds: Column, value: Column) -> Column:
    """``value`` where the rule fails, else null: the column an ExpectColumnValuesToBeNull
    checks (see the module docstring)."""
    return F.when(~rule_holds, value)


def _window_width(settings: Settings) -> Check:
    """On the derived ``window_width_error_seconds`` (``_derive_totals``)."""
    width = _as_seconds(settings.event_time_rules().windows.size)
    return Check("ExpectColumnValuesToBeNull", {"column": "window_width_error_seconds"},
                 BLOCKING, f"window_end = window_start + the configured width ({width} s)")


def _totals_checks(settings: Settings) -> tuple[Check, ...]:
    return (
        *_not_null("window_start", "window_end", "key", "total_amount", "event_count"),
        Check("ExpectCompoundColumnsToBeUnique", {"column_list": ["window_start", "key"]},
              BLOCKING, "one row per (window, key)"),
        Check("ExpectColumnValuesToBeBetween", {"column": "event_count", "min_value": 1},
              BLOCKING, "a window row exists only because events were counted in it"),
        _window_width(settings),
    )


def _derive_totals(settings: Settings) -> Callable[[DataFrame], DataFrame]:
    size = settings.event_time_rules().windows.size

    def derive(df: DataFrame) -> DataFrame:
        width = F.unix_micros("window_end") - F.unix_micros("window_start")
        return df.withColumn("window_width_error_seconds",
                             _offending(width == F.lit(size), _seconds(width)))

    return derive


# ----------------------------------------------------------------------------- suites


def _event_log(settings: Settings) -> TableSuite:
    skew = settings.event_time_rules().max_clock_skew
    checks = (
        *_not_null("event_id", "key", "amount", "currency", "event_time"),
        Check("ExpectColumnValuesToBeNull", {"column": "amount_out_of_range"},
              BLOCKING, f"amount within [amount_min, amount_max] = [{settings.amount_min}, "
                        f"{settings.amount_max}]"),
        Check("ExpectColumnValuesToBeInSet",
              {"column": "currency", "value_set": list(settings.currencies)},
              BLOCKING, "currency is a configured ISO-4217 code"),
        Check("ExpectColumnValuesToBeNull", {"column": "skew_beyond_bound_seconds"},
              BLOCKING, f"event_time <= arrival_time + max_clock_skew ({_as_seconds(skew)} s; "
                        "future-dated events belong in quarantine)"),
        _has_rows(EVENT_LOG),
    )

    def derive(df: DataFrame) -> DataFrame:
        event_us, arrival_us = F.unix_micros("event_time"), F.unix_micros("arrival_time")
        amount = F.col("amount")
        in_range = ((amount >= F.lit(settings.amount_min))
                    & (amount <= F.lit(settings.amount_max)))
        return (df.withColumn("amount_out_of_range", _offending(in_range, amount))
                  .withColumn("skew_beyond_bound_seconds", _offending(
                      ~is_future_dated(event_us, arrival_us, skew),
                      _seconds(event_us - arrival_us))))

    return TableSuite(EVENT_LOG, "event_date", checks,
                      ("event_id", "key", "amount", "currency", "event_time", "arrival_time"),
                      derive)


def _provisional(settings: Settings) -> TableSuite:
    checks = (
        *_totals_checks(settings),
        Check("ExpectColumnValuesToBeInSet",
              {"column": "status", "value_set": [s.value for s in WindowStatus]},
              BLOCKING, "window lifecycle is OPEN -> CLOSED -> FINAL"),
        Check("ExpectColumnPairValuesAToBeGreaterThanB",
              {"column_A": "finalized_batch_id", "column_B": "last_batch_id", "or_equal": True,
               "ignore_row_if": "either_value_is_missing"},
              BLOCKING, "a FINAL window is never revised after finalisation"),
        _has_rows(PROVISIONAL_TOTALS),
    )
    return TableSuite(PROVISIONAL_TOTALS, "window_date", checks,
                      ("window_start", "key", "event_count", "status", "revision",
                       "last_batch_id", "finalized_batch_id"), _derive_totals(settings))


def _canonical(settings: Settings) -> TableSuite:
    return TableSuite(CANONICAL_TOTALS, "window_date",
                      (*_totals_checks(settings), _has_rows(CANONICAL_TOTALS)),
                      ("window_start", "key", "event_count", "total_amount", "replay_id"),
                      _derive_totals(settings))


def _late_events(settings: Settings) -> TableSuite:
    grace = settings.event_time_rules().grace
    checks: tuple[Check, ...] = (
        *_not_null("event_id", "window_start", "window_end", "watermark", "lateness_seconds"),
        Check("ExpectColumnValuesToBeInSet", {"column": "beyond_grace", "value_set": [True]},
              BLOCKING, f"late side output only past grace: watermark >= window_end + grace "
                        f"({_as_seconds(grace)} s)"),
        Check("ExpectColumnPairValuesAToBeGreaterThanB",
              {"column_A": "watermark", "column_B": "window_end", "or_equal": True},
              BLOCKING, "the window had closed (window_end <= watermark) when the event came"),
        Check("ExpectColumnValuesToBeNull", {"column": "lateness_error_seconds"},
              BLOCKING, "lateness_seconds = watermark - window_end"),
    )
    if grace > 0:
        checks += (Check("ExpectColumnValuesToBeBetween",
                         {"column": "lateness_seconds", "min_value": 0, "strict_min": True},
                         WARNING, "with grace > 0 a late event is strictly past its window"),)

    def derive(df: DataFrame) -> DataFrame:
        end, wm = F.unix_micros("window_end"), F.unix_micros("watermark")
        return (df.withColumn("beyond_grace", is_beyond_grace(end, wm, grace))
                  .withColumn("lateness_error_seconds", _offending(
                      F.col("lateness_seconds") == _seconds(wm - end),
                      F.col("lateness_seconds") - _seconds(wm - end))))

    return TableSuite(LATE_EVENTS, "window_date", checks,
                      ("event_id", "key", "window_end", "watermark", "lateness_seconds"), derive)


def _uncaught_duplicates(settings: Settings) -> TableSuite:
    """The replay's record of what the stream counted more than once: the audit adds each row
    to its (window, key) gap, so a repeated or empty row would misstate the explanation. A day
    without rows is the normal case (no copy got past the stream's de-duplication)."""
    checks = (
        *_not_null("window_start", "window_end", "key", "duplicate_amount", "duplicate_count",
                   "replay_id"),
        Check("ExpectCompoundColumnsToBeUnique", {"column_list": ["window_start", "key"]},
              BLOCKING, "one row per (window, key): the audit adds it to that gap once"),
        Check("ExpectColumnValuesToBeBetween", {"column": "duplicate_count", "min_value": 1},
              BLOCKING, "a row exists only for copies the stream counted beyond the first"),
        _window_width(settings),
    )
    return TableSuite(UNCAUGHT_DUPLICATES, "window_date", checks,
                      ("window_start", "key", "duplicate_count", "duplicate_amount",
                       "replay_id"), _derive_totals(settings))


def _reconciliation(settings: Settings) -> TableSuite:
    tolerance = Tolerance(settings.tolerance_abs, settings.tolerance_rel)
    unexplained = [s.value for s in UNEXPLAINED_STATUSES]
    checks = (
        *_not_null("window_start", "key", "status"),
        Check("ExpectColumnValuesToBeInSet",
              {"column": "status", "value_set": [s.value for s in ReconStatus]},
              BLOCKING, "status is a reckon.reconcile.ReconStatus"),
        Check("ExpectColumnValuesToBeInSet", {"column": "invariant_holds", "value_set": [True]},
              BLOCKING, "MATCHED/EXPLAINED rows: canonical = provisional + late - duplicate "
                        f"over-count (nulls as 0; tolerance {tolerance.to_config()})"),
        Check("ExpectColumnValuesToBeInSet",
              {"column": "stored_arithmetic_holds", "value_set": [True]},
              BLOCKING, "stored gap = canonical - provisional, residual = gap - late + "
                        "duplicate"),
        Check("ExpectColumnValuesToNotBeInSet", {"column": "status", "value_set": unexplained},
              WARNING if settings.allow_unexplained else BLOCKING,
              "no unexplained breaks (settings.allow_unexplained turns this into a warning)"),
        _has_rows(RECONCILIATION),
    )

    def derive(df: DataFrame) -> DataFrame:
        zero_amt, zero_cnt = F.lit(Decimal("0.00")), F.lit(0).cast("long")
        p_amt = F.coalesce(F.col("provisional_amount"), zero_amt)
        c_amt = F.coalesce(F.col("canonical_amount"), zero_amt)
        p_cnt = F.coalesce(F.col("provisional_count"), zero_cnt)
        c_cnt = F.coalesce(F.col("canonical_count"), zero_cnt)
        late_amt = F.coalesce(F.col("late_amount"), zero_amt)
        late_cnt = F.coalesce(F.col("late_count"), zero_cnt)
        dup_amt = F.coalesce(F.col("duplicate_amount"), zero_amt)
        dup_cnt = F.coalesce(F.col("duplicate_count"), zero_cnt)
        res_amt = residual(c_amt - p_amt, late_amt, dup_amt)
        res_cnt = residual(c_cnt - p_cnt, late_cnt, dup_cnt)
        explained = F.col("status").isin(ReconStatus.MATCHED.value, ReconStatus.EXPLAINED.value)
        holds = F.when(explained, F.coalesce(within_tolerance(res_amt, res_cnt, c_amt, tolerance),
                                             F.lit(False))).otherwise(F.lit(True))
        stored = ((F.col("gap_amount") == c_amt - p_amt) & (F.col("gap_count") == c_cnt - p_cnt)
                  & (F.col("residual_amount") == res_amt) & (F.col("residual_count") == res_cnt))
        return (df.withColumn("invariant_holds", holds)
                  .withColumn("stored_arithmetic_holds", F.coalesce(stored, F.lit(False))))

    return TableSuite(RECONCILIATION, "window_date", checks,
                      ("window_start", "key", "status", "provisional_amount",
                       "provisional_count", "canonical_amount", "canonical_count",
                       "late_amount", "late_count", "duplicate_amount", "duplicate_count"),
                      derive)


def _quarantine(settings: Settings) -> TableSuite:
    checks = (
        *_not_null("reason"),
        Check("ExpectColumnValuesToMatchRegex", {"column": "reason", "regex": r"\S"},
              BLOCKING, "a quarantined row always says why (not empty)"),
        Check("ExpectColumnValuesToBeInSet",
              {"column": "reason", "value_set": list(QUARANTINE_REASONS)},
              WARNING, "reason is one of spark.parse.QUARANTINE_REASONS"),
    )
    return TableSuite(QUARANTINE, "arrival_date", checks,
                      ("partition", "offset", "input_file", "reason", "event_id"))


def build_suites(settings: Settings) -> tuple[TableSuite, ...]:
    """Every table's suite under these settings (widths, bounds, grace, tolerance)."""
    return (_event_log(settings), _quarantine(settings), _provisional(settings),
            _late_events(settings), _canonical(settings), _uncaught_duplicates(settings),
            _reconciliation(settings))
