"""Parse and validate raw event lines: the same code for the stream and the replay.

Input columns: ``payload`` (the raw line), ``transport_partition`` (Kafka's partition, or null),
``offset``, ``transport_time`` (Kafka timestamp or the landing file's modification time) and
``input_file``. Output: the typed event columns plus ``reason``/``detail``; ``reason`` is null
for a valid event. Nothing raises on bad input: every row comes out, valid or with a reason.

Rules (first failure wins). Shape first: ``empty_line`` (only whitespace), ``invalid_json``
(not exactly one JSON object on the line, or duplicate keys), ``missing_field``,
``wrong_type`` (an object or array in a text field), ``field_too_long``, ``bad_amount`` (a
plain decimal with at most 15 digits before the point and 3 after, the stored
``DECIMAL(18,3)``; a JSON number is judged by its own digits, not by the double Spark reads it
through), ``bad_event_time`` (ISO-8601 with a zone),
``bad_partition``, ``bad_arrival_time`` (not ISO-8601, or more than ``max_clock_skew`` after the
time the transport saw the line: the file's modification time or the Kafka timestamp). Then
the typed rules (``typed_checks``, which the replay re-applies to the event log):
``amount_out_of_range``, ``unknown_currency`` (not an ISO 4217 code), ``unsupported_currency``
(an ISO 4217 code reckon does not book: a fund or metal, more than 3 decimal places, or outside
the configured ``currencies``), ``exceeds_minor_unit`` (more decimal places than the currency's
ISO 4217 minor unit: JPY "5.5", EUR "1.005"), ``event_time_out_of_range``, ``future_dated``
(event_time more than ``max_clock_skew`` after arrival: a bad clock must never move the
watermark). reckon.money owns the currency data and the minor-unit predicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reckon.config import Settings
from reckon.eventtime import is_future_dated
from reckon.money import iso_currencies
from reckon.schema import AMOUNT_PRECISION, AMOUNT_SCALE, REQUIRED_EVENT_FIELDS
from reckon.timeutil import parse_timestamp
from spark.money import minor_unit_break_col
from spark.session import built_once_per_jvm

__all__ = ["MAX_FIELD_LENGTH", "QUARANTINE_REASONS", "first_failure",
           "parse_events", "typed_checks"]

MAX_FIELD_LENGTH = 256
QUARANTINE_REASONS = (
    "empty_line", "invalid_json", "missing_field", "wrong_type", "field_too_long", "bad_amount",
    "amount_out_of_range", "unknown_currency", "unsupported_currency", "exceeds_minor_unit",
    "bad_event_time", "event_time_out_of_range", "bad_partition", "bad_arrival_time",
    "future_dated",
)
_ISO = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$"
_AMOUNT = rf"^-?\d{{1,{AMOUNT_PRECISION - AMOUNT_SCALE}}}(\.\d{{1,{AMOUNT_SCALE}}})?$"
_PARTITION = r"^\d{1,9}$"  # a partition id is never negative (Kafka's are 0..n-1)
# blank: only white space, separators (a no-break space) or invisible format characters (a
# zero-width space); the anchored first-character test gates the whole-value one
_BLANK_START = r"^[\s\p{Z}\p{Cf}]"
_BLANK = r"^[\s\p{Z}\p{Cf}]*$"
_STRICT = {"allowSingleQuotes": "false"}  # Spark's default accepts {'a': 'b'}, which is not JSON
_RAW_FIELDS = (*REQUIRED_EVENT_FIELDS, "partition", "arrival_time")
# 20 places: more than a double carries (17 significant digits), with room for the 15 integer
# digits of an amount; a number with more places is rounded at the 20th, beyond any double.
_EXACT_AMOUNT_SCHEMA = T.StructType([T.StructField(
    "amount", T.DecimalType(AMOUNT_PRECISION - AMOUNT_SCALE + 20, 20), True)])
_RAW_SCHEMA = T.StructType(
    [T.StructField(name, T.StringType(), True) for name in _RAW_FIELDS]
    + [T.StructField("_corrupt", T.StringType(), True)]
)


Check = tuple[Column, str, Column]


def _plain_decimal(amount: Column) -> Column:
    """A decimal's text without the stored scale's trailing zeros (5.500 -> 5.5, 7.000 -> 7)."""
    text = amount.cast("string")
    return F.when(text.contains("."), F.regexp_replace(F.regexp_replace(text, "0+$", ""),
                                                       "\\.$", "")).otherwise(text)


def typed_checks(amount: Column, currency: Column, event_time: Column, arrival_time: Column,
                 settings: Settings) -> list[Check]:
    """The rules that judge already-typed values: amount range, currency (ISO 4217, booked,
    minor unit), event-time range, clock skew. The stream applies them after parsing; the
    replay re-applies them to the event log, so a tightened rule is honoured by the nightly run
    without a second implementation."""
    rules = settings.event_time_rules()
    min_us = parse_timestamp(settings.min_event_time, "min_event_time")
    event_us, arrival_us = F.unix_micros(event_time), F.unix_micros(arrival_time)
    breaks_unit = minor_unit_break_col(amount, currency, settings)
    return [
        ((amount < F.lit(settings.amount_min)) | (amount > F.lit(settings.amount_max)),
         "amount_out_of_range",
         F.concat(F.lit(f"amount outside [{settings.amount_min}, {settings.amount_max}]: "),
                  _plain_decimal(amount))),
        (~currency.isin(list(iso_currencies())), "unknown_currency",
         F.concat(F.lit("currency is not an ISO 4217 code: "), F.substring(currency, 1, 40))),
        (breaks_unit.isNull(), "unsupported_currency",
         F.concat(F.lit("currency is not one reckon books (a fund, metal or test code, more "
                        "than 3 decimal places, or not in the configured currencies): "),
                  currency)),
        (breaks_unit, "exceeds_minor_unit",
         F.concat(F.lit("amount has more decimal places than its currency allows: "),
                  currency, F.lit(" "), _plain_decimal(amount))),
        (event_us < F.lit(min_us), "event_time_out_of_range",
         F.concat(F.lit(f"event_time before {settings.min_event_time}: "),
                  event_time.cast("string"))),
        (is_future_dated(event_us, arrival_us, rules.max_clock_skew), "future_dated",
         F.concat(F.lit("event_time more than the max clock skew after arrival: "),
                  event_time.cast("string"), F.lit(" > "), arrival_time.cast("string"))),
    ]


def _rule_settings(settings: Settings) -> tuple[Any, ...]:
    """Every setting the parse's rules read (``typed_checks`` and ``_parse_plan``): the key of
    its cached columns, so a changed rule never meets a plan built for the old one."""
    return (settings.amount_min, settings.amount_max, tuple(settings.currencies),
            settings.min_event_time, settings.event_time_rules().max_clock_skew)


def first_failure(checks: list[Check]) -> tuple[Column, Column]:
    """(reason, detail) of the first check that holds, both null when none does. One flat
    CASE per column; give it cheap conditions (see ``parse_events``: heavy ones are computed
    once, as columns, before this runs)."""
    reason = F.lit(None).cast("string")
    detail = F.lit(None).cast("string")
    for condition, name, text in reversed(checks):
        hit = F.coalesce(condition, F.lit(False))
        reason = F.when(hit, F.lit(name)).otherwise(reason)
        detail = F.when(hit, text).otherwise(detail)
    return reason, detail


def _ahead_of_transport(line_arrival: Column, skew: int) -> Column:
    """The arrival time a line claims is more than the max clock skew after the time its
    transport saw it (the landing file's modification time, the Kafka timestamp)."""
    return is_future_dated(F.unix_micros(line_arrival), F.unix_micros(F.col("transport_time")),
                           skew)


def _iso_timestamp(text: Column) -> Column:
    """Strict ISO-8601 with a zone -> timestamp, else null (never raises)."""
    return F.when(text.rlike(_ISO), F.try_to_timestamp(text)).otherwise(F.lit(None))


@dataclass(frozen=True)
class _ParsePlan:
    """The parse's projections as unresolved columns (names and literals only, no DataFrame):
    ``parse_events`` applies them to any frame with the raw columns."""

    lines: tuple[Column, ...]      # 1. the line's parses, next to the raw columns
    values: tuple[Column, ...]     # 2. typed values, next to the raw columns and (1)
    flags: tuple[Column, ...]      # one boolean per check, next to everything so far
    events: tuple[Column, ...]     # 3. the output columns


def parse_events(raw: DataFrame, settings: Settings) -> DataFrame:
    """Raw rows -> typed event columns + ``reason``/``detail`` (null for a valid event).

    Built as three projections so every expensive expression runs once per row: the line's
    parses (object, one-value proof, keys), then the typed values and one boolean per check,
    then the reason/detail CASE over those booleans. As one nested expression, Spark
    re-evaluated the JSON parses inside every CASE branch (conditional branches are not
    shared by its common-subexpression elimination): several times slower.

    The columns are built once per rule set and JVM: building them is ~4,500 py4j calls
    (tenths of a second of driver time, 0.4-0.6 s on a busy machine), which every
    micro-batch paid before its first job."""
    plan = built_once_per_jvm(("parse", *_rule_settings(settings)),
                              lambda: _parse_plan(settings))
    df = raw.select("*", *plan.lines)
    df = df.select(*raw.columns, "_j", "_one_value", "_dup_keys", "_exact_amount",
                   *plan.values)
    return df.select("*", *plan.flags).select(*plan.events)


def _parse_plan(settings: Settings) -> _ParsePlan:
    payload = F.col("payload")
    # 1. The three parses of the line. from_json reads the first JSON value and ignores the
    #    rest of the line, so '{..}{..}' or '{..} junk' would pass as one event and lose the
    #    rest: the line is one value only if [line, "<md5 of line>"] parses to exactly that
    #    digest as its second and last element (a line cannot contain its own digest).
    #    Duplicate keys make an event ambiguous (which event_id?); from_json keeps the last.
    #    That second parse costs as much as the first, so it only runs when a cheap test
    #    cannot settle it: a line whose only '}' is its last non-blank character holds one
    #    value if its first value is an object (checked below), since that object ends there.
    digest = F.md5(payload)
    whole = F.from_json(F.concat(F.lit("["), payload, F.lit(',"'), digest, F.lit('"]')),
                        T.ArrayType(T.StringType()), _STRICT)
    keys = F.json_object_keys(payload)
    # The only '}' is the last character before trailing spaces: byte scans (endswith,
    # contains) instead of a regex, which Java tries again at every position of a line it does
    # not match, or instr, which steps through the line a character at a time (a quarter of
    # the parse's samples). Ending in exactly one '}', with none in what precedes it. Stricter
    # than "only '}' then whitespace": a line it turns down takes the exact test, so it can
    # only cost time, never change a verdict.
    trimmed = F.rtrim(payload)
    one_brace = (F.endswith(trimmed, F.lit("}")) & ~F.endswith(trimmed, F.lit("}}"))
                 & ~F.rtrim(trimmed, F.lit("}")).contains("}"))
    # An amount sent as a JSON number reaches the string field through a double (its text is
    # the double's: 1.000000000000000001 reads "1.0"). Read as a decimal, Spark takes the
    # number's own digits; a mismatch below is bad_amount. Skipped only for a line whose one
    # '"amount"' is a compact JSON string (a string's digits are its own), so producers that
    # send strings never pay for the second parse; a nested or escaped key takes it.
    amount_is_text = (payload.contains('"amount":"') & ~payload.contains("\\u")
                      & (F.size(F.split(payload, '"amount"')) == 2))
    exact_amount = F.when(
        ~amount_is_text,
        F.from_json(payload, _EXACT_AMOUNT_SCHEMA, _STRICT).getField("amount"))
    lines = (
        F.from_json(payload, _RAW_SCHEMA, {**_STRICT, "mode": "PERMISSIVE",
                                           "columnNameOfCorruptRecord": "_corrupt"}).alias("_j"),
        F.when(one_brace, F.lit(True)).otherwise(F.coalesce(
            (F.size(whole) == 2) & (F.try_element_at(whole, F.lit(2)) == digest),
            F.lit(False))).alias("_one_value"),
        F.coalesce(F.size(F.array_distinct(keys)) != F.size(keys), F.lit(False))
        .alias("_dup_keys"),
        exact_amount.alias("_exact_amount"),
    )
    # 2. Typed values, and one boolean column per check (evaluated once each).
    f = {name: F.col("_j").getField(name) for name in _RAW_FIELDS}
    skew = settings.event_time_rules().max_clock_skew
    amount_ok = f["amount"].rlike(_AMOUNT)
    line_arrival = _iso_timestamp(f["arrival_time"])
    values = (
        F.when(amount_ok, f["amount"].try_cast(T.DecimalType(AMOUNT_PRECISION, AMOUNT_SCALE)))
        .alias("_amount"),
        amount_ok.alias("_amount_ok"),
        _iso_timestamp(f["event_time"]).alias("_event_time"),
        line_arrival.alias("_line_arrival"),
        # the line's own arrival time, unless it claims to be later than its transport saw it
        # (then the row is quarantined below and keeps the transport's time)
        F.coalesce(F.when(~F.coalesce(_ahead_of_transport(line_arrival, skew), F.lit(False)),
                          line_arrival),
                   F.col("transport_time")).alias("_arrival_time"),
        F.coalesce(F.col("transport_partition"),
                   F.when(f["partition"].rlike(_PARTITION), f["partition"].cast("int")),
                   F.lit(0)).alias("_partition"),
    )
    amount, event_time = F.col("_amount"), F.col("_event_time")
    inexact = F.when(F.col("_exact_amount").isNotNull(), F.col("_exact_amount") != amount)
    arrival_time = F.col("_arrival_time")
    # Cheap gates first, each implied by the exact test behind it (so a verdict never
    # changes): only a value starting with a space can trim to empty; only one of more than
    # MAX_FIELD_LENGTH bytes can have more characters (octet_length is stored, length counts).
    missing = [F.when(f[n].isNull() | (F.octet_length(f[n]) == 0)
                      | (f[n].rlike(_BLANK_START) & f[n].rlike(_BLANK)), F.lit(n))
               for n in REQUIRED_EVENT_FIELDS]
    text_fields = ("event_id", "key", "source", "currency")
    too_long = [F.when((F.octet_length(f[n]) > MAX_FIELD_LENGTH)
                       & (F.length(f[n]) > MAX_FIELD_LENGTH), F.lit(n)) for n in text_fields]
    # JSON numbers and booleans in text fields are read as their text; objects and arrays
    # are not identifiers.
    nested = [F.when((f[n].contains("[") | f[n].contains("{"))
                     & f[n].rlike(r"^\s*[\[{]"), F.lit(n)) for n in text_fields]
    one_value, dup_keys = F.col("_one_value"), F.col("_dup_keys")
    checks: list[Check] = [
        # a line holding '{' is not blank: the regex runs on the few others only
        (~payload.contains("{") & payload.rlike(r"^\s*$"), "empty_line",
         F.lit("blank line")),
        (F.col("_j").isNull() | F.col("_j._corrupt").isNotNull() | ~one_value | dup_keys,
         "invalid_json",
         F.when(dup_keys, F.lit("duplicate keys in the JSON object"))
         .when(~one_value & F.col("_j._corrupt").isNull() & F.col("_j").isNotNull(),
               F.lit("more than one JSON value on the line"))
         .otherwise(F.lit("not a JSON object"))),
        (F.coalesce(*missing).isNotNull(), "missing_field",
         F.concat(F.lit("missing or empty: "), F.concat_ws(",", *missing))),
        (F.coalesce(*nested).isNotNull(), "wrong_type",
         F.concat(F.lit("an object or array where text belongs: "), F.concat_ws(",", *nested))),
        (F.coalesce(*too_long).isNotNull(), "field_too_long",
         F.concat(F.lit(f"longer than {MAX_FIELD_LENGTH} characters: "),
                  F.concat_ws(",", *too_long))),
        (~F.col("_amount_ok") | amount.isNull() | inexact, "bad_amount",
         F.concat(F.lit(f"amount is not a decimal with at most "
                        f"{AMOUNT_PRECISION - AMOUNT_SCALE} digits before the point and "
                        f"{AMOUNT_SCALE} after: "),
                  F.substring(F.coalesce(F.when(inexact, F.col("_exact_amount").cast("string")),
                                         f["amount"]), 1, 40))),
        (event_time.isNull(), "bad_event_time",
         F.concat(F.lit("event_time is not ISO-8601 with a zone: "),
                  F.substring(f["event_time"], 1, 60))),
        (f["partition"].isNotNull() & ~f["partition"].rlike(_PARTITION)
         & F.col("transport_partition").isNull(), "bad_partition",
         F.concat(F.lit("partition is not an integer from 0 up: "), F.substring(f["partition"], 1, 40))),
        ((f["arrival_time"].isNotNull() & F.col("_line_arrival").isNull())
         | arrival_time.isNull(),
         "bad_arrival_time",
         F.concat(F.lit("arrival_time is not ISO-8601 with a zone: "),
                  F.coalesce(F.substring(f["arrival_time"], 1, 60), F.lit("(none)")))),
        # A line may say when it arrived (tests, replays of archived files), but not later than
        # its transport saw it: otherwise one line dated ahead, event_time with it, would pass
        # the clock-skew rule against its own claim and carry the watermark forward.
        (_ahead_of_transport(F.col("_line_arrival"), skew),
         "bad_arrival_time",
         F.concat(F.lit("arrival_time is more than the max clock skew after the transport's "
                        "time (file or record): "), F.col("_line_arrival").cast("string"),
                  F.lit(" > "), F.col("transport_time").cast("string"))),
        *typed_checks(amount, f["currency"], event_time, arrival_time, settings),
    ]
    flags = tuple(F.coalesce(condition, F.lit(False)).alias(f"_check{i}")
                  for i, (condition, _, _) in enumerate(checks))
    # 3. The first failing check names the reason (conditions are now plain columns).
    reason, detail = first_failure([(F.col(f"_check{i}"), name, text)
                                    for i, (_, name, text) in enumerate(checks)])
    events = (
        f["event_id"].alias("event_id"), f["key"].alias("key"), amount.alias("amount"),
        f["currency"].alias("currency"), event_time.alias("event_time"),
        f["source"].alias("source"), F.col("_partition").alias("partition"), F.col("offset"),
        arrival_time.alias("arrival_time"), F.col("input_file"), payload.alias("payload"),
        reason.alias("reason"), detail.alias("detail"),
    )
    return _ParsePlan(lines, values, flags, events)
