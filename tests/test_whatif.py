"""Fast tier: the bound what-if (reference and vectorised), watermark_series, and the
``reckon bound-whatif-curve`` command on CSV and Parquet files."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main
from audits.bound_whatif import LatenessAnalysis, PartitionCurve, render_analysis
from audits.bound_whatif_file import read_events_file
from audits.records import AttributionRow
from reckon.errors import UsageError
from reckon.eventtime import (
    PartitionObservation,
    WatermarkPolicy,
    WatermarkState,
    WindowSpec,
    advance_watermark,
    is_beyond_allowed_lateness,
    shift_watermark_series,
    watermark_series,
)
from reckon.timeutil import format_micros
from reckon.whatif import (
    DEFAULT_IDLE_TIMEOUT,
    CurvePoint,
    lateness_curve,
    lateness_curve_reference,
    recommend,
)

S = 1_000_000
BASE = 1_767_225_600 * S  # 2026-01-01T00:00:00Z, a multiple of every window used here
NO_WM = np.iinfo(np.int64).min

# The semantics page's worked example: W = 10 s, one partition, one event per batch.
EXAMPLE = [1, 3, 7, 12, 15, 8, 22, 26, 4]


def example_events() -> list[tuple[int, int, int]]:
    return [(BASE + x * S, BASE + i * S, 0) for i, x in enumerate(EXAMPLE)]


def as_arrays(events: list[tuple[int, int, int]]) -> tuple[np.ndarray, ...]:
    arr = np.array(events, dtype=np.int64).reshape(-1, 3)
    return arr[:, 0], arr[:, 1], arr[:, 2]


# --------------------------------------------------------------------------- worked example


@pytest.mark.parametrize("impl", ["reference", "vectorised"])
def test_worked_example_drops_8_and_4_with_bound_3s(impl):
    events = example_events()
    bounds = [3 * S, 3600 * S]
    if impl == "reference":
        points = lateness_curve_reference(events, WindowSpec(10 * S), bounds)
    else:
        t, a, _ = as_arrays(events)
        points = lateness_curve(t, a, None, WindowSpec(10 * S), bounds)
    at3, large = points
    assert (at3.bound, at3.admitted, at3.dropped) == (3 * S, 7, 2)
    assert at3.completeness == pytest.approx(7 / 9)
    # [0,10) closes after 15 (max seen 15: 5 s), [10,20) after 26 (6 s); [20,30) never closes
    assert at3.avg_emit_latency == pytest.approx(5.5)
    assert (large.dropped, large.completeness, large.avg_emit_latency) == (0, 1.0, None)


def test_worked_example_with_grace_5s_drops_only_4():
    (point,) = lateness_curve_reference(example_events(), WindowSpec(10 * S), [3 * S],
                                        allowed_lateness=5 * S)
    assert (point.admitted, point.dropped) == (8, 1)


def test_hopping_counts_event_window_pairs():
    # W = 10 s every 5 s: 8 arrives after WM 12; its window [0,10) is final, [5,15) is open.
    t, a, _ = as_arrays(example_events())
    (point,) = lateness_curve(t, a, None, WindowSpec(10 * S, 5 * S), [3 * S])
    ref = lateness_curve_reference(example_events(), WindowSpec(10 * S, 5 * S), [3 * S])
    assert point == ref[0]
    assert point.admitted + point.dropped == 2 * len(EXAMPLE)
    assert point.dropped == 3  # 8 in [0,10); 4 in [-5,5) and [0,10)


def test_to_json_dict_has_exactly_the_documented_keys():
    point = CurvePoint.from_counts(2_500_000, 3, 1, 7_000_000, 2)
    assert point.to_json_dict() == {"bound_seconds": 2.5, "completeness": 0.75, "admitted": 3,
                                    "dropped": 1, "avg_emit_latency_seconds": 3.5}


def test_recommend_picks_the_smallest_bound_reaching_the_target_exactly():
    points = [CurvePoint.from_counts(b, a, d, 0, 0)
              for b, a, d in [(0, 90, 10), (5 * S, 999, 1), (2 * S, 999, 1), (9 * S, 1000, 0)]]
    assert recommend(points, 0.999).bound == 2 * S  # exactly 999/1000 reaches 0.999
    assert recommend(points, Decimal("0.9")).bound == 0
    assert recommend(points, "1").bound == 9 * S
    assert recommend(points[:1], 0.95) is None
    with pytest.raises(UsageError, match=r"target=1\.5 is not valid"):
        recommend(points, 1.5)


# --------------------------------------------------------------------------- properties


@st.composite
def event_logs(draw, max_events: int = 30):
    """Several partitions, out of order, with occasional long silences (idle partitions)."""
    n_parts = draw(st.integers(1, 3))
    labels = draw(st.sampled_from([(0, 1, 2), (3, 7, 11)]))[:n_parts]
    n = draw(st.integers(0, max_events))
    arrival = BASE
    events = []
    for _ in range(n):
        arrival += draw(st.sampled_from([0, 0, S // 2, S, 3 * S, 25 * S]))
        p = draw(st.sampled_from(labels))
        delay = draw(st.integers(0, 12)) * S // 2 + draw(st.sampled_from([0, 1, 999_999]))
        events.append((arrival - delay, arrival, p))
    expected = draw(st.lists(st.sampled_from([*labels, 99]), max_size=3, unique=True))
    return events, tuple(expected)


spec_strategy = st.sampled_from([WindowSpec(10 * S), WindowSpec(10 * S, 5 * S),
                                 WindowSpec(6 * S, 2 * S), WindowSpec(3 * S)])


@settings(max_examples=150, deadline=None)
@given(event_logs(), spec_strategy,
       st.lists(st.integers(0, 16).map(lambda k: k * S // 2), min_size=1, max_size=4),
       st.sampled_from([0, S, 5 * S]), st.sampled_from([2 * S, 10 * S, 20 * S]))
def test_vectorised_curve_equals_reference(log, spec, bounds, allowed_lateness, idle):
    events, expected = log
    t, a, p = as_arrays(events)
    kw = {"allowed_lateness": allowed_lateness, "idle_timeout": idle, "expected_partitions": expected}
    assert lateness_curve(t, a, p, spec, bounds, **kw) == lateness_curve_reference(
        events, spec, bounds, **kw)


@settings(max_examples=100, deadline=None)
@given(event_logs(max_events=40), spec_strategy, st.sampled_from([0, 2 * S]))
def test_completeness_never_falls_as_the_bound_grows(log, spec, allowed_lateness):
    events, expected = log
    t, a, p = as_arrays(events)
    points = lateness_curve(t, a, p, spec, [k * S // 2 for k in range(0, 30, 3)], allowed_lateness=allowed_lateness,
                            idle_timeout=10 * S, expected_partitions=expected)
    dropped = [pt.dropped for pt in points]
    assert dropped == sorted(dropped, reverse=True)
    assert [pt.completeness for pt in points] == sorted(pt.completeness for pt in points)
    assert [pt.bound for pt in points] == sorted(pt.bound for pt in points)


def iterate_watermark(events, policy, state=None):
    state = state or WatermarkState()
    before = []
    for t, a, p in events:
        before.append(NO_WM if state.watermark is None else state.watermark)
        state = advance_watermark(state, [PartitionObservation(p, t, a)], policy)
    return before, state


@settings(max_examples=200, deadline=None)
@given(event_logs(), st.booleans(), st.integers(0, 6).map(lambda k: k * S),
       st.sampled_from([S, 4 * S, 30 * S]), st.integers(0, 40), st.sampled_from([1, 2, 5, 64]))
def test_watermark_series_equals_iterated_advance_watermark(log, shuffle, lateness, idle,
                                                            split, cells):
    events, expected = log
    if shuffle:  # arrival times need not be monotone for the rule itself
        events = sorted(events, key=lambda e: (e[0] * 7 + e[2]) % 13)
    policy = WatermarkPolicy(lateness, idle, expected)
    want_before, want_state = iterate_watermark(events, policy)
    t, a, p = as_arrays(events)
    before, state = watermark_series(t, a, p, policy, max_cells=cells)
    assert before.tolist() == want_before
    assert state == want_state
    # continuing from a saved state is the same as one pass (what chunked callers rely on)
    k = min(split, len(events))
    first, mid = watermark_series(t[:k], a[:k], p[:k], policy)
    rest, end = watermark_series(t[k:], a[k:], p[k:], policy, state=mid)
    assert np.concatenate([first, rest]).tolist() == want_before
    assert end == want_state


def test_watermark_series_waits_for_expected_partitions_until_they_time_out():
    policy = WatermarkPolicy(watermark_bound=0, idle_timeout=10 * S, expected_partitions=(0, 1))
    events = [(BASE + 5 * S, BASE, 0), (BASE + 6 * S, BASE + 4 * S, 0),
              (BASE + 7 * S, BASE + 10 * S, 0), (BASE + 8 * S, BASE + 11 * S, 0)]
    before, state = watermark_series(*as_arrays(events), policy)
    # partition 1 never delivers: undefined until 10 s of arrival time have passed
    assert before.tolist() == [NO_WM, NO_WM, NO_WM, BASE + 7 * S]
    assert state.watermark == BASE + 8 * S and set(state.partitions) == {0}


def test_a_million_events_drop_what_each_bounds_own_watermark_drops():
    """At scale, the curve (one walk of the log, shifted per bound) counts exactly the pairs
    that each bound's own watermark series drops. Its speed is the benchmark's business."""
    rng = np.random.default_rng(3)
    n = 1_000_000
    a = BASE + np.sort(rng.integers(0, n * 5_000, n))
    t = a - rng.exponential(300_000, n).astype(np.int64)
    p = rng.integers(0, 3, n)
    spec, bounds = WindowSpec(10 * S), [0, S, 3 * S]
    points = lateness_curve(t, a, p, spec, bounds)
    ends = spec.window_starts(t)[0] + spec.size
    for point, bound in zip(points, bounds, strict=True):
        before, _ = watermark_series(t, a, p, WatermarkPolicy(bound, DEFAULT_IDLE_TIMEOUT))
        assert point.dropped == int(np.count_nonzero(is_beyond_allowed_lateness(ends, before, 0)))
    assert points[0].dropped > points[1].dropped > points[2].dropped > 0


@settings(max_examples=100, deadline=None)
@given(event_logs(), st.integers(0, 6).map(lambda k: k * S), st.sampled_from([S, 4 * S, 30 * S]))
def test_a_bounds_watermarks_are_the_zero_bounds_shifted_by_it(log, lateness, idle):
    events, expected = log
    t, a, p = as_arrays(events)
    at_zero, _ = watermark_series(t, a, p, WatermarkPolicy(0, idle, expected))
    want, _ = watermark_series(t, a, p, WatermarkPolicy(lateness, idle, expected))
    assert shift_watermark_series(at_zero, lateness).tolist() == want.tolist()


# --------------------------------------------------------------------------- the CLI


def iso(micros: int) -> str:
    return format_micros(micros)


def example_frame() -> pd.DataFrame:
    return pd.DataFrame({"event_time": [iso(t) for t, _, _ in example_events()],
                         "arrival_time": [iso(a) for _, a, _ in example_events()],
                         "partition": [0] * len(EXAMPLE)})


@pytest.fixture()
def cwd(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no stray ./reckon.toml
    for name in ("RECKON_CONFIG", "RECKON_GRACE", "RECKON_ALLOWED_LATENESS", "RECKON_SLIDE",
                 "RECKON_IDLE_TIMEOUT",
                 "RECKON_EXPECTED_PARTITIONS", "RECKON_TARGET_COMPLETENESS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def run_json(capsys, path: Path, bounds: str = "0s,3s,1h") -> list[dict]:
    code = main(["bound-whatif-curve", "--events", str(path), "--window", "10s",
                 "--bounds", bounds, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


KEYS = {"bound_seconds", "completeness", "admitted", "dropped", "avg_emit_latency_seconds"}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_cli_json_on_csv_and_parquet(cwd, capsys, fmt):
    frame = example_frame().iloc[::-1]  # file order is not arrival order: the CLI sorts
    path = cwd / f"events.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
    else:
        frame = frame.assign(event_time=pd.to_datetime(frame["event_time"], utc=True),
                             arrival_time=pd.to_datetime(frame["arrival_time"], utc=True))
        frame.to_parquet(path, index=False)
    rows = run_json(capsys, path, "3s,0s,1h")
    assert all(set(r) == KEYS for r in rows)
    assert [r["bound_seconds"] for r in rows] == [0.0, 3.0, 3600.0]
    assert (rows[1]["admitted"], rows[1]["dropped"]) == (7, 2)
    assert rows[1]["completeness"] == pytest.approx(7 / 9)
    assert rows[2]["dropped"] == 0 and rows[2]["avg_emit_latency_seconds"] is None


def test_naive_parquet_timestamps_are_read_as_utc(cwd):
    frame = example_frame()
    naive = frame.assign(
        event_time=pd.to_datetime(frame["event_time"], utc=True).dt.tz_localize(None),
        arrival_time=pd.to_datetime(frame["arrival_time"], utc=True).dt.tz_localize(None))
    naive.to_parquet(cwd / "n.parquet", index=False)
    t, a, p = read_events_file(cwd / "n.parquet")
    want_t, want_a, _ = as_arrays(example_events())
    assert t.tolist() == want_t.tolist() and a.tolist() == want_a.tolist()
    assert p is not None and p.tolist() == [0] * len(EXAMPLE)


def test_render_analysis_shows_curve_recommendations_and_who_is_late():
    points = tuple(lateness_curve(*as_arrays(example_events()), WindowSpec(10 * S),
                                  [0, 3 * S, 3600 * S]))
    analysis = LatenessAnalysis(
        day=date(2026, 1, 1), target=Decimal("0.999"), configured_bound=3 * S, events=9,
        points=points, recommended=recommend(points, Decimal("0.999")),
        partitions=(PartitionCurve(0, 9, points, None),))
    text = render_analysis(analysis, [AttributionRow(
        "partition", "0", 2, Decimal("3.00"), 9, Decimal("1.000000"), Decimal("1.000000"),
        Decimal("1.0000"))])
    assert "configured bound 3s, target completeness 0.999" in text
    assert "recommended bound for completeness 0.999: 1h" in text
    assert "partition 0: 9 events, recommended bound none reaches the target" in text
    assert "1.000000" in text and "77.7778%" in text
    assert analysis.configured == points[1]
    assert analysis.to_json_dict()["recommended_bound_seconds"] == 3600.0


def test_cli_keeps_file_order_for_equal_arrival_times(cwd, capsys):
    # both rows arrive at the same instant, so file order decides; with L = 0 the watermark
    # is 12 s after the event at 12 s, so an event at 1 s read after it is dropped.
    same = iso(BASE + 20 * S)
    first_12 = pd.DataFrame({"event_time": [iso(BASE + 12 * S), iso(BASE + 1 * S)],
                             "arrival_time": [same, same]})
    first_1 = first_12.iloc[::-1]
    first_12.to_csv(cwd / "a.csv", index=False)
    first_1.to_csv(cwd / "b.csv", index=False)
    assert run_json(capsys, cwd / "a.csv", "0s")[0]["dropped"] == 1
    assert run_json(capsys, cwd / "b.csv", "0s")[0]["dropped"] == 0


def test_cli_accepts_offsets_and_reads_them_as_utc(cwd, capsys):
    frame = example_frame()
    frame["event_time"] = [pd.Timestamp(v).tz_convert("Europe/Paris").isoformat()
                           for v in frame["event_time"]]
    frame.to_csv(cwd / "e.csv", index=False)
    assert run_json(capsys, cwd / "e.csv", "3s")[0]["dropped"] == 2


def test_cli_prints_a_readable_table(cwd, capsys):
    example_frame().to_csv(cwd / "e.csv", index=False)
    assert main(["bound-whatif-curve", "--events", str(cwd / "e.csv"), "--window", "10s",
                 "--bounds", "3s,1h"]) == 0
    out = capsys.readouterr().out
    assert "completeness" in out and "77.7778%" in out and "5.500s" in out
    assert "recommended bound for completeness 0.999: 1h" in out


@pytest.mark.parametrize(("setup", "args", "message"), [
    (None, ["--events", "missing.csv"], "--events='missing.csv' is not valid: an existing"),
    ("x.json", [], "a .csv, .parquet or .pq file"),
    ("nocol.csv", [], "missing column(s) arrival_time"),
    ("badtime.csv", [], "column arrival_time, row 2: 'yesterday' is not a time"),
    ("nozone.csv", [], "column event_time, row 1: '2026-01-01T00:00:01' is not a time"),
    ("datezone.csv", [], "column event_time, row 1: '2026-01-01' is not a time"),
    ("badpart.csv", [], "column partition, row 2: 'p1' is not a partition number"),
    ("ok.csv", ["--bounds", "3x"], "bounds='3x' is not valid"),
    ("ok.csv", ["--bounds", ","], "--bounds=',' is not valid"),
])
def test_cli_errors_name_the_file_column_and_what_is_allowed(cwd, capsys, setup, args,
                                                             message):
    t1, t2 = iso(BASE + S), iso(BASE + 2 * S)
    files = {
        "x.json": "{}",
        "nocol.csv": f"event_time\n{t1}\n",
        "badtime.csv": f"event_time,arrival_time\n{t1},{t1}\n{t2},yesterday\n",
        "nozone.csv": f"event_time,arrival_time\n2026-01-01T00:00:01,{t1}\n",
        "datezone.csv": f"event_time,arrival_time\n2026-01-01,{t1}\n",
        "badpart.csv": f"event_time,arrival_time,partition\n{t1},{t1},0\n{t2},{t2},p1\n",
        "ok.csv": f"event_time,arrival_time\n{t1},{t1}\n",
    }
    argv = ["bound-whatif-curve", "--window", "10s", "--bounds", "0s"]
    if setup is not None:
        (cwd / setup).write_text(files[setup])
        argv += ["--events", str(cwd / setup)]
    code = main(argv + args)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    if setup is not None and "bounds" not in message:
        assert setup in err


def test_the_text_curve_names_the_settings_as_the_cli_does(cwd, capsys):
    """``reckon bound-whatif-curve`` said "grace 0s", a name the flags no longer use."""
    path = cwd / "events.csv"
    example_frame().to_csv(path, index=False)
    assert main(["bound-whatif-curve", "--events", str(path), "--window", "10s",
                 "--bounds", "0s,3s"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "allowed lateness 0s" in head and "grace" not in head, head
