"""Fast tier: watermark bounds per input (issue 41). One bound for all reproduces today's
watermark exactly; inputs by (partition, source) with their own bounds follow the rule."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reckon.errors import ConfigError
from reckon.eventtime import (
    EventTimeRules,
    Hold,
    PartitionObservation,
    PartitionProgress,
    WatermarkPolicy,
    WatermarkState,
    advance_watermark,
    watermark_hold,
    watermark_series,
)
from reckon.reference import Event, stream_outcome

S = 1_000_000
BASE = 1_767_225_600 * S
NO_WM = np.iinfo(np.int64).min
SOURCES = ("radar", "http", "sat")


# ------------------------------------------------------------------ today's rule, frozen
@dataclass(frozen=True)
class _Today:
    """The watermark rule as it was before bounds per input (one bound L for every
    partition), kept verbatim as the oracle that the default must reproduce."""

    partitions: dict
    first: int | None = None
    clock: int | None = None
    watermark: int | None = None


def _today_advance(state: _Today, observations, lateness, idle_timeout, expected) -> _Today:
    partitions = dict(state.partitions)
    first, clock = state.first, state.clock
    for partition, t, a, a0 in observations:
        old = partitions.get(partition)
        partitions[partition] = (t if old is None else max(old[0], t),
                                 a if old is None else max(old[1], a))
        first = min(a0, a) if first is None else min(first, a0, a)
        clock = a if clock is None else max(clock, a)
    idle = set()
    if clock is not None:
        for p in set(partitions) | set(expected):
            since = partitions[p][1] if p in partitions else first
            if since is not None and clock - since >= idle_timeout:
                idle.add(p)
    waiting = [p for p in set(partitions) | set(expected) if p not in partitions and p not in idle]
    active = [p for p in partitions if p not in idle]
    if waiting or not active:
        return _Today(partitions, first, clock, state.watermark)
    candidate = min(partitions[p][0] for p in active) - lateness
    wm = candidate if state.watermark is None else max(state.watermark, candidate)
    return _Today(partitions, first, clock, wm)


observation = st.tuples(st.integers(0, 3), st.integers(0, 120), st.integers(0, 100),
                        st.integers(0, 5), st.sampled_from(SOURCES))
batches_st = st.lists(st.lists(observation, max_size=4), max_size=14)


def _observations(batch, clock0):
    """(partition, event s, arrival s, arrival spread s, source) -> observations."""
    return [PartitionObservation(p, BASE + t * S, BASE + (clock0 + a + d) * S,
                                 BASE + (clock0 + a) * S, source)
            for p, t, a, d, source in batch]


@settings(max_examples=300, deadline=None)
@given(batches_st, st.integers(0, 8), st.sampled_from([5, 20, 10**6]),
       st.lists(st.integers(0, 3), max_size=3), st.sets(st.integers(0, 3)))
def test_bounds_all_equal_to_L_reproduce_todays_watermark_exactly(batches, lateness_s, idle_s,
                                                                  expected, overridden):
    lateness, idle = lateness_s * S, idle_s * S
    policy = WatermarkPolicy(lateness, idle, tuple(expected),
                             partition_bounds=tuple((p, lateness) for p in overridden))
    assert policy.uniform
    state, today = WatermarkState(), _Today({})
    for batch in batches:
        obs = _observations(batch, 0)
        state = advance_watermark(state, obs, policy)
        today = _today_advance(today, [(o.partition, o.max_event_time, o.max_arrival_time,
                                        o.min_arrival_time) for o in obs],
                               lateness, idle, set(expected))
        assert state.watermark == today.watermark
        assert {p: (pr.max_event_time, pr.last_arrival) for p, pr in state.partitions.items()
                } == today.partitions
        assert (state.first_arrival, state.clock) == (today.first, today.clock)
        assert "sources" not in state.to_json()  # the recorded state is today's JSON
    assert WatermarkState.from_json(state.to_json()) == state


def _events(batches):
    """Flatten batches into one event per batch, in order: (t, a, partition, source)."""
    out, clock = [], 0
    for batch in batches:
        for p, t, a, d, source in batch:
            clock += a % 7
            out.append((BASE + t * S, BASE + (clock + d) * S, p, source))
    return out


def _iterate(events, policy):
    state, before = WatermarkState(), []
    for t, a, p, source in events:
        before.append(NO_WM if state.watermark is None else state.watermark)
        state = advance_watermark(state, [PartitionObservation(p, t, a, source=source)], policy)
    return before, state


bounds_st = st.dictionaries(st.sampled_from(SOURCES), st.integers(0, 30).map(lambda s: s * S),
                            max_size=3)
part_bounds_st = st.dictionaries(st.integers(0, 3), st.integers(0, 30).map(lambda s: s * S),
                                 max_size=2)


@settings(max_examples=300, deadline=None)
@given(batches_st, st.integers(0, 8), st.sampled_from([5, 20, 10**6]),
       st.lists(st.integers(0, 3), max_size=3), bounds_st, part_bounds_st, st.booleans(),
       st.sampled_from([1, 3, 64]))
def test_watermark_series_follows_each_inputs_bound(batches, lateness_s, idle_s, expected,
                                                    by_source_bounds, by_partition, by_source,
                                                    cells):
    """The numpy per-event series is advance_watermark one event at a time, with inputs by
    partition or by (partition, source) and a bound of their own."""
    policy = WatermarkPolicy(lateness_s * S, idle_s * S, tuple(expected), by_source=by_source,
                             partition_bounds=tuple(by_partition.items()),
                             source_bounds=tuple(by_source_bounds.items()) if by_source else ())
    events = _events(batches)
    want_before, want_state = _iterate(events, policy)
    t = np.array([e[0] for e in events], dtype=np.int64)
    a = np.array([e[1] for e in events], dtype=np.int64)
    p = np.array([e[2] for e in events], dtype=np.int64)
    source = [e[3] for e in events]
    before, state = watermark_series(t, a, p, policy, source=source, max_cells=cells)
    assert before.tolist() == want_before
    assert state == want_state
    k = len(events) // 2
    _, mid = watermark_series(t[:k], a[:k], p[:k], policy, source=source[:k])
    rest, end = watermark_series(t[k:], a[k:], p[k:], policy, mid, source=source[k:])
    assert rest.tolist() == want_before[k:] and end == want_state


@settings(max_examples=200, deadline=None)
@given(batches_st, bounds_st, part_bounds_st, st.integers(0, 8))
def test_inputs_by_source_obey_the_min_rule_over_their_own_bounds(batches, by_source_bounds,
                                                                  by_partition, lateness_s):
    """No idle input (timeout out of reach), none expected: after each batch the watermark
    is max(previous, min over the (partition, source) inputs of max_i - L_i), with L_i the
    source's override, else the partition's, else the default; a figure kept here."""
    policy = WatermarkPolicy(lateness_s * S, 10**16, by_source=True,
                             partition_bounds=tuple(by_partition.items()),
                             source_bounds=tuple(by_source_bounds.items()))
    state, previous, maxima = WatermarkState(), None, {}
    for batch in batches:
        obs = _observations(batch, 0)
        state = advance_watermark(state, obs, policy)
        for o in obs:
            key = (o.partition, o.source)
            maxima[key] = max(maxima.get(key, o.max_event_time), o.max_event_time)
        if maxima:
            floor = min(t - by_source_bounds.get(s, by_partition.get(p, lateness_s * S))
                        for (p, s), t in maxima.items())
            assert state.watermark == (floor if previous is None else max(previous, floor))
        previous = state.watermark
    assert WatermarkState.from_json(state.to_json()) == state


@settings(max_examples=100, deadline=None)
@given(batches_st, st.integers(0, 8), st.sampled_from([5, 20, 10**6]))
def test_one_source_per_partition_by_source_is_by_partition(batches, lateness_s, idle_s):
    """Inputs by source, each partition carrying one source: the same watermark as inputs by
    partition (the pair and the partition are the same input)."""
    one = [[(p, t, a, d, SOURCES[p % 3]) for p, t, a, d, _ in batch] for batch in batches]
    events = _events(one)
    plain, _ = _iterate(events, WatermarkPolicy(lateness_s * S, idle_s * S))
    paired, _ = _iterate(events, WatermarkPolicy(lateness_s * S, idle_s * S, by_source=True))
    assert plain == paired


def test_a_slow_source_on_a_shared_partition_holds_back_only_by_its_own_bound():
    """Partition 0 carries radar (bound 1 s) and sat (bound 10 s). Inputs by partition with
    one 10 s bound: WM = 50 - 10 = 40. By source: min(50 - 1, 45 - 10) = 35: sat holds it,
    by 14 s; radar's events no longer wait 10 s for themselves."""
    obs = [PartitionObservation(0, 50 * S, 60 * S, source="radar"),
           PartitionObservation(0, 45 * S, 60 * S, source="sat")]
    policy = WatermarkPolicy(1 * S, 60 * S, by_source=True, source_bounds=(("sat", 10 * S),))
    state = advance_watermark(WatermarkState(), obs, policy)
    assert state.watermark == 35 * S
    assert watermark_hold(state, policy) == Hold((0, "sat"), 35 * S, 14 * S)
    assert state.idle_partitions(policy) == ()
    one = advance_watermark(WatermarkState(), obs, WatermarkPolicy(10 * S, 60 * S))
    assert one.watermark == 40 * S


def test_an_expected_partition_not_yet_seen_holds_the_watermark():
    policy = WatermarkPolicy(0, 60 * S, (0, 1), by_source=True)
    state = advance_watermark(WatermarkState(), [PartitionObservation(0, 5 * S, 5 * S,
                                                                      source="a")], policy)
    assert state.watermark is None
    assert watermark_hold(state, policy) == Hold(1, None, None)


def test_an_idle_source_stops_holding_back_while_its_partition_lives():
    policy = WatermarkPolicy(0, 10 * S, by_source=True)
    state = WatermarkState({(0, "a"): PartitionProgress(100 * S, 100 * S),
                            (0, "b"): PartitionProgress(50 * S, 85 * S)}, 0, 100 * S)
    assert state.idle_inputs(policy) == ((0, "b"),)
    assert state.idle_partitions(policy) == ()
    state = advance_watermark(state, [PartitionObservation(0, 101 * S, 101 * S, source="a")],
                              policy)
    assert state.watermark == 101 * S


def test_bad_bounds_are_one_clear_error():
    with pytest.raises(ConfigError, match="need watermark_inputs"):
        WatermarkPolicy(0, S, source_bounds=(("sat", S),))
    with pytest.raises(ConfigError, match="partition 2"):
        WatermarkPolicy(0, S, partition_bounds=((2, -1),))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2), st.sampled_from(SOURCES)),
                max_size=25), st.integers(0, 5))
def test_the_reference_with_overrides_equal_to_L_is_todays_stream(rows, lateness_s):
    """stream_outcome under a policy whose every override equals L gives what one bound gives."""
    events = [Event(f"e{i}", "k", __import__("decimal").Decimal("1.00"), BASE + t * S,
                    BASE + i * S, partition=p, source=s) for i, (t, p, s) in enumerate(rows)]
    batches = [events[i:i + 3] for i in range(0, len(events), 3)]
    plain = EventTimeRules.parse(watermark_bound=lateness_s * S, idle_timeout="5s")
    same = EventTimeRules.parse(watermark_bound=lateness_s * S, idle_timeout="5s",
                                bound_by_partition={0: lateness_s * S, 2: lateness_s * S})
    a, b = stream_outcome(batches, plain), stream_outcome(batches, same)
    assert a.watermarks == b.watermarks and a.late == b.late and a.totals == b.totals


def test_the_start_up_line_names_every_bound_and_what_an_input_is() -> None:
    """`reckon stream` prints the policy's description when it starts: an operator must see
    that a source's override took effect, not only the default bound."""
    one = WatermarkPolicy(3_000_000, 60_000_000)
    assert one.describe() == "watermark bound 3s per partition"
    mixed = WatermarkPolicy(3_000_000, 60_000_000, by_source=True,
                            partition_bounds=((1, 5_000_000),),
                            source_bounds=(("sat", 10_000_000), ("http", 30_000_000)))
    assert mixed.describe() == ("watermark bound 3s per (partition, source), partition 1 5s, "
                                "source http 30s, source sat 10s")
