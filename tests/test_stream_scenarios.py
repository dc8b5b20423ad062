"""Spark tier: scenario transcripts through the real streaming job (landing source,
one file per micro-batch) give exactly the reference's tables."""

from __future__ import annotations

import pytest

from reckon.eventtime import EventTimeRules
from reckon.reference import stream_outcome
from tests.scenarios import BASE, SCENARIOS, S, scenario_totals
from tests.streamkit import (
    late_rows,
    provisional_rows,
    reference_late,
    reference_rows,
    watermarks,
)


@pytest.mark.parametrize("case", SCENARIOS, ids=lambda c: c.name)
def test_scenario_through_the_streaming_job(spark, streamed_scenario, case):
    warehouse = streamed_scenario(case.name).warehouse_path

    expected = stream_outcome(case.batches, EventTimeRules.parse(**case.rules))
    got = provisional_rows(spark, warehouse)
    assert got == reference_rows(expected)
    # and the transcript's own expectations, in its units
    assert {((k[0] - BASE) // S, k[1], k[2]): v[:4] for k, v in got.items()} \
        == scenario_totals(case)
    assert late_rows(spark, warehouse) == reference_late(expected)
    assert sorted((r[0], (r[1] - BASE) // S, int(r[4])) for r in late_rows(spark, warehouse)) \
        == sorted(case.late)
    assert watermarks(spark, warehouse) == expected.watermarks
    if case.watermarks is not None:
        assert [None if w is None else (w - BASE) // S for w in watermarks(spark, warehouse)] \
            == case.watermarks
    quarantine = spark.read.format("delta").load(str(warehouse / "quarantine"))
    assert sorted((r.event_id, r.reason) for r in quarantine.collect()) == \
        sorted((e.event_id, reason) for e, reason, _ in expected.quarantined)
    assert sorted(e.event_id for e, _, _ in expected.quarantined) == sorted(case.quarantined)
    # nothing vanishes: every line counted, late, duplicate or quarantined, per batch
    progress = spark.read.format("delta").load(str(warehouse / "watermark_progress")).collect()
    for row in progress:
        assert row.rows_in == row.valid + row.quarantined, row
        assert row.valid == row.on_time + row.revised + row.late + row.duplicates, row
    assert sum(r.rows_in for r in progress) == sum(len(b) for b in case.batches)
    # and each disposition's count is the reference's
    assert (sum(r.on_time + r.revised for r in progress), sum(r.revised for r in progress),
            sum(r.late for r in progress), sum(r.duplicates for r in progress)) == (
        expected.counted, expected.revised, len(expected.late), len(expected.duplicates))
