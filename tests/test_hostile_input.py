"""Spark tier: hostile landing input never crashes the stream and never loses a line.

The corpus (tests/hostile.py) is written as landing files (including an empty file, a file of
blank lines, a CRLF file, a file opening with a BOM and one whose last line is truncated with
no newline) and run through the real streaming query (available-now) and, separately, through
BatchProcessor on a static DataFrame. Either way every line the landing source defines comes
out exactly once: valid in ``event_log`` with its raw payload (extra fields kept), or in
``quarantine`` with the reason the corpus names, its payload, partition, offset and arrival.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from hashlib import md5
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from app.settings import load_settings
from reckon.config import Settings
from reckon.timeutil import MICROS_PER_SECOND, parse_timestamp
from spark import tables as tb
from spark.batch_metrics import BatchMetrics
from spark.parse import QUARANTINE_REASONS
from spark.sources import RAW_COLUMNS, StreamSource
from spark.stream import BatchProcessor, run_stream
from tests.hostile import (
    FILE_MTIME,
    HostileLine,
    corpus_files,
    expected_lines,
    write_corpus,
)

FILES = corpus_files()
LINES = expected_lines(FILES)
MTIMES = {f.name: (FILE_MTIME + i) * MICROS_PER_SECOND for i, f in enumerate(FILES)}


def _settings(warehouse: Path) -> Settings:
    # every file in one micro-batch: hostile input must not need a batch of its own
    return load_settings(env={}, warehouse=str(warehouse), shuffle_partitions=2,
                         max_files_per_trigger=len(FILES))


def _key(input_file: str, offset: int) -> tuple[str, int]:
    return input_file.rsplit("/", 1)[-1], int(offset)


def _outcome(spark, warehouse: Path) -> dict[str, dict]:
    """Both tables as {(file, offset): row summary}: hashes, not 1 MB payloads."""
    def rows(name: str, *cols) -> dict:
        df = tb.read_table(spark, warehouse, name).select(
            "input_file", "offset", F.md5("payload").alias("md5"),
            F.length("payload").alias("length"), "partition",
            F.unix_micros("arrival_time").alias("arrival_us"), *cols)
        out: dict = {}
        for r in df.collect():
            assert _key(r.input_file, r.offset) not in out, f"{name}: line twice: {r}"
            out[_key(r.input_file, r.offset)] = r
        return out

    return {
        "quarantine": rows(tb.QUARANTINE, "reason", F.substring("detail", 1, 200).alias("detail"),
                           "payload_base64"),
        "event_log": rows(tb.EVENT_LOG, "event_id", F.col("amount").cast("string").alias("amount"),
                          "is_duplicate",
                          F.when(F.length("payload") < 1000, F.col("payload")).alias("payload")),
    }


@pytest.fixture(scope="module")
def streamed(spark, tmp_path_factory) -> tuple[dict, list[BatchMetrics]]:
    root = tmp_path_factory.mktemp("hostile-stream")
    write_corpus(root / "landing", FILES)
    metrics: list[BatchMetrics] = []
    run_stream(spark, _settings(root / "wh"), StreamSource(landing=str(root / "landing")),
               on_batch=metrics.append, timeout_seconds=600)
    return _outcome(spark, root / "wh"), metrics


@pytest.fixture(scope="module")
def processed(spark, tmp_path_factory) -> tuple[dict, list[BatchMetrics]]:
    wh = tmp_path_factory.mktemp("hostile-batch") / "wh"
    # each line's bytes as the landing source hands them over (not decoded: a line that is
    # not UTF-8 keeps its bytes)
    rows = [(bytearray(ln.line_bytes), None, offset,
             datetime.fromtimestamp(MTIMES[name] / 1e6, UTC), name)
            for name, offset, ln in LINES]
    raw = spark.createDataFrame(rows, "payload binary, transport_partition int, offset long, "
                                      "transport_time timestamp, input_file string")
    raw = raw.withColumn("payload", F.col("payload").cast("string"))
    metrics: list[BatchMetrics] = []
    BatchProcessor.of(spark, _settings(wh), query_id="hostile", on_batch=metrics.append)(
        raw.select(*RAW_COLUMNS), 0)
    return _outcome(spark, wh), metrics


def _expected_arrival(name: str, ln: HostileLine) -> int:
    return MTIMES[name] if ln.arrival is None else parse_timestamp(ln.arrival, "arrival")


def _check_every_line(outcome: dict) -> None:
    quarantine, log = outcome["quarantine"], outcome["event_log"]
    expected = {(name, offset): ln for name, offset, ln in LINES}
    # raw lines = valid + quarantined, exactly, and no row without a line
    assert set(quarantine) | set(log) == set(expected)
    assert not set(quarantine) & set(log)
    problems = []
    for (name, offset), ln in sorted(expected.items()):
        got = quarantine.get((name, offset)) or log[(name, offset)]
        text = ln.text
        want = {"md5": md5(text.encode("utf-8")).hexdigest(), "length": len(text),
                "partition": ln.partition, "arrival_us": _expected_arrival(name, ln)}
        have = {k: getattr(got, k) for k in want}
        if ln.reason is None:
            want |= {"table": "event_log", "event_id": ln.event_id, "amount": ln.amount,
                     "is_duplicate": False}
            have |= {"table": "event_log" if (name, offset) in log else "quarantine",
                     "event_id": getattr(got, "event_id", None),
                     "amount": getattr(got, "amount", None),
                     "is_duplicate": getattr(got, "is_duplicate", None)}
            if (name, offset) in quarantine:
                have["reason"] = f"{got.reason}: {got.detail}"
        else:
            # a line that is not UTF-8 keeps its exact bytes; no other line has a copy
            exact = ln.line_bytes if ln.reason == "invalid_utf8" else None
            kept = getattr(got, "payload_base64", None)
            want |= {"table": "quarantine", "reason": ln.reason, "bytes": exact}
            have |= {"table": "quarantine" if (name, offset) in quarantine else "event_log",
                     "reason": getattr(got, "reason", None),
                     "bytes": None if kept is None else base64.b64decode(kept)}
            if ln.detail_has and ln.detail_has not in (getattr(got, "detail", "") or ""):
                have["detail"] = got.detail
                want["detail"] = f"... {ln.detail_has} ..."
        if have != want:
            problems.append(f"{name}:{offset} {ln.name}: want {want}, got {have}")
    assert not problems, "\n".join(problems)


def _check_counts(outcome: dict, metrics: list[BatchMetrics]) -> None:
    valid = sum(1 for *_, ln in LINES if ln.reason is None)
    assert (len(outcome["event_log"]), len(outcome["quarantine"])) == (valid, len(LINES) - valid)
    assert sum(m.rows_in for m in metrics) == len(LINES)
    assert sum(m.valid for m in metrics) == valid
    assert sum(m.quarantined for m in metrics) == len(LINES) - valid


def test_corpus_covers_every_quarantine_reason():
    reasons = {ln.reason for *_, ln in LINES}
    assert reasons - {None} == set(QUARANTINE_REASONS)


def test_line_counting_of_the_landing_files():
    """An empty file is 0 lines; ``\\n\\n  \\n`` is 3 (two empty, one of spaces); a truncated
    last line with no newline is a line; CRLF files keep their line count."""
    by_file = {f.name: f for f in FILES}
    counts = {name: sum(1 for n, *_ in LINES if n == name) for name in by_file}
    assert counts["h-005-empty.ndjson"] == 0 and by_file["h-005-empty.ndjson"].content() == b""
    assert by_file["h-006-blank.ndjson"].content() == b"\n\n  \n"
    assert counts["h-006-blank.ndjson"] == 3
    assert not by_file["h-007-truncated.ndjson"].content().endswith(b"\n")
    assert counts["h-007-truncated.ndjson"] == 2
    assert by_file["h-003-times.ndjson"].content().startswith(b"\xef\xbb\xbf{")


def test_stream_over_hostile_files_accounts_for_every_line(streamed):
    outcome, metrics = streamed
    assert len(metrics) == 1  # one micro-batch, no crash, no retry
    _check_counts(outcome, metrics)
    _check_every_line(outcome)


def test_stream_keeps_extra_fields_in_the_event_log_payload(streamed):
    outcome, _ = streamed
    (row,) = [r for r in outcome["event_log"].values() if r.event_id == "h-extra-fields"]
    assert '"note":"kept"' in row.payload
    assert '"meta":{"nested":[1,2,{"deep":null}]}' in row.payload


def test_batch_processor_over_the_same_corpus_agrees(processed, streamed):
    outcome, metrics = processed
    _check_counts(outcome, metrics)
    _check_every_line(outcome)
    # the same rows, reasons and details as the streaming query
    strip = {t: {k: (r.reason, r.detail) if t == "quarantine" else (r.event_id, r.amount)
                 for k, r in outcome[t].items()} for t in outcome}
    assert strip == {t: {k: (r.reason, r.detail) if t == "quarantine" else (r.event_id, r.amount)
                         for k, r in streamed[0][t].items()} for t in streamed[0]}
