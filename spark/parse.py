"""Parse and validate raw event lines: the same code for the stream and the replay.

Input columns: ``payload`` (the raw line), ``transport_partition`` (Kafka's partition, or null),
``offset``, ``transport_time`` (Kafka timestamp or the landing file's modification time) and
``input_file``. Output: the typed event columns plus ``reason``/``detail``; ``reason`` is null
for a valid event. Nothing raises on bad input: every row comes out, valid or with a reason.

Rules (first failure wins). First ``invalid_utf8``: the line's bytes are not valid UTF-8 (the
landing source and the Kafka value hand them over as they came; decoding would turn every
invalid byte into U+FFFD and merge ``merchant-\\xff`` with ``merchant-\\xfe`` and a real
``merchant-\\ufffd``). The quarantine keeps its exact bytes in ``payload_base64`` and shows
``payload`` with U+FFFD for them (``quarantine_payload``); a valid line holding a real U+FFFD
is an ordinary line. Then the shape: ``empty_line`` (only whitespace), ``invalid_json``
(not exactly one JSON object on the line, or duplicate keys), ``lone_surrogate`` (a ``\\u``
escape of half a UTF-16 surrogate pair, ``"merchant-\\ud800"``: no character, and UTF-8
cannot hold it; read, it became ``?`` and merged with a real ``merchant-?``), ``missing_field``,
``wrong_type`` (an object or array in a text field), ``field_too_long``, ``bad_amount`` (a
plain decimal with at most 15 digits before the point and 3 after, the stored
``DECIMAL(18,3)``; a JSON number is judged by its exact value, never through a double:
12.5, 1.5e2 and 12345678.5 are amounts, 1.0005 and 1.000000000000000001 are not),
``bad_event_time`` (ISO-8601 with a zone), ``bad_partition``, ``bad_arrival_time`` (not
ISO-8601, or more than ``max_clock_skew`` after the time the transport saw the line: the
file's modification time or the Kafka timestamp). Then
the typed rules (``typed_checks``, which the replay re-applies to the event log):
``amount_out_of_range``, ``unknown_currency`` (not an ISO 4217 code), ``unsupported_currency``
(an ISO 4217 code reckon does not book: a fund or metal, more than 3 decimal places, or outside
the configured ``currencies``), ``exceeds_minor_unit`` (more decimal places than the currency's
ISO 4217 minor unit: JPY "5.5", EUR "1.005"), ``event_time_out_of_range``, ``future_dated``
(event_time more than ``max_clock_skew`` after arrival: a bad clock must never move the
watermark). reckon.money owns the currency data and the minor-unit predicate.

The shape rules (``empty_line`` to ``bad_event_time``) run in one pass over each line in the
JVM (``jvm/parse``: ``reckon.jvm.ParseLine``, a Spark UDF that reads the line once with
Jackson's streaming parser); the rules that need the transport's columns and the typed rules
run here as Spark expressions. The fuzz tests (tests/test_parse_fuzz.py) hold both to a
pure-Python oracle.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reckon.engine_config import ParseConfig
from reckon.eventtime import is_future_dated
from reckon.money import iso_currencies
from reckon.schema import AMOUNT_PRECISION, AMOUNT_SCALE
from reckon.timeutil import parse_timestamp
from spark.money import minor_unit_break_col
from spark.session import built_once_per_jvm

__all__ = ["INVALID_UTF8", "LONE_SURROGATE", "MAX_FIELD_LENGTH", "QUARANTINE_REASONS",
           "first_failure", "parse_events", "quarantine_payload", "typed_checks"]

MAX_FIELD_LENGTH = 256
INVALID_UTF8 = "invalid_utf8"
LONE_SURROGATE = "lone_surrogate"
QUARANTINE_REASONS = (
    INVALID_UTF8, "empty_line", "invalid_json", LONE_SURROGATE, "missing_field", "wrong_type",
    "field_too_long", "bad_amount",
    "amount_out_of_range", "unknown_currency", "unsupported_currency", "exceeds_minor_unit",
    "bad_event_time", "event_time_out_of_range", "bad_partition", "bad_arrival_time",
    "future_dated",
)
Check = tuple[Column, str, Column]
#: A JSON ``\\u`` escape (after an even run of backslashes) of a high surrogate not followed
#: by a low one, or of a low surrogate not preceded by a high one (reckon.reference's rule).
LONE_SURROGATE_ESCAPE = (r"(?<!\\)(?:\\\\)*(?:\\u[dD][89abAB][0-9a-fA-F]{2}"
                         r"(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                         r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2})")


def quarantine_payload() -> tuple[Column, Column]:
    """``payload`` and ``payload_base64`` of a quarantine row, from a parsed row's raw
    ``payload`` and ``reason``: a line that is not valid UTF-8 keeps its exact bytes in
    base64 (``unbase64(payload_base64)`` gives them back; ``base64 -d`` in a shell) and shows
    its text with U+FFFD for the invalid bytes; any other line is its text, and no base64.

    >>> bad.select(*quarantine_payload())  # doctest: +SKIP
    """
    raw, bad = F.col("payload"), F.col("reason") == F.lit(INVALID_UTF8)
    return (F.when(bad, F.make_valid_utf8(raw)).otherwise(raw).alias("payload"),
            # one line: Spark may wrap base64 text MIME-style (spark.sql.chunkBase64String)
            F.when(bad, F.translate(F.base64(raw.cast("binary")), "\r\n", ""))
            .alias("payload_base64"))


def _plain_decimal(amount: Column) -> Column:
    """A decimal's text without the stored scale's trailing zeros (5.500 -> 5.5, 7.000 -> 7)."""
    text = amount.cast("string")
    return F.when(text.contains("."), F.regexp_replace(F.regexp_replace(text, "0+$", ""),
                                                       "\\.$", "")).otherwise(text)


def typed_checks(amount: Column, currency: Column, event_time: Column, arrival_time: Column,
                 config: ParseConfig) -> list[Check]:
    """The rules that judge already-typed values: amount range, currency (ISO 4217, booked,
    minor unit), event-time range, clock skew. The stream applies them after parsing; the
    replay re-applies them to the event log, so a tightened rule is honoured by the nightly run
    without a second implementation."""
    min_us = parse_timestamp(config.min_event_time, "min_event_time")
    event_us, arrival_us = F.unix_micros(event_time), F.unix_micros(arrival_time)
    breaks_unit = minor_unit_break_col(amount, currency, config.currencies)
    return [
        ((amount < F.lit(config.amount_min)) | (amount > F.lit(config.amount_max)),
         "amount_out_of_range",
         F.concat(F.lit(f"amount outside [{config.amount_min}, {config.amount_max}]: "),
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
         F.concat(F.lit(f"event_time before {config.min_event_time}: "),
                  event_time.cast("string"))),
        (is_future_dated(event_us, arrival_us, config.max_clock_skew), "future_dated",
         F.concat(F.lit("event_time more than the max clock skew after arrival: "),
                  event_time.cast("string"), F.lit(" > "), arrival_time.cast("string"))),
    ]


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


def _ahead_of_transport(line_arrival_us: Column, skew: int) -> Column:
    """The arrival time a line claims is more than the max clock skew after the time its
    transport saw it (the landing file's modification time, the Kafka timestamp)."""
    return is_future_dated(line_arrival_us, F.unix_micros(F.col("transport_time")), skew)


_LINE_FUNCTION = "reckon_parse_line"
# What reckon.jvm.ParseLine returns for a line: its fields, typed where a shape rule types
# them, and the first failing shape rule (both null when the line passes them all).
_LINE_SCHEMA = T.StructType([
    T.StructField("event_id", T.StringType()), T.StructField("key", T.StringType()),
    T.StructField("amount", T.DecimalType(AMOUNT_PRECISION, AMOUNT_SCALE)),
    T.StructField("currency", T.StringType()), T.StructField("event_us", T.LongType()),
    T.StructField("source", T.StringType()), T.StructField("partition", T.IntegerType()),
    T.StructField("partition_text", T.StringType()),
    T.StructField("arrival_us", T.LongType()), T.StructField("arrival_text", T.StringType()),
    T.StructField("reason", T.StringType()), T.StructField("detail", T.StringType()),
])


def _register_line_parser(spark: SparkSession) -> None:
    """Register the JVM line parser as ``reckon_parse_line`` in this session: a temporary
    function, so registering it again (every parse does) only replaces it.

    Registered as non-deterministic, though it is not: that keeps the optimizer from copying
    the call into a filter above it (a filter on ``reason`` or ``event_time`` would otherwise
    parse every line twice, once to filter and once to project)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    session = spark._jsparkSession
    # Registered by Java code, not through py4j's choice among functions.udf's overloads
    # (that choice can differ between JVMs; see ParseLine.register).
    jvm.reckon.jvm.ParseLine.register(
        session, _LINE_FUNCTION, session.parseDataType(_LINE_SCHEMA.json()),
        MAX_FIELD_LENGTH, AMOUNT_PRECISION - AMOUNT_SCALE, AMOUNT_SCALE)


@dataclass(frozen=True)
class _ParsePlan:
    """The parse's projections as unresolved columns (names and literals only, no DataFrame):
    ``parse_events`` applies them to any frame with the raw columns."""

    line: Column                   # 1. the JVM parse of the line, as the struct ``_p``
    values: tuple[Column, ...]     # 2. values that need the transport's columns
    events: tuple[Column, ...]     # 3. the output columns, the first failing rule named


def parse_events(raw: DataFrame, config: ParseConfig) -> DataFrame:
    """Raw rows -> typed event columns + ``reason``/``detail`` (null for a valid event).

    Three projections, so each expression runs once per row: the JVM parse of the line
    (every shape rule, one pass), the values that need the transport's columns (the
    partition, the arrival time), then the remaining rules and the first failure's
    reason and detail.

    The columns are built once per rule set and JVM (each is py4j calls, which every
    micro-batch would pay before its first job), keyed on ``config`` itself: every value the
    rules read is in it, so a changed rule never meets columns built for the old one.

    >>> parse_events(raw, settings.parse_config()).filter("reason is null")  # doctest: +SKIP
    """
    _register_line_parser(raw.sparkSession)
    plan = built_once_per_jvm(("parse", config), lambda: _parse_plan(config))
    df = raw.select("*", plan.line)
    return df.select("*", *plan.values).select(*plan.events)


def _parse_plan(config: ParseConfig) -> _ParsePlan:
    p = F.col("_p")
    ahead = F.coalesce(_ahead_of_transport(p["arrival_us"], config.max_clock_skew), F.lit(False))
    values = (
        # the line's own arrival time, unless it claims to be later than its transport saw
        # it (then the row is quarantined below and keeps the transport's time)
        F.coalesce(F.when(~ahead, F.timestamp_micros(p["arrival_us"])),
                   F.col("transport_time")).alias("_arrival_time"),
        ahead.alias("_ahead"),
        F.timestamp_micros(p["event_us"]).alias("_event_time"),
        F.coalesce(F.col("transport_partition"), p["partition"], F.lit(0)).alias("_partition"),
        F.coalesce(F.is_valid_utf8("payload"), F.lit(True)).alias("_utf8"),
    )
    amount, event_time = p["amount"], F.col("_event_time")
    arrival_time = F.col("_arrival_time")
    checks: list[Check] = [
        (p["partition_text"].isNotNull() & p["partition"].isNull()
         & F.col("transport_partition").isNull(), "bad_partition",
         F.concat(F.lit("partition is not an integer from 0 up: "),
                  F.substring(p["partition_text"], 1, 40))),
        ((p["arrival_text"].isNotNull() & p["arrival_us"].isNull()) | arrival_time.isNull(),
         "bad_arrival_time",
         F.concat(F.lit("arrival_time is not ISO-8601 with a zone: "),
                  F.coalesce(F.substring(p["arrival_text"], 1, 60), F.lit("(none)")))),
        # A line may say when it arrived (tests, replays of archived files), but not later than
        # its transport saw it: otherwise one line dated ahead, event_time with it, would pass
        # the clock-skew rule against its own claim and carry the watermark forward.
        (F.col("_ahead"), "bad_arrival_time",
         F.concat(F.lit("arrival_time is more than the max clock skew after the transport's "
                        "time (file or record): "),
                  F.timestamp_micros(p["arrival_us"]).cast("string"),
                  F.lit(" > "), F.col("transport_time").cast("string"))),
        *typed_checks(amount, p["currency"], event_time, arrival_time, config),
    ]
    reason, detail = first_failure(checks)
    # bytes that are not UTF-8 first (the JVM read them as U+FFFD: its fields are not what
    # was sent), then the JVM's JSON shape rules, then a lone surrogate escape (the JVM's
    # text, written back as UTF-8, has '?' for it), then the JVM's field rules
    utf8, shape = F.col("_utf8"), p["reason"].isin("empty_line", "invalid_json")
    lone = F.col("payload").contains("\\u") & F.col("payload").rlike(LONE_SURROGATE_ESCAPE)
    reason = (F.when(~utf8, F.lit(INVALID_UTF8)).when(shape, p["reason"])
              .when(lone, F.lit(LONE_SURROGATE))
              .when(p["reason"].isNotNull(), p["reason"]).otherwise(reason))
    detail = (F.when(~utf8, F.concat(
        F.lit("line is not valid UTF-8 ("), F.octet_length("payload").cast("string"),
        F.lit(" bytes): its exact bytes are in payload_base64, payload shows them as U+FFFD")))
              .when(shape, p["detail"])
              .when(lone, F.concat(
                  F.lit("a \\u escape of a lone UTF-16 surrogate, which is no character: "),
                  F.substring(F.regexp_extract("payload", LONE_SURROGATE_ESCAPE, 0), -6, 6)))
              .when(p["reason"].isNotNull(), p["detail"]).otherwise(detail))
    events = (
        p["event_id"].alias("event_id"), p["key"].alias("key"), amount.alias("amount"),
        p["currency"].alias("currency"), event_time.alias("event_time"),
        p["source"].alias("source"), F.col("_partition").alias("partition"), F.col("offset"),
        arrival_time.alias("arrival_time"), F.col("input_file"), F.col("payload"),
        reason.alias("reason"), detail.alias("detail"),
    )
    line = F.call_function(_LINE_FUNCTION, F.col("payload")).alias("_p")
    return _ParsePlan(line, values, events)
