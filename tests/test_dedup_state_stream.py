"""The running stream judges duplicates by its state store (reckon.jvm.BucketedDedupState, or
reckon.jvm.DedupState for a state begun keyed by event_id), and defers to the archive where
the state cannot vouch (reckon.dedup_state): real streaming queries over a landing dir,
compared with the pure reference."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from reckon.eventtime import EventTimeRules
from reckon.reference import stream_outcome
from spark import dedup
from spark import tables as tb
from spark.dedup import StateSeed
from spark.sources import StreamSource
from spark.stream import run_stream
from tests.streamkit import (
    late_rows,
    provisional_rows,
    reference_late,
    reference_rows,
    stream_settings,
    write_landing,
)
from tests.test_replay_audit import RULES, random_batches

pytestmark = pytest.mark.spark

BAD_LINES = {1: ["not json at all", '{"event_id": "half"'], 3: ['{"event_id": ""}']}


def _stream(spark, settings, landing, checkpoint=None) -> list:
    metrics: list = []
    run_stream(spark, settings, StreamSource(landing=str(landing)), available_now=True,
               checkpoint=checkpoint, on_batch=metrics.append)
    return metrics


def _state_variables(spark, checkpoint) -> set[str]:
    """The dedup state's variables, from Spark's reader of a checkpoint's state metadata."""
    (row,) = spark.read.format("state-metadata").load(str(checkpoint)).collect()
    return {v["stateName"] for v in json.loads(row.operatorProperties)["stateVariables"]
            if not v["stateName"].startswith("$")}  # "$": Spark's own, such as its timers


@pytest.mark.parametrize("buckets, windows", [(dedup.STATE_BUCKETS, {}), (2, {"slide": "5s"})],
                         ids=["1024-buckets-tumbling", "2-buckets-hopping"])
def test_the_stream_judges_duplicates_by_its_state_as_the_reference_does(spark, tmp_path,
                                                                         monkeypatch, buckets,
                                                                         windows):
    """Re-deliveries within the dedup horizon (an hour) and beyond it, across batches and
    within one, on three partitions in three currencies, with quarantined lines among them:
    the state's verdicts are the reference's, and no batch of a stream that began on an empty
    archive (and ran for less than the state's TTL) reads the archive. With 2 buckets every
    bucket holds many ids; the checkpoint records the count its state was keyed by. The
    batches' dispositions are counted as the reference counts them, with hopping
    windows too (10 s every 5 s: each event counted in two windows)."""
    monkeypatch.setattr(dedup, "STATE_BUCKETS", buckets)
    rules = {**RULES, "dedup_horizon": "1h", **windows}
    batches = random_batches(9, n=30, batches=5, stragglers=2)
    hour = 3_600 * 1_000_000
    first = batches[0]
    batches.append([replace(first[0], arrival_time=first[0].arrival_time + 2 * hour),
                    replace(first[1], arrival_time=first[1].arrival_time + hour // 2)])
    landing = tmp_path / "landing"
    write_landing(landing, batches, extra_lines=BAD_LINES)
    settings = stream_settings(tmp_path / "wh", **rules)
    metrics = _stream(spark, settings, landing)
    expected = stream_outcome(batches, EventTimeRules.parse(**rules))
    admitted = [e.event_id for e, _ in expected.admitted]
    assert expected.duplicates, "the feed re-delivers within the horizon"
    assert len(admitted) > len(set(admitted)), "and beyond it: a copy the rule lets through"
    assert provisional_rows(spark, settings.warehouse_path) == reference_rows(expected)
    assert late_rows(spark, settings.warehouse_path) == reference_late(expected)
    assert sum(m.duplicates for m in metrics) == len(expected.duplicates)
    assert (sum(m.on_time + m.revised for m in metrics), sum(m.revised for m in metrics),
            sum(m.late for m in metrics)) == (expected.counted, expected.revised,
                                              len(expected.late))
    assert expected.late, "late windows are counted too, not only on-time ones"
    assert sum(m.quarantined for m in metrics) == sum(len(v) for v in BAD_LINES.values())
    assert {m.dedup_by for m in metrics if m.valid} == {"state"}
    log = tb.read_table(spark, settings.warehouse_path, tb.EVENT_LOG)
    flagged = {r.event_id for r in log.filter("is_duplicate").select("event_id").collect()}
    assert flagged == {e.event_id for e, _ in expected.duplicates}
    # each batch committed the keys it changed (a changelog), not a snapshot of the store
    checkpoint = settings.warehouse_path / "_checkpoints" / "stream-landing"
    assert len({p.name.split(".")[0].split("_")[0]
                for p in (checkpoint / "state").rglob("*.changelog")}) == len(metrics)
    assert json.loads(StateSeed.record_of(checkpoint).read_text())["buckets"] == buckets
    assert _state_variables(spark, checkpoint) == {"latest_by_event", "prune_at"}


def _three_batches_and_redeliveries(seed: int) -> tuple[dict, list]:
    """An hour's dedup horizon, three random batches, and a fourth that re-delivers three
    events of the second half an hour later: duplicates a state that kept them must catch."""
    rules = {**RULES, "dedup_horizon": "1h"}
    hour = 3_600 * 1_000_000
    batches = random_batches(seed, n=24, batches=3)
    batches.append([replace(e, arrival_time=e.arrival_time + hour // 2) for e in batches[1][:3]])
    return rules, batches


def test_a_state_begun_keyed_by_event_id_keeps_its_layout(spark, tmp_path):
    """A checkpoint whose dedup state began keyed by event_id (its record names no buckets,
    as reckon wrote it before the buckets) restarts with that layout, which Spark requires of
    the same checkpoint: the restarted stream judges by its state, a re-delivery of an event
    from before the restart is a duplicate, and the tables are the reference's."""
    rules, batches = _three_batches_and_redeliveries(19)
    settings = stream_settings(tmp_path / "wh", **rules)
    landing, checkpoint = tmp_path / "landing", tmp_path / "checkpoint"
    record = StateSeed.record_of(checkpoint)
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"event_log_version": None, "archived_until": None}))
    write_landing(landing, batches[:3])
    _stream(spark, settings, landing, checkpoint=str(checkpoint))
    write_landing(landing, batches[3:], start=3)
    after = _stream(spark, settings, landing, checkpoint=str(checkpoint))
    assert [(m.duplicates, m.dedup_by) for m in after if m.valid] == [(3, "state")]
    assert "buckets" not in json.loads(record.read_text())
    assert _state_variables(spark, checkpoint) == {"latest_arrival"}
    expected = stream_outcome(batches, EventTimeRules.parse(**rules))
    assert provisional_rows(spark, settings.warehouse_path) == reference_rows(expected)


def test_a_new_checkpoint_on_an_archive_is_judged_against_the_archive(spark, tmp_path):
    """The checkpoint is lost and a new query re-reads the landing dir: its state is empty,
    so it judges what arrives within a horizon of the archive against the archive, and every
    re-read delivery is a duplicate of its archived copy; nothing is counted twice."""
    batches = random_batches(11, n=24, batches=3)
    landing = tmp_path / "landing"
    write_landing(landing, batches)
    settings = stream_settings(tmp_path / "wh", **RULES)
    _stream(spark, settings, landing)
    totals, late = (provisional_rows(spark, settings.warehouse_path),
                    late_rows(spark, settings.warehouse_path))
    again = _stream(spark, settings, landing, checkpoint=str(tmp_path / "new-checkpoint"))
    assert [m.duplicates for m in again if m.valid] == [len(b) for b in batches]
    assert {m.dedup_by for m in again if m.valid} == {"archive"}
    assert provisional_rows(spark, settings.warehouse_path) == totals
    assert late_rows(spark, settings.warehouse_path) == late


def test_a_new_checkpoint_starts_from_the_archives_last_horizon(spark, tmp_path):
    """A new query on a warehouse with events, over new files only (the producer moved to
    another landing dir): its state starts from the archive's last hour, so a re-delivery of
    an archived event is caught by the state, with no archive read; the tables end as one
    stream over all the files would leave them."""
    rules = {**RULES, "dedup_horizon": "1h"}
    hour = 3_600 * 1_000_000
    batches = random_batches(13, n=24, batches=4)
    earlier = batches[1]
    batches.append([replace(e, arrival_time=e.arrival_time + hour // 2) for e in earlier[:3]])
    settings = stream_settings(tmp_path / "wh", **rules)
    write_landing(tmp_path / "before", batches[:2])
    _stream(spark, settings, tmp_path / "before")
    write_landing(tmp_path / "after", batches[2:], start=2)
    after = _stream(spark, settings, tmp_path / "after",
                    checkpoint=str(tmp_path / "another-checkpoint"))
    expected = stream_outcome(batches, EventTimeRules.parse(**rules))
    assert after[-1].duplicates == 3
    assert {m.dedup_by for m in after if m.valid} == {"state"}

    def figures(rows: dict) -> dict:  # the second query numbers its batches from 0 again
        return {cell: (total, count, status, revision)
                for cell, (total, count, status, revision, *_batches) in rows.items()}

    assert (figures(provisional_rows(spark, settings.warehouse_path))
            == figures(reference_rows(expected)))
    assert ([row[:3] for row in late_rows(spark, settings.warehouse_path)]
            == [row[:3] for row in reference_late(expected)])


def test_a_checkpoint_from_before_the_state_goes_on_against_the_archive(spark, tmp_path,
                                                                        capsys):
    """A checkpoint written by a query without the dedup state (as reckon ran before it)
    cannot take the stateful operator (Spark refuses it). The restarted stream says so in one
    line and goes on judging duplicates against the archive: a re-delivery of an archived
    event is still a duplicate, and the tables are the reference's."""
    from pathlib import Path

    from spark.sources import landing_admitter
    from spark.stream import BatchProcessor

    rules, batches = _three_batches_and_redeliveries(17)
    settings = stream_settings(tmp_path / "wh", **rules)
    landing, checkpoint = tmp_path / "landing", tmp_path / "checkpoint"
    write_landing(landing, batches[:3])
    source = StreamSource(landing=str(landing))
    processor = BatchProcessor.of(spark, settings, checkpoint=str(checkpoint))
    admitter = landing_admitter(source, Path(checkpoint))
    assert admitter is not None
    admitter.admit()
    # no dedup state
    query = (source.read(spark, settings.trigger_limits(), admitter.files_dir).writeStream
             .foreachBatch(processor).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    write_landing(landing, batches[3:], start=3)
    after = _stream(spark, settings, landing, checkpoint=str(checkpoint))
    assert "written before the dedup state" in capsys.readouterr().err
    assert [m.duplicates for m in after if m.valid] == [3]
    assert {m.dedup_by for m in after if m.valid} == {"archive"}
    expected = stream_outcome(batches, EventTimeRules.parse(**rules))
    assert provisional_rows(spark, settings.warehouse_path) == reference_rows(expected)


def test_a_bucket_forgets_the_ids_not_seen_for_the_ttl(spark, tmp_path):
    """The bucketed state keeps no TTL per entry: a timer per bucket prunes the ids not
    updated for the TTL (here 2 s; the stream's is two horizons and a margin). Read with
    Spark's state reader, as an operator inspecting a checkpoint would: after the first batch
    the bucket holds a and b; a batch 3 s later that re-delivers b and brings c leaves b and c,
    and a (not seen for the TTL) is gone. The verdicts compare arrivals, not the pruning: b's
    copy arrived within the horizon of the first, so it is a duplicate."""
    import time

    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

    from spark.stream import _start_without_empty_batches

    source, checkpoint = tmp_path / "rows", tmp_path / "checkpoint"
    schema = ("event_id string, reason string, arrival_us long, partition int, "
              "input_file string, offset long")
    seed = spark.createDataFrame([], "event_id string, latest_us long")
    jvm = spark.sparkContext._jvm
    verdicts: list[tuple[int, str, bool]] = []

    def run(rows: list[tuple], name: str) -> set[str]:
        spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(source / name))
        stream = spark.readStream.schema(schema).parquet(str(source / "*"))
        flagged = ClassicDataFrame(jvm.reckon.jvm.BucketedDedupState.flag(
            stream._jdf, seed._jdf, 3_600_000_000, jvm.java.time.Duration.ofSeconds(2), 1),
            spark)
        writer = (flagged.writeStream.option("checkpointLocation", str(checkpoint))
                  .trigger(availableNow=True).foreachBatch(lambda df, batch_id: verdicts.extend(
                      (batch_id, r.event_id, r.is_duplicate) for r in df.collect())))
        _start_without_empty_batches(spark, writer).awaitTermination()
        state = (spark.read.format("statestore").option("stateVarName", "latest_by_event")
                 .load(str(checkpoint)))
        return {r.user_map_key.value for r in state.select("user_map_key").collect()}

    assert run([("a", None, 1_000, 0, "f0", 0), ("b", None, 2_000, 0, "f0", 1)], "0") == {"a", "b"}
    time.sleep(3)
    assert run([("b", None, 3_000, 0, "f1", 0), ("c", None, 4_000, 0, "f1", 1)], "1") == {"b", "c"}
    assert sorted(verdicts) == [(0, "a", False), (0, "b", False), (1, "b", True), (1, "c", False)]
