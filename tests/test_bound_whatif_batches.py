"""The per-batch bound what-if: the pure reference, its fast path, and the warehouse (Spark)
implementation against the reference on random batched logs."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reckon.eventtime import (
    EventTimeRules,
    WatermarkPolicy,
    WatermarkState,
    WindowSpec,
    advance_watermark,
)
from reckon.timeutil import day_bounds, from_micros
from reckon.whatif import lateness_curve_reference
from reckon.whatif_batches import (
    BatchedEvent,
    batch_curve_reference,
    batch_point_reference,
    batch_steps,
    curve_points,
    observations,
    policy_point,
    shift_state,
    state_under,
)

S = 1_000_000
DAY = date(2026, 1, 1)
D0, D1 = day_bounds(DAY)
WORKED = [1, 3, 7, 12, 15, 8, 22, 26, 4]


def test_one_event_per_batch_is_the_per_event_curve():
    """With one event per batch the stream is the per-event replay: same curve."""
    events = [BatchedEvent(D0 + t * S, D0 + (100 + i) * S, 0, i) for i, t in enumerate(WORKED)]
    bounds = [0, 3 * S, 10 * S]
    per_batch = batch_curve_reference(events, WindowSpec(10 * S), bounds)
    per_event = lateness_curve_reference([(e.event_us, e.arrival_us, 0) for e in events],
                                         WindowSpec(10 * S), bounds)
    assert per_batch == per_event
    assert per_batch[1].dropped == 2  # 8 and 4, as in docs/semantics.md


def test_events_of_one_batch_are_judged_against_the_previous_batch():
    """The worked example's events in batches of three (L = 3 s): 8 comes with 12 and 15 and
    is judged against the watermark the batch before them left (4): on time. Only 4 (against
    WM 12) is dropped; one event at a time, 8 meets WM 12 too and both are."""
    ts = [[1, 3, 7], [12, 15, 8], [22, 26, 4]]
    events = [BatchedEvent(D0 + t * S, D0 + 100 * S + b, 0, b)
              for b, batch in enumerate(ts) for t in batch]
    (point,) = batch_curve_reference(events, WindowSpec(10 * S), [3 * S])
    (per_event,) = lateness_curve_reference([(e.event_us, e.arrival_us, 0) for e in events],
                                            WindowSpec(10 * S), [3 * S])
    assert (point.dropped, per_event.dropped) == (1, 2)
    assert point.completeness > per_event.completeness


def test_the_start_state_is_shifted_to_each_bound():
    """A stream that recorded WM 20 at bound 3 s would have had WM 23 at bound 0 and WM 9 at
    bound 14 s: an event of window [0,10) is late under 0 and 3 s, on time under 14 s."""
    start = WatermarkState(watermark=D0 + 20 * S)
    events = [BatchedEvent(D0 + 5 * S, D0 + 30 * S, 0, 7)]
    points = batch_curve_reference(events, WindowSpec(10 * S), [0, 3 * S, 14 * S],
                                   start=start, start_bound=3 * S)
    assert [p.dropped for p in points] == [1, 1, 0]


def test_only_judged_pairs_in_the_day_s_windows_count_but_every_event_moves_the_watermark():
    events = [BatchedEvent(D0 - 5 * S, D0, 0, 0, judged=False),        # yesterday
              BatchedEvent(D0 + 40 * S, D0 + 1, 0, 0, judged=False),   # a flagged copy
              BatchedEvent(D0 + 2 * S, D0 + 2, 0, 1)]                   # judged, late
    (point,) = batch_curve_reference(events, WindowSpec(10 * S), [0], starts=(D0, D1))
    assert (point.admitted, point.dropped) == (0, 1)


# --------------------------------------------------------------------------- random logs


@st.composite
def batched_logs(draw, max_events: int = 24):
    """Events around midnight on 1-3 partitions, out of order, cut into batches of 1-5 in
    arrival order; some flagged duplicates (not judged; they move the watermark)."""
    labels = draw(st.sampled_from([(0,), (0, 1), (0, 1, 2)]))
    n = draw(st.integers(1, max_events))
    arrival, batch, left = D0 - 20 * S, 0, draw(st.integers(1, 5))
    out = []
    for _ in range(n):
        arrival += draw(st.sampled_from([0, S // 2, S, 3 * S, 30 * S]))
        delay = draw(st.integers(0, 14)) * S // 2 + draw(st.sampled_from([0, 1, 999_999]))
        duplicate = draw(st.integers(0, 9)) == 0
        t = arrival - delay
        out.append(BatchedEvent(t, arrival, draw(st.sampled_from(labels)), batch,
                                judged=not duplicate and t >= D0 - S))
        left -= 1
        if left == 0:
            batch, left = batch + 1, draw(st.integers(1, 5))
    return out


def fast_path(events, windows, bounds, allowed_lateness, idle, start, start_bound, starts):
    """What the warehouse implementation does, on lists: batch_steps once at bound 0, each
    pair late under L when before0 - end - G >= L, curve_points to finish."""
    batches = {}
    for e in events:
        batches.setdefault(e.batch, []).append(e)
    steps = batch_steps([(b, observations(es)) for b, es in sorted(batches.items())],
                        WatermarkPolicy(0, idle), shift_state(start, start_bound))
    before = {s.batch: s.before for s in steps}
    ends = [(e.batch, w.end) for e in events if e.judged for w in windows.assign(e.event_us)
            if starts[0] <= w.start < starts[1]]
    dropped = {b: sum(1 for batch, end in ends if before[batch] is not None
                      and before[batch] - end - allowed_lateness >= b) for b in bounds}
    return curve_points(steps, bounds, len(ends), dropped, {end for _, end in ends})


@settings(max_examples=150, deadline=None)
@given(batched_logs(), st.sampled_from([WindowSpec(10 * S), WindowSpec(10 * S, 5 * S)]),
       st.sampled_from([0, 2 * S]), st.sampled_from([4 * S, 60 * S]),
       st.sampled_from([None, 10 * S]), st.sampled_from([0, 3 * S]))
def test_the_fast_path_equals_the_reference(events, windows, allowed_lateness, idle, seed_wm, seed_bound):
    start = WatermarkState(watermark=None if seed_wm is None else D0 + seed_wm)
    bounds = [0, S, 3 * S, 7 * S]
    assert fast_path(events, windows, bounds, allowed_lateness, idle, start, seed_bound, (D0, D1)) == \
        batch_curve_reference(events, windows, bounds, allowed_lateness=allowed_lateness, idle_timeout=idle,
                              start=start, start_bound=seed_bound, starts=(D0, D1))


@settings(max_examples=150, deadline=None)
@given(batched_logs(), st.sampled_from([WindowSpec(10 * S), WindowSpec(10 * S, 5 * S)]),
       st.sampled_from([0, 2 * S]), st.sampled_from([4 * S, 60 * S]),
       st.lists(st.sampled_from([0, S, 3 * S, 7 * S]), min_size=3, max_size=3),
       st.booleans(), st.integers(0, 2**32))
def test_bounds_per_input_per_batch_the_fast_path_equals_the_reference(
        events, windows, allowed_lateness, idle, bounds, by_source, seed):
    """Issue 41: the per-batch what-if under a policy with a bound per input (what
    ``audits.bound_whatif_batches.batch_points`` does: ``batch_steps`` under the policy, pairs
    late against their batch's ``before``, ``policy_point``) equals the reference walk; with
    every bound equal it is the curve's row of that bound."""
    import random

    rng = random.Random(seed)
    events = [BatchedEvent(e.event_us, e.arrival_us, e.partition, e.batch, e.judged,
                           source=rng.choice(["sat", "web", "radar"])) for e in events]
    source_bounds = tuple(zip(("sat", "web", "radar"), bounds, strict=True)) if by_source \
        else ()
    policy = WatermarkPolicy(bounds[0], idle, by_source=by_source, source_bounds=source_bounds,
                             partition_bounds=() if by_source else ((1, bounds[1]),))
    batches: dict[int, list[BatchedEvent]] = {}
    for e in events:
        batches.setdefault(e.batch, []).append(e)
    steps = batch_steps([(b, observations(es)) for b, es in sorted(batches.items())], policy)
    before = {step.batch: step.before for step in steps}
    ends = [(e.batch, w.end) for e in events if e.judged for w in windows.assign(e.event_us)
            if D0 <= w.start < D1]
    dropped = sum(1 for batch, end in ends if before[batch] is not None
                  and end + allowed_lateness <= before[batch])
    fast = policy_point(steps, policy, len(ends), dropped, sorted({end for _, end in ends}))
    reference = batch_point_reference(events, windows, policy, allowed_lateness=allowed_lateness, starts=(D0, D1))
    assert fast == reference
    uniform = WatermarkPolicy(bounds[0], idle, by_source=by_source)
    assert batch_point_reference(events, windows, uniform, allowed_lateness=allowed_lateness, starts=(D0, D1)) == \
        batch_curve_reference(events, windows, [bounds[0]], allowed_lateness=allowed_lateness, idle_timeout=idle,
                              starts=(D0, D1), by_source=by_source)[0]


def test_a_recorded_state_starts_a_walk_under_another_policy_re_keyed():
    """A state recorded with inputs by source merges into partitions for a policy by
    partition; a state by partition cannot be split into sources (they start unknown)."""
    from reckon.eventtime import PartitionProgress

    by_source = WatermarkState({(0, "a"): PartitionProgress(50, 9),
                                (0, "b"): PartitionProgress(40, 8),
                                (1, "a"): PartitionProgress(30, 7)}, 7, 9, 28)
    merged = state_under(by_source, WatermarkPolicy(2, 60))
    assert merged.partitions == {0: PartitionProgress(50, 9), 1: PartitionProgress(30, 7)}
    assert merged.watermark == 28  # min(50, 30) - 2
    by_partition = WatermarkState({0: PartitionProgress(50, 9)}, 9, 9, 47)
    assert state_under(by_partition, WatermarkPolicy(0, 60, by_source=True)) == \
        WatermarkState({}, 9, 9, None)


# --------------------------------------------------------------------------- Spark tier


def _log_row(i: int, e: BatchedEvent) -> dict:
    moment = from_micros(e.event_us)
    return {"event_id": f"e{i}", "key": "k", "amount": Decimal("1.00"), "currency": "USD",
            "event_time": moment, "source": "s", "partition": e.partition, "offset": i,
            "arrival_time": from_micros(e.arrival_us), "input_file": None, "payload": None,
            "batch_id": e.batch, "is_duplicate": not e.judged and e.event_us >= D0 - S,
            "event_date": moment.date()}


def _write(spark, settings_, events, seed: WatermarkState | None, seed_batch: int) -> None:
    """event_log rows, and the progress row of the batch before the range (the seed)."""
    from spark import tables as tb

    wh = settings_.warehouse_path
    for name in (tb.EVENT_LOG, tb.WATERMARK_PROGRESS):
        tb.ensure_table(spark, wh, name)
    df = spark.createDataFrame([_log_row(i, e) for i, e in enumerate(events)],
                               tb.SCHEMAS[tb.EVENT_LOG])
    tb.marked_append(df, wh, tb.EVENT_LOG, "test", 0)
    if seed is None:
        return
    from pyspark.sql import functions as F

    row = {f.name: None for f in tb.SCHEMAS[tb.WATERMARK_PROGRESS].fields}
    row.update(batch_id=seed_batch, query_id="q", processed_at=from_micros(D0),
               partition_max_event_time=F.create_map().cast("map<int,timestamp>"),
               partition_last_arrival=F.create_map().cast("map<int,timestamp>"),
               idle_partitions=F.array().cast("array<int>"), state_json=seed.to_json(),
               rows_in=0, valid=0, quarantined=0, duplicates=0, on_time=0, revised=0, late=0,
               duration_seconds=0.0, rules_json=json.dumps(
                   settings_.event_time_rules().to_config()))
    tb.marked_append(tb.single_row(spark, tb.WATERMARK_PROGRESS, row), wh,
                     tb.WATERMARK_PROGRESS, "test", 0)


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(events=batched_logs(max_events=30), allowed_lateness=st.sampled_from(["0s", "2s"]),
       slide=st.sampled_from(["", "5s"]))
def test_the_warehouse_curve_equals_the_reference(spark, tmp_path_factory, events, allowed_lateness,
                                                  slide):
    """The Spark implementation against the reference on the same batches, the state before
    the day's first judged batch read from watermark_progress as the stream records it."""
    from app.settings import load_settings
    from audits.bound_whatif_batches import analyze_day_batches

    settings_ = load_settings(env={}, warehouse=str(tmp_path_factory.mktemp("wh")),
                              shuffle_partitions=2, window="10s", slide=slide, allowed_lateness=allowed_lateness,
                              watermark_bound="3s", idle_timeout="20s")
    rules: EventTimeRules = settings_.event_time_rules()
    if not any(e.judged and _in_day(e, rules.windows) for e in events):
        return
    lo = min(e.batch for e in events if e.judged and _in_day(e, rules.windows))
    hi = max(e.batch for e in events if e.judged and _in_day(e, rules.windows))
    seed = WatermarkState()
    for b in range(lo):
        seed = advance_watermark(seed, observations(e for e in events if e.batch == b),
                                 rules.watermark)
    _write(spark, settings_, events, seed if lo else None, lo - 1)
    bounds = [0, 3 * S, 7 * S]
    curve = analyze_day_batches(spark, settings_.whatif_config(), DAY, bounds=bounds)
    expected = batch_curve_reference(
        [e for e in events if lo <= e.batch <= hi], rules.windows, bounds, allowed_lateness=rules.allowed_lateness,
        idle_timeout=rules.watermark.idle_timeout, start=seed, start_bound=3 * S,
        starts=(D0, D1))
    assert list(curve.points) == expected
    assert curve.configured == expected[1]


def _in_day(e: BatchedEvent, windows: WindowSpec) -> bool:
    lo, hi = windows.day_event_times(DAY)
    return lo <= e.event_us < hi


def test_a_day_without_archived_events_is_refused_in_one_line(spark, warehouse):
    from app.settings import load_settings
    from audits.bound_whatif_batches import analyze_day_batches
    from reckon.errors import NoEventsError, UsageError

    settings_ = load_settings(env={}, warehouse=str(warehouse), shuffle_partitions=2)
    with pytest.raises(UsageError, match="event_log"):
        analyze_day_batches(spark, settings_.whatif_config(), DAY)
    _write(spark, settings_, [BatchedEvent(D0 + 86_400 * S * 3, D0, 0, 0)], None, 0)
    with pytest.raises(NoEventsError, match=r"^the stream archived no events of 2026-01-01$"):
        analyze_day_batches(spark, settings_.whatif_config(), DAY)


def test_on_a_streamed_day_the_configured_row_is_what_the_stream_did(spark, tmp_path):
    """The real batch processor runs a day in batches of several events (after a batch of the
    previous day, so the day starts from a carried-over watermark); replay, audit, report.
    At the configured bound the per-batch what-if drops exactly the day's late_events and
    gives the headline's completeness; the per-event what-if drops more."""
    from audits.audit import audit_day
    from audits.bound_whatif import analyze_day
    from audits.bound_whatif_batches import analyze_day_batches
    from reports.db.repository import audit_recorder
    from reports.render import render_day
    from spark import tables as tb
    from spark.replay import replay_day
    from spark.stream import BatchProcessor
    from tests.scenarios import ev
    from tests.streamkit import event_line, stream_settings
    from tests.test_report_render import _assert_per_batch_row_is_the_headline

    batches = [[ev(-10, 95), ev(-5, 96)],
               [ev(1, 100), ev(3, 100), ev(7, 100)], [ev(12, 101), ev(15, 101), ev(8, 101)],
               [ev(22, 102), ev(26, 102), ev(4, 102), ev(9, 102)],
               [ev(31, 103), ev(18, 103), ev(24, 103), ev(35, 103), ev(29, 103)],
               [ev(41, 104), ev(33, 104), ev(38, 104), ev(27, 104)]]
    settings_ = stream_settings(tmp_path / "wh", window="10s", watermark_bound="3s", allowed_lateness="0s")
    processor = BatchProcessor.of(spark, settings_, query_id="q-39")
    for batch_id, batch in enumerate(batches):
        processor(spark.createDataFrame(
            [(event_line(e), None, e.offset, None, "p0") for e in batch],
            "payload string, transport_partition int, offset long, transport_time timestamp, "
            "input_file string"), batch_id)
    late = (tb.read_table(spark, settings_.warehouse_path, tb.LATE_EVENTS)
            .filter(f"window_date = '{DAY}'").count())
    assert late == 4  # 4 and 9 (WM 12), 18 (WM 23), 27 (WM 32)

    per_batch = analyze_day_batches_configured(spark, settings_)
    per_event = analyze_day(spark, settings_.whatif_config(), DAY).configured
    assert per_batch.dropped == late and per_batch.admitted == 15  # of 19
    # a bound changed since (--change-spec to 5s) is not what the day ran with: the configured
    # row is still the recorded 3s, what the stream did; the current bound's row is also shown
    later = stream_settings(tmp_path / "wh", window="10s", watermark_bound="5s", allowed_lateness="0s")
    curve = analyze_day_batches(spark, later.whatif_config(), DAY)
    assert curve.configured_bound == 3 * S and curve.configured == per_batch
    assert {3 * S, 5 * S} <= {pt.bound for pt in curve.points}
    assert per_event is not None and per_event.dropped > per_batch.dropped

    replay_day(spark, settings_.replay_config(), DAY)
    audit = audit_day(spark, settings_.audit_config(), DAY, kind="nightly", recorder=audit_recorder(settings_))
    assert audit.completeness is not None
    ratio = Decimal(per_batch.admitted) / Decimal(per_batch.admitted + per_batch.dropped)
    assert ratio.quantize(Decimal("0.000001")) == Decimal(audit.completeness) \
        == Decimal("0.789474")
    result = render_day(settings_.report_config(), DAY)
    _assert_per_batch_row_is_the_headline(result, Decimal(audit.completeness), late)


def analyze_day_batches_configured(spark, settings_):
    from audits.bound_whatif_batches import analyze_day_batches

    point = analyze_day_batches(spark, settings_.whatif_config(), DAY).configured
    assert point is not None
    return point
