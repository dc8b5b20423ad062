"""Spark tier: SIGKILL the streaming process mid-run, restart from the checkpoint, finish; every
table equals an uninterrupted run's (no loss, no double count). Exactly once in practice."""

from __future__ import annotations

import pytest

from app.generate import GeneratorConfig, generate_landing
from app.settings import load_settings
from spark import tables as tb
from spark.sources import StreamSource
from spark.stream import run_stream
from tests.stream_chaos import (
    VOLATILE,
    kill_during,
    run_to_end,
    stream_command,
    stream_env,
    table_snapshot,
)

# Soak tier (~3 min): the default tier checks the same mechanism without a process kill
# (tests/test_replay_audit.py::test_a_re_run_batch_changes_nothing: a fresh processor re-runs
# the last batch and changes nothing); tests/test_chaos.py kills the stream repeatedly.
pytestmark = [pytest.mark.slow, pytest.mark.soak]


def test_killed_stream_restarts_to_the_same_tables(spark, tmp_path):
    landing = tmp_path / "landing"
    manifest = generate_landing(landing, GeneratorConfig(events=600, partitions=3, keys=12,
                                              lines_per_file=150, rate=50.0, seed=11,
                                              duplicate_rate=0.03, malformed_rate=0.01))
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    cmd = stream_command(landing, killed)
    assert kill_during(cmd, killed, after_batches=1, extra_delay=1.5), \
        "the stream finished before it could be killed: give it more files"
    run_to_end(cmd)  # restart from the same checkpoint and finish
    # the uninterrupted run, in this process, with the settings the command has: its
    # environment (tests/stream_chaos.py: one file per micro-batch, so the same batches) and
    # the expected partitions it reads from the landing's manifest
    settings = load_settings(env=stream_env(), warehouse=str(clean),
                             expected_partitions=tuple(manifest.expected_partitions))
    run_stream(spark, settings, StreamSource(landing=str(landing)), on_batch=None)
    for name in VOLATILE:
        assert table_snapshot(spark, killed, name) == table_snapshot(spark, clean, name), name
    # and it really processed everything: nothing vanished
    progress = spark.read.format("delta").load(str(killed / tb.WATERMARK_PROGRESS))
    sums = progress.groupBy().sum("rows_in", "valid", "quarantined").first()
    assert sums[0] == sums[1] + sums[2] == sum(
        len(p.read_text().splitlines()) for p in landing.glob("events-*.ndjson"))
