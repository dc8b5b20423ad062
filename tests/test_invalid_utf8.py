"""Bytes that are not UTF-8 are quarantined with their bytes, never merged (issue 60, point 6).

The probe: a landing file whose keys are ``merchant-\\xff``, ``merchant-\\xfe`` and a real
``merchant-\\ufffd`` (bytes ``ef bf bd``). Spark's text reader keeps a line's raw bytes; the
landing source's split and the parser used to decode them, every invalid byte became U+FFFD,
and the three merchants were one key with 3.00 booked. Now the two lines that are not UTF-8
are ``invalid_utf8`` in quarantine (``payload_base64`` their exact bytes, ``payload`` with
U+FFFD to read), the real U+FFFD is an ordinary merchant, and the line counts add up. The
same holds for a Kafka record's value (binary), for the nightly replay (it reads the event
log, which never holds such a line) and in the pure reference (``reckon.reference``:
``landing_file_lines``, ``line_problem``), property-tested against the landing source.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from reckon.reference import landing_file_lines, line_problem

DAY = date(2026, 1, 1)
REAL = "merchant-\ufffd"


def _line(i: int, key: bytes) -> bytes:
    return json.dumps({"event_id": f"u{i}", "key": "KEY", "amount": "1.00", "currency": "USD",
                       "event_time": f"2026-01-01T00:00:0{i}Z", "source": "pos",
                       "partition": 0, "arrival_time": "2026-01-01T00:00:09Z"},
                      separators=(",", ":")).encode().replace(b"KEY", key)


PROBE = [_line(1, b"merchant-\xff"), _line(2, b"merchant-\xfe"), _line(3, REAL.encode())]


def test_the_reference_quarantines_bytes_that_are_not_utf8_and_keeps_a_real_fffd():
    assert [line_problem(b) for b in PROBE] == ["invalid_utf8", "invalid_utf8", None]
    # overlong, a UTF-16 surrogate, beyond U+10FFFF, a cut sequence: not UTF-8 either
    for bad in (b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"):
        assert line_problem(b"{" + bad + b"}") == "invalid_utf8", bad
    content = b"\xef\xbb\xbf" + b"\r\n".join(PROBE) + b"\r\n"
    assert landing_file_lines(content) == PROBE
    assert landing_file_lines(b"") == [] and landing_file_lines(b"\n\n") == [b"", b""]


# ----------------------------------------------------------------- the landing source, fuzzed

_piece = st.one_of(
    st.sampled_from([*PROBE, b"", b"  ", b"\xef\xbb\xbf", b"\xff", b"\xc3", b"\xed\xa0\x80",
                     b"\xe2\x82\xac", b"\xf0\x9f\x92\xb6", b"\xc3\x85", b"\x85",
                     b"\xe2\x80\xa8", b"\r", b"\x00"]),
    st.binary(max_size=12))


@st.composite
def _file(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.lists(_piece, max_size=4).map(b"".join), max_size=6))
    sep = draw(st.sampled_from([b"\n", b"\r\n"]))
    body = sep.join(lines) + (sep if lines and draw(st.booleans()) else b"")
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + body


@pytest.mark.spark
@settings(max_examples=5, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(files=st.lists(_file(), min_size=3, max_size=6))
def test_the_landing_source_cuts_and_judges_bytes_as_the_reference_does(spark, tmp_path_factory,
                                                                         files):
    """Files of random bytes (valid and invalid UTF-8, BOMs, CRLF, NEL, U+2028, NUL) read by
    the landing source and parsed: each line's bytes are the reference's, byte for byte, and
    it is invalid_utf8 exactly when the reference says so; the quarantine's base64 gives the
    bytes back."""
    from app.settings import load_settings
    from spark.parse import parse_events, quarantine_payload
    from spark.sources import landing_lines

    folder = tmp_path_factory.mktemp("bytes")
    for i, content in enumerate(files):
        (folder / f"f{i}.ndjson").write_bytes(content)
    read = spark.read.format("text").option("wholetext", "true").load(str(folder))
    parsed = parse_events(landing_lines(read), load_settings(env={}).parse_config())
    rows = parsed.select("input_file", "offset", "reason",
                         F.base64(F.col("payload").cast("binary")).alias("raw"),
                         *quarantine_payload()).collect()
    got = {(r.input_file.rsplit("/", 1)[-1], r.offset):
           (base64.b64decode(r.raw), r.reason == "invalid_utf8",
            None if r.payload_base64 is None else base64.b64decode(r.payload_base64))
           for r in rows}
    want = {(f"f{i}.ndjson", n): (b, line_problem(b) is not None,
                                  b if line_problem(b) is not None else None)
            for i, content in enumerate(files) for n, b in enumerate(landing_file_lines(content))}
    assert got == want


# ----------------------------------------------------------------- the stream, as a user runs it

@pytest.fixture(scope="module")
def probe(spark, tmp_path_factory) -> dict:
    """The probe's landing file streamed by ``run_stream`` into a warehouse whose quarantine
    table was written by the reckon before ``payload_base64`` (it gains the column), then the
    day replayed from the event log."""
    from pyspark.sql import types as T

    from app.settings import load_settings
    from spark import tables as tb
    from spark.replay import replay_day
    from spark.sources import StreamSource
    from spark.stream import run_stream

    root = tmp_path_factory.mktemp("utf8")
    landing, wh = root / "landing", root / "wh"
    landing.mkdir()
    (landing / "a.ndjson").write_bytes(b"\n".join(PROBE) + b"\n")
    os.utime(landing / "a.ndjson", (1_767_225_630, 1_767_225_630))
    before = T.StructType([f for f in tb.SCHEMAS[tb.QUARANTINE].fields
                           if f.name != "payload_base64"])
    tb.ensure_table(spark, wh, tb.QUARANTINE, before)
    settings = load_settings(env={}, warehouse=str(wh), shuffle_partitions=2)
    metrics: list = []
    run_stream(spark, settings, StreamSource(landing=str(landing)), on_batch=metrics.append)
    replay_day(spark, settings.replay_config(), DAY)
    return {
        "wh": wh, "metrics": metrics,
        "deltas": {(r.key, r.currency): r.total_amount
                   for r in tb.read_table(spark, wh, tb.PROVISIONAL_DELTAS).collect()},
        "canonical": {(r.key, r.currency): (r.total_amount, r.event_count)
                      for r in tb.read_table(spark, wh, tb.CANONICAL_TOTALS).collect()},
        "quarantine": sorted(tb.read_table(spark, wh, tb.QUARANTINE).collect(),
                             key=lambda r: r.offset),
        "log": [r.event_id for r in tb.read_table(spark, wh, tb.EVENT_LOG).collect()],
    }


@pytest.mark.spark
def test_invalid_bytes_never_merge_merchants_in_the_stream_or_the_replay(probe):
    assert probe["deltas"] == {(REAL, "USD"): Decimal("1.000")}  # was 3.000: three merged
    assert probe["canonical"] == {(REAL, "USD"): (Decimal("1.000"), 1)}
    assert probe["log"] == ["u3"]
    # nothing vanishes: 3 lines = 1 valid + 2 quarantined
    (m,) = probe["metrics"]
    assert (m.rows_in, m.valid, m.quarantined) == (3, 1, 2)


@pytest.mark.spark
def test_the_quarantine_keeps_the_exact_bytes_and_says_why(probe):
    rows = probe["quarantine"]
    assert [(r.reason, r.offset, r.event_id, r.origin) for r in rows] == [
        ("invalid_utf8", 0, "u1", "stream"), ("invalid_utf8", 1, "u2", "stream")]
    assert [base64.b64decode(r.payload_base64) for r in rows] == PROBE[:2]
    assert [r.payload for r in rows] == [b.decode("utf-8", "replace") for b in PROBE[:2]]
    assert rows[0].detail == (f"line is not valid UTF-8 ({len(PROBE[0])} bytes): its exact "
                              "bytes are in payload_base64, payload shows them as U+FFFD")
    assert all(r.event_time is not None for r in rows)  # its day: the replay and explain


@pytest.mark.spark
def test_reckon_sql_and_explain_show_the_quarantined_bytes(probe, capsys):
    """What a user reads: ``reckon sql`` gives the base64 back, ``unbase64`` the bytes; ``reckon
    explain`` of the real U+FFFD merchant's window lists the two lines that were kept out."""
    from app.cli import main

    wh = str(probe["wh"])
    assert main(["sql", "--warehouse", wh, "--json",
                 'SELECT "offset", payload_base64, hex(from_base64(payload_base64)) AS hex '
                 'FROM quarantine ORDER BY "offset"']) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["rows"] if isinstance(out, dict) else out
    assert [r["hex"] for r in rows] == [b.hex().upper() for b in PROBE[:2]], rows
    assert main(["explain", "--warehouse", wh, "--key", REAL,
                 "--window", "2026-01-01T00:00:00Z"]) == 0
    told = capsys.readouterr().out
    assert told.count("invalid_utf8") == 2, told


@pytest.mark.spark
def test_a_kafka_value_that_is_not_utf8_is_quarantined_with_its_bytes(spark):
    """A Kafka record's value is binary: read as the stream and the replay read it
    (``kafka_raw_columns``) and parsed, the same three records give the same verdicts."""
    from app.settings import load_settings
    from spark.parse import parse_events, quarantine_payload
    from spark.sources import RAW_COLUMNS, kafka_raw_columns

    at = datetime(2026, 1, 1, 0, 0, 9, tzinfo=UTC)
    records = spark.createDataFrame(
        [(bytearray(b), 0, i, at) for i, b in enumerate(PROBE)],
        "value binary, partition int, offset long, timestamp timestamp")
    parsed = parse_events(records.select(*kafka_raw_columns("events")).select(*RAW_COLUMNS),
                          load_settings(env={}).parse_config())
    rows = parsed.select("offset", "reason", "key", *quarantine_payload()).orderBy("offset")
    got = [(r.reason, r.key if r.reason is None else None,
            r.payload_base64 and base64.b64decode(r.payload_base64)) for r in rows.collect()]
    assert got == [("invalid_utf8", None, PROBE[0]), ("invalid_utf8", None, PROBE[1]),
                   (None, REAL, None)]


@pytest.mark.spark
def test_a_quarantine_table_from_before_the_column_takes_a_replays_write(spark, tmp_path):
    """A warehouse written before ``payload_base64`` (the nightly replay may write its
    quarantine before the upgraded stream's first batch): the replay's day overwrite adds the
    column, the old rows read it as null, and the layout check accepts the old table."""
    from pyspark.sql import types as T

    from spark import tables as tb

    wh = tmp_path / "wh"
    before = T.StructType([f for f in tb.SCHEMAS[tb.QUARANTINE].fields
                           if f.name != "payload_base64"])
    at = datetime(2026, 1, 1, 0, 0, 9)
    old = spark.createDataFrame([("bad_amount", "x", "{}", 0, 1, at, "f", 1, "stream", at,
                                  "q1", None, DAY)], before)
    tb.ensure_table(spark, wh, tb.QUARANTINE, before)
    old.write.format("delta").mode("append").save(tb.table_path(wh, tb.QUARANTINE))
    tb.require_layout(spark, wh, [tb.QUARANTINE])
    replayed = old.withColumns({"origin": F.lit("replay:2026-01-01"), "event_id": F.lit("q2"),
                                "payload_base64": F.lit("/w==")})
    tb.replace_rows(tb.conform(replayed, tb.QUARANTINE), wh, tb.QUARANTINE,
                    "origin = 'replay:2026-01-01'")
    rows = tb.read_table(spark, wh, tb.QUARANTINE).orderBy("event_id").collect()
    assert [(r.event_id, r.payload_base64) for r in rows] == [("q1", None), ("q2", "/w==")]


@pytest.mark.spark
def test_a_lone_surrogate_escape_is_quarantined_as_the_reference_says(spark):
    """``"merchant-\\ud800"`` and ``"merchant-\\udfff"`` are no text (half a UTF-16 pair):
    read, each became ``merchant-?`` and merged with a real ``merchant-?``. The parser
    quarantines them as ``lone_surrogate`` exactly where the reference (Python's JSON reading)
    finds a lone surrogate; a whole pair, an escaped backslash and a real ``?`` are keys."""
    from app.settings import load_settings
    from spark.parse import parse_events

    keys = ["merchant-\\ud800", "merchant-\\udfff", "merchant-?", "\\ud83d\\udcb6",
            "\\\\ud800", "\\\\\\ud800", "\\udcb6\\ud83d", "\\u00e9"]
    lines = [_line(i % 10, b"KEY").replace(b'"KEY"', f'"{k}"'.encode()) for i, k in enumerate(keys)]
    lines.append(b'{"n":{"deep":["\\ud800"]},' + _line(0, b"k")[1:])
    at = datetime(2026, 1, 1, 0, 0, 9, tzinfo=UTC)
    raw = spark.createDataFrame([(ln.decode(), None, i, at, "f") for i, ln in enumerate(lines)],
                                "payload string, transport_partition int, offset long, "
                                "transport_time timestamp, input_file string")
    got = {r.offset: (r.reason, r.key, r.detail)
           for r in parse_events(raw, load_settings(env={}).parse_config()).collect()}
    assert {i: got[i][0] for i in got} == {i: line_problem(b) for i, b in enumerate(lines)}
    assert [got[i][0] for i in range(len(keys))] == [
        "lone_surrogate", "lone_surrogate", None, None, None, "lone_surrogate",
        "lone_surrogate", None]
    assert got[2][1] == "merchant-?" and got[3][1] == "\U0001f4b6"
    assert got[0][2] == "a \\u escape of a lone UTF-16 surrogate, which is no character: \\ud800"
