"""Fast tier: the pure reference on the scenario transcripts and on random streams."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reckon.eventtime import EventTimeRules
from reckon.reference import Event, canonical_totals, run_stream
from tests.scenarios import BASE, SCENARIOS, S


@pytest.mark.parametrize("case", SCENARIOS, ids=lambda c: c.name)
def test_scenarios_through_the_reference(case):
    out = run_stream(case.batches, EventTimeRules.parse(**case.rules))
    got = {((w.start - BASE) // S, k): (str(r.total), r.count, r.status.value, r.revision)
           for (w, k), r in out.totals.items()}
    assert got == case.totals
    assert sorted((r.event.event_id, (r.window.start - BASE) // S, r.lateness // S)
                  for r in out.late) == sorted(case.late)
    assert sorted(e.event_id for e, _, _ in out.quarantined) == sorted(case.quarantined)
    if case.watermarks is not None:
        assert [None if w is None else (w - BASE) // S for w in out.watermarks] == \
            case.watermarks


def test_worked_example_watermark_trace():
    out = run_stream(SCENARIOS[0].batches, EventTimeRules.parse(window="10s", lateness="3s"))
    assert [None if w is None else (w - BASE) // S for w in out.watermarks] == \
        [-2, 0, 4, 9, 12, 12, 19, 23, 23]


events = st.builds(
    lambda i, k, cents, t, d, p, dup: (i, k, cents, t, d, p, dup),
    st.integers(0, 40), st.sampled_from(["a", "b", "c"]), st.integers(1, 10_000),
    st.integers(0, 120), st.integers(0, 30), st.integers(0, 2), st.booleans(),
)


def _stream(raw):
    out, offsets = [], {}
    for i, k, cents, t, d, p, _ in raw:
        offsets[p] = offsets.get(p, -1) + 1
        out.append(Event(f"id{i}", k, Decimal(cents) / 100, BASE + t * S, BASE + (t + d) * S, p,
                         offsets[p]))
    return sorted(out, key=lambda e: (e.arrival_time, e.partition, e.offset))


@settings(max_examples=200, deadline=None)
@given(st.lists(events, max_size=40), st.integers(1, 6), st.sampled_from(["0s", "4s"]))
def test_nothing_vanishes_and_canonical_equals_provisional_plus_late_minus_duplicates(
        raw, cut, grace):
    stream = _stream(raw)
    batches = [stream[i:i + cut] for i in range(0, len(stream), cut)]
    rules = EventTimeRules.parse(window="10s", lateness="3s", grace=grace, dedup_horizon="1h",
                                 idle_timeout="1h")
    out = run_stream(batches, rules)
    late = len(out.late)
    assert out.valid == out.counted + late + len(out.duplicates)
    # payload-consistent copies only (same id -> same payload here?) then no conflicts:
    canon, conflicts = canonical_totals(stream, rules)
    if not conflicts:
        for (w, k), row in canon.items():
            prov = out.totals.get((w, k))
            late_sum = sum((r.event.amount for r in out.late if (r.window, r.event.key) == (w, k)),
                           Decimal(0))
            assert row.total == (prov.total if prov else 0) + late_sum
