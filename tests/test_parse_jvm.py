"""Spark tier: the JVM line parser (jvm/parse, ``reckon.jvm.ParseLine``) reads a line as
Spark reads it.

The parser replaced Spark expressions (from_json, regexes, try_to_timestamp); where a rule is
"as Spark reads it", these tests hold the JVM code to Spark's own functions on the edge
cases: timestamps (leap seconds, 24:00, offsets past 18:00, a trailing newline), text fields
that arrive as numbers, booleans or objects, and the field lists against reckon.schema. The
verdicts themselves are fuzzed against a pure-Python oracle in tests/test_parse_fuzz.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pyspark.sql import functions as F

from app.settings import load_settings
from reckon.schema import REQUIRED_EVENT_FIELDS
from spark.parse import parse_events

SETTINGS = load_settings(env={})
_ISO = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$"
_EVENT = {"event_id": "e", "key": "k", "amount": "1.00", "currency": "EUR",
          "event_time": "2026-06-01T00:00:00Z", "source": "pos"}


def _raw(spark, lines: list[str]):
    return spark.createDataFrame(
        [(text, None, i, datetime(2026, 6, 1, tzinfo=UTC), "t") for i, text in enumerate(lines)],
        "payload string, transport_partition int, offset long, transport_time timestamp, "
        "input_file string")


def test_event_times_read_as_sparks_own_cast(spark):
    texts = ["2026-06-01T00:00:00Z", "2026-06-01T00:00:00.5+05:30", "2026-06-01T00:00:00Z\n",
             "2026-06-01T00:00:00Z\r\n", "2026-06-01T00:00:00Z\u0085", "2026-02-30T00:00:00Z",
             "2028-02-29T23:59:59.999999-00:00", "2026-06-01T24:00:00Z",
             "2016-12-31T23:59:60Z", "2026-06-01T00:00:00+18:00", "2026-06-01T00:00:00+18:01",
             "2026-06-01T00:00:00+05:60", "2026-13-01T00:00:00Z", "0000-01-01T00:00:00Z",
             "9999-12-31T23:59:59.1234-14:00", "2026-06-01T00:00:00", "2026-06-01 00:00:00Z",
             "2026-06-01T00:00:00.1234567Z", " 2026-06-01T00:00:00Z",
             # read by position (no regular expression): shapes near the accepted one
             "2026-06-01T00:00:00.Z", "2026-06-01T00:00:00+0530", "2026-06-01T00:00:00z",
             "\uff12026-06-01T00:00:00Z", "2026-06-01T00:00:00.000001+00:00x",
             "2026-06-01T00:00:00.1-05:00", "2026-6-01T00:00:00Z"]
    lines = [json.dumps({**_EVENT, "event_time": t}) for t in texts]
    rows = (parse_events(_raw(spark, lines), SETTINGS.parse_config())
            .select("offset", F.unix_micros("event_time").alias("got"),
                    F.when(F.get_json_object("payload", "$.event_time").rlike(_ISO),
                           F.unix_micros(F.try_to_timestamp(
                               F.get_json_object("payload", "$.event_time"))))
                    .alias("spark"))
            .orderBy("offset").collect())
    assert [(texts[r.offset], r.got) for r in rows] == [(texts[r.offset], r.spark) for r in rows]
    # the cases are not all alike: some read, some refused
    assert 0 < sum(r.got is None for r in rows) < len(rows)


def test_text_fields_read_as_from_json_reads_them(spark):
    values: list[object] = [42, -0, 1.5e2, 6.760001337973969e16, True, "x",
                            {"a": [1, {"b": "\U00021043"}]}, [None, 2.5], "\u00e9"]
    lines = [json.dumps({**_EVENT, "key": v}, ensure_ascii=i % 2 == 0)
             for i, v in enumerate(values)]
    rows = (parse_events(_raw(spark, lines), SETTINGS.parse_config())
            .select("offset", "key", F.from_json("payload", "key string")["key"].alias("spark"))
            .orderBy("offset").collect())
    assert [(r.offset, r.key) for r in rows] == [(r.offset, r.spark) for r in rows]


def test_amounts_sent_as_numbers_are_judged_by_their_exact_value(spark):
    sent = ["12.5", "1.5e2", "12.5000", "-0", "1.005", "1.0005", "1.000000000000000001",
            "999999.9999999999999", "1e15", "NaN", "12345678.5"]
    lines = [json.dumps(_EVENT).replace('"1.00"', number) for number in sent]
    rows = (parse_events(_raw(spark, lines), SETTINGS.parse_config())
            .select("offset", F.col("amount").cast("string").alias("amount"), "reason")
            .orderBy("offset").collect())
    got = {sent[r.offset]: (r.amount, r.reason) for r in rows}
    assert got == {
        "12.5": ("12.500", None), "1.5e2": ("150.000", None), "12.5000": ("12.500", None),
        "-0": ("0.000", None),
        "1.005": ("1.005", "exceeds_minor_unit"),  # a whole number of thousandths, not cents
        "1.0005": (None, "bad_amount"), "1.000000000000000001": (None, "bad_amount"),
        "999999.9999999999999": (None, "bad_amount"), "1e15": (None, "bad_amount"),
        "NaN": (None, "bad_amount"),
        "12345678.5": ("12345678.500", "amount_out_of_range"),
    }


def test_the_jvm_reads_the_fields_the_schema_names(spark):
    parser = spark.sparkContext._jvm.reckon.jvm.ParseLine
    assert tuple(parser.REQUIRED) == REQUIRED_EVENT_FIELDS
    assert tuple(parser.FIELDS) == (*REQUIRED_EVENT_FIELDS, "partition", "arrival_time")


def test_a_filter_over_the_parse_still_parses_each_line_once(spark):
    """A filter on the parse's output must not be copied into the parse (the optimizer would
    call the parser once to filter and once to project)."""
    parsed = parse_events(_raw(spark, [json.dumps(_EVENT)]), SETTINGS.parse_config())
    plan = (parsed.filter(F.col("reason").isNull() & (F.col("event_time") > F.lit("2026-01-01")))
            ._jdf.queryExecution().optimizedPlan().toString())
    assert plan.count("reckon_parse_line(") == 1, plan
    assert parsed.filter(F.col("reason").isNull()).count() == 1
