"""Smoke test of the benchmark harness: `python -m bench` at a tiny scale writes one result
file per workload with the keys BENCHMARKS.md and readers rely on, and regenerates the
markdown. Results go to a temporary folder so the committed ones are left alone.

The default suite runs the stream and lateness workloads (the harness end to end, ~1 min);
`make test-soak` runs the others (replay, audit and their baselines; freshness, which feeds
files for seconds whatever the scale; the scale curve's three replays and audits; the
compaction and long-day workloads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.__main__ import main
from bench.stream_bench import sweep_sizes
from bench.workloads import WORKLOADS

pytestmark = pytest.mark.slow

TOP_KEYS = {"workload", "scale_factor", "scale", "results", "ratios", "targets", "profile",
            "settings", "versions", "machine", "git_commit", "load_average_before",
            "load_average_after", "total_seconds", "started_at", "command"}
MEMORY_KEYS = {"peak_driver_rss_mb", "peak_python_rss_mb", "peak_jvm_rss_mb",
               "peak_jvm_heap_used_mb"}


DEFAULT = ["stream", "lateness"]
SOAK = ["replay", "audit", "freshness", "scale", "compaction", "long_day", "fixed_cost",
        "postmortem", "postmortem_day", "nightly_dag"]


@pytest.mark.parametrize("names", [DEFAULT, pytest.param(SOAK, marks=pytest.mark.soak)],
                         ids=["stream+lateness", "the-rest"])
def test_every_workload_writes_a_complete_result(spark, streamed_scenario, tmp_path: Path,
                                                 names, monkeypatch) -> None:
    assert sorted(DEFAULT + SOAK) == sorted(WORKLOADS), "a workload nobody smoke-tests"
    if "postmortem" in names:  # a streamed warehouse stands in for the demo's
        from tests.scenarios import SCENARIOS

        case = next(c for c in SCENARIOS if c.name.startswith("EUR, JPY and KWD"))
        monkeypatch.setenv("RECKON_BENCH_POSTMORTEM_WAREHOUSE",
                           str(streamed_scenario(case.name).warehouse_path))
    results, md = tmp_path / "results", tmp_path / "BENCHMARKS.md"
    code = main(["--scale", "0.0002", "--only", *names, "--results-dir", str(results),
                 "--data-dir", str(tmp_path / "data"), "--markdown", str(md)])
    assert code == 0
    for name in names:
        payload = json.loads((results / f"{name}.json").read_text())
        assert payload.keys() >= TOP_KEYS, name
        assert payload["workload"] == name
        assert {"pyspark", "delta-spark", "duckdb", "datacompy", "python"} <= payload[
            "versions"].keys()
        assert payload["machine"]["cpu_count"] >= 1
        assert len(payload["load_average_before"]) == 3
        for t in payload["targets"]:
            assert {"target", "goal", "measured", "met"} <= t.keys()
        if name not in ("freshness", "scale", "fixed_cost", "nightly_dag"):  # ours alone
            assert len(payload["results"]) >= 2, f"{name} needs ours and a baseline"
            for contender, r in payload["results"].items():
                assert r["wall_seconds"] > 0, (name, contender)
                assert r.keys() >= MEMORY_KEYS, (name, contender)
            assert payload["ratios"], name

    checks = {"stream": _stream, "replay": _replay, "audit": _audit, "lateness": _lateness,
              "freshness": _freshness, "scale": _scale, "compaction": _compaction,
              "long_day": _long_day, "fixed_cost": _fixed_cost,
              "postmortem_day": _postmortem_day}
    for name in names:
        if name in checks:
            checks[name](json.loads((results / f"{name}.json").read_text()))
    text = md.read_text()
    for name in names:
        assert f"| {name} |" in text


def _stream(stream: dict) -> None:
    ours = stream["results"]["reckon_stream"]
    native = stream["results"]["spark_native_watermark"]
    assert ours["events_per_second"] > 0 and native["events_per_second"] > 0
    assert ours["late_events_kept"] >= 0 and native["late_events_kept"] == 0
    assert stream["profile"]["reckon_step_seconds_total"], "per-step profile missing"
    files = stream["scale"]["files"]
    sweep = stream["profile"]["trigger_sweep"]
    assert [pt["files_per_trigger"] for pt in sweep] == sweep_sizes(files)
    for pt in sweep:
        assert pt["reckon_events_per_second"] > 0 and pt["native_events_per_second"] > 0
        assert pt["ratio"] > 0 and pt["reckon_late_events_kept"] >= 0
        if pt["files_per_trigger"] == files:  # the whole landing dir: one batch of every line
            assert pt["batches"] == 1 and pt["lines_per_trigger"] == stream["scale"]["lines"]
        else:
            assert pt["batches"] > 1 and pt["lines_per_trigger"] < stream["scale"]["lines"]


def _replay(replay: dict) -> None:
    for contender, r in replay["results"].items():  # every contender, in turns, median kept
        assert len(r["wall_seconds_runs"]) == replay["settings"]["rounds"], contender
        assert r["wall_seconds"] == sorted(r["wall_seconds_runs"])[len(r["wall_seconds_runs"]) // 2]
    assert replay["results"]["reckon_replay_day"]["windows"] > 0
    assert replay["profile"]["replay_timeline_seconds"], "timeline of the median run missing"


def _audit(audit: dict) -> None:
    counts = audit["results"]["reckon_audit_record_false"]["status_counts"]
    assert counts["MATCHED"] > 0 and counts["UNEXPLAINED"] + counts["EXPLAINED"] > 0
    for contender in ("reckon_audit_record_false", "datacompy_spark_compare"):
        runs = audit["results"][contender]["wall_seconds_runs"]
        assert len(runs) == audit["settings"]["rounds"], contender
        assert audit["results"][contender]["wall_seconds"] == sorted(runs)[len(runs) // 2]


def _lateness(lateness: dict) -> None:
    assert lateness["profile"]["agree_on_reference_slice"] is True


def _freshness(fresh: dict) -> None:
    for row in fresh["results"].values():
        assert row["files_landed"] > 0
        assert row["files_visible"] == row["files_landed"]
        # the stream ran on top of the archived hour (its de-duplication read it every batch)
        assert row["event_log_rows_at_end"] > row["archived_rows_before_the_feed"] >= 100
        assert {"p50", "p95", "p99"} <= row["latency_seconds"].keys()
        # the warm-up file is timed apart from the steady-state feed
        assert row["cold_start_seconds"] is not None and row["cold_start_seconds"] > 0


def _scale(scale: dict) -> None:
    assert len(scale["results"]) == 3
    # the driver's memory on a standalone cluster: its own JVM, at each of the three sizes
    cluster = scale["driver_on_cluster"]
    assert cluster["spark_master"].startswith("spark://")
    assert sorted(cluster["results"]) == sorted(scale["results"])
    for point in cluster["results"].values():
        for part in ("replay", "audit"):
            assert point[part]["wall_seconds"] > 0
            assert 0 < point[part]["peak_jvm_heap_used_mb"] <= 1024  # within the 1g driver
    names = [t["target"] for t in scale["targets"]]
    assert any("standalone cluster" in n for n in names)


def _compaction(compaction: dict) -> None:
    from bench.compaction_bench import STREAM_FILE_ROWS

    events = compaction["scale"]["events"]
    assert compaction["scale"]["event_log_files"] == max(2, events // STREAM_FILE_ROWS)
    assert set(compaction["results"]) == {"reckon_replay_small_files", "reckon_compact_day",
                                          "reckon_replay_compacted"}
    done = compaction["profile"]["compaction"]
    assert done["event_log_files_before"] == compaction["scale"]["event_log_files"]
    assert done["event_log_files_after"] == 1


def _long_day(long_day: dict) -> None:
    """The real stream's batches late in a day (a day of deltas behind them) and in the
    morning, each judged by the dedup state, each with its dashboard read of the open and
    recent windows."""
    scale = long_day["scale"]
    assert scale["provisional_deltas_rows"] >= 20
    morning = long_day["results"]["reckon_stream_morning"]
    evening = long_day["results"]["reckon_stream_evening"]
    for run in (morning, evening):
        assert run["batches"] == len(run["batch_seconds"]) == scale["timed_batches"]
        assert run["dedup_by"] == {"state": scale["timed_batches"]}
        assert run["lines_in"] > 0 and run["dashboard_rows"] > 0
        assert run["dashboard_windows"] > 0 and run["dashboard_read_seconds"] > 0
        assert {"parse+summary", "dedup+classify", "event_log", "progress"} <= run[
            "median_step_seconds"].keys()
    assert long_day["ratios"]["batch_evening_vs_morning"] == round(
        evening["median_commit_interval_seconds"] / morning["median_commit_interval_seconds"], 3)


def _fixed_cost(fixed: dict) -> None:
    """Steady batches of one file each through the real stream, their medians per step."""
    ours = fixed["results"]["reckon_stream_steady_batches"]
    scale = fixed["scale"]
    assert ours["batches"] == scale["batches"] - scale["warm_up_batches"] > 0
    assert ours["lines_in"] == ours["batches"] * scale["lines_per_batch"]
    assert ours["median_commit_interval_seconds"] >= ours["median_batch_seconds"] > 0
    assert fixed["profile"]["median_step_seconds"]["parse+summary"] > 0


def _postmortem_day(day: dict) -> None:
    assert day["profile"]["answers_equal"] is True  # the engines were timed on one answer
    assert all(n > 0 for n in day["profile"]["answer_rows"].values())
    assert day["scale"]["table_rows"]["late_events"] > 0
