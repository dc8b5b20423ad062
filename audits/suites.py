"""The data-quality suites, kept as code: one per warehouse table, each expectation with a severity.

A suite is data (``TableSuite``): the table, its day partition column, the derived columns the
expectations need (computed in Spark before validation, so that every rule is a plain column
check GX can count and sample), and ``Check`` items. Rules are not restated: lateness uses
``reckon.eventtime.is_beyond_allowed_lateness``, the reconciliation invariant uses
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
- late_events ``beyond_grace = watermark >= window_end + allowed_lateness`` (the side-output rule) and
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

from decimal import Decimal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from audits.event_log_match import against_event_log, event_log_checks
from audits.suite_model import (
    BLOCKING,
    GRAIN,
    MIN_ROWS,
    WARNING,
    Check,
    DayScope,
    Derive,
    TableSuite,
    offending,
)
from reckon.engine_config import CheckConfig
from reckon.eventtime import WindowStatus, is_beyond_allowed_lateness, is_future_dated
from reckon.money import accepted_currencies
from reckon.reconcile import (
    UNEXPLAINED_STATUSES,
    ReconStatus,
    Tolerance,
    residual,
    within_tolerance,
)
from reckon.timeutil import parse_duration
from spark.money import minor_unit_break_col
from spark.parse import QUARANTINE_REASONS
from spark.tables import (
    CANONICAL_TOTALS,
    EVENT_LOG,
    LATE_EVENTS,
    PROVISIONAL_DELTAS,
    PROVISIONAL_TOTALS,
    QUARANTINE,
    RECONCILIATION,
    TOTAL,
    UNCAUGHT_DUPLICATES,
    read_table,
    table_exists,
)

__all__ = ["build_suites", "smallest_allowed_lateness"]

_US = 1_000_000
_SECONDS = "decimal(20,6)"


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
    """At least ``MIN_ROWS`` rows: one on a day with events, none needed on a day without
    (``reckon.quality_verdict.min_rows``; the run sets the parameter)."""
    return Check("ExpectTableRowCountToBeBetween", {"min_value": {"$PARAMETER": MIN_ROWS}},
                 WARNING, f"no {table} rows on a day with events: the step that writes them "
                          "may not have run")


def _window_width(config: CheckConfig) -> Check:
    """On the derived ``window_width_error_seconds`` (``_derive_totals``)."""
    width = _as_seconds(config.rules.windows.size)
    return Check("ExpectColumnValuesToBeNull", {"column": "window_width_error_seconds"},
                 BLOCKING, f"window_end = window_start + the configured width ({width} s)")


def _booked_currency(config: CheckConfig) -> Check:
    """currency is one reckon books: ``reckon.money.accepted_currencies`` of the setting."""
    codes = sorted(accepted_currencies(config.currencies))
    narrowed = (f"the configured currencies ({', '.join(codes)})" if config.currencies
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


def _minor_unit_break(config: CheckConfig, *amounts: str) -> Column:
    """Each of ``amounts`` (column names) that is not a whole number of the row's currency's
    minor units, as ``<column> <amount> <currency>`` ('; ' between them); null when every one
    keeps the rule (or is null). A currency reckon does not book is the currency check's."""
    currency = F.col("currency")
    parts = [F.when(F.coalesce(minor_unit_break_col(F.col(c), currency, config.currencies),
                               F.lit(False)),
                    F.concat_ws(" ", F.lit(c), F.col(c).cast("string"), currency))
             for c in amounts]
    text = F.concat_ws("; ", *parts)
    return F.when(text != "", text)


def _totals_checks(config: CheckConfig) -> tuple[Check, ...]:
    return (
        *_not_null("window_start", "window_end", "key", "currency", "total_amount",
                   "event_count"),
        _unique_grain("amounts of two currencies are never one total"),
        _booked_currency(config),
        _minor_units("total_amount is"),
        Check("ExpectColumnValuesToBeBetween", {"column": "event_count", "min_value": 1},
              BLOCKING, "a window row exists only because events were counted in it"),
        _window_width(config),
    )


def _derive_totals(config: CheckConfig, amount: str) -> Derive:
    """Window width and minor units of a per-grain table whose money is column ``amount``."""
    size = config.rules.windows.size

    def derive(df: DataFrame, _scope: DayScope) -> DataFrame:
        width = F.unix_micros("window_end") - F.unix_micros("window_start")
        return df.withColumns({
            "window_width_error_seconds": offending(width == F.lit(size), _seconds(width)),
            "minor_unit_break": _minor_unit_break(config, amount)})

    return derive


# ----------------------------------------------------------------------------- suites


def _event_log(config: CheckConfig) -> TableSuite:
    skew = config.rules.max_clock_skew
    checks = (
        *_not_null("event_id", "key", "amount", "currency", "event_time"),
        Check("ExpectColumnValuesToBeNull", {"column": "amount_out_of_range"},
              BLOCKING, f"amount within [amount_min, amount_max] = [{config.amount_min}, "
                        f"{config.amount_max}]"),
        _booked_currency(config),
        _minor_units("amount is"),
        Check("ExpectColumnValuesToBeNull", {"column": "skew_beyond_bound_seconds"},
              BLOCKING, f"event_time <= arrival_time + max_clock_skew ({_as_seconds(skew)} s; "
                        "future-dated events belong in quarantine)"),
    )  # no row count: a day without events is a quiet day, its verdict says so

    def derive(df: DataFrame, _scope: DayScope) -> DataFrame:
        event_us, arrival_us = F.unix_micros("event_time"), F.unix_micros("arrival_time")
        amount = F.col("amount")
        in_range = ((amount >= F.lit(config.amount_min))
                    & (amount <= F.lit(config.amount_max)))
        return df.withColumns({
            "amount_out_of_range": offending(in_range, amount),
            "minor_unit_break": _minor_unit_break(config, "amount"),
            "skew_beyond_bound_seconds": offending(~is_future_dated(event_us, arrival_us, skew),
                                                    _seconds(event_us - arrival_us))})

    return TableSuite(EVENT_LOG, "event_date", checks,
                      ("event_id", "key", "amount", "currency", "event_time", "arrival_time"),
                      derive)


def _provisional(config: CheckConfig) -> TableSuite:
    checks = (
        *_totals_checks(config),
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
    totals = _derive_totals(config, "total_amount")

    def derive(df: DataFrame, scope: DayScope) -> DataFrame:
        return totals(df, scope).join(_deltas_added_twice(scope), list(GRAIN), "left")

    return TableSuite(PROVISIONAL_TOTALS, "window_date", checks,
                      (*GRAIN, "event_count", "total_amount", "status", "revision",
                       "last_batch_id", "finalized_batch_id", "batch_added_twice"), derive)


def _deltas_added_twice(scope: DayScope) -> DataFrame:
    """Per (window, key, currency) of the day: the batches whose delta provisional_deltas
    holds more than once (``batch 7 x2``), or no row. provisional_totals folds the deltas, so
    a batch appended twice (an idempotency failure) shows only as a larger total there."""
    wh = scope.replay.warehouse
    if not table_exists(wh, PROVISIONAL_DELTAS):
        return scope.spark.createDataFrame([], "window_start timestamp, key string, "
                                           "currency string, batch_added_twice string")
    copies = (read_table(scope.spark, wh, PROVISIONAL_DELTAS)
              .filter(F.col("window_date") == F.lit(scope.day))
              .groupBy(*GRAIN, "query_id", "batch_id").agg(F.count(F.lit(1)).alias("n"))
              .filter(F.col("n") > 1))
    return copies.groupBy(*GRAIN).agg(F.concat_ws(", ", F.collect_list(F.format_string(
        "batch %d x%d", F.col("batch_id"), F.col("n")))).alias("batch_added_twice"))


def _canonical(config: CheckConfig) -> TableSuite:
    totals = _derive_totals(config, "total_amount")

    def derive(df: DataFrame, scope: DayScope) -> DataFrame:
        return against_event_log(totals(df, scope), scope)

    return TableSuite(CANONICAL_TOTALS, "window_date",
                      (*_totals_checks(config), *_not_null("replay_id"),
                       *event_log_checks(),
                       _has_rows(CANONICAL_TOTALS)),
                      (*GRAIN, "event_count", "total_amount", "replay_id"), derive)


def smallest_allowed_lateness(config: CheckConfig) -> int:
    """The allowed lateness (microseconds) late_events are judged by: a late event was judged
    by the one in force when it came, and past the smallest the warehouse ever had holds for
    every row, whichever version. Both engines' derives read it (``audits.suites_local``)."""
    from storage.spec_log import recorded_versions

    return min([config.rules.allowed_lateness,
                *(parse_duration(v.spec["allowed_lateness"], "allowed_lateness")
                  for v in recorded_versions(config.warehouse))])


def _late_events(config: CheckConfig) -> TableSuite:
    allowed_lateness = smallest_allowed_lateness(config)
    checks: tuple[Check, ...] = (
        *_not_null("event_id", "currency", "window_start", "window_end", "watermark",
                   "lateness_seconds"),
        _booked_currency(config),
        _minor_units("amount is"),
        Check("ExpectColumnValuesToBeInSet", {"column": "beyond_grace", "value_set": [True]},
              BLOCKING, "late side output only past the allowed lateness: watermark >= "
                        f"window_end + allowed lateness ({_as_seconds(allowed_lateness)} s)"),
        Check("ExpectColumnPairValuesAToBeGreaterThanB",
              {"column_A": "watermark", "column_B": "window_end", "or_equal": True},
              BLOCKING, "the window had closed (window_end <= watermark) when the event came"),
        Check("ExpectColumnValuesToBeNull", {"column": "lateness_error_seconds"},
              BLOCKING, "lateness_seconds = watermark - window_end"),
    )
    if allowed_lateness > 0:
        checks += (Check("ExpectColumnValuesToBeBetween",
                         {"column": "lateness_seconds", "min_value": 0, "strict_min": True},
                         WARNING, "with an allowed lateness > 0 a late event is strictly past "
                         "its window"),)

    def derive(df: DataFrame, _scope: DayScope) -> DataFrame:
        end, wm = F.unix_micros("window_end"), F.unix_micros("watermark")
        return df.withColumns({
            "beyond_grace": is_beyond_allowed_lateness(end, wm, allowed_lateness),
            "lateness_error_seconds": offending(
                F.col("lateness_seconds") == _seconds(wm - end),
                F.col("lateness_seconds") - _seconds(wm - end)),
            "minor_unit_break": _minor_unit_break(config, "amount")})

    return TableSuite(LATE_EVENTS, "window_date", checks,
                      ("event_id", "key", "currency", "amount", "window_end", "watermark",
                       "lateness_seconds"), derive)


def _uncaught_duplicates(config: CheckConfig) -> TableSuite:
    """The replay's record of what the stream counted more than once: the audit adds each row
    to its (window, key, currency) gap, so a repeated or empty row would misstate the
    explanation. A day without rows is the normal case (no copy got past the stream's
    de-duplication)."""
    checks = (
        *_not_null("window_start", "window_end", "key", "currency", "duplicate_amount",
                   "duplicate_count", "replay_id"),
        _unique_grain("the audit adds it to that gap once"),
        _booked_currency(config),
        _minor_units("duplicate_amount is"),
        Check("ExpectColumnValuesToBeBetween", {"column": "duplicate_count", "min_value": 1},
              BLOCKING, "a row exists only for copies the stream counted beyond the first"),
        _window_width(config),
    )
    return TableSuite(UNCAUGHT_DUPLICATES, "window_date", checks,
                      (*GRAIN, "duplicate_count", "duplicate_amount", "replay_id"),
                      _derive_totals(config, "duplicate_amount"))


_RECON_AMOUNTS = ("provisional_amount", "canonical_amount", "gap_amount", "late_amount",
                  "duplicate_amount", "residual_amount")


def _reconciliation(config: CheckConfig) -> TableSuite:
    tolerance = config.tolerance
    unexplained = [s.value for s in UNEXPLAINED_STATUSES]
    checks = (
        *_not_null("window_start", "key", "currency", "status"),
        _unique_grain("a currency's window is reconciled once, never with another's money"),
        _booked_currency(config),
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
              WARNING if config.allow_unexplained else BLOCKING,
              "no unexplained breaks (config.allow_unexplained turns this into a warning)"),
        _has_rows(RECONCILIATION),
    )
    return TableSuite(RECONCILIATION, "window_date", checks,
                      (*GRAIN, "status", "provisional_amount", "provisional_count",
                       "canonical_amount", "canonical_count", "late_amount", "late_count",
                       "duplicate_amount", "duplicate_count"),
                      _derive_reconciliation(config, tolerance))


def _derive_reconciliation(config: CheckConfig, tolerance: Tolerance) -> Derive:
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
            "minor_unit_break": _minor_unit_break(config, *_RECON_AMOUNTS)})

    return derive


def _quarantine(config: CheckConfig) -> TableSuite:
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


def build_suites(config: CheckConfig) -> tuple[TableSuite, ...]:
    """Every table's suite under ``config`` (widths, bounds, allowed lateness, tolerance,
    currencies), e.g. ``build_suites(settings.check_config())``. The event log's comes first:
    ``audits.quality.run_checks`` learns from it whether the day had events."""
    return (_event_log(config), _quarantine(config), _provisional(config),
            _late_events(config), _canonical(config), _uncaught_duplicates(config),
            _reconciliation(config))
