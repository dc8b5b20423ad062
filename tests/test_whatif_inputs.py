"""Fast tier: bounds per input recommended from the data (reckon.whatif_inputs), and the
``reckon bound-whatif --per-source`` rendering."""

from __future__ import annotations

import json
from datetime import date

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from audits.bound_whatif import render_per_input
from reckon.eventtime import (
    PartitionObservation,
    WatermarkPolicy,
    WatermarkState,
    WindowSpec,
    advance_watermark,
    classify,
)
from reckon.whatif import lateness_curve
from reckon.whatif_inputs import PerInputRecommendation, judge_policy, recommend_per_input

S = 1_000_000
BASE = 1_767_225_600 * S
W = WindowSpec(10 * S)
CANDIDATES = [0, S, 3 * S, 10 * S, 30 * S]
SOURCES = ("radar", "sat", "http")

logs = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 25), st.integers(0, 1),
                          st.sampled_from(SOURCES)), max_size=40)


def _arrays(rows):
    """(event s, delay s, partition, source) -> arrays in arrival order."""
    t = np.array([BASE + r[0] * S for r in rows], dtype=np.int64)
    a = t + np.array([r[1] * S for r in rows], dtype=np.int64)
    order = np.argsort(a, kind="stable")
    p = np.array([r[2] for r in rows], dtype=np.int64)
    src = np.array([r[3] for r in rows], dtype=object)
    return t[order], a[order], p[order], src[order]


@settings(max_examples=150, deadline=None)
@given(logs, st.dictionaries(st.sampled_from(SOURCES), st.sampled_from(CANDIDATES)),
       st.sampled_from(CANDIDATES))
def test_judging_a_policy_is_classify_per_event_under_advance_watermark(rows, by_source, default):
    """judge_policy's counts are those of the book rule: each event classified against the
    watermark the events before it left, under bounds per source."""
    t, a, p, src = _arrays(rows)
    policy = WatermarkPolicy(default, 60 * S, by_source=True,
                             source_bounds=tuple(by_source.items()))
    point, _ = judge_policy(t, a, p, src, W, policy)
    state, dropped = WatermarkState(), 0
    for ti, ai, pi, si in zip(t.tolist(), a.tolist(), p.tolist(), src.tolist(), strict=True):
        dropped += sum(classify(w.end, state.watermark, 0).value == "late" for w in W.assign(ti))
        state = advance_watermark(state, [PartitionObservation(pi, ti, ai, source=si)], policy)
    assert (point.dropped, point.admitted) == (dropped, len(rows) - dropped)


@settings(max_examples=100, deadline=None)
@given(logs, st.sampled_from(CANDIDATES), st.booleans())
def test_one_bound_for_all_judges_as_the_curve_does(rows, bound, by_source):
    t, a, p, src = _arrays(rows)
    point, _ = judge_policy(t, a, p, src, W, WatermarkPolicy(bound, 60 * S, by_source=by_source))
    assert point == lateness_curve(t, a, p, W, [bound], idle_timeout=60 * S, source=src,
                                   by_source=by_source)[0]


@settings(max_examples=100, deadline=None)
@given(logs, st.sampled_from(["0.5", "0.9", "1"]), st.booleans())
def test_the_recommendation_is_what_its_bounds_give_and_reaches_the_target_when_one_bound_does(
        rows, target, by_source):
    t, a, p, src = _arrays(rows)
    rec = recommend_per_input(t, a, p, src, W, CANDIDATES, target, idle_timeout=60 * S,
                              by_source=by_source)
    point, _ = judge_policy(t, a, p, src, W, rec.policy(60 * S))
    assert point == rec.per_input
    if rec.single is not None:
        assert rec.reached
    assert sum(b.events for b in rec.bounds) == len(rows)
    assert PerInputRecommendation.from_json_dict(json.loads(json.dumps(rec.to_json_dict()))
                                                 ).to_json_dict() == rec.to_json_dict()


def bursty_day(n: int = 3000, seed: int = 3):
    """radar: real time, in order; sat: a buffer that delivers every 10 s (5 s into each
    window), in order; http: real time with up to 12 s of jitter. One partition carries all
    three."""
    rng = np.random.default_rng(seed)
    t = BASE + np.sort(rng.integers(0, n * S // 2, n))
    src = rng.choice(np.array(SOURCES, dtype=object), n)
    a = np.where(src == "sat", ((t - BASE - 5 * S) // (10 * S) + 1) * 10 * S + 5 * S + BASE, t)
    a = a + np.where(src == "http", rng.integers(0, 12 * S, n), 0)
    order = np.argsort(a, kind="stable")
    return t[order], a[order], None, src[order]


def test_a_slow_source_gets_its_bound_and_the_others_wait_less_than_under_one_bound():
    t, a, p, src = bursty_day()
    rec = recommend_per_input(t, a, p, src, W, [0, S, 2 * S, 5 * S, 10 * S, 20 * S], "0.999",
                              idle_timeout=60 * S)
    assert rec.reached and rec.single is not None and rec.by_partition is not None
    for one in (rec.single, rec.by_partition):
        assert rec.per_input.completeness >= one.completeness
        assert rec.per_input.avg_emit_latency < one.avg_emit_latency
    # today's rule (inputs by partition, one bound) waits for the buffer on every window
    assert rec.by_partition.avg_emit_latency > rec.per_input.avg_emit_latency + 5
    text = render_per_input(rec, date(2026, 1, 1))
    assert "bounds per source for 2026-01-01, target completeness 0.999" in text
    assert "configure: watermark_bound_by_source = " in text
    assert "sent no event" not in text


def test_the_configure_lines_set_the_recommended_bounds_from_a_file_or_flags(tmp_path):
    """What ``reckon bound-whatif --per-source`` says to write, pasted into reckon.toml or given
    as flags, configures exactly the recommended bounds."""
    from app.cli import _settings, build_parser
    from app.settings import load_settings

    t, a, p, src = bursty_day()
    rec = recommend_per_input(t, a, p, src, W, [0, S, 2 * S, 5 * S, 10 * S, 20 * S], "0.999",
                              idle_timeout=60 * S)
    lines = render_per_input(rec, date(2026, 1, 1)).splitlines()
    toml = next(ln for ln in lines if ln.startswith("  reckon.toml: "))
    flags = next(ln for ln in lines if ln.startswith("  flags: "))
    setting, _, inputs = toml.removeprefix("  reckon.toml: ").partition("  and ")
    (tmp_path / "reckon.toml").write_text(f"watermark_bound = \"{rec.per_input.bound // S}s\"\n"
                                          f"{setting}\n{inputs}\n")
    by_file = load_settings(tmp_path / "reckon.toml", env={})
    by_flags = _settings(build_parser().parse_args(
        ["stream", "--landing", "l", "--watermark-bound", f"{rec.per_input.bound // S}s",
         *flags.removeprefix("  flags:").split()]))
    for configured in (by_file, by_flags):
        assert configured.event_time_rules().watermark == rec.policy(60 * S)


def test_a_configured_source_without_events_is_named():
    """A bound for a source the day never heard of (a typo in the configuration) is named."""
    from reckon.spec import unseen_inputs

    t, a, p, src = bursty_day()
    rec = recommend_per_input(t, a, p, src, W, [0, S, 10 * S], "0.999", idle_timeout=60 * S)
    policy = WatermarkPolicy(0, 60 * S, by_source=True,
                             source_bounds=(("http", S), ("htpp", S), ("sat", S)))
    unheard = unseen_inputs(policy, (), [b.unit for b in rec.bounds])[0]
    assert unheard == ["htpp"]
    assert ("configured bounds of sources that sent no event on 2026-01-01: htpp (a misspelt "
            "name?") in render_per_input(rec, date(2026, 1, 1), unheard=unheard)


def test_a_running_start_knows_every_input_from_the_first_arrival():
    """A source first heard of 5 s into the log: from an empty start the windows the others
    closed meanwhile drop its first events; a running start does not."""
    t = BASE + np.array([0, 11, 12, 13, 1, 14]) * S
    a = BASE + np.array([0, 11, 12, 13, 14, 15]) * S
    src = np.array(["radar", "radar", "radar", "radar", "sat", "radar"], dtype=object)
    empty = recommend_per_input(t, a, None, src, W, [0, 20 * S], "1", idle_timeout=60 * S)
    running = recommend_per_input(t, a, None, src, W, [0, 20 * S], "1", idle_timeout=60 * S,
                                  running=True)
    assert [b.bound for b in empty.bounds] != [0, 0]
    assert [b.bound for b in running.bounds] == [0, 0] and running.per_input.dropped == 0
