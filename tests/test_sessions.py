"""Session windows on plain lists (reckon/sessions.py, reckon/session_reference.py): the
replay's sessions, the stream's, and the audit that maps one to the other.

Fast tier, except the last test, which checks the replay's sessions against Spark's own
``session_window`` on the same events (one watermark, no allowed lateness: the rules
coincide)."""

from __future__ import annotations

import random
from dataclasses import replace
from decimal import Decimal
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reckon.eventtime import EventTimeRules
from reckon.reconcile import ReconStatus
from reckon.reference import Event
from reckon.session_reference import (
    canonical_sessions,
    reconcile_sessions,
    session_stream_outcome,
)
from reckon.sessions import Session, absorb, sessions_of
from tests.test_reference import _stream

S = 1_000_000
BASE = 1_767_225_600 * S  # 2026-01-01T00:00:00Z
GAP = 10 * S
points = st.lists(st.tuples(st.integers(0, 300), st.integers(1, 999)), max_size=40)


def _money(raw: list[tuple[int, int]]) -> list[tuple[int, Decimal]]:
    return [(t * S, Decimal(cents).scaleb(-2)) for t, cents in raw]


@given(points)
def test_sessions_hold_every_event_once_with_no_gap_over_g_inside_and_more_between(raw):
    events = _money(raw)
    sessions = sessions_of(events, GAP)
    assert sum(s.count for s in sessions) == len(events)
    assert sum((s.total for s in sessions), Decimal(0)) == sum((a for _, a in events), Decimal(0))
    times = sorted(t for t, _ in events)
    for s in sessions:
        inside = [t for t in times if s.start <= t < s.end]
        assert inside[0] == s.start and s.end == inside[-1] + GAP
        assert all(b - a <= GAP for a, b in pairwise(inside))
    for a, b in pairwise(sessions):
        assert b.start > a.end  # a gap longer than g between sessions


@given(points, st.randoms(use_true_random=False))
def test_the_replays_sessions_do_not_depend_on_the_order_of_the_log(raw, rnd):
    events = _money(raw)
    shuffled = events[:]
    rnd.shuffle(shuffled)
    assert sessions_of(shuffled, GAP) == sessions_of(events, GAP)


def test_an_event_exactly_g_after_the_last_stays_in_the_session():
    assert [(s.start, s.end) for s in sessions_of([(0, Decimal(1)), (GAP, Decimal(1))], GAP)] \
        == [(0, 2 * GAP)]


def test_an_on_time_event_bridging_two_open_sessions_merges_them_as_a_revision():
    a, b = Session(0, GAP, Decimal("1.00"), 1), Session(15 * S, 25 * S, Decimal("2.00"), 1)
    merge = absorb([a, b], [(8 * S, Decimal("4.00"))], GAP, watermark=5 * S, allowed_lateness=0)
    assert merge.sessions == (Session(0, 25 * S, Decimal("7.00"), 3),)
    assert merge.replaced == (a, b) and merge.late == ()


def test_a_late_event_never_bridges_final_sessions():
    a, b = Session(0, GAP, Decimal("1.00"), 1), Session(15 * S, 25 * S, Decimal("2.00"), 1)
    merge = absorb([a, b], [(8 * S, Decimal("4.00"))], GAP, watermark=40 * S, allowed_lateness=0)
    assert merge.sessions == (a, b) and merge.replaced == ()
    assert merge.late == ((0, 0, 25 * S),)  # the span it would have joined: both


def test_within_allowed_lateness_a_closed_session_is_revised_not_late():
    closed = Session(0, GAP, Decimal("1.00"), 1)
    merge = absorb([closed], [(5 * S, Decimal("1.00"))], GAP, watermark=12 * S,
                   allowed_lateness=5 * S)
    assert merge.late == () and merge.sessions == (Session(0, 15 * S, Decimal("2.00"), 2),)


def _event(i: int, t: int, arrival: int, amount: str, currency: str = "EUR") -> Event:
    return Event(f"e{i}", "m-1", Decimal(amount), BASE + t * S, BASE + arrival * S, 0, i,
                 currency=currency)


def test_worked_example_a_late_event_bridging_two_published_sessions_explains_the_gap():
    """Gap 10 s, bound 3 s: sessions at 0-2 s and 14-16 s are final by the time an event at
    8 s arrives (its batch's watermark is 40 s). The stream keeps two sessions and sends the
    event to the late side output; the replay sees one session 0-26 s. Its gap is the late
    event's amount exactly."""
    rules = EventTimeRules.parse(window="10s", watermark_bound="3s", idle_timeout="1h")
    batches = [[_event(0, 0, 0, "1.00"), _event(1, 2, 2, "2.00")],
               [_event(2, 14, 14, "4.00"), _event(3, 16, 16, "8.00")],
               [_event(4, 43, 43, "5", "JPY")],  # moves the watermark past both
               [_event(5, 8, 50, "16.00")]]
    out = session_stream_outcome(batches, rules, GAP)
    assert [(s.start - BASE, s.end - BASE) for s in out.sessions[("m-1", "EUR")]] \
        == [(0, 12 * S), (14 * S, 26 * S)]
    [late] = out.late
    assert late.event.event_id == "e5" and (late.span.start - BASE, late.span.end - BASE) \
        == (0, 26 * S)
    everything = [e for batch in batches for e in batch]
    [session] = [s for (_, cur), ss in canonical_sessions(everything, rules, GAP).items()
                 for s in ss if cur == "EUR"]
    assert (session.start - BASE, session.end - BASE, session.total) \
        == (0, 26 * S, Decimal("31.00"))
    rows = reconcile_sessions(out, everything, rules, GAP)
    row = next(r for (w, _, cur), r in rows.items() if cur == "EUR")
    assert row.gap == (Decimal("16.00"), 1) and row.late == (Decimal("16.00"), 1)
    assert row.residual == (Decimal("0"), 0) and row.status is ReconStatus.EXPLAINED


# (key, minor units, currency, event second, delay, partition, re-delivery): as the windows'
# property test draws them, so ~20% of the examples hold a late event and many a duplicate
events = st.builds(
    lambda k, units, cur, t, d, p, r: (k, units, cur, t, d, p, r),
    st.sampled_from(["a", "b"]), st.integers(1, 10_000), st.sampled_from(["EUR", "JPY", "KWD"]),
    st.integers(0, 120), st.sampled_from([0, 0, 1, 3, 25, 40]), st.integers(0, 2),
    st.sampled_from([0, 0, 0, 2, 20]))


@settings(max_examples=200, deadline=None)
@given(st.lists(events, max_size=40), st.integers(1, 6), st.sampled_from(["0s", "4s"]))
def test_nothing_vanishes_and_every_session_gap_is_its_late_events_and_duplicates(
        raw, cut, allowed):
    stream = _stream(raw)
    batches = [stream[i:i + cut] for i in range(0, len(stream), cut)]
    rules = EventTimeRules.parse(window="10s", watermark_bound="3s", allowed_lateness=allowed, dedup_horizon="5s",
                                 idle_timeout="1h")
    out = session_stream_outcome(batches, rules, GAP)
    assert len(stream) == out.counted + len(out.late) + len(out.duplicates)
    for grain, row in reconcile_sessions(out, stream, rules, GAP).items():
        assert row.residual == (Decimal(0), 0), (grain, row)


def test_one_batch_with_nothing_late_gives_the_replays_sessions():
    rng = random.Random(7)
    batch = [_event(i, rng.randrange(0, 200), 0, f"{rng.randrange(1, 999)}.00")
             for i in range(60)]
    batch = [replace(e, arrival_time=BASE) for e in batch]
    rules = EventTimeRules.parse(window="10s", watermark_bound="3s", idle_timeout="1h")
    out = session_stream_outcome([batch], rules, GAP)
    assert out.sessions == canonical_sessions(batch, rules, GAP) and out.late == []


@pytest.mark.spark
def test_the_replays_sessions_are_sparks_session_window(spark):
    """The replay's rule is Spark's: ``groupBy(key, currency, session_window(t, g))`` on the
    same events gives the same sessions, totals and counts (microsecond times, exact
    decimals)."""
    from pyspark.sql import functions as F

    rng = random.Random(11)
    rows = [(f"k{rng.randrange(3)}", rng.choice(["EUR", "JPY"]), rng.randrange(0, 400) * S
             + rng.choice([0, 1, 999_999]), Decimal(rng.randrange(1, 99_999)).scaleb(-2))
            for _ in range(300)]
    df = spark.createDataFrame(rows, "key string, currency string, t long, amount decimal(38,3)")
    got = (df.groupBy("key", "currency", F.session_window(F.timestamp_micros("t"), "10 seconds")
                      .alias("s"))
           .agg(F.sum("amount").alias("total"), F.count("*").alias("n"))
           .select("key", "currency", F.unix_micros("s.start").alias("start"),
                   F.unix_micros("s.end").alias("end"), "total", "n").collect())
    spark_sessions = sorted((r["key"], r["currency"], r["start"], r["end"], r["total"], r["n"])
                            for r in got)
    ours = sorted((k, cur, s.start, s.end, s.total, s.count)
                  for (k, cur) in {(k, c) for k, c, _, _ in rows}
                  for s in sessions_of([(t, a) for kk, cc, t, a in rows if (kk, cc) == (k, cur)],
                                       GAP))
    assert spark_sessions == ours
