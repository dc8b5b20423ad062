"""Batch marks a stream commit carries in its userMetadata (spark/tables.py; fast tier), and the
concurrent writes of one batch they make safe (Spark tier)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.commits import batch_mark, batch_mark_reads, parse_batch_mark


@given(st.text(min_size=1), st.sampled_from(["event_log", "provisional_totals"]),
       st.integers(0, 2**62))
def test_a_mark_reads_back_as_what_was_written(app_id, table, batch_id):
    assert parse_batch_mark(batch_mark(app_id, table, batch_id)) == (app_id, table, batch_id)


@given(st.dictionaries(st.sampled_from(["event_log", "watermark_progress"]),
                       st.integers(0, 2**62)))
def test_a_mark_carries_the_versions_its_batch_read(reads):
    text = batch_mark("app", "event_log", 7, reads)
    assert parse_batch_mark(text) == ("app", "event_log", 7)
    assert batch_mark_reads(text) == reads


def test_reads_are_empty_where_no_mark_records_them():
    for text in (None, "nightly replay", batch_mark("a", "t", 1), json.dumps(
            {"reckon_batch": {"app": "a", "table": "t", "batch": 1, "reads": [3]}}), json.dumps(
            {"reckon_batch": {"app": "a", "table": "t", "batch": 1, "reads": {"t": "x"}}}),
            json.dumps({"reckon_batch": {"app": "a", "table": "t", "reads": {"t": 1}}})):
        assert batch_mark_reads(text) == {}, text


def test_other_user_metadata_is_no_mark():
    for text in (None, "", "nightly replay", "reckon_batch", json.dumps({"reckon_batch": 3}),
                 json.dumps({"reckon_batch": {"app": "a", "table": "t"}}),
                 json.dumps({"reckon_batch": {"app": "a", "table": "t", "batch": "x"}}), "{"):
        assert parse_batch_mark(text) is None, text


@pytest.mark.spark
def test_a_failed_write_is_raised_only_after_every_write_of_the_batch_ended(spark):
    """The stream's concurrent writes: a batch that fails never leaves a write running into its
    own re-run, and the failure is not swallowed."""
    import threading
    import time
    from contextlib import nullcontext

    from spark.concurrent_writes import ConcurrentWrites

    slow_done = threading.Event()
    steps: list[str] = []

    def step(name: str):
        steps.append(name)
        return nullcontext()

    def slow() -> None:
        time.sleep(0.5)
        slow_done.set()

    def failing() -> None:
        raise RuntimeError("deltas failed")

    writes = ConcurrentWrites(step)
    writes.start("event_log", slow)
    writes.start("deltas", failing)
    writes.wait()
    assert slow_done.is_set()
    assert sorted(steps) == ["deltas", "event_log"]
    with pytest.raises(RuntimeError, match="deltas failed"):
        writes.raise_first_error()


@pytest.mark.spark
def test_reads_side_by_side_raise_the_first_failure_in_the_calls_order():
    """The audit opens its inputs side by side and checks the layout first: when several
    fail, the error raised is the first call's, however the threads finish."""
    import time

    from spark.concurrent_writes import side_by_side

    def late_failure() -> None:
        time.sleep(0.2)
        raise LookupError("the layout check")

    def early_failure() -> None:
        raise ValueError("a table")

    with pytest.raises(LookupError, match="layout"):
        side_by_side({"layout": late_failure, "table": early_failure, "ok": lambda: 1})
    assert side_by_side({"b": lambda: 2, "a": lambda: 1}) == {"b": 2, "a": 1}


def test_marks_from_a_past_version_down_read_the_commit_files_as_the_history_says(spark,
                                                                              tmp_path):
    """marked_commits(at_version=v) reads commit files from v down; Delta's own history() is
    the oracle: the same (version, mark) pairs, newest first, at every v (marked appends of two
    apps, an unmarked append, an OPTIMIZE)."""
    from delta.tables import DeltaTable

    from spark import tables as tb
    from storage import commits
    from tests.test_bound_whatif_spark import BASE, S, log_row

    name = tb.EVENT_LOG
    tb.ensure_table(spark, tmp_path, name)
    for i, (app, batch) in enumerate((("a", 0), ("b", 0), (None, None), ("a", 1), ("b", 1))):
        rows = spark.createDataFrame([log_row(i, BASE + i * S, BASE + i * S, 0, offset=i)],
                                     tb.SCHEMAS[name])
        if app is None:
            rows.write.format("delta").mode("append").save(tb.table_path(tmp_path, name))
        else:
            tb.marked_append(rows, tmp_path, name, app, batch)
    table = DeltaTable.forPath(spark, tb.table_path(tmp_path, name))
    table.optimize().executeCompaction()
    described = table.history().select("version", "userMetadata", "operation",
                                       "operationMetrics").collect()
    history = [(r.version, parse_batch_mark(r.userMetadata)) for r in described]
    head = max(v for v, _ in history)
    assert head == 6 and history[0][1] is None  # 5 appends and the OPTIMIZE after version 0
    for at in range(head + 1):
        want = [(v, m) for v, m in history if v <= at and m is not None and m[1] == name]
        assert list(commits.marked_commits(tmp_path, name, at_version=at)) == want, at
    assert list(commits.marked_commits(tmp_path, name, at_version=head))[:2] == [
        (v, m) for v, m in history if m is not None][:2]
    assert commits.last_marked_batch(tmp_path, name, "a", at_version=head) == 1
    assert commits.marked_commit(tmp_path, name, "b", 0) == (
        next(v for v, m in history if m == ("b", name, 0)), {})
    assert commits.marked_commit(tmp_path, name, "b", 2) is None
    # commit_infos: the same commits oldest first, after a version, as the history shows them
    for after in (-1, 3, head):
        infos = list(commits.commit_infos(tmp_path, name, after))
        assert [(v, i["operation"], i.get("userMetadata"),
                 {k: str(x) for k, x in (i.get("operationMetrics") or {}).items()})
                for v, i in infos] == [
            (r.version, r.operation, r.userMetadata, dict(r.operationMetrics or {}))
            for r in reversed(described) if r.version > after], after


@pytest.mark.spark
def test_the_current_version_from_the_log_files_is_the_one_the_history_gives(spark, tmp_path):
    """current_version probes the commit files after _last_checkpoint's version (or lists the
    log without it); Delta's history() is the oracle after every commit, across checkpoints,
    without the hint, and when the hinted commit file was cleaned up."""
    from delta.tables import DeltaTable

    from spark import tables as tb
    from storage import commits
    from tests.test_bound_whatif_spark import BASE, S, log_row

    name = tb.EVENT_LOG
    assert commits.current_version(tmp_path, name) is None  # no table
    (tmp_path / name / "_delta_log").mkdir(parents=True)
    assert commits.current_version(tmp_path, name) is None  # a log without a commit
    (tmp_path / name / "_delta_log").rmdir()
    path = tb.ensure_table(spark, tmp_path, name)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '3')")
    table = DeltaTable.forPath(spark, path)
    log = tmp_path / name / "_delta_log"

    def newest() -> int:
        return int(table.history(1).select("version").first()[0])

    for i in range(9):
        assert commits.current_version(tmp_path, name) == newest(), i
        rows = spark.createDataFrame([log_row(i, BASE + i * S, BASE + i * S, 0, offset=i)],
                                     tb.SCHEMAS[name])
        tb.marked_append(rows, tmp_path, name, "a", i)
    head = newest()
    hint = json.loads((log / "_last_checkpoint").read_text())["version"]
    assert head == 10 and 0 < hint < head  # the probe starts past the first commits
    assert commits.current_version(tmp_path, name) == head
    # files that are no commit of their own: a commit in flight, a log compaction, checksums
    (log / f".{head + 1:020d}.json.0a1b.tmp").write_text("{}")
    (log / f"{0:020d}.{3:020d}.compacted.json").write_text("{}")
    (log / "_staged_commits").mkdir(exist_ok=True)
    (log / "_staged_commits" / f"{head + 2:020d}.0a1b.json").write_text("{}")
    (log / "_last_checkpoint").rename(log / "last_checkpoint.kept")
    assert commits.current_version(tmp_path, name) == head  # listed
    (log / "_last_checkpoint").write_text('{"version": 9, "si')  # torn: listed
    assert commits.current_version(tmp_path, name) == head
    (log / "last_checkpoint.kept").replace(log / "_last_checkpoint")
    (log / f"{hint:020d}.json").unlink()  # as Delta's log cleanup may leave it
    assert commits.current_version(tmp_path, name) == head
    assert spark.read.format("delta").load(path).count() == 9
