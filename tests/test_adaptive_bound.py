"""The adaptive watermark bound on plain lists (reckon/adaptive_bound.py): the estimator's
rules, the walk against the fixed-bound walk it generalises, and the day with a burst of skew
the issue names (fast tier)."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reckon.adaptive_bound import AdaptivePolicy, adaptive_point_reference, next_bound
from reckon.errors import ConfigError
from reckon.eventtime import WatermarkPolicy, WindowSpec
from reckon.whatif_batches import BatchedEvent, batch_point_reference

S = 1_000_000
HOUR = 3600 * S
WINDOWS = WindowSpec(10 * S)


@given(st.integers(0, 60 * S), st.lists(st.lists(st.integers(0, 90 * S), max_size=20),
                                         min_size=1, max_size=30),
       st.integers(0, 20 * S), st.integers(0, 10 * S), st.integers(0, 50 * S),
       st.integers(1, 99))
def test_a_bound_stays_between_floor_and_ceiling_rises_at_once_and_falls_by_the_advance(
        current, history, floor, span, advance, percent):
    policy = AdaptivePolicy(target=Fraction(percent, 100), floor=floor, ceiling=floor + span,
                            horizon=10, granularity=S // 10)
    new = next_bound(current, history, policy, advance)
    fresh = next_bound(policy.ceiling + 1, history, policy, 10 ** 18)  # what it proposes
    assert policy.floor <= fresh <= policy.ceiling
    if fresh >= current:
        assert new == fresh
    else:
        assert fresh <= new <= current and current - new <= advance


def _stream(rng: random.Random, partitions: int, n: int) -> list[BatchedEvent]:
    events = []
    for i in range(n):
        t = i * S // 3
        arrival = t + rng.choice([0, 0, S // 2, 2 * S, 12 * S])
        events.append((t, arrival, rng.randrange(partitions)))
    events.sort(key=lambda e: e[1])
    return [BatchedEvent(t, a, p, a // (3 * S)) for t, a, p in events]


@pytest.mark.parametrize("seed", range(5))
def test_a_bound_held_between_equal_floor_and_ceiling_is_the_fixed_bounds_walk(seed):
    """floor == ceiling: the adaptive walk can never move a bound, so it must count, drop
    and emit exactly as the fixed-bound walk of reckon/whatif_batches.py does."""
    rng = random.Random(seed)
    events = _stream(rng, partitions=3, n=300)
    bound = rng.choice([0, S, 3 * S])
    held = AdaptivePolicy(target=Fraction(99, 100), floor=bound, ceiling=bound)
    adaptive = adaptive_point_reference(events, WINDOWS, held, start_bound=bound,
                                        idle_timeout=HOUR)
    fixed = batch_point_reference(events, WINDOWS, WatermarkPolicy(bound, HOUR))
    assert adaptive.point == fixed and adaptive.changes == []


def _day_with_a_burst() -> list[BatchedEvent]:
    """4 events a second for 1,000 s; calm (under 1 s late) except 400-700 s, where delays
    ramp up to 20 s and back; a batch every 2 s of arrival."""
    rng = random.Random(3)
    events = []
    for i in range(4000):
        t = i * S // 4
        second = t // S
        ramp = min(1.0, min(second - 400, 700 - second) / 60) if 400 <= second < 700 else 0.0
        events.append((t, t + int(ramp * 20 * S * rng.random()) + rng.randrange(S)))
    events.sort(key=lambda e: e[1])
    return [BatchedEvent(t, a, 0, a // (2 * S)) for t, a in events]


def test_on_a_day_with_a_burst_the_adaptive_bound_holds_the_target_earlier_than_any_fixed():
    """Target 99%. The fixed bound chosen on the calm morning (0 s reaches 100% there) falls
    short over the day; the smallest fixed bound that reaches 99% over the day waits far
    longer per window than the adaptive bound, which reaches it too."""
    events = _day_with_a_burst()
    target = Fraction(99, 100)

    def fixed(bound: int, evs: list[BatchedEvent]):
        return batch_point_reference(evs, WINDOWS, WatermarkPolicy(bound, HOUR))

    morning = [e for e in events if e.event_us < 400 * S]
    chosen_before = next(b for b in range(0, 30 * S, S // 2)
                         if fixed(b, morning).completeness >= target)
    assert fixed(chosen_before, events).completeness < target
    best_fixed = next(fixed(b, events) for b in range(0, 30 * S, S // 2)
                      if fixed(b, events).completeness >= target)
    policy = AdaptivePolicy(target=target, floor=0, ceiling=60 * S, horizon=10,
                            granularity=S // 2)
    adaptive = adaptive_point_reference(events, WINDOWS, policy, start_bound=chosen_before,
                                        idle_timeout=HOUR)
    assert adaptive.point.completeness >= target
    assert adaptive.point.avg_emit_latency is not None and best_fixed.avg_emit_latency
    assert adaptive.point.avg_emit_latency < best_fixed.avg_emit_latency / 2
    assert max(c.bound for c in adaptive.changes) >= 10 * S  # it widened in the burst
    assert adaptive.changes[-1].bound <= 2 * S  # and settled after it


def test_a_bad_adaptive_policy_is_one_clear_line():
    with pytest.raises(ConfigError, match=r"target_completeness=0\.0000% is not valid"):
        AdaptivePolicy(target=Fraction(0), floor=0, ceiling=S)
    with pytest.raises(ConfigError, match="0 <= floor <= ceiling"):
        AdaptivePolicy(target=Fraction(1), floor=2 * S, ceiling=S)
