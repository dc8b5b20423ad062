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
- every table with money ``minor_unit_break``: each amount of the row that is not a whole
  number of its currency's ISO 4217 minor units (``spark.money.minor_unit_break_col``), as
  ``<column> <amount> <currency>`` text (a JPY total of 5.500 breaks it).
- canonical_totals ``event_log_mismatch``: what the event log holds for the row's
  (window, key, currency) where the row's total or count differs from it. The log is read at
  the version the row's replay pinned (``replay_runs.event_log_version``) and summed as the
  replay sums it: valid events (``spark.parse.typed_checks``), one copy per event_id (the
  first in arrival order), per window of the day, per currency. A row whose total adds
  another currency's amounts (or another key's, window's, a lost or doubled event) differs
  from its grain's sum and is named. ``event_log_comparable`` is false for a row whose replay
  pinned no event_log version (a replay from Kafka, a replay that did not finish) or whose
  pinned version can no longer be read (log or files cleaned up): a warning, never a pass
  nobody sees.

Money is per (window, key, currency) (docs/decisions/0001): every per-grain table is unique
on ``(window_start, key, currency)``, and its currency is one reckon books
(``reckon.money.accepted_currencies``; an empty ``currencies`` setting means every ISO 4217
currency with 0 to 3 minor digits).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from reckon.config import Settings
from reckon.errors import invalid
from reckon.eventtime import WindowStatus, is_beyond_grace, is_future_dated
from reckon.money import accepted_currencies
from reckon.reconcile import (
    UNEXPLAINED_STATUSES,
    ReconStatus,
    Tolerance,
    residual,
    within_tolerance,
)
from reckon.schema import TOTAL_IDENTITY
from reckon.timeutil import parse_duration
from spark.money import amount_text_col, minor_unit_break_col
from spark.parse import QUARANTINE_REASONS
from spark.tables import (
    CANONICAL_TOTALS,
    EVENT_LOG,
    LATE_EVENTS,
    PROVISIONAL_DELTAS,
    PROVISIONAL_TOTALS,
    QUARANTINE,
    RECONCILIATION,
    REPLAY_RUNS,
    TOTAL,
    UNCAUGHT_DUPLICATES,
    is_missing_file_error,
    read_table,
    table_exists,
)

__all__ = [
    "BLOCKING",
    "GRAIN",
    "SEVERITIES",
    "WARNING",
    "Check",
    "DayScope",
    "TableSuite",
    "build_suites",
    "event_log_totals",
    "suite_name",
]

BLOCKING = "blocking"
WARNING = "warning"
SEVERITIES = (BLOCKING, WARNING)
#: What identifies a row of every per-grain table: money is kept per (window, key, currency).
GRAIN = ("window_start", *TOTAL_IDENTITY)

_US = 1_000_000
_SECONDS = "decimal(20,6)"
# a pinned event_log version that can no longer be read: its commits or data files are gone
_UNREADABLE_VERSION = ("DELTA_VERSION_NOT_FOUND", "DELTA_LOG_FILE_NOT_FOUND",
                       "DELTA_NO_RECREATABLE_HISTORY_FOUND",
                       "DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION")


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
    """What a suite's ``derive`` may read besides the day's rows: the session, the settings
    and the day, to read other tables day-scoped. Frames it keeps (``keep``) are persisted
    until ``release``, which the validation calls once the table is validated."""

    spark: SparkSession
    settings: Settings
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


def _booked_currency(settings: Settings) -> Check:
    """currency is one reckon books: ``reckon.money.accepted_currencies`` of the setting."""
    codes = sorted(accepted_currencies(settings.currencies))
    narrowed = (f"the configured currencies ({', '.join(codes)})" if settings.currencies
                else "an ISO 4217 currency with 0 to 3 minor digits")
    return Check("ExpectColumnValuesToBeInSet", {"column": "currency", "value_set": codes},
                 BLOCKING, f"currency is {narrowed}")


def _unique_grain(what: str) -> Check:
    return Check("ExpectCompoundColumnsToBeUnique", {"column_list": list(GRAIN)}, BLOCKING,
                 f"one row per (window, key, currency): {what}")


def _minor_units(what: str) -> Check:
    """On the derived ``minor_unit_break`` (``_minor_unit_break``)."""
    return Check("ExpectColumnValuesToBeNull", {"column": "minor_unit_break"}, BLOCKING,
                 f"{what} a whole number of its currency's ISO 4217 minor units (JPY 0 "
                 "places, EUR 2, KWD 3)")


def _minor_unit_break(settings: Settings, *amounts: str) -> Column:
    """Each of ``amounts`` (column names) that is not a whole number of the row's currency's
    minor units, as ``<column> <amount> <currency>`` ('; ' between them); null when every one
    keeps the rule (or is null). A currency reckon does not book is the currency check's."""
    currency = F.col("currency")
    parts = [F.when(F.coalesce(minor_unit_break_col(F.col(c), currency, settings),
                               F.lit(False)),
                    F.concat_ws(" ", F.lit(c), F.col(c).cast("string"), currency))
             for c in amounts]
    text = F.concat_ws("; ", *parts)
    return F.when(text != "", text)


def _totals_checks(settings: Settings) -> tuple[Check, ...]:
    return (
        *_not_null("window_start", "window_end", "key", "currency", "total_amount",
                   "event_count"),
        _unique_grain("amounts of two currencies are never one total"),
        _booked_currency(settings),
        _minor_units("total_amount is"),
        Check("ExpectColumnValuesToBeBetween", {"column": "event_count", "min_value": 1},
              BLOCKING, "a window row exists only because events were counted in it"),
        _window_width(settings),
    )


def _derive_totals(settings: Settings, amount: str) -> Derive:
    """Window width and minor units of a per-grain table whose money is column ``amount``."""
    size = settings.event_time_rules().windows.size

    def derive(df: DataFrame, _scope: DayScope) -> DataFrame:
        width = F.unix_micros("window_end") - F.unix_micros("window_start")
        return df.withColumns({
            "window_width_error_seconds": _offending(width == F.lit(size), _seconds(width)),
            "minor_unit_break": _minor_unit_break(settings, amount)})

    return derive


# ----------------------------------------------------------------------------- event log


def event_log_totals(spark: SparkSession, settings: Settings, day: date,
                     version: int) -> DataFrame:
    """(window_start, key, currency, log_amount, log_count) of ``day``'s windows, summed from
    ``event_log`` at ``version`` by the replay's own exact path (spark/replay.py
    ``day_totals_from_log``). Day-scoped: nothing is collected."""
    from spark.replay import day_totals_from_log

    return (day_totals_from_log(spark, settings, day, version)
            .withColumnsRenamed({"total_amount": "log_amount", "event_count": "log_count"}))


def _pinned_versions(scope: DayScope, totals: DataFrame) -> dict[str, int | None]:
    """replay_id -> the event_log version that replay pinned, for each replay that wrote the
    day's rows (None: it pinned none, or its run record is missing). A handful of rows."""
    ids = [r.replay_id for r in totals.select("replay_id").distinct().collect()
           if r.replay_id is not None]
    wh = scope.settings.warehouse_path
    if not ids or not table_exists(wh, REPLAY_RUNS):
        return dict.fromkeys(ids)
    runs = {r.replay_id: r.event_log_version for r in read_table(scope.spark, wh, REPLAY_RUNS)
            .filter((F.col("window_date") == F.lit(scope.day)) & F.col("replay_id").isin(ids))
            .select("replay_id", "event_log_version").collect()}
    return {i: None if runs.get(i) is None else int(runs[i]) for i in ids}


def _unreadable(exc: Exception) -> bool:
    text = str(exc)
    return is_missing_file_error(exc) or any(marker in text for marker in _UNREADABLE_VERSION)


def _log_sums(scope: DayScope, versions: Mapping[str, int | None]
              ) -> tuple[DataFrame | None, list[str]]:
    """``event_log_totals`` at each pinned version, tagged with its replay_id (kept), and the
    replay_ids whose version could be read (None and [] when none could)."""
    frames: list[DataFrame] = []
    read: list[str] = []
    for replay_id, version in sorted(versions.items()):
        if version is None or not table_exists(scope.settings.warehouse_path, EVENT_LOG):
            continue
        try:
            frames.append(scope.keep(event_log_totals(
                scope.spark, scope.settings, scope.day, version)
                .withColumn("replay_id", F.lit(replay_id))))
        except Exception as exc:  # a py4j error is not a PySparkException
            if not _unreadable(exc):
                raise
            continue
        read.append(replay_id)
    if not frames:
        return None, []
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union, read


def _against_event_log(df: DataFrame, scope: DayScope) -> DataFrame:
    """canonical_totals rows with ``event_log_comparable`` and ``event_log_mismatch`` (see the
    module docstring): each row beside its grain's sum in the event log its replay read."""
    sums, read = _log_sums(scope, _pinned_versions(scope, df))
    if sums is None:
        return df.withColumns({"event_log_comparable": F.lit(False),
                               "event_log_mismatch": F.lit(None).cast("string")})
    comparable = F.col("replay_id").isin(read)
    log_amount = F.coalesce(F.col("log_amount"), F.lit(0).cast(TOTAL))
    log_count = F.coalesce(F.col("log_count"), F.lit(0).cast("long"))
    agrees = (F.col("total_amount") == log_amount) & (F.col("event_count") == log_count)
    text = F.concat(F.lit("event log: "), F.col("currency"), F.lit(" "),
                    amount_text_col(log_amount, F.col("currency")), F.lit(" in "),
                    log_count.cast("string"), F.lit(" event(s)"))
    return (df.join(sums, ["replay_id", *GRAIN], "left")
            .withColumns({"event_log_comparable": comparable,
                          "event_log_mismatch": F.when(comparable, _offending(agrees, text))})
            .drop("log_amount", "log_count"))


def _event_log_checks() -> tuple[Check, ...]:
    return (
        Check("ExpectColumnValuesToBeNull", {"column": "event_log_mismatch"}, BLOCKING,
              "total_amount and event_count = the sum and count of the grain's de-duplicated "
              "valid events in the event log the replay read, in the row's currency: a total "
              "that adds two currencies (or loses or doubles an event) differs"),
        Check("ExpectColumnValuesToBeInSet",
              {"column": "event_log_comparable", "value_set": [True]}, WARNING,
              "the row's replay pinned an event_log version that can still be read (a replay "
              "from Kafka pins none), so its totals were compared with the event log"),
    )


# ----------------------------------------------------------------------------- suites


def _event_log(settings: Settings) -> TableSuite:
    skew = settings.event_time_rules().max_clock_skew
    checks = (
        *_not_null("event_id", "key", "amount", "currency", "event_time"),
        Check("ExpectColumnValuesToBeNull", {"column": "amount_out_of_range"},
              BLOCKING, f"amount within [amount_min, amount_max] = [{settings.amount_min}, "
                        f"{settings.amount_max}]"),
        _booked_currency(settings),
        _minor_units("amount is"),
        Check("ExpectColumnValuesToBeNull", {"column": "skew_beyond_bound_seconds"},
              BLOCKING, f"event_time <= arrival_time + max_clock_skew ({_as_seconds(skew)} s; "
                        "future-dated events belong in quarantine)"),
        _has_rows(EVENT_LOG),
    )

    def derive(df: DataFrame, _scope: DayScope) -> DataFrame:
        event_us, arrival_us = F.unix_micros("event_time"), F.unix_micros("arrival_time")
        amount = F.col("amount")
        in_range = ((amount >= F.lit(settings.amount_min))
                    & (amount <= F.lit(settings.amount_max)))
        return df.withColumns({
            "amount_out_of_range": _offending(in_range, amount),
            "minor_unit_break": _minor_unit_break(settings, "amount"),
            "skew_beyond_bound_seconds": _offending(~is_future_dated(event_us, arrival_us, skew),
                                                    _seconds(event_us - arrival_us))})

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
        Check("ExpectColumnValuesToBeNull", {"column": "batch_added_twice"}, BLOCKING,
              "each batch adds to a window once: a delta appended twice counts twice"),
        _has_rows(PROVISIONAL_TOTALS),
    )
    totals = _derive_totals(settings, "total_amount")

    def derive(df: DataFrame, scope: DayScope) -> DataFrame:
        return totals(df, scope).join(_deltas_added_twice(scope), list(GRAIN), "left")

    return TableSuite(PROVISIONAL_TOTALS, "window_date", checks,
                      (*GRAIN, "event_count", "total_amount", "status", "revision",
                       "last_batch_id", "finalized_batch_id", "batch_added_twice"), derive)


def _deltas_added_twice(scope: DayScope) -> DataFrame:
    """Per (window, key, currency) of the day: the batches whose delta provisional_deltas
    holds more than once (``batch 7 x2``), or no row. provisional_totals folds the deltas, so
    a batch appended twice (an idempotency failure) shows only as a larger total there."""
    wh = scope.settings.warehouse_path
    if not table_exists(wh, PROVISIONAL_DELTAS):
        return scope.spark.createDataFrame([], "window_start timestamp, key string, "
                                           "currency string, batch_added_twice string")
    copies = (read_table(scope.spark, wh, PROVISIONAL_DELTAS)
              .filter(F.col("window_date") == F.lit(scope.day))
              .groupBy(*GRAIN, "query_id", "batch_id").agg(F.count(F.lit(1)).alias("n"))
              .filter(F.col("n") > 1))
    return copies.groupBy(*GRAIN).agg(F.concat_ws(", ", F.collect_list(F.format_string(
        "batch %d x%d", F.col("batch_id"), F.col("n")))).alias("batch_added_twice"))


def _canonical(settings: Settings) -> TableSuite:
    totals = _derive_totals(settings, "total_amount")

    def derive(df: DataFrame, scope: DayScope) -> DataFrame:
        return _against_event_log(totals(df, scope), scope)

    return TableSuite(CANONICAL_TOTALS, "window_date",
                      (*_totals_checks(settings), *_not_null("replay_id"),
                       *_event_log_checks(),
                       _has_rows(CANONICAL_TOTALS)),
                      (*GRAIN, "event_count", "total_amount", "replay_id"), derive)


def _late_events(settings: Settings) -> TableSuite:
    from spark.spec import recorded_versions

    # a late event was judged by the allowed lateness (internally: grace) in force when it
    # came: past the smallest the warehouse ever had holds for every row, whichever version
    grace = min([settings.event_time_rules().grace,
                 *(parse_duration(v.spec["grace"], "grace")
                   for v in recorded_versions(settings.warehouse_path))])
    checks: tuple[Check, ...] = (
        *_not_null("event_id", "currency", "window_start", "window_end", "watermark",
                   "lateness_seconds"),
        _booked_currency(settings),
        _minor_units("amount is"),
        Check("ExpectColumnValuesToBeInSet", {"column": "beyond_grace", "value_set": [True]},
              BLOCKING, "late side output only past the allowed lateness: watermark >= "
                        f"window_end + allowed lateness ({_as_seconds(grace)} s)"),
        Check("ExpectColumnPairValuesAToBeGreaterThanB",
              {"column_A": "watermark", "column_B": "window_end", "or_equal": True},
              BLOCKING, "the window had closed (window_end <= watermark) when the event came"),
        Check("ExpectColumnValuesToBeNull", {"column": "lateness_error_seconds"},
              BLOCKING, "lateness_seconds = watermark - window_end"),
    )
    if grace > 0:
        checks += (Check("ExpectColumnValuesToBeBetween",
                         {"column": "lateness_seconds", "min_value": 0, "strict_min": True},
                         WARNING, "with an allowed lateness > 0 a late event is strictly past "
                         "its window"),)

    def derive(df: DataFrame, _scope: DayScope) -> DataFrame:
        end, wm = F.unix_micros("window_end"), F.unix_micros("watermark")
        return df.withColumns({
            "beyond_grace": is_beyond_grace(end, wm, grace),
            "lateness_error_seconds": _offending(
                F.col("lateness_seconds") == _seconds(wm - end),
                F.col("lateness_seconds") - _seconds(wm - end)),
            "minor_unit_break": _minor_unit_break(settings, "amount")})

    return TableSuite(LATE_EVENTS, "window_date", checks,
                      ("event_id", "key", "currency", "amount", "window_end", "watermark",
                       "lateness_seconds"), derive)


def _uncaught_duplicates(settings: Settings) -> TableSuite:
    """The replay's record of what the stream counted more than once: the audit adds each row
    to its (window, key, currency) gap, so a repeated or empty row would misstate the
    explanation. A day without rows is the normal case (no copy got past the stream's
    de-duplication)."""
    checks = (
        *_not_null("window_start", "window_end", "key", "currency", "duplicate_amount",
                   "duplicate_count", "replay_id"),
        _unique_grain("the audit adds it to that gap once"),
        _booked_currency(settings),
        _minor_units("duplicate_amount is"),
        Check("ExpectColumnValuesToBeBetween", {"column": "duplicate_count", "min_value": 1},
              BLOCKING, "a row exists only for copies the stream counted beyond the first"),
        _window_width(settings),
    )
    return TableSuite(UNCAUGHT_DUPLICATES, "window_date", checks,
                      (*GRAIN, "duplicate_count", "duplicate_amount", "replay_id"),
                      _derive_totals(settings, "duplicate_amount"))


_RECON_AMOUNTS = ("provisional_amount", "canonical_amount", "gap_amount", "late_amount",
                  "duplicate_amount", "residual_amount")


def _reconciliation(settings: Settings) -> TableSuite:
    tolerance = Tolerance(settings.tolerance_abs, settings.tolerance_rel)
    unexplained = [s.value for s in UNEXPLAINED_STATUSES]
    checks = (
        *_not_null("window_start", "key", "currency", "status"),
        _unique_grain("a currency's window is reconciled once, never with another's money"),
        _booked_currency(settings),
        _minor_units("every amount of the row is"),
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
    return TableSuite(RECONCILIATION, "window_date", checks,
                      (*GRAIN, "status", "provisional_amount", "provisional_count",
                       "canonical_amount", "canonical_count", "late_amount", "late_count",
                       "duplicate_amount", "duplicate_count"),
                      _derive_reconciliation(settings, tolerance))


def _derive_reconciliation(settings: Settings, tolerance: Tolerance) -> Derive:
    def derive(df: DataFrame, _scope: DayScope) -> DataFrame:
        zero_amt, zero_cnt = F.lit(0).cast(TOTAL), F.lit(0).cast("long")
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
        return df.withColumns({
            "invariant_holds": holds,
            "stored_arithmetic_holds": F.coalesce(stored, F.lit(False)),
            "minor_unit_break": _minor_unit_break(settings, *_RECON_AMOUNTS)})

    return derive


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
    """Every table's suite under these settings (widths, bounds, grace, tolerance, currencies)."""
    return (_event_log(settings), _quarantine(settings), _provisional(settings),
            _late_events(settings), _canonical(settings), _uncaught_duplicates(settings),
            _reconciliation(settings))
