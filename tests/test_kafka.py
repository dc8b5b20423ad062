"""Kafka tier: scenario events produced to a real KRaft broker, read by the real streaming job.

The stream judges micro-batch n against the watermark after batch n-1, so the expected tables
depend on the batch boundaries. Spark forms the batches from Kafka offsets
(``maxOffsetsPerTrigger``); the tests read the boundaries Spark actually used back from
``event_log.batch_id`` and run the pure reference (reckon.reference) over exactly those batches.
The transcript expectations of tests/scenarios.py are checked too where the boundaries are
fixed (one offset per trigger on one partition gives the scenario's one-event batches).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from app.settings import load_settings
from reckon.config import Settings
from reckon.reference import Event, stream_outcome
from reckon.timeutil import to_micros
from spark.sources import StreamSource
from spark.stream import run_stream
from tests.kafka_broker import KafkaBroker, Placement, produce_events
from tests.scenarios import BASE, SCENARIOS, S, scenario_totals
from tests.streamkit import (
    late_rows,
    provisional_rows,
    reference_late,
    reference_rows,
    watermarks,
)

pytestmark = pytest.mark.kafka

STREAM_TIMEOUT = 3600.0  # seconds; only a guard against a hung query (a busy 2-core machine
# needs minutes per micro-batch when several Spark test runs share it)


def _settings(warehouse: Path, **rules: object) -> Settings:
    return load_settings(env={}, warehouse=str(warehouse), shuffle_partitions=2, **rules)


def _stream(spark, settings: Settings, broker: KafkaBroker, topic: str,
            checkpoint: Path) -> None:
    run_stream(spark, settings, StreamSource(kafka_bootstrap=broker.bootstrap, topic=topic),
               checkpoint=str(checkpoint), on_batch=None, timeout_seconds=STREAM_TIMEOUT)


def _log(spark, warehouse: Path) -> list:
    """event_log as small Python rows (test tables hold a few dozen rows)."""
    return (spark.read.format("delta").load(str(warehouse / "event_log"))
            .select("event_id", "partition", "offset", "arrival_time", "input_file",
                    "batch_id", "is_duplicate").collect())


def _with_kafka_offsets(events: list[Event], placements: list[Placement]) -> dict:
    """(partition, offset) -> the event as Kafka stored it (the offset is Kafka's)."""
    out = {}
    for e, p in zip(events, placements, strict=True):
        assert (p.event_id, p.partition) == (e.event_id, e.partition)
        out[(p.partition, p.offset)] = dataclasses.replace(e, offset=p.offset)
    return out


def _formed_batches(log: list, stored: dict) -> list[list[Event]]:
    """The micro-batches Spark formed, as reference events, from event_log.batch_id."""
    by_batch: dict[int, list[Event]] = {}
    for r in log:
        by_batch.setdefault(r.batch_id, []).append(stored[(r.partition, r.offset)])
    assert sorted(by_batch) == list(range(len(by_batch))), \
        f"batch ids are not 0..n-1: {sorted(by_batch)}"
    return [by_batch[i] for i in range(len(by_batch))]


def _assert_transport_from_kafka(log: list, stored: dict, topic: str) -> None:
    """Every produced record is archived once, at Kafka's partition and offset."""
    got = Counter((r.partition, r.offset) for r in log)
    assert got == Counter(list(stored)), "event_log (partition, offset) differ from Kafka's"
    for r in log:
        e = stored[(r.partition, r.offset)]
        assert (r.event_id, r.input_file) == (e.event_id, topic)
        assert to_micros(r.arrival_time) == e.arrival_time


def _assert_matches_reference(spark, warehouse: Path, batches: list[list[Event]],
                              settings: Settings):
    expected = stream_outcome(batches, settings.event_time_rules())
    assert provisional_rows(spark, warehouse) == reference_rows(expected)
    assert late_rows(spark, warehouse) == reference_late(expected)
    assert watermarks(spark, warehouse) == expected.watermarks
    return expected


# ---------------------------------------------------------------------------- worked example


def test_worked_example_from_kafka_matches_the_transcript(spark, kafka_broker, tmp_path):
    # allowed lateness 0 (the allowed lateness variant differs only in classification, which the landing-source
    # scenario test covers; here the transport is under test)
    case = SCENARIOS[0]
    topic = kafka_broker.create_topic("worked-example", partitions=1)
    events = [e for batch in case.batches for e in batch]
    stored = _with_kafka_offsets(events, produce_events(kafka_broker.bootstrap, topic, events))
    warehouse = tmp_path / "wh"
    settings = _settings(warehouse, max_offsets_per_trigger=1, **case.rules)

    _stream(spark, settings, kafka_broker, topic, tmp_path / "cp")

    log = _log(spark, warehouse)
    _assert_transport_from_kafka(log, stored, topic)
    batches = _formed_batches(log, stored)
    # one offset per trigger on one partition: exactly the transcript's one-event batches
    assert [[e.event_id for e in b] for b in batches] == \
        [[e.event_id for e in b] for b in case.batches]
    _assert_matches_reference(spark, warehouse, batches, settings)
    got = provisional_rows(spark, warehouse)
    assert {((k[0] - BASE) // S, k[1], k[2]): v[:4] for k, v in got.items()} \
        == scenario_totals(case)
    assert sorted((r[0], (r[1] - BASE) // S, int(r[4])) for r in late_rows(spark, warehouse)) \
        == sorted(case.late)


# ---------------------------------------------------------------------------- several partitions

# Event times (seconds after BASE) per Kafka partition, in offset order. Partition 2 is slow,
# so under the min rule it holds the watermark back (the max rule would close [10,20) after the
# fifth round); partition 1's last event (7) arrives after [0,10) closed; partition 2's last
# record re-delivers partition 1's second event (a duplicate across partitions).
_TIMES = {0: [1, 5, 11, 16, 24, 31], 1: [2, 6, 12, 3, 22, 7], 2: [0, 4, 8, 13, 18, None]}
_DUPLICATE_OF = (1, 1)  # (partition, round) re-delivered as partition 2's last record


def three_partition_rounds(*, duplicate: bool = True) -> list[list[Event]]:
    """Round k holds the k-th record of each partition; arrival times are whole seconds,
    increasing in round order (so they survive Kafka's millisecond timestamps)."""
    rounds: list[list[Event]] = []
    for k in range(6):
        batch = []
        for p, times in _TIMES.items():
            arrival = BASE + (100 + 3 * k + p) * S
            t = times[k]
            if t is None:
                if not duplicate:
                    t = 21
                else:
                    original = rounds[_DUPLICATE_OF[1]][_DUPLICATE_OF[0]]
                    batch.append(dataclasses.replace(original, arrival_time=arrival,
                                                     partition=p, offset=k))
                    continue
            batch.append(Event(f"p{p}-r{k}-t{t}", "acct-a" if (k + p) % 2 == 0 else "acct-b",
                               Decimal(f"{10 + k}.{p}5"), BASE + t * S, arrival, p, k))
        rounds.append(batch)
    return rounds


def test_three_partitions_take_partition_offset_and_arrival_from_kafka(spark, kafka_broker,
                                                                       tmp_path):
    topic = kafka_broker.create_topic("three-partitions", partitions=3)
    rounds = three_partition_rounds()
    events = [e for batch in rounds for e in batch]
    # the lines carry neither partition nor arrival_time: both must come from Kafka
    placements = produce_events(kafka_broker.bootstrap, topic, events, transport_fields=True)
    stored = _with_kafka_offsets(events, placements)
    assert sorted(p.offset for p in placements if p.partition == 2) == list(range(6))
    warehouse = tmp_path / "wh"
    settings = _settings(warehouse, max_offsets_per_trigger=3)

    _stream(spark, settings, kafka_broker, topic, tmp_path / "cp")

    log = _log(spark, warehouse)
    _assert_transport_from_kafka(log, stored, topic)
    batches = _formed_batches(log, stored)
    assert len(batches) > 1, "maxOffsetsPerTrigger=3 must split 18 records into micro-batches"
    expected = _assert_matches_reference(spark, warehouse, batches, settings)
    duplicated = [r.event_id for r in log if r.is_duplicate]
    assert duplicated == [e.event_id for e, _ in expected.duplicates] == ["p1-r1-t6"]
    # Spark splits a trigger's offsets across partitions in proportion to their backlog: with
    # equal backlogs that is one record per partition, i.e. exactly the designed rounds, which
    # exercise the min rule and a late event.
    assert [sorted(e.event_id for e in b) for b in batches] == \
        [sorted(e.event_id for e in b) for b in rounds]
    assert [(r.event.event_id, (r.watermark - BASE) // S) for r in expected.late] == \
        [("p1-r5-t7", 15)]
    assert expected.watermarks[-1] == BASE + 15 * S


# ---------------------------------------------------------------------------- broker restart


@pytest.mark.soak  # ~35 s more; the other Kafka tests run in the default tier
def test_broker_restart_between_runs_loses_nothing_and_counts_nothing_twice(spark, tmp_path):
    """Produce three rounds, stream them, restart the broker (same data directory and port),
    produce the other three, stream again from the same checkpoint."""
    rounds = three_partition_rounds(duplicate=False)
    first = [e for batch in rounds[:3] for e in batch]
    rest = [e for batch in rounds[3:] for e in batch]
    warehouse = tmp_path / "wh"
    settings = _settings(warehouse)  # no rate limit: one micro-batch per run
    checkpoint = tmp_path / "cp"
    with KafkaBroker() as broker:
        topic = broker.create_topic("restart", partitions=3)
        placements = produce_events(broker.bootstrap, topic, first)
        _stream(spark, settings, broker, topic, checkpoint)
        assert len(_log(spark, warehouse)) == len(first)

        port = broker.port
        broker.stop()
        assert not broker.running
        broker.start()
        assert broker.port == port

        placements += produce_events(broker.bootstrap, topic, rest)
        _stream(spark, settings, broker, topic, checkpoint)

    stored = _with_kafka_offsets(first + rest, placements)
    # the topic's data survived the restart: offsets continue where they were
    assert sorted(o for (p, o) in stored if p == 0) == list(range(6))
    log = _log(spark, warehouse)
    _assert_transport_from_kafka(log, stored, topic)
    assert Counter(r.event_id for r in log) == Counter(e.event_id for e in first + rest)
    assert not [r.event_id for r in log if r.is_duplicate]
    batches = _formed_batches(log, stored)
    assert [len(b) for b in batches] == [len(first), len(rest)]
    expected = _assert_matches_reference(spark, warehouse, batches, settings)
    # nothing lost, nothing twice: counted + late covers every event exactly once
    counted = sum(r.event_count for r in _provisional_counts(spark, warehouse))
    assert counted + len(expected.late) == len(first + rest)


def _provisional_counts(spark, warehouse: Path) -> list:
    return (spark.read.format("delta").load(str(warehouse / "provisional_deltas"))
            .select("event_count").collect())


# ---------------------------------------------------------------------------- the harness


def test_missing_broker_jars_tell_the_user_to_run_make_setup(tmp_path):
    from reckon.errors import ConfigError

    with pytest.raises(ConfigError, match=r"make setup"):
        KafkaBroker(tmp_path)


def test_a_kafka_stream_expects_every_partition_of_its_topic(spark, kafka_broker):
    """Partition 2 is still empty when the stream starts: it must be expected all the same
    (from the topic's metadata), or the watermark would be defined by 0 and 1 alone and
    partition 2's first backlog judged late."""
    from reckon.errors import UsageError
    from spark.sources import kafka_offsets, kafka_partitions

    topic = kafka_broker.create_topic("empty-partition", partitions=3)
    assert kafka_partitions(spark, kafka_broker.bootstrap, topic) == [0, 1, 2]
    empty = {0: 0, 1: 0, 2: 0}
    assert kafka_offsets(spark, kafka_broker.bootstrap, topic, latest=True) == empty
    with pytest.raises(UsageError, match="no such topic"):
        kafka_partitions(spark, kafka_broker.bootstrap, "no-such-topic", timeout_seconds=10)


def test_the_broker_listens_on_loopback_only(kafka_broker):
    import socket

    with socket.create_connection(("127.0.0.1", kafka_broker.port), timeout=5):
        pass
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outbound IP
        outward = probe.getsockname()[0]
    finally:
        probe.close()
    if outward.startswith("127."):
        pytest.skip("this machine has no non-loopback address to probe")
    for port in (kafka_broker.port, kafka_broker.controller_port):
        with pytest.raises(OSError):
            socket.create_connection((outward, port), timeout=5).close()


def test_replay_straight_from_the_topic_equals_the_reference(spark, kafka_broker, tmp_path):
    """`reckon replay --kafka`: a batch read of the topic, earliest to latest, gives the same
    canonical totals as the pure reference (re-deliveries counted once, malformed lines and
    events of other days left out), with no event log involved."""
    from datetime import date

    from audits.audit import audit_day
    from reckon.eventtime import EventTimeRules
    from reckon.reference import canonical_totals, reconcile_outcome, stream_outcome
    from spark.replay import replay_day
    from tests.test_replay_audit import DAY2, RULES, random_batches, run_batches

    topic = kafka_broker.create_topic("replay-from-topic", partitions=3)
    batches = random_batches(21, n=30, conflicting=2)
    events = [e for batch in batches for e in batch]
    produce_events(kafka_broker.bootstrap, topic, events)
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    producer.send(topic, value=b'{"event_id": "broken', partition=0)
    producer.flush()
    producer.close()
    settings = dataclasses.replace(
        load_settings(env={}, warehouse=str(tmp_path / "wh"), shuffle_partitions=2, **RULES),
        kafka_bootstrap=kafka_broker.bootstrap, kafka_topic=topic)
    result = replay_day(spark, settings.replay_config(), DAY2, from_kafka=True)
    assert result.source == f"kafka:{topic}" and result.event_log_version is None
    canon, _ = canonical_totals(events, EventTimeRules.parse(**RULES))
    day2 = date(2026, 1, 2)
    want = {(w.start, k, cur): (r.total.quantize(Decimal("0.001")), r.count)
            for (w, k, cur), r in canon.items() if _day_of(w.start) == day2}
    got = {(to_micros(r.window_start), r.key, r.currency): (r.total_amount, r.event_count) for r in
           spark.read.format("delta").load(str(tmp_path / "wh" / "canonical_totals")).collect()}
    assert got == want and result.windows == len(want)
    assert spark.read.format("delta").load(str(tmp_path / "wh" / "uncaught_duplicates")).count() == 0

    # Once the stream has run, a replay from the topic takes what the stream counted twice from
    # the event log (copy by copy) and the audit explains every gap, as the reference does.
    rules = EventTimeRules.parse(**RULES)
    run_batches(spark, settings, batches)
    replay_day(spark, settings.replay_config(), DAY2, from_kafka=True)
    audit = audit_day(spark, settings.audit_config(), DAY2, recorder=None)
    ref = {(w.start, k, cur): r for (w, k, cur), r in
           reconcile_outcome(stream_outcome(batches, rules), events, rules).items()
           if _day_of(w.start) == day2}
    rows = {(to_micros(r.window_start), r.key, r.currency): r for r in spark.read.format("delta").load(
        str(tmp_path / "wh" / "reconciliation")).collect()}
    assert audit.unexplained == 0 and set(rows) == set(ref)
    assert any(r.duplicate[1] for r in ref.values())  # the stream did count copies twice
    assert {k: ((r.duplicate_amount, r.duplicate_count), r.status) for k, r in rows.items()} == {
        k: (r.duplicate, r.status.value) for k, r in ref.items()}


def _day_of(micros: int):
    from reckon.timeutil import from_micros

    return from_micros(micros).date()
