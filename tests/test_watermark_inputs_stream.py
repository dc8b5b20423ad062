"""Spark tier: the real batch processor with bounds per watermark input (issue 41) equals the
pure reference on random multi-source streams, records which input held the watermark back,
and writes into a watermark_progress table made before those columns existed."""

from __future__ import annotations

import random
from dataclasses import replace
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reckon.eventtime import (
    EventTimeRules,
    WatermarkState,
    advance_watermark,
    input_label,
    watermark_hold,
)
from reckon.reference import _observations, stream_outcome
from reckon.timeutil import to_micros
from spark import tables as tb
from tests.streamkit import (
    late_rows,
    provisional_rows,
    reference_late,
    reference_rows,
    stream_settings,
    watermarks,
)
from tests.test_replay_audit import S, random_batches, run_batches

BOUNDS = ["0s", "1s", "4s", "15s"]


def _multi_source(seed: int, batches: int) -> list[list]:
    """random_batches with a third source, "sat", that arrives 0-12 s later than the others
    (a slow producer sharing the partitions)."""
    rng = random.Random(seed)
    out = []
    for batch in random_batches(seed, n=24, partitions=2, batches=batches):
        moved = []
        for e in batch:
            if rng.random() < 0.35:
                e = replace(e, source="sat", arrival_time=e.arrival_time + rng.randint(0, 12) * S)
            moved.append(e)
        out.append(moved)
    return out


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(100, 10**6), batches=st.integers(2, 4),
       sat=st.sampled_from(BOUNDS), web=st.sampled_from(BOUNDS), p1=st.sampled_from(BOUNDS),
       inputs=st.sampled_from(["source", "partition"]))
def test_the_stream_equals_the_reference_with_a_bound_per_input(spark, tmp_path_factory, seed,
                                                                batches, sat, web, p1, inputs):
    rules = dict(window="10s", watermark_bound="2s", allowed_lateness="1s", dedup_horizon="4s", idle_timeout="1h",
                 watermark_inputs=inputs, watermark_bound_by_partition=f"1={p1}")
    if inputs == "source":
        rules["watermark_bound_by_source"] = f"sat={sat},web={web}"
    warehouse = tmp_path_factory.mktemp("bounds") / "wh"
    settings_ = stream_settings(warehouse, **rules)
    stream = _multi_source(seed, batches)
    run_batches(spark, settings_, stream)
    event_rules = settings_.event_time_rules()
    expected = stream_outcome(stream, event_rules)
    assert provisional_rows(spark, warehouse) == reference_rows(expected)
    assert late_rows(spark, warehouse) == reference_late(expected)
    assert watermarks(spark, warehouse) == expected.watermarks
    progress = (spark.read.format("delta").load(str(warehouse / tb.WATERMARK_PROGRESS))
                .orderBy("batch_id").collect())
    assert [(r.held_by, r.held_back_seconds) for r in progress] == _holds(stream, event_rules)


def _holds(stream, rules: EventTimeRules) -> list[tuple[str | None, Decimal | None]]:
    state, out = WatermarkState(), []
    for batch in stream:
        state = advance_watermark(state, _observations(batch), rules.watermark)
        hold = watermark_hold(state, rules.watermark)
        out.append((None, None) if hold is None else (
            input_label(hold.input),
            None if hold.held_back is None
            else (Decimal(hold.held_back) / S).quantize(Decimal("0.000001"))))
    return out


def test_a_progress_table_from_before_the_hold_columns_gains_them(spark, tmp_path):
    """A warehouse whose watermark_progress predates held_by and held_back_seconds is still
    this layout; its next batch adds the columns (older rows read null)."""
    warehouse = tmp_path / "wh"
    old = tb.SCHEMAS[tb.WATERMARK_PROGRESS]
    tb.ensure_table(spark, warehouse, tb.WATERMARK_PROGRESS,
                    type(old)([f for f in old.fields if f.name not in ("held_by",
                                                                        "held_back_seconds")]))
    tb.require_layout(spark, warehouse)
    settings_ = stream_settings(warehouse, window="10s", watermark_bound="2s", idle_timeout="1h")
    stream = _multi_source(7, 2)
    run_batches(spark, settings_, stream)
    tb.require_layout(spark, warehouse)
    rows = spark.read.format("delta").load(str(warehouse / tb.WATERMARK_PROGRESS)).collect()
    assert len(rows) == 2 and all(r.held_by and r.held_by.startswith("partition ") for r in rows)
    assert [to_micros(r.watermark) for r in sorted(rows, key=lambda r: r.batch_id)] == \
        stream_outcome(stream, settings_.event_time_rules()).watermarks
