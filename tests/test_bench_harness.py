"""The benchmark's measuring protocol: contenders run in turns after one untimed round, the
median timed run is reported, nothing one contender cached is left for the next, and the heap
a run keeps is read only once the collections have settled."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from bench.harness import MemorySampler, alternate


def test_contenders_alternate_and_the_median_run_is_reported(spark) -> None:
    calls: list[str] = []
    walls = {"ours": iter([99.0, 3.0, 1.0, 2.0]), "theirs": iter([50.0, 7.0, 9.0, 8.0])}
    cached_at_start: list[bool] = []

    def contender(name: str) -> Any:
        def run() -> tuple[Any, dict[str, Any]]:
            cached_at_start.append(not spark._jsparkSession.sharedState().cacheManager()
                                   .isEmpty())
            spark.range(10).cache().count()  # like DataComPy: cached and never unpersisted
            calls.append(name)
            wall = next(walls[name])
            return f"{name}@{wall}", {"wall_seconds": wall}
        return run

    out = alternate(spark, {"ours": contender("ours"), "theirs": contender("theirs")}, 3,
                     "audit")

    assert calls == ["ours", "theirs"] * 4  # in turns, the first round untimed
    assert cached_at_start == [False] * 8  # each run starts with nothing cached
    value, measured, timed = out["ours"]
    assert timed == [3.0, 1.0, 2.0] and measured["wall_seconds"] == 2.0 and value == "ours@2.0"
    value, measured, timed = out["theirs"]
    assert timed == [7.0, 9.0, 8.0] and measured["wall_seconds"] == 8.0 and value == "theirs@8.0"


def _jvm_reading(heap_mb: list[float], collections: list[int]) -> Any:
    """The slice of a SparkSession the sampler reads: a JVM whose heap in use after each
    System.gc() is the next of ``heap_mb`` (what Spark's ContextCleaner frees between two
    collections is only reclaimed by the second)."""
    mb = 1024 * 1024
    heap = iter(heap_mb)
    used = [0.0]

    def collect() -> None:
        collections.append(1)
        used[0] = next(heap)

    runtime = SimpleNamespace(totalMemory=lambda: int(used[0] * mb), freeMemory=lambda: 0)
    lang = SimpleNamespace(System=SimpleNamespace(gc=collect),
                           Runtime=SimpleNamespace(getRuntime=lambda: runtime))
    return SimpleNamespace(sparkContext=SimpleNamespace(_jvm=SimpleNamespace(
        java=SimpleNamespace(lang=lang))))


def test_the_kept_heap_is_read_once_two_collections_agree() -> None:
    collections: list[int] = []
    sampler = MemorySampler(_jvm_reading([310.0, 180.0, 126.0, 125.5, 90.0], collections))
    kept = sampler._heap_after_gc(settle_seconds=0)
    assert (round(kept / 1024 / 1024, 1), len(collections)) == (125.5, 4)


def test_the_kept_heap_reading_gives_up_after_its_attempts() -> None:
    collections: list[int] = []
    sampler = MemorySampler(_jvm_reading([400.0, 300.0, 200.0, 100.0, 50.0], collections))
    kept = sampler._heap_after_gc(settle_seconds=0, attempts=3)
    assert (round(kept / 1024 / 1024, 1), len(collections)) == (200.0, 3)


def test_the_noise_sentence_quotes_each_contenders_recorded_runs() -> None:
    """'Read this first' quotes the spread of the runs in the result files, never a figure
    typed into the notes; a workload not recorded, or run once, adds nothing."""
    from bench.report import _spread

    replay = {"results": {"reckon_replay_day": {"wall_seconds_runs": [56.8, 46.8, 50.5]},
                          "spark_groupby_floor": {"wall_seconds_runs": [14.5, 9.3, 10.5]}}}
    audit = {"results": {"reckon_audit_record_false": {"wall_seconds_runs": [17.6]},
                         "datacompy_spark_compare": {"wall_seconds_runs": [39.9, 30.8]}}}
    text = _spread({"replay": replay, "audit": audit})
    assert "replay run the same replay took 46.8 to 56.8 s" in text
    assert "the plain Spark floor took 9.3 to 14.5 s" in text
    assert "audit run DataComPy took 30.8 to 39.9 s" in text
    assert "the same audit" not in text  # one run has no spread
    assert _spread({"stream": {"results": {}}}) == "Wall seconds are noisy. "


def test_absolute_targets_are_read_from_the_results_and_prorated_to_the_goals_size() -> None:
    """The product's absolute goals are judged on the recorded figures: events/s as measured,
    the replay prorated to 20M events and the audit to 1M rows; the fastest other contender
    is quoted in the same unit, and a workload not recorded adds no row."""
    from bench.report import _absolute_rows

    stream = {"scale": {"events": 2_000_000},
              "results": {"reckon_stream": {"events_per_second": 250_000},
                          "spark_native_watermark": {"events_per_second": 300_000}}}
    replay = {"scale": {"events": 10_000_000},
              "results": {"reckon_replay_day": {"wall_seconds": 20.0},
                          "spark_groupby_floor": {"wall_seconds": 4.0}}}
    audit = {"scale": {"reconciliation_rows": 2_000_000},
             "results": {"reckon_audit_record_false": {"wall_seconds": 19.0},
                         "datacompy_spark_compare": {"wall_seconds": 50.0}}}
    rows = _absolute_rows({"stream": stream, "replay": replay, "audit": audit})
    assert rows == [
        "| stream | events/s from JSON, every late event kept | >= 200,000 | 250,000 | "
        "2,000,000 events | spark_native_watermark 300,000 | yes |",
        "| replay | seconds for a day of 20M events | <= 30 | 40.0 | 10,000,000 events | "
        "spark_groupby_floor 8.000 | NO |",
        "| audit | seconds per 1M (window, key, currency) rows | <= 10 | 9.500 | 2,000,000 rows | "
        "datacompy_spark_compare 25.0 | yes |"]
    assert _absolute_rows({"lateness": {"results": {}}}) == []


def test_the_trigger_sweep_is_a_table_from_the_profile_and_absent_when_it_did_not_run() -> None:
    from bench.report import _sweep_rows

    point = {"lines_per_trigger": 500_000, "batches": 5, "reckon_events_per_second": 13_106,
             "native_events_per_second": 44_469, "ratio": 0.332, "reckon_late_events_kept": 99}
    rows = _sweep_rows({"trigger_sweep": [point]})
    assert "| 500,000 | 5 | 13,106 | 44,469 | 0.33x | 99 |" in rows
    assert _sweep_rows({}) == [] and _sweep_rows({"trigger_sweep": []}) == []


def test_benchmarks_md_is_the_results_tables_and_the_short_notes(tmp_path) -> None:
    """Each workload's section is its contenders' table, generated from the result file, and
    its note from bench/notes/<workload>.md; prose is wrapped, so no line outside a table is
    long, and a figure comes from the results only."""
    import json

    from bench.report import write_markdown

    results, notes = tmp_path / "results", tmp_path / "notes"
    results.mkdir()
    notes.mkdir()
    lateness = {"workload": "lateness", "scale_factor": 1.0, "total_seconds": 12.5,
                "started_at": "2026-11-26T12:00:00+00:00", "load_average_before": [1.0, 1, 1],
                "load_average_after": [2.0, 2, 2], "git_commit": "abc", "git_dirty": False,
                "machine": {"cpu_count": 2, "memory_gb": 8, "platform": "linux"},
                "versions": dict.fromkeys(("python", "pyspark", "delta-spark", "duckdb",
                                           "datacompy", "numpy"), "1"),
                "scale": {"events": 10_000_000, "reference_events": 20_000},
                "results": {"reckon_lateness_curve": {"wall_seconds": 2.5,
                                                      "events_per_second_per_bound": 24_000_000},
                            "pure_python_reference": {"wall_seconds": 1.0,
                                                      "events_per_second_per_bound": 80_000}},
                "ratios": {"per_event_speedup": 300.0}, "targets": []}
    (results / "lateness.json").write_text(json.dumps(lateness))
    (notes / "lateness.md").write_text("The curve walks the log once,\nwith bound 0. " * 8)
    md = tmp_path / "BENCHMARKS.md"
    write_markdown(results, md, notes)
    text = md.read_text()
    section = text[text.index("### 5. Lateness curve"):]
    assert "| reckon_lateness_curve | 10,000,000 events | 2.500 | 24,000,000 /bound |" in section
    assert "| per_event_speedup | 300.0 |" in section
    assert "The curve walks the log once, with bound 0." in " ".join(section.split())
    assert all(len(line) <= 100 for line in text.splitlines() if not line.startswith("|"))
    (notes / "lateness.md").unlink()  # a workload without a note: just its tables
    write_markdown(results, md, notes)
    assert "walks the log" not in md.read_text()


def test_every_workload_has_a_short_note() -> None:
    """The notes BENCHMARKS.md prints stay short: history goes to bench/CHANGELOG.md."""
    from bench.report import ORDER, read_note

    for name in ORDER:
        note = read_note(name)
        assert note, f"bench/notes/{name}.md is missing"
        assert len(note) <= 700 and note.count(". ") <= 4, f"bench/notes/{name}.md is long"


def test_the_sweep_sizes_collapse_to_the_whole_dir_when_it_has_fewer_files() -> None:
    from bench.stream_bench import STREAM_SWEEP_FILES, sweep_sizes

    assert sweep_sizes(202) == [50, 202]                        # the full-scale landing dir
    assert sweep_sizes(20) == [20]                              # --quick: one point
    assert sweep_sizes(10_000) == sorted(STREAM_SWEEP_FILES)


def test_a_cloned_warehouse_shares_data_files_but_not_logs(tmp_path) -> None:
    """The freshness workload starts from a clone of a built hour of event_log: its data files
    are the built ones (hard links, no copy of 18M rows), while a log file rewritten in the
    clone (Delta rewrites _last_checkpoint in place) leaves the built warehouse as it was."""
    from bench.datasets import clone_warehouse

    built = tmp_path / "built"
    data = built / "event_log" / "event_date=2025-12-31" / "part-0.parquet"
    log = built / "event_log" / "_delta_log" / "_last_checkpoint"
    for path, text in ((data, "rows"), (log, '{"version": 1}'),
                       (built / "_bench_built.json", "{}")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    clone = tmp_path / "work" / "wh"
    clone_warehouse(built, clone)
    cloned_data = clone / data.relative_to(built)
    cloned_log = clone / log.relative_to(built)
    assert cloned_data.stat().st_ino == data.stat().st_ino
    assert cloned_log.stat().st_ino != log.stat().st_ino
    with cloned_log.open("w") as rewritten:  # in place, as Hadoop's local file system does
        rewritten.write('{"version": 2}')
    assert log.read_text() == '{"version": 1}'
    assert not (clone / "_bench_built.json").exists()  # the clone is no built warehouse
    (clone / "event_log" / "new.parquet").write_text("appended")
    clone_warehouse(built, clone)  # again: the run's leftovers are gone
    assert not (clone / "event_log" / "new.parquet").exists()


def test_a_folder_a_stopped_stream_still_writes_to_is_emptied_on_a_later_try(
        tmp_path, monkeypatch) -> None:
    """The state store's maintenance can still write files just after a stream stopped, and
    the first removal fails with "directory not empty": fresh_folder tries again; a folder
    that never empties still fails, after its attempts."""
    import errno
    import shutil

    from bench import datasets

    real_rmtree, calls = shutil.rmtree, []

    def busy_once(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 1:
            raise OSError(errno.ENOTEMPTY, "Directory not empty", str(path))
        real_rmtree(path, *args, **kwargs)

    folder = tmp_path / "run"
    (folder / "state" / "0").mkdir(parents=True)
    (folder / "state" / "0" / "1.delta").write_text("x")
    monkeypatch.setattr(datasets.shutil, "rmtree", busy_once)
    assert datasets.fresh_folder(folder, pause_seconds=0.01) == folder
    assert list(folder.iterdir()) == [] and len(calls) == 2

    def always_busy(path, *args, **kwargs):
        raise OSError(errno.ENOTEMPTY, "Directory not empty", str(path))

    monkeypatch.setattr(datasets.shutil, "rmtree", always_busy)
    try:
        datasets.fresh_folder(folder, attempts=2, pause_seconds=0.01)
    except OSError as err:
        assert err.errno == errno.ENOTEMPTY
    else:
        raise AssertionError("a folder that never empties must fail")


def _fake_day_commands(monkeypatch, tmp_path, spark_answer: list[dict]) -> list[str]:
    """The postmortem_day workload with its warehouse and commands faked: each DuckDB
    command takes 1 s, each Spark one 7 s, and answers ``[{"n": "1.500"}]`` (Spark
    ``spark_answer``). Returns the engines in the order they ran."""
    import json

    from bench import postmortem_day_bench as day

    order: list[str] = []

    def run(args: list[str], expect: int, out: Any) -> tuple[float, float]:
        engine = args[args.index("--engine") + 1]
        order.append(engine)
        out.write_text(json.dumps(spark_answer if engine == "spark" else [{"n": "1.500"}]))
        return (7.0 if engine == "spark" else 1.0), 100.0

    monkeypatch.setattr(day, "audited_day", lambda spark, scale: SimpleNamespace(
        warehouse_path=tmp_path))
    monkeypatch.setattr(day, "_table_rows", lambda wh: {"event_log": 3, "late_events": 1})
    monkeypatch.setattr(day, "time_process", run)
    return order


def test_the_day_questions_alternate_engines_and_the_ratio_is_the_target(monkeypatch,
                                                                         tmp_path) -> None:
    from bench.harness import Scale
    from bench.postmortem_day_bench import DAY_QUESTIONS, bench_postmortem_day

    order = _fake_day_commands(monkeypatch, tmp_path, [{"n": "1.500"}])
    out = bench_postmortem_day(None, Scale(factor=1.0, data_dir=tmp_path))

    assert order == ["duckdb", "spark"] * 3 * len(DAY_QUESTIONS)  # in turns, 3 at full scale
    assert out["ratios"] == {f"{q}_spark_over_duckdb": 7.0 for q in DAY_QUESTIONS}
    assert [(t["measured"], t["met"]) for t in out["targets"]] == [(7.0, True)] * 2
    assert out["profile"]["answers_equal"] is True


def test_the_day_questions_refuse_to_time_two_different_answers(monkeypatch,
                                                                tmp_path) -> None:
    from bench.harness import Scale
    from bench.postmortem_day_bench import bench_postmortem_day

    _fake_day_commands(monkeypatch, tmp_path, [{"n": "1.50"}])  # a decimal's scale differs
    with pytest.raises(RuntimeError, match="answered differently on spark run 1: row 0"):
        bench_postmortem_day(None, Scale(factor=1.0, data_dir=tmp_path))
