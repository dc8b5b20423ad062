"""When the stream's dedup state may judge a batch alone (reckon.dedup_state).

The rule is checked against two models of the state store: per event_id the latest arrival,
kept ``ttl`` of processing time after its last update and forgotten after that (Spark's TTL,
reckon.jvm.DedupState), or forgotten by a prune that runs at most four times a TTL and drops
what was not updated for the TTL (reckon.jvm.BucketedDedupState's timer). Whenever the rule
says the state suffices, the state's verdict must be the reference's (every earlier copy).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reckon.dedup_state import StateCoverage, state_suffices
from reckon.eventtime import is_duplicate_of_recent

HORIZON, TTL = 100, 200


def _reference(history: list[tuple[str, int]], event_id: str, arrival: int) -> bool:
    priors = [a for e, a in history if e == event_id]
    return bool(priors) and is_duplicate_of_recent(max(priors), arrival, HORIZON)


PRUNE_EVERY = TTL // 4  # the bucketed state's timer grid


def _alive(entry: tuple[int, int] | None, now: int, pruned: bool) -> bool:
    """Whether the state still has the entry: a pruned state deletes what it forgets, a TTL
    hides it from ``now > last update + TTL`` on."""
    return entry is not None and (pruned or now <= entry[1] + TTL)


def _state_verdict(state: dict[str, tuple[int, int]], event_id: str, arrival: int,
                   now: int, pruned: bool) -> bool:
    entry = state.get(event_id)
    if entry is None or not _alive(entry, now, pruned):  # forgotten
        return False
    return is_duplicate_of_recent(entry[0], arrival, HORIZON)


def _prune(state: dict[str, tuple[int, int]], prune_at: int | None, now: int) -> int | None:
    """The bucketed state's timer after a batch at ``now``: when due, it drops the entries not
    updated for the TTL; one is pending while entries remain. Returns when the next is due."""
    if prune_at is not None and now >= prune_at:
        for event_id in [e for e, (_, updated) in state.items() if updated < now - TTL]:
            del state[event_id]
        prune_at = None
    if prune_at is None and state:
        prune_at = (now // PRUNE_EVERY + 1) * PRUNE_EVERY
    return prune_at


batches_st = st.lists(  # per batch: the processing delay since the last, and its copies
    st.tuples(st.integers(1, 150),  # with their lag: arrival = processing time - lag
              st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(0, 400)),
                       min_size=1, max_size=6)),
    min_size=1, max_size=12)


@settings(max_examples=400, deadline=None)
@given(archived=st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(0, 300)),
                         max_size=6),
       batches=batches_st, pruned=st.booleans())
def test_when_the_rule_trusts_the_state_its_verdict_is_the_references(archived, batches,
                                                                      pruned):
    history = list(archived)  # every copy archived so far, as (event_id, arrival)
    until = max((a for _, a in archived), default=None)
    coverage = StateCoverage(archived_until=until, started=None, min_lag=None)
    state: dict[str, tuple[int, int]] = {}  # event_id -> (latest arrival, last update)
    prune_at: int | None = None
    now = 300  # after every archived arrival
    for number, (delay, copies) in enumerate(batches):
        now += delay
        if number == 0 and until is not None:  # the seed: the archive's last horizon
            for event_id, arrival in archived:
                if arrival >= until - HORIZON:
                    kept = state.get(event_id, (arrival, now))[0]
                    state[event_id] = (max(kept, arrival), now)
        batch = sorted(((e, now - lag) for e, lag in copies), key=lambda c: c[1])
        arrivals = [a for _, a in batch]
        trusted = state_suffices(coverage, min_arrival=arrivals[0], processed_at=now,
                                 horizon=HORIZON, ttl=TTL)
        for event_id, arrival in batch:
            expected = _reference(history, event_id, arrival)
            if trusted:
                assert _state_verdict(state, event_id, arrival, now, pruned) == expected
            history.append((event_id, arrival))
            kept = state.get(event_id)
            alive = _alive(kept, now, pruned)
            state[event_id] = (max(arrival, kept[0]) if alive and kept else arrival, now)
        if pruned:
            prune_at = _prune(state, prune_at, now)
        coverage = coverage.after_batch(now, arrivals[-1])


def test_a_state_seeded_from_the_archive_defers_to_it_for_what_arrived_before():
    coverage = StateCoverage(archived_until=1_000, started=None, min_lag=None)
    assert not state_suffices(coverage, min_arrival=999, processed_at=1_060,
                              horizon=HORIZON, ttl=TTL)
    assert state_suffices(coverage, min_arrival=1_000, processed_at=1_060,
                          horizon=HORIZON, ttl=TTL)


def test_a_lag_that_grows_past_the_ttl_margin_defers_to_the_archive():
    """A stream down for longer than its TTL (or falling behind) may have forgotten the
    earlier copy of what now arrives."""
    steady = StateCoverage(archived_until=None, started=0, min_lag=5)
    assert state_suffices(steady, min_arrival=1_000, processed_at=1_050,
                          horizon=HORIZON, ttl=TTL)
    assert not state_suffices(steady, min_arrival=1_000, processed_at=1_200,
                              horizon=HORIZON, ttl=TTL)


def test_a_seeded_copy_ages_from_the_first_batch_though_that_batch_arrived_long_before():
    """The seed enters the state with the first batch. When that batch was all old arrivals
    (judged by the archive), its lag says nothing of the seed's: the seed's own lag counts,
    or a copy the TTL has forgotten would be judged by the state (here: 'a', archived at 300,
    seeded at 400, forgotten after 600, re-delivered at 350 and processed at 650)."""
    coverage = (StateCoverage(archived_until=300, started=None, min_lag=None)
                .after_batch(processed_at=400, max_arrival=100))
    assert not state_suffices(coverage, min_arrival=350, processed_at=650,
                              horizon=HORIZON, ttl=TTL)
