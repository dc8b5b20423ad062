"""Fast tier: the event-time rules as pure functions, including the semantics page's example."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reckon.errors import ConfigError
from reckon.eventtime import (
    Disposition,
    PartitionObservation,
    WatermarkPolicy,
    WatermarkState,
    Window,
    WindowSpec,
    WindowStatus,
    advance_watermark,
    classify,
    ends_passed,
    window_status,
)

S = 1_000_000
times = st.integers(min_value=0, max_value=10**16)


@given(times, st.integers(1, 10**9))
def test_tumbling_window_contains_its_event_and_is_aligned(t, width):
    (w,) = WindowSpec(width).assign(t)
    assert w.contains(t)
    assert w.start % width == 0 and w.end - w.start == width


@given(times, st.integers(1, 10**6), st.integers(1, 8))
def test_hopping_windows_are_exactly_those_that_contain_the_event(t, slide, k):
    spec = WindowSpec(slide * k, slide)
    windows = spec.assign(t)
    assert len(windows) == (k if k > 1 else 1)
    assert all(w.contains(t) and w.start % slide == 0 for w in windows)
    # the window just before the oldest and just after the newest do not contain t
    assert not Window(windows[0].start - slide, windows[0].end - slide).contains(t)
    assert not Window(windows[-1].start + slide, windows[-1].end + slide).contains(t)


@given(st.integers(0, 10**12), st.integers(1, 10**4), st.integers(1, 6),
       st.integers(0, 50 * 10**4), st.booleans())
def test_covered_event_times_are_exactly_the_times_a_range_of_windows_holds(t0, slide, k, length,
                                                                            aligned):
    """The replay and audit read [lo, hi) for a day: an event outside it is in none of the day's
    windows, an event inside it is in at least one. Windows are on the epoch's grid, a day need
    not be (a 7-minute step does not divide 24 hours), and hopping windows reach past the day's
    end."""
    spec = WindowSpec(slide * k, slide)
    first = t0 - t0 % slide if aligned else t0
    end = first + (length - length % slide if aligned else length)
    lo, hi = spec.covered_event_times(first, end)

    def in_range(t: int) -> bool:
        return any(first <= w.start < end for w in spec.assign(t))

    for t in (lo - 1, lo, hi - 1, hi, (lo + hi) // 2):
        assert in_range(t) == (lo <= t < hi), t


@given(times, times, times, times)
def test_intersects_matches_the_definition(a, b, c, d):
    w1 = Window(min(a, b), max(a, b) + 1)
    w2 = Window(min(c, d), max(c, d) + 1)
    shared = max(w1.start, w2.start) < min(w1.end, w2.end)
    assert w1.intersects(w2) == shared == w2.intersects(w1)


def test_window_starts_agree_on_ints_and_numpy():
    spec = WindowSpec(10 * S, 5 * S)
    ts = np.array([0, 4 * S, 5 * S, 123_456_789], dtype=np.int64)
    vector = spec.window_starts(ts)
    for i, t in enumerate(ts.tolist()):
        assert [int(v[i]) for v in vector] == spec.window_starts(t)


def test_window_repr_prints_the_interval():
    assert repr(Window(0, 10 * S)) == "Window[1970-01-01T00:00:00Z, 1970-01-01T00:00:10Z)"


@pytest.mark.parametrize("size,slide", [(0, None), (10, 3), (10, 20), (10, -5)])
def test_bad_window_specs_are_rejected_with_the_value(size, slide):
    with pytest.raises(ConfigError):
        WindowSpec(size, slide)


def test_classify_boundaries():
    # end 10, allowed lateness 5: open while WM < 10; revision while 10 <= WM < 15; late from 15
    assert classify(10, None, 5) is Disposition.ON_TIME
    assert classify(10, 9, 5) is Disposition.ON_TIME
    assert classify(10, 10, 5) is Disposition.REVISION
    assert classify(10, 14, 5) is Disposition.REVISION
    assert classify(10, 15, 5) is Disposition.LATE
    assert classify(10, 10, 0) is Disposition.LATE
    assert window_status(10, 12, 5) is WindowStatus.CLOSED
    assert window_status(10, 15, 5) is WindowStatus.FINAL


def _feed(policy, batches):
    state, marks = WatermarkState(), []
    for batch in batches:
        state = advance_watermark(state, [PartitionObservation(*o) for o in batch], policy)
        marks.append(state.watermark)
    return state, marks


def test_min_rule_holds_the_watermark_for_the_slow_partition():
    policy = WatermarkPolicy(watermark_bound=3 * S, idle_timeout=100 * S, expected_partitions=(0, 1))
    _, marks = _feed(policy, [
        [(0, 20 * S, 20 * S)],                 # partition 1 not seen yet: undefined
        [(1, 12 * S, 21 * S)],                 # min(20, 12) - 3 = 9
        [(0, 40 * S, 40 * S)],                 # min(40, 12) - 3 = 9 still
        [(1, 30 * S, 41 * S)],                 # min(40, 30) - 3 = 27
    ])
    assert marks == [None, 9 * S, 9 * S, 27 * S]


def test_idle_partition_stops_holding_back_and_rejoins_without_going_backwards():
    policy = WatermarkPolicy(watermark_bound=0, idle_timeout=10 * S, expected_partitions=(0, 1))
    _, marks = _feed(policy, [
        [(0, 5 * S, 5 * S), (1, 5 * S, 5 * S)],   # both at 5
        [(0, 12 * S, 12 * S)],                     # 1 silent 7s: not idle, WM stays 5
        [(0, 20 * S, 20 * S)],                     # 1 silent 15s: idle -> WM 20
        [(1, 8 * S, 21 * S)],                      # 1 rejoins at 8: min would be 8, keep 20
        [(0, 30 * S, 30 * S), (1, 25 * S, 30 * S)],
    ])
    assert marks == [5 * S, 5 * S, 20 * S, 20 * S, 25 * S]


def test_expected_partition_that_never_delivers_times_out_from_first_arrival():
    policy = WatermarkPolicy(watermark_bound=0, idle_timeout=10 * S, expected_partitions=(0, 1, 2))
    _, marks = _feed(policy, [[(0, 1 * S, 1 * S), (1, 1 * S, 1 * S)],
                              [(0, 5 * S, 5 * S), (1, 5 * S, 5 * S)],
                              [(0, 11 * S, 11 * S), (1, 11 * S, 11 * S)]])
    assert marks == [None, None, 11 * S]


def test_an_expected_partition_times_out_from_the_first_arrival_within_a_batch():
    """One batch of partition 0 arriving over 0..120 s, partition 1 expected but silent, idle
    timeout 60 s: partition 1 has been silent 120 s since the stream's first arrival, so it is
    idle and the watermark is defined, exactly as when the same events come one per batch."""
    policy = WatermarkPolicy(watermark_bound=3 * S, idle_timeout=60 * S, expected_partitions=(0, 1))
    events = [(0, t * S, t * S) for t in range(0, 121, 10)]
    one_by_one, _ = _feed(policy, [[e] for e in events])
    whole = advance_watermark(WatermarkState(), [
        PartitionObservation(0, 120 * S, 120 * S, min_arrival_time=0)], policy)
    assert whole.watermark == one_by_one.watermark == 117 * S
    assert whole.first_arrival == 0


@given(st.lists(st.lists(st.tuples(st.integers(0, 3), times, times), max_size=4), max_size=12))
def test_watermark_never_moves_backwards_and_never_passes_a_live_partition(batches):
    """No idle partitions (timeout out of reach), none expected: after each batch the
    watermark is max(previous, min over the partitions seen of their max event time - L),
    a running figure this test keeps itself."""
    policy = WatermarkPolicy(watermark_bound=S, idle_timeout=10**16 + 1, expected_partitions=())
    state = WatermarkState()
    previous = None
    maxima: dict[int, int] = {}
    for batch in batches:
        state = advance_watermark(state, [PartitionObservation(*o) for o in batch], policy)
        for partition, event_time, _ in batch:
            maxima[partition] = max(maxima.get(partition, event_time), event_time)
        if maxima:
            floor = min(maxima.values()) - S
            assert state.watermark == (floor if previous is None else max(previous, floor))
        else:
            assert state.watermark is None
        previous = state.watermark
    assert WatermarkState.from_json(state.to_json()) == state


def test_zero_idle_timeout_is_rejected_because_it_can_lose_data():
    with pytest.raises(ConfigError, match="idle_timeout"):
        WatermarkPolicy(watermark_bound=0, idle_timeout=0)


@given(st.integers(-10**16, 10**16), st.integers(0, 10**10),
       st.sampled_from([1, 7, 10 * S, 60 * S, 86_400 * S]))
def test_a_watermark_advance_passes_exactly_the_ends_it_closes(before, advance, step):
    """The ends ends_passed names are exactly the window ends (multiples of the step) whose
    status the advance moves off OPEN: the rule the derived provisional_totals closes windows
    by."""
    after = before + advance
    first, last = ends_passed(before, after, step)
    assert first % step == 0 and last % step == 0
    for end in (first - step, first, last, last + step):
        moved = (window_status(end, before, 0) is WindowStatus.OPEN
                 and window_status(end, after, 0) is not WindowStatus.OPEN)
        assert moved == (first <= end <= last)
