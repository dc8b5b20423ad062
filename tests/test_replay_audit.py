"""Spark tier: stream -> replay -> audit on random streams, checked row for row against the pure
reference (reckon.reference), plus injected faults the audit must catch exactly.

The streams cross midnight UTC so the day boundary of the replay and the audit is exercised;
re-deliveries arrive beyond a short dedup horizon so some duplicates escape the stream and
must be explained as duplicate over-count."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audits.audit import audit_day
from reckon.errors import UsageError
from reckon.eventtime import EventTimeRules
from reckon.reconcile import ReconStatus
from reckon.reference import (
    Event,
    arrival_order,
    canonical_totals,
    duplicate_overcount,
    reconcile_outcome,
    stream_outcome,
)
from reckon.timeutil import day_bounds, to_micros
from reports.db.repository import audit_recorder
from spark import tables as tb
from spark.replay import ReplayResult, replay_day
from spark.stream import BatchProcessor
from storage import commits
from tests.scenarios import CURRENCIES, minor_units
from tests.streamkit import (
    copy_warehouse,
    event_line,
    late_rows,
    provisional_rows,
    reference_late,
    reference_rows,
    stream_settings,
)

S = 1_000_000
DAY1, DAY2 = date(2026, 1, 1), date(2026, 1, 2)
MIDNIGHT = day_bounds(DAY2)[0]
RULES = dict(window="10s", watermark_bound="3s", allowed_lateness="2s", dedup_horizon="4s", idle_timeout="1h")


def random_batches(seed: int, n: int = 40, partitions: int = 3, batches: int = 3,
                   conflicting: int = 0, stragglers: int = 0) -> list[list[Event]]:
    """Events around midnight, out of order, in EUR, JPY and KWD (2, 0 and 3 decimal places),
    some re-delivered (same payload) much later; ``conflicting`` more re-deliveries carry
    another amount, key, currency or event time (a conflict).
    ``stragglers`` events of the day's last seconds arrive in one more batch after all the
    others, when the watermark has long passed their windows: late events, for certain."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        t = MIDNIGHT + rng.randint(-40, 40) * S + rng.randint(0, 999) * 1000
        delay = rng.choice([0, 0, 1, 2, 3, 5, 8, 20]) * S + rng.randint(0, 999_999)
        currency = rng.choice(CURRENCIES)
        events.append(Event(f"ev{seed}-{i}", rng.choice(["m1", "m2", "m3"]),
                            minor_units(rng.randint(1, 99_999), currency), t, t + delay,
                            rng.randrange(partitions), 0, rng.choice(["pos", "web"]),
                            currency))
    for e in rng.sample(events, n // 10):  # re-deliveries: within and beyond the horizon
        later = e.arrival_time + rng.choice([1, 10]) * S
        events.append(Event(e.event_id, e.key, e.amount, e.event_time, later, e.partition, 0,
                            e.source, e.currency))
    for e in rng.sample(events[:n], conflicting):  # beyond the horizon: the stream counts both
        later = e.arrival_time + 10 * S
        change = rng.choice(["amount", "key", "event_time", "currency"])
        events.append(Event(
            e.event_id, "m9" if change == "key" else e.key,
            e.amount + 1 if change == "amount" else e.amount,
            _same_day_shift(e.event_time) if change == "event_time" else e.event_time, later,
            e.partition, 0, e.source,
            ("JPY" if e.currency == "EUR" else "EUR") if change == "currency" else e.currency))
    events.sort(key=lambda e: e.arrival_time)
    offsets: dict[int, int] = {}
    ordered = []
    for e in events:
        offsets[e.partition] = offsets.get(e.partition, -1) + 1
        ordered.append(Event(e.event_id, e.key, e.amount, e.event_time, e.arrival_time,
                             e.partition, offsets[e.partition], e.source, e.currency))
    cuts = sorted(rng.sample(range(1, len(ordered)), batches - 1))
    out = [ordered[a:b] for a, b in zip([0, *cuts], [*cuts, len(ordered)], strict=True)]
    if stragglers:  # their own generator: the batches above stay as they were without them
        late_rng, last = random.Random(seed + 1_000), ordered[-1].arrival_time
        late = []
        for i in range(stragglers):
            t, partition = MIDNIGHT - late_rng.randint(25, 40) * S, late_rng.randrange(partitions)
            offsets[partition] = offsets.get(partition, -1) + 1
            currency = late_rng.choice(CURRENCIES)
            late.append(Event(f"ev{seed}-late{i}", late_rng.choice(["m1", "m2", "m3"]),
                              minor_units(late_rng.randint(1, 99_999), currency), t,
                              last + (i + 1) * S, partition, offsets[partition], "pos",
                              currency))
        out.append(late)
    return out


def _same_day_shift(t: int) -> int:
    """7 s later, or earlier if later is the next day: a replay de-duplicates within a day."""
    return t + 7 * S if (t + 7 * S < MIDNIGHT) == (t < MIDNIGHT) else t - 7 * S


def run_batches(spark, settings, batches: list[list[Event]]) -> BatchProcessor:
    """Drive the real foreachBatch function with static DataFrames, one per micro-batch; the
    processor can go on with the next batches."""
    processor = BatchProcessor.of(spark, settings, query_id="test-query")
    for batch_id, batch in enumerate(batches):
        processor(_raw(spark, batch), batch_id)
    return processor


def _raw(spark, batch: list[Event]):
    """One micro-batch as the stream hands it to foreachBatch (RAW_COLUMNS)."""
    return spark.createDataFrame(
        [(event_line(e), None, e.offset, None, f"p{e.partition}") for e in batch],
        "payload string, transport_partition int, offset long, transport_time timestamp, "
        "input_file string")


def _canonical_rows(spark, warehouse):
    df = spark.read.format("delta").load(str(warehouse / tb.CANONICAL_TOTALS))
    return {(to_micros(r.window_start), r.key, r.currency): (r.total_amount, r.event_count)
            for r in df.collect()}


def _recon_rows(spark, warehouse):
    df = spark.read.format("delta").load(str(warehouse / tb.RECONCILIATION))
    return {(to_micros(r.window_start), r.key, r.currency): r for r in df.collect()}


def _figures(result, *names: str) -> dict[str, tuple[str, ...]]:
    """An audit result's per-currency figures, by currency: {code: (figure, ...)}."""
    return {c["currency"]: tuple(c[name] for name in names) for c in result.currencies}


_MILLS = Decimal("0.001")  # the stored scale


# tumbling and hopping windows (10 s every 5 s: each event in two windows); seeds 2 and 3 are
# the same check on other random streams: `make test-soak`
# the hopping case also has conflicting re-deliveries the stream counts twice: the replay
# attributes each extra copy to its own key, amount and windows.
# replay_broadcast_ids=0: the replay groups every event by event_id (as on a day with more
# repeated ids than it broadcasts); otherwise only the repeated ids are grouped
@pytest.mark.parametrize("seed, windows, conflicting, broadcast_ids", [
    (1, {}, 0, 0), (4, {"slide": "5s"}, 4, 1000),
    pytest.param(2, {}, 0, 1000, marks=pytest.mark.soak),
    pytest.param(3, {}, 4, 0, marks=pytest.mark.soak)],
    ids=["tumbling-1-group-all", "hopping-4-conflicts", "tumbling-2",
         "tumbling-3-conflicts-group-all"])
def test_stream_replay_audit_agree_with_the_reference(spark, tmp_path, seed, windows,
                                                      conflicting, broadcast_ids):
    warehouse = tmp_path / "wh"
    config = {**RULES, **windows}
    settings = stream_settings(warehouse, **config, replay_broadcast_ids=broadcast_ids)
    batches = random_batches(seed, conflicting=conflicting, stragglers=3)
    run_batches(spark, settings, batches)
    rules = EventTimeRules.parse(**config)
    if windows:
        assert rules.windows.step < rules.windows.size  # really hopping
    expected = stream_outcome(batches, rules)
    assert len(expected.late) >= 3  # the late path is exercised, not just zero against zero
    log = [e for b in batches for e in b]

    # the stream: row for row, and nothing vanishes
    assert provisional_rows(spark, warehouse) == reference_rows(expected)
    progress = spark.read.format("delta").load(str(warehouse / tb.WATERMARK_PROGRESS))
    sums = progress.groupBy().sum("valid", "on_time", "revised", "late", "duplicates").first()
    valid, on_time, revised, late, dups = (int(x) for x in sums)
    assert valid == len(log) == expected.valid
    assert (on_time + revised, revised, late, dups) == (
        expected.counted, expected.revised, len(expected.late), len(expected.duplicates))

    # the replay of both days equals the reference's canonical totals
    replays = [replay_day(spark, settings.replay_config(), day) for day in (DAY1, DAY2)]
    canon, conflicts = canonical_totals(log, rules)
    assert bool(conflicts) == (conflicting > 0)
    admitted = Counter(e.event_id for e, _ in expected.admitted)
    assert bool({i for i in conflicts if admitted[i] > 1}) == (conflicting > 0)  # counted twice
    assert sum(r.conflicts for r in replays) == len(conflicts)
    # each run's counts: an event belongs to the day of its first copy's event time
    first: dict[str, Event] = {}
    for e in sorted(log, key=arrival_order):
        first.setdefault(e.event_id, e)
    copies = Counter(e.event_id for e in log)
    for day, run in zip((DAY1, DAY2), replays, strict=True):
        d0, d1 = day_bounds(day)
        ids = [i for i, e in first.items() if d0 <= e.event_time < d1]
        assert (run.valid_events, run.duplicate_copies, run.arrived_after_day,
                run.quarantined, run.rows_read) == (
            len(ids), sum(copies[i] - 1 for i in ids),
            sum(first[i].arrival_time >= d1 for i in ids), 0, sum(copies[i] for i in ids))
    stored = spark.read.format("delta").load(str(warehouse / tb.REPLAY_CONFLICTS)).collect()
    assert sorted(r.event_id for r in stored) == conflicts
    assert _canonical_rows(spark, warehouse) == {
        (w.start, k, cur): (r.total.quantize(_MILLS), r.count)
        for (w, k, cur), r in canon.items()}
    # each currency's day total, recorded per currency (never one sum over currencies)
    for day, run in zip((DAY1, DAY2), replays, strict=True):
        d0, d1 = day_bounds(day)
        want_day: dict[str, Decimal] = {}
        for (w, _k, cur), r in canon.items():
            if d0 <= w.start < d1:
                want_day[cur] = want_day.get(cur, Decimal(0)) + r.total
        assert {c: Decimal(a) for c, a in run.total_amounts.items()} == want_day
    # what the stream counted more than once, recorded by the replay: the reference's figure
    uncaught = spark.read.format("delta").load(str(warehouse / tb.UNCAUGHT_DUPLICATES))
    assert {(to_micros(r.window_start), r.key, r.currency):
            (r.duplicate_amount, r.duplicate_count) for r in uncaught.collect()} == {
        (w.start, k, cur): (a.quantize(_MILLS), c)
        for (w, k, cur), (a, c) in duplicate_overcount(expected, rules).items()}

    # the audit: every row explained, equal to the reference reconciliation
    results = [audit_day(spark, settings.audit_config(), day, recorder=None) for day in (DAY1, DAY2)]
    assert sum(r.unexplained for r in results) == 0
    got = _recon_rows(spark, warehouse)
    want = reconcile_outcome(expected, log, rules)
    assert set(got) == {(w.start, k, cur) for (w, k, cur) in want}
    assert len({k[2] for k in got}) == len(CURRENCIES)  # every currency has its own rows
    for (w, k, cur), ref in want.items():
        row = got[(w.start, k, cur)]
        assert row.status == ref.status.value
        assert (row.late_amount, row.late_count) == ref.late
        assert (row.duplicate_amount, row.duplicate_count) == ref.duplicate
        assert (row.residual_amount, row.residual_count) == ref.residual == (Decimal("0.00"), 0)
    # the provisional side of each row is the stream's row as it stands (status included)
    from spark.provisional import read_provisional
    from storage.spec_log import rules_in_force

    prov = {(to_micros(r.window_start), r.key, r.currency): (r.status, r.revision,
                                                             r.total_amount)
            for r in read_provisional(spark, warehouse, rules_in_force(warehouse)).collect()}
    assert {k: (r.provisional_status, r.provisional_revision, r.provisional_amount)
            for k, r in got.items()} == {k: prov.get(k, (None, None, None)) for k in got}
    assert {r.provisional_status for r in got.values()} >= {"FINAL"}
    for result in results:  # gap = late - duplicates, per currency
        for code, (gap, late, dup, res) in _figures(
                result, "gap_total", "late_total", "duplicate_total", "residual_total").items():
            assert Decimal(gap) == Decimal(late) - Decimal(dup) and Decimal(res) == 0, code


def test_a_conflict_of_the_next_day_counted_twice_is_explained_in_a_window_of_this_day(
        spark, tmp_path):
    """Hopping windows (10 s every 5 s): an event at 00:00:02 belongs to the day before through
    its window [23:59:55, 00:00:05). Its re-delivery with another amount arrives beyond the dedup
    horizon, so the stream counts both copies. The conflict is the next day's, yet the earlier
    day's replay must still record the extra copy in that window, or its audit breaks."""
    config = {**RULES, "slide": "5s"}
    settings = stream_settings(tmp_path / "wh", **config)
    t = MIDNIGHT + 2 * S
    batches = [[Event("b", "m2", Decimal("5.00"), MIDNIGHT - 20 * S, MIDNIGHT - 19 * S, 0, 0,
                      "pos"),
                Event("a", "m1", Decimal("10.00"), t, t + S // 2, 0, 1, "pos")],
               [Event("a", "m1", Decimal("12.00"), t, t + 10 * S, 0, 2, "pos")]]
    run_batches(spark, settings, batches)
    rules = EventTimeRules.parse(**config)
    expected = stream_outcome(batches, rules)
    assert [e.amount for e, _ in expected.admitted if e.event_id == "a"] == [10, 12]
    replays = [replay_day(spark, settings.replay_config(), day) for day in (DAY1, DAY2)]
    assert [r.conflicts for r in replays] == [0, 1]
    audits = [audit_day(spark, settings.audit_config(), day, recorder=None) for day in (DAY1, DAY2)]
    assert [a.unexplained for a in audits] == [0, 0]
    got = _recon_rows(spark, tmp_path / "wh")
    want = reconcile_outcome(expected, [e for b in batches for e in b], rules)
    assert {k: (r.duplicate_amount, r.duplicate_count, r.status) for k, r in got.items()} == {
        (w.start, k, cur): (*r.duplicate, r.status.value) for (w, k, cur), r in want.items()}
    assert got[(MIDNIGHT - 5 * S, "m1", "USD")].duplicate_amount == Decimal("12.00")


def test_a_conflict_whose_copies_straddle_midnight_is_listed_by_the_day_of_the_earliest(
        spark, tmp_path):
    """Hopping windows (10 s every 5 s): copy 1 of "x" says 00:00:01 and arrives first, copy 2
    says 23:59:59 and arrives later. The first day's replay reads both (its window
    [23:59:55, 00:00:05) holds them) and must list the conflict, since its earliest copy is
    that day's; the next day's replay reads from midnight and sees only copy 1. Listed once,
    counted once, as the reference finds it."""
    config = {**RULES, "slide": "5s"}
    settings = stream_settings(tmp_path / "wh", **config)
    batches = [[Event("b", "m2", Decimal("5.00"), MIDNIGHT - 20 * S, MIDNIGHT - 19 * S, 0, 0,
                      "pos"),
                Event("x", "m1", Decimal("10.00"), MIDNIGHT + S, MIDNIGHT + 2 * S, 0, 1, "pos")],
               [Event("x", "m1", Decimal("10.00"), MIDNIGHT - S, MIDNIGHT + 12 * S, 0, 2, "pos")]]
    run_batches(spark, settings, batches)
    _, conflicts = canonical_totals([e for b in batches for e in b],
                                    EventTimeRules.parse(**config))
    assert conflicts == ["x"]
    replays = [replay_day(spark, settings.replay_config(), day) for day in (DAY1, DAY2)]
    assert [r.conflicts for r in replays] == [1, 0]
    stored = spark.read.format("delta").load(str(tmp_path / "wh" / tb.REPLAY_CONFLICTS))
    assert [(r.event_id, r.window_date, r.copies) for r in stored.collect()] == [("x", DAY1, 2)]


def test_a_straggler_that_lands_after_the_replay_waits_for_the_next_replay(spark, tmp_path):
    """The stream runs through the night: a late event of the closed day that lands between
    the replay and the audit is in late_events but not in the canonical totals the audit
    compares. The audit reads late_events as of the batches in the replay's event_log version,
    so it reports no break now, and the next replay and audit take the straggler in."""
    settings = stream_settings(tmp_path / "wh", **RULES)
    processor = BatchProcessor.of(spark, settings, query_id="test-query")
    processor(_raw(spark, [
        Event("a", "m1", Decimal("1.00"), MIDNIGHT - 10 * S, MIDNIGHT - 9 * S, 0, 0, "pos"),
        Event("b", "m1", Decimal("2.00"), MIDNIGHT + 30 * S, MIDNIGHT + 31 * S, 0, 1, "pos")]),
        0)
    replay_day(spark, settings.replay_config(), DAY1)
    before = audit_day(spark, settings.audit_config(), DAY1, recorder=None)
    assert (before.unexplained, _figures(before, "late_total")) == (0, {"USD": ("0.000",)})
    straggler = Event("s", "m1", Decimal("4.00"), MIDNIGHT - 5 * S, MIDNIGHT + 60 * S, 0, 2,
                      "pos")
    processor(_raw(spark, [straggler]), 1)
    late = spark.read.format("delta").load(str(tmp_path / "wh" / tb.LATE_EVENTS))
    assert [r.event_id for r in late.collect()] == ["s"]  # the stream sent it to late_events
    # recorded, with its late attribution
    now = audit_day(spark, settings.audit_config(), DAY1, recorder=audit_recorder(settings))
    assert (now.unexplained, _figures(now, "late_total", "canonical_total")) == (
        0, {"USD": ("0.000", "1.000")})
    from delta.tables import DeltaTable

    from reports.db.repository import ReportDB

    db = ReportDB.from_settings(settings)

    def late_attributed(run_id: str) -> int:  # the attribution reads the run's cut too
        return sum(r.late_events for r in db.attribution(run_id) if r.dimension == "partition")

    assert late_attributed(now.run_id) == 0
    # the run keeps the material_gap it was audited under (issue 61): {} when it was off
    recorded = db.get_audit_run(now.run_id)
    assert recorded is not None and recorded.material_gap == {}

    latest = DeltaTable.forPath(spark, str(tmp_path / "wh" / tb.LATE_EVENTS)).history(1).first()
    assert now.table_versions[tb.LATE_EVENTS] < latest.version  # read before the straggler
    replay_day(spark, settings.replay_config(), DAY1)
    material = dataclasses.replace(settings, material_gap={"USD": "3.00"})
    after = audit_day(spark, material.audit_config(), DAY1, recorder=audit_recorder(settings))
    assert (after.unexplained, _figures(after, "late_total", "canonical_total")) == (
        0, {"USD": ("4.000", "5.000")})
    assert late_attributed(after.run_id) == 1
    assert db.get_audit_run(after.run_id).material_gap == {"USD": "3.00"}  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def streamed(spark, tmp_path_factory) -> Path:
    """One random stream across midnight, streamed once; tests that replay, audit or tamper
    with it work on their own copy."""
    warehouse = tmp_path_factory.mktemp("streamed") / "wh"
    run_batches(spark, stream_settings(warehouse, **RULES), random_batches(7))
    return warehouse


@dataclasses.dataclass(frozen=True)
class Replayed:
    """``streamed`` with both days replayed; ``day1`` is the result of DAY1's replay."""

    warehouse: Path
    day1: ReplayResult


@pytest.fixture(scope="module")
def replayed(spark, streamed: Path, tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    """A copy of ``streamed`` with DAY1 and DAY2 replayed, once for the tests whose own steps
    start after both replays (re-replaying, tampering, auditing): each works on its own copy,
    so each starts from exactly the warehouse its own two replays left."""
    warehouse = copy_warehouse(streamed, tmp_path_factory.mktemp("replayed"))
    settings = stream_settings(warehouse, **RULES)
    day1 = replay_day(spark, settings.replay_config(), DAY1)
    replay_day(spark, settings.replay_config(), DAY2)
    return Replayed(warehouse, day1)


def test_replay_is_idempotent_and_leaves_other_days_alone(spark, replayed, tmp_path):
    warehouse = copy_warehouse(replayed.warehouse, tmp_path)
    settings = stream_settings(warehouse, **RULES)
    first = replayed.day1
    canonical = spark.read.format("delta").load(str(warehouse / tb.CANONICAL_TOTALS))
    before = sorted(tuple(r) for r in canonical.collect())
    day2_files = sorted(p.name for p in (warehouse / tb.CANONICAL_TOTALS).glob(
        "window_date=2026-01-02/*.parquet"))
    again = replay_day(spark, settings.replay_config(), DAY1)
    after = sorted(tuple(r) for r in
                   spark.read.format("delta").load(str(warehouse / tb.CANONICAL_TOTALS)).collect())
    assert after == before
    assert again.replay_id == first.replay_id and again.windows == first.windows
    assert sorted(p.name for p in (warehouse / tb.CANONICAL_TOTALS).glob(
        "window_date=2026-01-02/*.parquet")) == day2_files
    runs = spark.read.format("delta").load(str(warehouse / tb.REPLAY_RUNS))
    assert runs.filter("window_date = '2026-01-01'").count() == 1


def test_rows_the_rules_now_reject_are_quarantined_by_the_replay_and_released_again(
        spark, streamed, tmp_path):
    """A lower amount_max after the stream ran: the replay quarantines the day's copies above
    it (origin replay:<day>, payload kept) and counts each row once; the replay under the old
    rules again replaces that quarantine with nothing and counts them."""
    from pyspark.sql import functions as F

    warehouse = copy_warehouse(streamed, tmp_path)
    settings = stream_settings(warehouse, **RULES)
    d0, d1 = day_bounds(DAY2)
    micros = F.unix_micros("event_time")
    day_rows = spark.read.format("delta").load(str(warehouse / tb.EVENT_LOG)).filter(
        (micros >= d0) & (micros < d1))
    amounts = sorted(r.amount for r in day_rows.select("amount").collect())
    cap = amounts[len(amounts) // 2]
    above = sorted((r.event_id, r.payload) for r in day_rows.filter(F.col("amount") > cap)
                   .select("event_id", "payload").collect())
    assert above and all(payload for _, payload in above)

    def quarantine():
        return spark.read.format("delta").load(str(warehouse / tb.QUARANTINE)).filter(
            F.col("origin") == f"replay:{DAY2}").collect()

    base = replay_day(spark, settings.replay_config(), DAY2)
    assert base.quarantined == 0 and quarantine() == []
    strict = replay_day(spark, stream_settings(warehouse, **RULES, amount_max=str(cap))
                        .replay_config(), DAY2)
    rows = quarantine()
    assert strict.quarantined == len(rows) == len(above)
    assert sorted((r.event_id, r.payload) for r in rows) == above
    assert {r.reason for r in rows} == {"amount_out_of_range"}
    assert strict.rows_read == base.rows_read
    assert strict.valid_events + strict.duplicate_copies < base.valid_events + base.duplicate_copies
    again = replay_day(spark, settings.replay_config(), DAY2)
    assert again.quarantined == 0 and quarantine() == []
    assert (again.valid_events, again.duplicate_copies, again.total_amounts) == (
        base.valid_events, base.duplicate_copies, base.total_amounts)
    assert strict.total_amounts != base.total_amounts


def test_an_audit_before_the_replay_says_which_replay_to_run(spark, streamed, tmp_path):
    warehouse = copy_warehouse(streamed, tmp_path)
    with pytest.raises(UsageError, match=r"run `reckon replay --date 2026-01-02`"):
        audit_day(spark, stream_settings(warehouse, **RULES).audit_config(), DAY2, recorder=None)
    assert not (warehouse / tb.RECONCILIATION).exists()


def test_an_audit_of_a_day_without_a_finished_replay_says_which_replay_to_run(
        spark, streamed, tmp_path):
    """The replay tables exist (DAY1 was replayed) but DAY2 never was: without the check every
    provisional window of DAY2 would be MISSING_IN_CANONICAL. Then a replay of DAY2 that wrote
    its canonical_totals but failed before its run record, while an earlier replay of the day
    had finished (simulated: the run record renamed to that earlier replay)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    warehouse = copy_warehouse(streamed, tmp_path)
    settings = stream_settings(warehouse, **RULES)
    replay_day(spark, settings.replay_config(), DAY1)
    with pytest.raises(UsageError, match=r"no finished replay; run `reckon replay --date "
                                         r"2026-01-02`"):
        audit_day(spark, settings.audit_config(), DAY2, recorder=None)
    assert not (warehouse / tb.RECONCILIATION).exists()
    unfinished = replay_day(spark, settings.replay_config(), DAY2)
    DeltaTable.forPath(spark, str(warehouse / tb.REPLAY_RUNS)).update(
        F.col("replay_id") == F.lit(unfinished.replay_id),
        {"replay_id": F.lit("2026-01-02:event_log:v1:earlier")})
    with pytest.raises(UsageError, match=f"the replay {unfinished.replay_id} that wrote the "
                                         "day's canonical_totals did not finish"):
        audit_day(spark, settings.audit_config(), DAY2, recorder=None)
    assert audit_day(spark, settings.audit_config(), DAY1, recorder=None).rows > 0


def test_replay_counts_what_the_stream_never_saw_and_the_audit_flags_it(spark, streamed,
                                                                        tmp_path):
    """Drop events from the stream's view only (archived by another writer, batch_id null):
    canonical includes them; the audit reports exactly those windows UNEXPLAINED."""
    warehouse = copy_warehouse(streamed, tmp_path)
    settings = stream_settings(warehouse, **RULES)
    t = MIDNIGHT + 5 * S + 123
    hidden = [Event("hidden-1", "m9", Decimal("12.34"), t, t + S, 0, 999),
              Event("hidden-2", "m9", Decimal("0.66"), t + S, t + 2 * S, 0, 1000)]
    rows = [(e.event_id, e.key, e.amount, e.currency, e.event_time, e.source, e.partition,
             e.offset, e.arrival_time) for e in hidden]
    df = spark.createDataFrame(rows, "event_id string, key string, amount decimal(18,3), "
                                     "currency string, t long, source string, partition int, "
                                     "offset long, a long")
    from pyspark.sql import functions as F
    df = df.select("event_id", "key", "amount", "currency",
                   F.timestamp_micros("t").alias("event_time"), "source", "partition", "offset",
                   F.timestamp_micros("a").alias("arrival_time"),
                   F.lit("other-writer").alias("input_file"), F.lit(None).alias("payload"),
                   F.lit(None).cast("long").alias("batch_id"), F.lit(False).alias("is_duplicate"),
                   F.to_date(F.timestamp_micros("t")).alias("event_date"))
    tb.conform(df, tb.EVENT_LOG).write.format("delta").mode("append").save(
        str(warehouse / tb.EVENT_LOG))
    replay_day(spark, settings.replay_config(), DAY2)
    result = audit_day(spark, settings.audit_config(), DAY2, recorder=None)
    bad = {k: r for k, r in _recon_rows(spark, warehouse).items()
           if r.status not in (ReconStatus.MATCHED.value, ReconStatus.EXPLAINED.value)}
    assert list(bad) == [(MIDNIGHT, "m9", "USD")]
    row = bad[(MIDNIGHT, "m9", "USD")]
    assert (row.residual_amount, row.residual_count) == (Decimal("13.00"), 2)
    assert row.status == ReconStatus.MISSING_IN_STREAM.value
    assert result.unexplained == 1


def test_a_changed_provisional_amount_is_caught_with_its_residual(spark, replayed, tmp_path):
    from delta.tables import DeltaTable

    from tests.streamkit import edit_a_provisional_delta

    warehouse = copy_warehouse(replayed.warehouse, tmp_path)
    settings = stream_settings(warehouse, **RULES)
    victim = edit_a_provisional_delta(spark, warehouse, "window_date = '2026-01-02'")
    table = DeltaTable.forPath(spark, str(warehouse / tb.PROVISIONAL_DELTAS))
    audit_day(spark, settings.audit_config(), DAY1, recorder=None)
    result = audit_day(spark, settings.audit_config(), DAY2, recorder=None)
    bad = {k: r for k, r in _recon_rows(spark, warehouse).items()
           if r.status not in (ReconStatus.MATCHED.value, ReconStatus.EXPLAINED.value)}
    assert list(bad) == [(to_micros(victim.window_start), victim.key, victim.currency)]
    # The result names the version of each input it read: the update is the newest one.
    inputs = (tb.PROVISIONAL_DELTAS, tb.WATERMARK_PROGRESS, tb.CANONICAL_TOTALS,
              tb.LATE_EVENTS, tb.UNCAUGHT_DUPLICATES)
    assert result.table_versions == {
        name: DeltaTable.forPath(spark, str(warehouse / name)).history(1).first().version
        for name in inputs}
    assert result.table_versions[tb.PROVISIONAL_DELTAS] == (
        table.history().filter("operation = 'UPDATE'").first().version)
    row = next(iter(bad.values()))
    assert (row.status, row.residual_amount, row.residual_count) == (
        ReconStatus.UNEXPLAINED.value, Decimal("-0.07"), 0)


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(100, 10**6), partitions=st.integers(1, 3), batches=st.integers(2, 4),
       allowed_lateness=st.sampled_from(["0s", "2s"]), stragglers=st.integers(0, 2))
def test_stream_equals_the_reference_on_random_streams(spark, tmp_path_factory, seed,
                                                       partitions, batches, allowed_lateness, stragglers):
    """Hypothesis drives the shape (seed, partitions, batch boundaries, allowed_lateness); the real batch
    processor and the pure reference must agree row for row, and nothing vanishes."""
    warehouse = tmp_path_factory.mktemp("prop") / "wh"
    rules = {**RULES, "allowed_lateness": allowed_lateness}
    settings_ = stream_settings(warehouse, **rules)
    stream = random_batches(seed, n=24, partitions=partitions, batches=batches,
                            stragglers=stragglers)
    run_batches(spark, settings_, stream)
    expected = stream_outcome(stream, EventTimeRules.parse(**rules))
    assert provisional_rows(spark, warehouse) == reference_rows(expected)
    assert late_rows(spark, warehouse) == reference_late(expected)
    progress = spark.read.format("delta").load(str(warehouse / tb.WATERMARK_PROGRESS))
    valid, counted, late, dups = (int(x) for x in progress.groupBy().sum(
        "valid", "on_time", "late", "duplicates").first())
    revised = int(progress.groupBy().sum("revised").first()[0])
    assert valid == sum(len(b) for b in stream) == counted + revised + late + dups


def _commits(warehouse: Path) -> dict[str, int]:
    from tests.stream_chaos import VOLATILE

    return {name: len(list((warehouse / name / "_delta_log").glob("*.json")))
            for name in VOLATILE}


def test_a_re_run_batch_changes_nothing(spark, tmp_path):
    """What a restart after a crash does: the same micro-batch ids again, in a fresh process
    (no in-memory state). Every write is skipped by its batch mark in the table's commit files and
    the watermark is restored from watermark_progress, so no table changes and no commit is
    made -- also when the fresh processor re-runs every batch, not only the last."""
    from tests.stream_chaos import VOLATILE, table_snapshot

    warehouse = tmp_path / "wh"
    settings_ = stream_settings(warehouse, **RULES)
    batches = random_batches(31, n=20, batches=2)
    run_batches(spark, settings_, batches)
    before = {name: table_snapshot(spark, warehouse, name) for name in VOLATILE}
    commits = _commits(warehouse)
    fresh = BatchProcessor.of(spark, settings_, query_id="test-query")
    fresh(_raw(spark, batches[-1]), len(batches) - 1)
    assert _commits(warehouse) == commits
    again = BatchProcessor.of(spark, settings_, query_id="test-query")
    for batch_id, batch in enumerate(batches):
        again(_raw(spark, batch), batch_id)
    assert _commits(warehouse) == commits
    assert {name: table_snapshot(spark, warehouse, name) for name in VOLATILE} == before


@pytest.mark.parametrize("old_marks", [False, True],
                         ids=["marks-record-reads", "marks-from-before-reads-were-recorded"])
def test_a_batch_cut_short_between_tables_is_finished_by_the_re_run(spark, tmp_path,
                                                                     monkeypatch, old_marks):
    """A crash after a batch's event_log commit (and late_events', if it has late events),
    before its deltas and its progress row: the re-run (a fresh processor, as after a restart)
    writes only what is missing, and every table equals the pure reference's -- nothing lost,
    nothing twice. Also when the crashed run's marks predate the record of what a batch read
    (an upgrade between the crash and the restart): event_log as of just before its own
    commit."""
    warehouse = tmp_path / "wh"
    settings_ = stream_settings(warehouse, **RULES)
    batches = random_batches(5, n=30, batches=3)
    crashing = BatchProcessor.of(spark, settings_, query_id="test-query")
    if old_marks:
        mark = commits.batch_mark
        monkeypatch.setattr(tb, "batch_mark", lambda app_id, name, batch_id, reads=None:
                            mark(app_id, name, batch_id))

    def crash(*args, **kwargs):
        raise RuntimeError("killed before the deltas")

    for batch_id, batch in enumerate(batches):
        if batch_id == 1:
            monkeypatch.setattr(crashing, "_write_deltas", crash)
            with pytest.raises(RuntimeError, match="killed before the deltas"):
                crashing(_raw(spark, batch), batch_id)
            break
        crashing(_raw(spark, batch), batch_id)
    marks = {name: commits.last_marked_batch(warehouse, name, crashing.app_id)
             for name in (tb.EVENT_LOG, tb.PROVISIONAL_DELTAS, tb.WATERMARK_PROGRESS)}
    assert marks == {tb.EVENT_LOG: 1, tb.PROVISIONAL_DELTAS: 0, tb.WATERMARK_PROGRESS: 0}
    commit = commits.marked_commit(warehouse, tb.EVENT_LOG, crashing.app_id, 1)
    assert commit is not None
    assert set(commit[1]) == (set() if old_marks else {tb.EVENT_LOG, tb.WATERMARK_PROGRESS,
                                                       commits.CLOCK_READ})
    monkeypatch.undo()  # the restart runs this code

    restarted = BatchProcessor.of(spark, settings_, query_id="test-query")
    for batch_id in range(1, len(batches)):
        restarted(_raw(spark, batches[batch_id]), batch_id)
    expected = stream_outcome(batches, EventTimeRules.parse(**RULES))
    assert provisional_rows(spark, warehouse) == reference_rows(expected)
    assert late_rows(spark, warehouse) == reference_late(expected)
    log = spark.read.format("delta").load(str(warehouse / tb.EVENT_LOG))
    assert log.count() == sum(len(b) for b in batches)
    progress = spark.read.format("delta").load(str(warehouse / tb.WATERMARK_PROGRESS))
    assert sorted(r.batch_id for r in progress.collect()) == [0, 1, 2]


def test_a_re_run_batch_whose_commits_are_gone_stops_with_what_to_do(spark, tmp_path):
    """A restarted query whose tables hold later batches but no longer a commit of the batch
    it re-runs (its commit files expired, or the checkpoint came from an older copy) cannot
    know which event_log version its first run judged duplicates against: it stops and says
    to start a new query, instead of counting every event as a duplicate."""
    from spark.stream import STREAM_TABLES

    warehouse = tmp_path / "wh"
    settings_ = stream_settings(warehouse, **RULES)
    batches = random_batches(5, n=30, batches=2)
    first = BatchProcessor.of(spark, settings_, query_id="test-query")
    for name in STREAM_TABLES:  # readable from a checkpoint once a commit file is gone
        spark.sql(f"ALTER TABLE delta.`{tb.table_path(warehouse, name)}` "
                  "SET TBLPROPERTIES ('delta.checkpointInterval' = '1')")
    for batch_id, batch in enumerate(batches):
        first(_raw(spark, batch), batch_id)
    gone = []
    for name in STREAM_TABLES:
        found = commits.marked_commit(warehouse, name, first.app_id, 0)
        if found is not None:  # expired
            (warehouse / name / "_delta_log" / f"{found[0]:020d}.json").unlink()
            gone.append(name)
    assert tb.EVENT_LOG in gone and tb.PROVISIONAL_DELTAS in gone
    log = spark.read.format("delta").load(tb.table_path(warehouse, tb.EVENT_LOG))
    assert log.count() == sum(len(b) for b in batches)

    restarted = BatchProcessor.of(spark, settings_, query_id="test-query")
    with pytest.raises(RuntimeError, match=r"no commit of batch 0 itself.*new checkpoint"):
        restarted(_raw(spark, batches[0]), 0)


def test_a_re_run_batch_reads_what_its_first_run_read_though_another_query_wrote_since(
        spark, tmp_path, monkeypatch):
    """Query A's first batch resumes from the watermark query B left and judges duplicates
    against event_log as it is; B then commits another batch (copies of A's events, and a
    watermark far ahead) before A's batch writes, and A is killed before its deltas. The re-run
    reads the event_log and watermark_progress versions its first run recorded in its batch
    marks, so every table equals that of the same interleaving without the crash. The control
    re-run reads event_log as of just before its own commit and watermark_progress as it is
    (the code before the record) and comes out different: A's events judged duplicates of B's
    copies or late, though event_log archived them as counted."""
    batches = random_batches(7, n=30, batches=3)
    b_first, a_batch, b_second = batches[0], batches[1], batches[1] + batches[2]

    def interleaved(warehouse: Path, *, crash: bool) -> None:
        settings_ = stream_settings(warehouse, **RULES)
        other = BatchProcessor.of(spark, settings_, query_id="query-b")
        other(_raw(spark, b_first), 0)
        query_a = BatchProcessor.of(spark, settings_, query_id="query-a")
        classify = query_a._classify

        def b_commits_first(*args, **kwargs):
            other(_raw(spark, b_second), 1)
            return classify(*args, **kwargs)

        query_a._classify = b_commits_first
        if not crash:
            query_a(_raw(spark, a_batch), 0)
            return

        def killed(*args, **kwargs):
            raise RuntimeError("killed before the deltas")

        query_a._write_deltas = killed
        with pytest.raises(RuntimeError, match="killed before the deltas"):
            query_a(_raw(spark, a_batch), 0)
        assert commits.last_marked_batch(warehouse, tb.EVENT_LOG, query_a.app_id) == 0
        BatchProcessor.of(spark, settings_, query_id="query-a")(_raw(spark, a_batch), 0)

    def tables(warehouse: Path) -> tuple:
        log = spark.read.format("delta").load(tb.table_path(warehouse, tb.EVENT_LOG))
        flags = sorted((r.event_id, r.batch_id, r.is_duplicate) for r in
                       log.select("event_id", "batch_id", "is_duplicate").collect())
        return provisional_rows(spark, warehouse), late_rows(spark, warehouse), flags

    interleaved(tmp_path / "uninterrupted", crash=False)
    expected = tables(tmp_path / "uninterrupted")

    def as_before_the_record(self, batch_id: int, _written: frozenset[str]
                             ) -> dict[str, int | None]:
        """event_log just before the batch's own commit, watermark_progress as it is."""
        found = commits.marked_commit(self.warehouse, tb.EVENT_LOG, self.app_id, batch_id)
        return {tb.EVENT_LOG: found[0] - 1 if found else commits.current_version(self.warehouse,
                                                                            tb.EVENT_LOG),
                tb.WATERMARK_PROGRESS: commits.current_version(self.warehouse,
                                                          tb.WATERMARK_PROGRESS)}

    with monkeypatch.context() as unrecorded:
        unrecorded.setattr(BatchProcessor, "batch_reads", as_before_the_record)
        interleaved(tmp_path / "control", crash=True)
    assert tables(tmp_path / "control")[:2] != expected[:2]
    interleaved(tmp_path / "wh", crash=True)
    assert tables(tmp_path / "wh") == expected


def test_the_batch_own_event_log_commit_never_makes_its_events_duplicates(spark, tmp_path,
                                                                          monkeypatch):
    """A Delta write re-caches every cached plan that reads the table it writes, so once a
    batch's event_log append commits, the next use of its persisted de-duplication re-computes
    it; the deltas and the late_events write here start only after that commit (the race the
    concurrent writes can lose). The de-duplication reads event_log at a version pinned when the
    batch started, so its own rows are never their own earlier copies: the tables equal the
    pure reference's. The control run reads event_log unpinned, as before the fix, and loses
    totals: the forced order does reach the re-computation on this Spark and Delta."""
    import threading

    batches = random_batches(6, n=30, batches=3, stragglers=2)
    expected = stream_outcome(batches, EventTimeRules.parse(**RULES))
    assert expected.late and expected.counted

    def stream_with_the_log_first(warehouse: Path) -> None:
        processor = BatchProcessor.of(spark, stream_settings(warehouse, **RULES),
                                   query_id="test-query")
        started, committed = threading.Event(), threading.Event()
        write_log, deltas, write_late = (processor._write_event_log,
                                         processor._write_deltas, processor._write_late)

        def log_first(*args, **kwargs):
            started.set()
            try:
                write_log(*args, **kwargs)
            finally:
                committed.set()

        def after_the_log(write):
            def wait_then_write(*args, **kwargs):
                if started.is_set():  # a batch with no valid event writes no event_log
                    assert committed.wait(120)
                write(*args, **kwargs)
            return wait_then_write

        processor._write_event_log = log_first
        processor._write_deltas = after_the_log(deltas)
        processor._write_late = after_the_log(write_late)
        for batch_id, batch in enumerate(batches):
            started.clear()
            committed.clear()
            processor(_raw(spark, batch), batch_id)

    with monkeypatch.context() as unpinned:
        unpinned.setattr(tb, "read_table", lambda spark_, wh, name, version=None:
                         spark_.read.format("delta").load(tb.table_path(wh, name)))
        stream_with_the_log_first(tmp_path / "control")
    assert provisional_rows(spark, tmp_path / "control") != reference_rows(expected)

    stream_with_the_log_first(tmp_path / "wh")
    assert provisional_rows(spark, tmp_path / "wh") == reference_rows(expected)
    assert late_rows(spark, tmp_path / "wh") == reference_late(expected)


@pytest.mark.parametrize("absent", [(), ("provisional", "late")],
                         ids=["all-inputs", "no-stream-tables"])
def test_the_audit_joins_every_mix_of_inputs_as_the_reference_does(spark, absent):
    """16 keys in one window, key k present in input i when bit i of k is set (two late
    events where late is present): every mix, including a window only the late side output
    or only uncaught_duplicates knows, makes the reference's row and status."""
    from pyspark.sql import functions as F

    from audits.reconcile_rows import reconcile_frame
    from reckon.reconcile import Tolerance, reconcile

    rng = random.Random(16)
    names = ("provisional", "canonical", "late", "duplicate")
    ws = MIDNIGHT
    present = {name: [f"k{k:02d}" for k in range(16) if k >> i & 1 and name not in absent]
               for i, name in enumerate(names)}

    def money() -> Decimal:
        return Decimal(rng.randint(1, 9999)) / 100

    totals = {name: {key: (money(), rng.randint(1, 5)) for key in present[name]}
              for name in ("provisional", "canonical", "duplicate")}
    late_rows = [(key, money()) for key in present["late"] for _ in range(2)]
    late = {}
    for key, amount in late_rows:
        total, count = late.get(key, (Decimal("0.00"), 0))
        late[key] = (total + amount, count + 1)

    def frame(rows, schema):  # odd keys in JPY, even in EUR: the join is by currency too
        return None if not rows else spark.createDataFrame(rows, schema).withColumns({
            "window_start": F.timestamp_micros(F.col("ws")),
            "currency": F.when(F.substring("key", 2, 2).cast("int") % 2 == 1, F.lit("JPY"))
            .otherwise(F.lit("EUR"))})

    provisional = frame([(ws, k, a, n, "CLOSED", 1) for k, (a, n) in
                         totals["provisional"].items()],
                        "ws long, key string, total_amount decimal(38,3), event_count long, "
                        "status string, revision int")
    canonical = frame([(ws, k, a, n) for k, (a, n) in totals["canonical"].items()],
                      "ws long, key string, total_amount decimal(38,3), event_count long")
    late_df = frame([(ws, k, a) for k, a in late_rows],
                    "ws long, key string, amount decimal(18,3)")
    duplicates = frame([(ws, k, a, n) for k, (a, n) in totals["duplicate"].items()],
                       "ws long, key string, duplicate_amount decimal(38,3), "
                       "duplicate_count long")

    rows = reconcile_frame(provisional, canonical, late_df, duplicates, Tolerance(), DAY2,
                           "run-1", 10 * S).collect()
    want = reconcile(totals["provisional"], totals["canonical"], late, totals["duplicate"])
    got = {r.key: r for r in rows}
    assert len(rows) == len(got) == len(want)
    for key, ref in want.items():
        row = got[key]
        assert row.status == ref.status.value, key
        assert (row.gap_amount, row.gap_count) == ref.gap, key
        assert (row.residual_amount, row.residual_count) == ref.residual, key
        assert (row.late_amount, row.late_count) == ref.late, key
        assert (row.duplicate_amount, row.duplicate_count) == ref.duplicate, key
        assert (row.provisional_status is None) == (ref.provisional is None), key


def test_the_audits_tolerance_in_spark_is_the_references_at_its_bounds(spark):
    """Tolerance 0.05 absolute or 0.001 of |canonical|: residuals exactly at either bound are
    MATCHED/EXPLAINED, one cent beyond is not, a negative canonical amount uses its magnitude,
    and a residual count is never tolerated; the Spark column rule agrees with the reference
    row for row (DECIMAL(38,3) times a Decimal ratio, no float)."""
    from pyspark.sql import functions as F

    from audits.reconcile_rows import reconcile_frame
    from reckon.reconcile import Tolerance, reconcile

    tolerance = Tolerance(Decimal("0.05"), Decimal("0.001"))
    D = Decimal
    # key -> provisional, canonical (amount, count); residual = canonical - provisional
    cases = {
        "abs-at-bound": ((D("10.00"), 1), (D("10.05"), 1)),
        "abs-beyond": ((D("10.00"), 1), (D("10.06"), 1)),
        "rel-at-bound": ((D("1000.00"), 1), (D("1001.00"), 1)),      # 0.001 * 1001.00 = 1.001
        "rel-beyond": ((D("1000.00"), 1), (D("1001.01"), 1)),        # 1.01 > 1.00101
        "negative-canonical": ((D("-1001.00"), 1), (D("-1000.00"), 1)),  # 1.00 <= 1.000
        "count-never": ((D("10.00"), 1), (D("10.00"), 2)),
        "with-late": ((D("10.00"), 1), (D("15.04"), 2)),               # late 5.00 explains
    }
    late = {"with-late": (D("5.00"), 1)}
    ws = MIDNIGHT

    def frame(rows, schema):
        return spark.createDataFrame(rows, schema).withColumns({
            "window_start": F.timestamp_micros(F.col("ws")), "currency": F.lit("EUR")})

    provisional = frame([(ws, k, p[0], p[1], "FINAL", 0) for k, (p, _) in cases.items()],
                        "ws long, key string, total_amount decimal(38,3), event_count long, "
                        "status string, revision int")
    canonical = frame([(ws, k, c[0], c[1]) for k, (_, c) in cases.items()],
                      "ws long, key string, total_amount decimal(38,3), event_count long")
    late_df = frame([(ws, k, a) for k, (a, _) in late.items()],
                    "ws long, key string, amount decimal(18,3)")
    rows = {r.key: r for r in reconcile_frame(provisional, canonical, late_df, None, tolerance,
                                              DAY2, "run-1", 10 * S).collect()}
    want = reconcile({k: p for k, (p, _) in cases.items()}, {k: c for k, (_, c) in cases.items()},
                     late, None, tolerance)
    assert {k: rows[k].status for k in cases} == {k: want[k].status.value for k in cases}
    assert {k for k in cases if want[k].status.value in ("MATCHED", "EXPLAINED")} == {
        "abs-at-bound", "rel-at-bound", "negative-canonical", "with-late"}


def test_a_row_rejected_before_the_days_first_window_is_quarantined_by_its_day(spark,
                                                                              tmp_path):
    """7-minute windows do not divide the day: the window [23:58, 00:05) belongs to Jan 1 and
    the first one starting on Jan 2 starts at 00:02 (a multiple of 7 minutes since the epoch).
    A row at 00:01 Jan 2 that a lower amount_max now rejects lies in Jan 1's windows but Jan 2's
    calendar day: Jan 2's replay quarantines it, Jan 1's counts none of it, and nothing
    vanishes."""
    from pyspark.sql import functions as F

    config = {**RULES, "window": "7m"}
    first_start = ((MIDNIGHT // (420 * S)) + 1) * 420 * S
    assert MIDNIGHT < MIDNIGHT + 60 * S < first_start  # 00:01 is before Jan 2's first window
    events = [Event("big", "m1", Decimal("500.00"), MIDNIGHT + 60 * S, MIDNIGHT + 61 * S, 0, 0,
                    "pos"),
              Event("small", "m1", Decimal("1.00"), first_start + S, first_start + 2 * S, 0, 1,
                    "pos")]
    warehouse = tmp_path / "wh"
    run_batches(spark, stream_settings(warehouse, **config), [events])
    strict = stream_settings(warehouse, **config, amount_max="100.00")
    runs = {day: replay_day(spark, strict.replay_config(), day) for day in (DAY1, DAY2)}
    quarantined = spark.read.format("delta").load(str(warehouse / tb.QUARANTINE)).filter(
        F.col("origin").startswith("replay:")).select("origin", "event_id").collect()
    assert [(r.origin, r.event_id) for r in quarantined] == [(f"replay:{DAY2}", "big")]
    assert (runs[DAY2].quarantined, runs[DAY1].quarantined) == (1, 0)
    assert sum(r.valid_events for r in runs.values()) == 1  # "small", in Jan 2's window
    assert _canonical_rows(spark, warehouse) == {(first_start, "m1", "USD"): (Decimal("1.00"), 1)}


def test_a_query_on_a_new_checkpoint_inherits_the_watermark_and_counts_nothing_twice(
        spark, tmp_path):
    """The checkpoint is lost: a new query (another id, batch ids from 0 again) re-reads the
    source from the start. It starts from the watermark its predecessor left, and every
    re-read delivery is a duplicate of its archived copy (same arrival), whatever batch number
    either query gave it: provisional_totals and late_events do not move. Judged from no
    watermark and against only the predecessor's lower-numbered batches, most of them would
    have been counted again into windows long FINAL."""
    from pyspark.sql import functions as F

    warehouse = tmp_path / "wh"
    settings = stream_settings(warehouse, **RULES)
    batches = random_batches(5, stragglers=2)
    run_batches(spark, settings, batches)
    totals, late = provisional_rows(spark, warehouse), late_rows(spark, warehouse)
    assert len(late) >= 2
    progress = spark.read.format("delta").load(str(warehouse / tb.WATERMARK_PROGRESS))
    last_watermark = progress.filter(F.col("batch_id") == len(batches) - 1).first().watermark
    metrics: list = []
    successor = BatchProcessor.of(spark, settings, query_id="after-a-lost-checkpoint",
                               on_batch=metrics.append)
    for batch_id, batch in enumerate(batches):
        successor(_raw(spark, batch), batch_id)
    assert provisional_rows(spark, warehouse) == totals
    assert late_rows(spark, warehouse) == late
    assert [m.duplicates for m in metrics] == [len(b) for b in batches]
    first = (spark.read.format("delta").load(str(warehouse / tb.WATERMARK_PROGRESS))
             .filter((F.col("query_id") == "after-a-lost-checkpoint") & (F.col("batch_id") == 0))
             .first())
    assert first.watermark_before == last_watermark


def test_an_audit_overtaken_by_another_audit_of_its_day_records_nothing(spark, streamed,
                                                                        tmp_path, monkeypatch):
    """Two audits of one day overlap: the second replaces the reconciliation partition between
    the first's write and its break recording. The day's writer lock refuses a second audit
    (storage.writer_lock); one that gets past it all the same (a file system whose locks do
    not hold) is caught here: the first must not file the second's rows as its own breaks,
    nor become current; it says to run again."""
    import audits.audit as audit_module
    import audits.audit_record as record_module
    from reckon.errors import ConcurrentAuditError, ConcurrentWriterError
    from reports.db.repository import ReportDB

    warehouse = copy_warehouse(streamed, tmp_path)
    settings = stream_settings(warehouse, **RULES)
    replay_day(spark, settings.replay_config(), DAY2)
    earlier = audit_day(spark, settings.audit_config(), DAY2, recorder=audit_recorder(settings))
    assert earlier.breaks_recorded > 0  # the day has breaks for the runs to record
    record_breaks = record_module._record_breaks
    overtaken: list[str] = []

    def overtaken_by_another_audit(written, recorder, run_id, day):
        monkeypatch.setattr(record_module, "_record_breaks", record_breaks)
        with pytest.raises(ConcurrentWriterError, match="audit of 2026-01-02 refused"):
            audit_day(spark, settings.audit_config(), DAY2, recorder=None)
        overtaken.append(audit_module._audit_day(spark, settings.audit_config(), DAY2, kind="nightly",
                                                 recorder=None).run_id)
        return record_breaks(written, recorder, run_id, day)

    monkeypatch.setattr(record_module, "_record_breaks", overtaken_by_another_audit)
    with pytest.raises(ConcurrentAuditError, match="another audit of 2026-01-02 replaced"):
        audit_day(spark, settings.audit_config(), DAY2, recorder=audit_recorder(settings))
    assert overtaken
    db = ReportDB.from_settings(settings)
    assert db.current_audit_run(DAY2).run_id == earlier.run_id
    assert len(db.breaks(earlier.run_id)) == earlier.breaks_recorded


def test_the_audit_command_warns_when_the_day_is_not_closed_yet(spark, replayed, tmp_path,
                                                                monkeypatch, capsys):
    """The stream's watermark has passed midnight but not the end of day 2: auditing day 2 by
    hand is allowed, with a warning that its provisional totals can still change; day 1 is
    closed and audits without one."""
    from app.cli import main

    warehouse = copy_warehouse(replayed.warehouse, tmp_path)
    for key, value in RULES.items():
        monkeypatch.setenv(f"RECKON_{key.upper()}", value)
    assert main(["audit", "--warehouse", str(warehouse), "--date", "2026-01-02"]) == 0
    assert ("has not passed the end of the day's last window + allowed lateness"
            in capsys.readouterr().err)
    assert main(["audit", "--warehouse", str(warehouse), "--date", "2026-01-01"]) == 0
    assert "has not passed" not in capsys.readouterr().err


@pytest.mark.parametrize("rejected_ids, broadcast_ids", [
    ({"twice"}, 1_000_000),   # only a repeated id's copies: the grouped path's read sees them
    ({"once"}, 1_000_000),    # only an id read once: the other path's read
    ({"twice", "once"}, 0),   # every id grouped (more repeated ids than the limit)
])
def test_a_rejected_row_is_quarantined_whichever_path_its_id_takes(spark, tmp_path,
                                                                  rejected_ids, broadcast_ids):
    """The replay counts the rows a lower amount_max now rejects in the same read that picks
    each event's first copy, whose plan splits the day into ids read once and ids that
    repeat. A rejected row on either side, or with every id grouped, is quarantined with
    every copy, and only the accepted ones are counted."""
    from pyspark.sql import functions as F

    t = MIDNIGHT + 60 * S
    big, small = Decimal("500.00"), Decimal("1.00")
    amount = {e: big if e in rejected_ids else small for e in ("twice", "once")}
    events = [Event("twice", "m1", amount["twice"], t, t + S, 0, 0, "pos"),
              Event("once", "m1", amount["once"], t + S, t + 2 * S, 0, 1, "pos"),
              Event("twice", "m1", amount["twice"], t, t + 3 * S, 0, 2, "pos"),
              Event("kept", "m1", small, t + 2 * S, t + 3 * S, 0, 3, "pos")]
    warehouse = tmp_path / "wh"
    run_batches(spark, stream_settings(warehouse, **RULES), [events])
    strict = stream_settings(warehouse, **RULES, amount_max="100.00",
                             replay_broadcast_ids=broadcast_ids)
    run = replay_day(spark, strict.replay_config(), DAY2)
    quarantined = sorted(r.event_id for r in spark.read.format("delta").load(
        str(warehouse / tb.QUARANTINE)).filter(F.col("origin") == f"replay:{DAY2}").collect())
    want = sorted(e.event_id for e in events if e.event_id in rejected_ids)
    assert quarantined == want and run.quarantined == len(want)
    assert run.valid_events == 3 - len(rejected_ids)
    assert run.rows_read == len(events)
