"""Batch marks a stream commit carries in its userMetadata (spark/tables.py; fast tier), and the
concurrent writes of one batch they make safe (Spark tier)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark.tables import batch_mark, parse_batch_mark


@given(st.text(min_size=1), st.sampled_from(["event_log", "provisional_totals"]),
       st.integers(0, 2**62))
def test_a_mark_reads_back_as_what_was_written(app_id, table, batch_id):
    assert parse_batch_mark(batch_mark(app_id, table, batch_id)) == (app_id, table, batch_id)


def test_other_user_metadata_is_no_mark():
    for text in (None, "", "nightly replay", "reckon_batch", json.dumps({"reckon_batch": 3}),
                 json.dumps({"reckon_batch": {"app": "a", "table": "t"}}),
                 json.dumps({"reckon_batch": {"app": "a", "table": "t", "batch": "x"}}), "{"):
        assert parse_batch_mark(text) is None, text


@pytest.mark.spark
def test_a_failed_write_is_raised_only_after_every_write_of_the_batch_ended(spark):
    """The stream's concurrent writes: a batch that fails never leaves a write running into its
    own re-run, and the failure is not swallowed."""
    import threading
    import time
    from contextlib import nullcontext

    from spark.stream import _ConcurrentWrites

    slow_done = threading.Event()
    steps: list[str] = []

    def step(name: str):
        steps.append(name)
        return nullcontext()

    def slow() -> None:
        time.sleep(0.5)
        slow_done.set()

    def failing() -> None:
        raise RuntimeError("MERGE failed")

    writes = _ConcurrentWrites(step)
    writes.start("event_log", slow)
    writes.start("merge", failing)
    writes.wait()
    assert slow_done.is_set()
    assert sorted(steps) == ["event_log", "merge"]
    with pytest.raises(RuntimeError, match="MERGE failed"):
        writes.raise_first_error()
