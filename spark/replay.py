"""The nightly replay: canonical totals for one UTC day from the full event log.

Independent of the stream's decisions: every valid event of the day counts once, whether the
stream counted it, sent it to ``late_events``, caught it as a duplicate or never saw it. The
replay re-applies the typed validation rules (spark/parse.py ``typed_checks``) and the window
assignment (reckon.eventtime via spark/rules.py), de-duplicates by event_id (first copy in
arrival order wins; copies whose payloads disagree are reported in ``replay_conflicts``, never
silently merged) and overwrites the day atomically (Delta ``replaceWhere``), so a re-run gives
identical rows and leaves other days untouched.

Totals are kept per (window, key, currency): amounts of two currencies are never added, and
``replay_runs`` records the day's total per currency.

In the same pass it records ``uncaught_duplicates``: per (window, key, currency), the copies of an
event_id that the stream processed without catching them as duplicates (``event_log``:
``batch_id`` set, ``is_duplicate`` false), beyond the first in arrival order. Each was counted
or sent to the late side output, so the audit explains a gap with totals alone and never
rescans the event log. Copies of one event are identical unless the event is a conflict, so
per event the over-count is ``(admitted copies - 1) x`` its one payload; only conflicting
events (and a replay from Kafka, which has no stream flags) take the per-copy path.

Almost every event_id occurs once, so a replay of the event log first counts the day's ids
(64-bit hashes, a narrow pass) and groups only the rows of the ids that repeat; every other row
is its event as it stands. With more repeated ids than ``replay_broadcast_ids`` it groups the
whole day by event_id, with the same result.

A day's windows are those whose start lies in ``[00:00, 24:00)`` UTC; with hopping windows, or
a step that does not divide 24 hours, the last ones reach past midnight into the next day, so
the read runs that far (``WindowSpec.covered_event_times``). An
event "of the day" (for the counts in ``replay_runs``) is one whose slide-aligned window starts
in the day. Reads pin the event log's Delta version, which ``replay_runs`` records.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F

from reckon.engine_config import ReplayConfig
from reckon.errors import UsageError
from reckon.eventtime import WindowSpec
from reckon.money import CurrencyTotals
from reckon.schema import TOTAL_IDENTITY
from reckon.timeutil import day_bounds, days_between
from spark import tables as tb
from spark.concurrent_writes import ConcurrentWrites
from spark.observe import observed
from spark.parse import first_failure, parse_events, quarantine_payload, typed_checks
from spark.rules import arrival_order, window_starts_col
from storage import commits
from storage.writer_lock import WriterLock, replay_lock

__all__ = ["ReplayResult", "day_log_rows", "day_totals_from_log", "replay_day",
           "replay_range", "uncaught_copies"]


@dataclass(frozen=True)
class ReplayResult:
    """What one replay of one day read and wrote. Counts are events of the day (see module)."""

    replay_id: str
    day: str
    source: str
    event_log_version: int | None
    rows_read: int            # copies read for the day's windows, valid or not
    valid_events: int         # unique event_ids counted
    quarantined: int          # rows the typed rules reject now
    duplicate_copies: int     # extra copies beyond the first
    conflicts: int            # event_ids whose copies disagree
    arrived_after_day: int    # valid events that arrived after the day ended
    new_since_previous: int | None
    windows: int              # (window, key, currency) rows written
    total_amounts: dict[str, str]  # currency -> the day's canonical total, exact decimal text
    duration_seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ts(micros: int) -> Column:
    return F.timestamp_micros(F.lit(micros))


def _read_range(config: ReplayConfig, day: date) -> tuple[int, int]:
    """[read_from, read_to) in microseconds: every event a window starting in ``day`` holds,
    and every event of the calendar day. The two differ when the window step does not divide
    24 hours (7-minute windows: the first window starting on a day may start after midnight)
    or exceeds it (a day on which no window starts): the calendar day's rows are the ones
    this day's replay quarantines when a rule now rejects them, and no other day reads them."""
    lo, hi = config.rules.windows.day_event_times(day)
    d0, d1 = day_bounds(day)
    return min(lo, d0), max(hi, d1)


def _from_event_log(spark: SparkSession, config: ReplayConfig, day: date
                    ) -> tuple[DataFrame, int | None]:
    """The day's candidate rows from the event log at a pinned version, with ``reason``."""
    wh = config.warehouse
    if not tb.table_exists(wh, tb.EVENT_LOG):
        raise UsageError(f"no event_log in warehouse {str(wh)!r}: run `reckon stream` first "
                         "(or check --warehouse)")
    version = commits.current_version(wh, tb.EVENT_LOG)
    if version is None:
        raise UsageError(f"event_log in warehouse {str(wh)!r} has no commit yet: run "
                         "`reckon stream` first")
    return day_log_rows(spark, config, day, version), version


def day_log_rows(spark: SparkSession, config: ReplayConfig, day: date,
                 version: int) -> DataFrame:
    """The event_log rows (at ``version``) whose event times a replay of ``day`` reads, with
    the replay's ``reason``/``detail`` (null for a row the typed rules accept now)."""
    wh = config.warehouse
    lo, hi = _read_range(config, day)
    last_day = (datetime.fromtimestamp((hi - 1) / 1e6, UTC)).date()
    log = (tb.read_table(spark, wh, tb.EVENT_LOG, version=version)
           .filter((F.col("event_date") >= F.lit(day)) & (F.col("event_date") <= F.lit(last_day))
                   & (F.col("event_time") >= _ts(lo)) & (F.col("event_time") < _ts(hi))))
    reason, detail = first_failure(typed_checks(F.col("amount"), F.col("currency"),
                                                F.col("event_time"), F.col("arrival_time"),
                                                config.parse))
    return log.withColumn("reason", reason).withColumn("detail", detail)


def day_totals_from_log(spark: SparkSession, config: ReplayConfig, day: date,
                        version: int) -> DataFrame:
    """The replay's canonical sums of ``day`` by its exact path (every event grouped by
    event_id, no repeated-id split): (window_start, key, currency, total_amount, event_count).
    What a data-quality check compares canonical_totals with: the same functions, not a
    second statement of the rules."""
    d0, d1 = day_bounds(day)
    spec = config.rules.windows
    valid = (day_log_rows(spark, config, day, version).filter(F.col("reason").isNull())
             .select("event_id", *TOTAL_IDENTITY, "amount", "source", "partition", "offset",
                     "input_file", F.unix_micros("event_time").alias("event_us"),
                     F.unix_micros("arrival_time").alias("arrival_us"),
                     F.lit(False).alias("admitted")))
    return (_first_copies(valid)
            .select(*TOTAL_IDENTITY, "amount",
                    F.explode(window_starts_col(F.col("event_us"), spec)).alias("ws_us"))
            .filter((F.col("ws_us") >= F.lit(d0)) & (F.col("ws_us") < F.lit(d1)))
            .groupBy("ws_us", *TOTAL_IDENTITY)
            .agg(F.sum(F.col("amount").cast(tb.TOTAL)).alias("total_amount"),
                 F.count(F.lit(1)).alias("event_count"))
            .select(F.timestamp_micros("ws_us").alias("window_start"), *TOTAL_IDENTITY,
                    "total_amount", "event_count"))


def _from_kafka(spark: SparkSession, config: ReplayConfig, day: date) -> DataFrame:
    """Replay straight from the topic (batch read, earliest to latest as of the start, pinned
    as offsets so that every pass of the replay reads the same records): full validation."""
    from spark.sources import RAW_COLUMNS, kafka_offsets, kafka_raw_columns

    topic = config.kafka_topic
    pinned = {edge: json.dumps({topic: {str(p): o for p, o in kafka_offsets(
        spark, config.kafka_bootstrap, topic, latest=edge == "ending").items()}})
        for edge in ("starting", "ending")}
    raw = (spark.read.format("kafka")
           .option("kafka.bootstrap.servers", config.kafka_bootstrap)
           .option("subscribe", topic)
           .option("startingOffsets", pinned["starting"])
           .option("endingOffsets", pinned["ending"])
           .load()
           .select(*kafka_raw_columns(config.kafka_topic)))
    lo, hi = _read_range(config, day)
    parsed = parse_events(raw.select(*RAW_COLUMNS), config.parse)
    # Rows that fail before an event_time is known cannot be placed in a day: they are the
    # stream's quarantine, not the replay's. Keep the ones this day's windows would hold.
    return parsed.filter((F.col("event_time") >= _ts(lo)) & (F.col("event_time") < _ts(hi)))


def _admitted() -> Column:
    """An event_log copy the stream processed and did not catch as a duplicate (a copy archived
    by another writer has no batch_id)."""
    return F.coalesce(F.col("batch_id").isNotNull() & ~F.col("is_duplicate"), F.lit(False))


def uncaught_copies(log: DataFrame, spec: WindowSpec, d0: int, d1: int) -> DataFrame:
    """Copy by copy: (ws_us, key, currency, amount) of every copy the stream admitted beyond the
    first in arrival order, in each of its own windows that start in [d0, d1). ``log``:
    event_log rows with the replay's ``reason`` (copies the typed rules now reject are not
    attributed)."""
    order = Window.partitionBy("event_id").orderBy(*arrival_order())
    return (log.filter(F.col("reason").isNull() & _admitted())
            .withColumn("copy", F.row_number().over(order)).filter(F.col("copy") > 1)
            .select(*TOTAL_IDENTITY, "amount",
                    F.explode(window_starts_col(F.unix_micros("event_time"), spec))
                    .alias("ws_us"))
            .filter((F.col("ws_us") >= F.lit(d0)) & (F.col("ws_us") < F.lit(d1))))


def _first_copies(valid: DataFrame) -> DataFrame:
    """Per event_id of ``valid``: the first copy in arrival order (key, currency, amount,
    event_us, arrival_us), its number of copies, whether they disagree, and the identical
    copies the stream admitted beyond the first (``uncaught``; see the module)."""
    fingerprint = F.xxhash64("key", "amount", "currency", "event_us", "source")
    first = F.min_by(F.struct("key", "currency", "amount", "event_us", "arrival_us"),
                     F.struct(*arrival_order("arrival_us")))
    return (valid.groupBy("event_id")
            .agg(first.alias("f"), F.count(F.lit(1)).alias("copies"),
                 (F.min(fingerprint) != F.max(fingerprint)).alias("conflict"),
                 F.count_if("admitted").alias("admitted"))
            .select("event_id", "f.key", "f.currency", "f.amount", "f.event_us", "f.arrival_us",
                    "copies", "conflict",
                    F.when(F.col("conflict"), F.lit(0))
                    .otherwise(F.greatest(F.col("admitted") - 1, F.lit(0))).alias("uncaught")))


def _id_hash() -> Column:
    return F.xxhash64("event_id").alias("id_hash")


def _repeated_ids(rows: DataFrame, limit: int) -> DataFrame | None:
    """The 64-bit hashes of the event_ids read more than once (persisted), or None when there
    are more than ``limit`` of them. A hash shared by two ids only sends both down the exact
    path, so the split in ``_one_row_per_event`` never changes a total."""
    # Counted by a window over the shuffled hashes, not by groupBy().count(): nearly every id
    # occurs once, so a map-side partial aggregation would hash all rows and combine none.
    copies = F.count(F.lit(1)).over(Window.partitionBy("id_hash"))
    repeated = (rows.select(_id_hash()).select("id_hash", copies.alias("copies"))
                .filter(F.col("copies") > 1).select("id_hash").distinct().persist())
    if repeated.count() <= limit:
        return repeated
    repeated.unpersist()
    return None


def _one_row_per_event(rows: DataFrame, repeated: DataFrame | None,
                       valid: Callable[[DataFrame, str], DataFrame]) -> DataFrame:
    """``_first_copies`` of the valid rows of ``rows`` (``valid`` keeps them, given a branch of
    the plan and its name). Grouping a day by event_id sorts every row (the first-copy buffer
    is a struct, so Spark plans a sort aggregate) although almost every id occurs once. Given
    the ids that repeat (few enough to broadcast), a row of any other id is its event as it
    stands, and only the repeated ids are grouped."""
    if repeated is None:
        return _first_copies(valid(rows, "all"))
    tagged = rows.withColumn("id_hash", _id_hash())
    once = (valid(tagged.join(F.broadcast(repeated), "id_hash", "left_anti"), "once")
            .select("event_id", "key", "currency", "amount", "event_us", "arrival_us",
                    F.lit(1).cast("long").alias("copies"), F.lit(False).alias("conflict"),
                    F.lit(0).cast("long").alias("uncaught")))
    more = _first_copies(valid(tagged.join(F.broadcast(repeated), "id_hash", "left_semi")
                               .drop("id_hash"), "repeated"))
    return once.unionByName(more)


def _window_columns(size: int, replay_id: str) -> dict[str, Column]:
    """The columns every per-(window, key, currency) table of the replay derives from
    ``ws_us``."""
    return {"window_start": F.timestamp_micros("ws_us"),
            "window_end": F.timestamp_micros(F.col("ws_us") + F.lit(size)),
            "window_date": F.to_date(F.timestamp_micros("ws_us")),
            "replay_id": F.lit(replay_id)}


def _replay_id(day: date, source: str, version: int | None, config: ReplayConfig) -> str:
    rules = json.dumps(config.rules.to_record(), sort_keys=True)
    parse = config.parse
    checks = f"{parse.amount_min}|{parse.amount_max}|{','.join(parse.currencies)}"
    digest = hashlib.sha256(f"{rules}|{checks}|{parse.min_event_time}".encode()).hexdigest()
    return f"{day.isoformat()}:{source}:v{'-' if version is None else version}:{digest[:10]}"


def replay_day(spark: SparkSession, config: ReplayConfig, day: date, *,
               from_kafka: bool = False, held: WriterLock | None = None) -> ReplayResult:
    """Recompute ``canonical_totals`` for ``day`` and record the run in ``replay_runs``.

    ``from_kafka`` reads the configured topic (config.kafka_bootstrap / kafka_topic) from
    earliest to latest instead of the event log. One replay of a day at a time
    (storage.writer_lock): a second one is refused before it writes. ``held``: the day's
    replay lock, already taken by the caller (``replay_lock``; app.pipeline takes it
    before starting Spark, so a refused replay costs no JVM).

    Example: ``replay_day(spark, settings.replay_config(), date(2026, 1, 1)).valid_events``."""
    with nullcontext(held) if held is not None else replay_lock(config.warehouse, day,
                                                                  from_kafka=from_kafka):
        return _replay_day(spark, config, day, from_kafka=from_kafka)


@dataclass(frozen=True)
class _DayRead:
    """What every step of one replay of a day shares: the day's bounds, its source and the
    rows read (the event log at a pinned version, or the topic), and the run's id."""

    spark: SparkSession
    config: ReplayConfig
    day: date
    from_kafka: bool
    spec: WindowSpec
    source: str                 # "event_log" or "kafka:<topic>"
    version: int | None         # the event log's pinned version (None from Kafka)
    rows: DataFrame             # the day's candidate rows, each with the replay's ``reason``
    replay_id: str
    started_at: datetime

    @property
    def bounds(self) -> tuple[int, int]:
        """[start, end) of the calendar day, in microseconds."""
        return day_bounds(self.day)


def _replay_day(spark: SparkSession, config: ReplayConfig, day: date, *,
                from_kafka: bool) -> ReplayResult:
    """The replay's steps, in order. Each table write of the day starts as soon as its rows
    are known and runs beside the others (each replaces only this day's or this origin's
    rows: most of a small commit is Delta's driver-side bookkeeping); all have ended, failed
    or not, before the run record is written."""
    t0 = time.monotonic()
    read = _read_day(spark, config, day, from_kafka=from_kafka)
    writes = ConcurrentWrites()
    cached: list[DataFrame] = []  # persisted by a step; unpersisted whatever happens
    try:
        repeated = _repeated_ids_of_day(read, cached)
        events, screens = _one_row_per_valid_event(read, repeated)
        totals, summary, day_totals = _write_canonical_totals(read, events, cached)
        bad_seen = _quarantine_rejected(read, writes, screens)
        conflicting = _write_uncaught_duplicates(read, writes, events, totals,
                                                 bool(summary["has_conflict"]), cached)
        conflicts_seen = _write_conflicts(read, writes, conflicting,
                                          bool(summary["has_conflict"]))
        previous = _previous_valid_events(read)
    finally:
        writes.wait()
        for frame in cached:
            frame.unpersist()
    writes.raise_first_error()
    return _record_run(read, summary=summary, day_totals=day_totals, previous=previous,
                       quarantined=int(observed(bad_seen, {"rows": 0})["rows"]),
                       conflicts=int(observed(conflicts_seen, {"rows": 0})["rows"]),
                       duration_seconds=round(time.monotonic() - t0, 3))


def _read_day(spark: SparkSession, config: ReplayConfig, day: date, *,
              from_kafka: bool) -> _DayRead:
    """Step 0: the tables the replay writes exist (in the current layout), and the day's rows
    are read from the event log at its current version, or from the topic."""
    started_at, wh = datetime.now(UTC), config.warehouse
    written = (tb.CANONICAL_TOTALS, tb.UNCAUGHT_DUPLICATES, tb.REPLAY_RUNS,
               tb.REPLAY_CONFLICTS, tb.QUARANTINE)
    tb.require_layout(spark, wh, (tb.EVENT_LOG, *written))
    for name in written:
        tb.ensure_table(spark, wh, name)
    if from_kafka:
        if not config.kafka_bootstrap:
            raise UsageError("replay from Kafka needs --kafka BOOTSTRAP (or RECKON_KAFKA_BOOTSTRAP)")
        source, version = f"kafka:{config.kafka_topic}", None
        rows = _from_kafka(spark, config, day)
    else:
        source = "event_log"
        rows, version = _from_event_log(spark, config, day)
    return _DayRead(spark=spark, config=config, day=day, from_kafka=from_kafka,
                    spec=config.rules.windows, source=source, version=version, rows=rows,
                    replay_id=_replay_id(day, source, version, config),
                    started_at=started_at)


def _repeated_ids_of_day(read: _DayRead, cached: list[DataFrame]) -> DataFrame | None:
    """Step 1: the 64-bit hashes of the ids read more than once (persisted), counted over a
    read of event_id alone (a narrow pass: step 2 groups only their rows). None: step 2 groups
    every row by event_id (a replay from Kafka, or more repeated ids than
    ``replay_broadcast_ids``)."""
    if read.from_kafka:
        return None
    repeated = _repeated_ids(read.rows, read.config.broadcast_ids)
    cached += [repeated] if repeated is not None else []
    return repeated


def _rejected_in_day(read: _DayRead) -> Column:
    """A row the typed rules reject now, of the calendar day (no other day's replay reads it)."""
    d0, d1 = read.bounds
    in_day = (F.col("event_time") >= _ts(d0)) & (F.col("event_time") < _ts(d1))
    return F.col("reason").isNotNull() & in_day


def _one_row_per_valid_event(read: _DayRead, repeated: DataFrame | None
                             ) -> tuple[DataFrame, list[Observation]]:
    """Step 2: one row per event_id, the first copy in arrival order, with its copies and
    whether they disagree. The same read counts the rows the typed rules reject now (step 4
    quarantines them): one observation per branch of the plan, so every row is counted once
    whichever path its id takes."""
    screens: list[Observation] = []

    def valid(rows: DataFrame, branch: str) -> DataFrame:
        screen = Observation(f"replay_screen_{branch}")
        screens.append(screen)
        return (rows.observe(screen, F.count_if(_rejected_in_day(read)).alias("rejected"))
                .filter(F.col("reason").isNull())
                .select("event_id", "key", "amount", "currency", "source", "partition",
                        "offset", "input_file", F.unix_micros("event_time").alias("event_us"),
                        F.unix_micros("arrival_time").alias("arrival_us"),
                        (F.lit(False) if read.from_kafka else _admitted()).alias("admitted")))

    return _one_row_per_event(read.rows, repeated, valid), screens


def _quarantine_rejected(read: _DayRead, writes: ConcurrentWrites,
                         screens: list[Observation]) -> Observation:
    """Step 4: rows the typed rules reject now are quarantined with the replay as origin
    (day-scoped), replacing what an earlier replay of the day put there. Usually none is
    (the stream quarantined them on arrival): step 2's read counted them, and then no payload
    is read again. A retried task can only over-count, never hide a rejected row. Returns
    the observation counting the rows quarantined."""
    origin = f"replay:{read.day.isoformat()}"
    any_rejected = read.from_kafka or any(
        observed(screen, {"rejected": 0})["rejected"] for screen in screens)
    bad = read.rows.filter(_rejected_in_day(read)).select(
        "reason", "detail", *quarantine_payload(), "partition", "offset", "arrival_time", "input_file",
        F.lit(None).cast("long").alias("batch_id"), F.lit(origin).alias("origin"),
        F.lit(read.started_at).alias("quarantined_at"), "event_id", "event_time",
        F.to_date("arrival_time").alias("arrival_date"))
    bad_seen = Observation("replay_quarantine")
    writes.start("quarantine", tb.replace_rows,
                 tb.conform(bad if any_rejected else bad.limit(0), tb.QUARANTINE)
                 .observe(bad_seen, F.count(F.lit(1)).alias("rows")),
                 read.config.warehouse, tb.QUARANTINE, f"origin = '{origin}'")
    return bad_seen


def _window_totals(read: _DayRead, events: DataFrame) -> DataFrame:
    """Step 3's rows: window assignment (the one rule), the day's windows only, exact sums per
    (window, key, currency), at the total's precision (no day overflows it). Per-event counts
    ride along on the event's own slide-aligned window (pos 0) so one pass gives both the
    totals and the run's counts."""
    d0, d1 = read.bounds
    exploded = (events.select("*", F.posexplode(window_starts_col(F.col("event_us"), read.spec))
                              .alias("pos", "ws_us"))
                .filter((F.col("ws_us") >= F.lit(d0)) & (F.col("ws_us") < F.lit(d1))))
    own = F.col("pos") == 0
    return (exploded.groupBy("ws_us", *TOTAL_IDENTITY)
            .agg(F.sum(F.col("amount").cast(tb.TOTAL)).alias("total_amount"),
                 F.count(F.lit(1)).alias("event_count"),
                 F.sum(F.when(own, 1).otherwise(0)).alias("_events"),
                 F.sum(F.when(own, F.col("copies") - 1).otherwise(0)).alias("_dups"),
                 # any window of the day holding a conflicting event: whether the day has
                 # conflicts to list (which ones is step 6's rule)
                 F.max("conflict").alias("_has_conflict"),
                 F.sum(F.when(own & (F.col("arrival_us") >= F.lit(d1)), 1).otherwise(0))
                 .alias("_after"),
                 F.sum("uncaught").alias("duplicate_count"),
                 # null (skipped) on the many rows without: no decimal product per event
                 F.sum(F.when(F.col("uncaught") > 0,
                              F.col("amount").cast(tb.TOTAL) * F.col("uncaught")))
                 .cast(tb.TOTAL).alias("duplicate_amount"))
            .withColumns(_window_columns(read.spec.size, read.replay_id)))


def _write_canonical_totals(read: _DayRead, events: DataFrame, cached: list[DataFrame]
                            ) -> tuple[DataFrame, dict[str, Any], CurrencyTotals]:
    """Step 3: the day's canonical totals written (replaceWhere of the day). The run's counts
    are observed while the rows are written (one pass, no second job over the events). The
    observed node sits after the final aggregation, in the write's result stage, whose
    accumulator updates Spark applies once per partition even when a task is retried.
    Returns the persisted totals (step 5 reads them back), the counts, and the day's total
    per currency."""
    totals = _window_totals(read, events).persist()
    cached.append(totals)
    summary = Observation("replay_summary")
    tb.replace_rows(tb.conform(totals.observe(
        summary, F.count(F.lit(1)).alias("windows"), F.sum("_events").alias("events"),
        F.sum("_dups").alias("dups"), F.sum("_after").alias("after"),
        F.max("_has_conflict").alias("has_conflict")), tb.CANONICAL_TOTALS),
        read.config.warehouse, tb.CANONICAL_TOTALS, tb.window_day(read.day))
    counts = observed(summary, {"windows": 0, "events": 0, "dups": 0, "after": 0,
                                "has_conflict": None})
    # the day's total per currency, from the persisted rows (one row per currency back)
    day_totals = CurrencyTotals()
    if int(counts["windows"]):
        for r in totals.groupBy("currency").agg(F.sum("total_amount").alias("amount")).collect():
            day_totals.add(r.currency, r.amount)
    return totals, counts, day_totals


def _write_uncaught_duplicates(read: _DayRead, writes: ConcurrentWrites, events: DataFrame,
                               totals: DataFrame, has_conflict: bool,
                               cached: list[DataFrame]) -> DataFrame:
    """Step 5: what the stream counted more than once. Identical copies came with the totals;
    the copies of conflicting events (their own key, amount and windows) and, for a replay
    from Kafka, every copy the stream admitted come from the event log copy by copy. Started
    only after the canonical_totals commit: the audit trusts a day's duplicates once the
    replay that wrote its totals finished (audits.audit_inputs._finished_replay). Returns the
    conflicting events (step 6 lists them)."""
    (d0, d1), spec, wh = read.bounds, read.spec, read.config.warehouse
    conflicting = events.filter("conflict").select("event_id", "event_us")
    if has_conflict:  # a few ids, used twice below: group the day by event_id again
        conflicting = conflicting.persist()
        cached.append(conflicting)
    per_copy: DataFrame | None = None
    if read.from_kafka and tb.table_exists(wh, tb.EVENT_LOG):
        per_copy = uncaught_copies(_from_event_log(read.spark, read.config, read.day)[0],
                                   spec, d0, d1)
    elif not read.from_kafka and has_conflict:
        per_copy = uncaught_copies(read.rows.join(conflicting.select("event_id"), "event_id"),
                                   spec, d0, d1)
    uncaught = totals.filter(F.col("duplicate_count") > 0).select(
        "ws_us", *TOTAL_IDENTITY, "duplicate_amount", "duplicate_count")
    if per_copy is not None:
        uncaught = (uncaught.unionByName(per_copy.select(
            "ws_us", *TOTAL_IDENTITY, F.col("amount").cast(tb.TOTAL).alias("duplicate_amount"),
            F.lit(1).cast("long").alias("duplicate_count")))
            .groupBy("ws_us", *TOTAL_IDENTITY)
            .agg(F.sum("duplicate_amount").alias("duplicate_amount"),
                 F.sum("duplicate_count").alias("duplicate_count")))
    writes.start("uncaught_duplicates", tb.replace_rows,
                 tb.conform(uncaught.withColumns(_window_columns(spec.size, read.replay_id)),
                            tb.UNCAUGHT_DUPLICATES),
                 wh, tb.UNCAUGHT_DUPLICATES, tb.window_day(read.day))
    return conflicting


def _write_conflicts(read: _DayRead, writes: ConcurrentWrites, conflicting: DataFrame,
                     has_conflict: bool) -> Observation:
    """Step 6: conflicts, which ids and every payload seen (small: only disagreeing ids). A
    conflict is listed by the day of its earliest copy's event time, and the run's count is
    the rows written. (Both once followed the kept copy: with hopping windows, copies on both
    sides of midnight made the earlier day see the conflict, which the later day, reading
    from midnight, cannot, and it was listed nowhere.) Returns the observation counting the
    rows written."""
    d0, d1 = read.bounds
    conflict_rows = (read.rows.filter(F.col("reason").isNull())
                     .join(conflicting.select("event_id"), "event_id")
                     .groupBy("event_id")
                     .agg(F.count(F.lit(1)).alias("copies"),
                          F.sort_array(F.collect_set("payload")).alias("payloads"),
                          F.min_by("payload", F.struct(*arrival_order())).alias("kept_payload"),
                          F.min(F.unix_micros("event_time")).alias("event_us"))
                     .filter((F.col("event_us") >= F.lit(d0)) & (F.col("event_us") < F.lit(d1)))
                     .withColumns({"replay_id": F.lit(read.replay_id),
                                   "window_date": F.lit(read.day)}))
    if not has_conflict:
        conflict_rows = conflict_rows.limit(0)
    conflicts_seen = Observation("replay_conflicts")
    writes.start("replay_conflicts", tb.replace_rows,
                 tb.conform(conflict_rows, tb.REPLAY_CONFLICTS)
                 .observe(conflicts_seen, F.count(F.lit(1)).alias("rows")),
                 read.config.warehouse, tb.REPLAY_CONFLICTS, tb.window_day(read.day))
    return conflicts_seen


def _previous_valid_events(read: _DayRead) -> int | None:
    """The valid events the newest other replay of the day counted (None: it is the first)."""
    previous = (tb.read_table(read.spark, read.config.warehouse, tb.REPLAY_RUNS)
                .filter((F.col("window_date") == F.lit(read.day))
                        & (F.col("replay_id") != read.replay_id))
                .orderBy(F.col("started_at").desc()).select("valid_events").limit(1)
                .collect())
    return int(previous[0][0]) if previous else None


def _record_run(read: _DayRead, *, summary: dict[str, Any], day_totals: CurrencyTotals,
                previous: int | None, quarantined: int, conflicts: int,
                duration_seconds: float) -> ReplayResult:
    """Step 7: the run record in replay_runs (replaced when the same inputs are replayed
    again), and the result the caller prints or passes on."""
    events_n, dups = int(summary["events"] or 0), int(summary["dups"] or 0)
    result = ReplayResult(
        replay_id=read.replay_id, day=read.day.isoformat(), source=read.source,
        event_log_version=read.version, rows_read=events_n + dups + quarantined,
        valid_events=events_n, quarantined=quarantined, duplicate_copies=dups,
        conflicts=conflicts, arrived_after_day=int(summary["after"] or 0),
        new_since_previous=None if previous is None else events_n - previous,
        windows=int(summary["windows"]),
        total_amounts={code: str(amount) for code, amount in sorted(day_totals.items())},
        duration_seconds=duration_seconds)
    run_row = {**asdict(result), "window_date": read.day, "started_at": read.started_at,
               "arrived_after_close": result.arrived_after_day,
               "total_amounts": _currency_map(day_totals),
               "rules_json": json.dumps(read.config.rules.to_record(),
                                        sort_keys=True)}
    tb.replace_rows(tb.single_row(read.spark, tb.REPLAY_RUNS, run_row),
                    read.config.warehouse, tb.REPLAY_RUNS,
                    f"replay_id = '{read.replay_id}'")
    return result


def _currency_map(totals: CurrencyTotals) -> Column:
    """A MAP<STRING, DECIMAL(38,3)> literal of per-currency totals (empty on a quiet day)."""
    items: list[Column] = []
    for code, amount in sorted(totals.items()):
        items += [F.lit(code), F.lit(amount).cast(tb.TOTAL)]
    return F.create_map(*items).cast(tb.SCHEMAS[tb.REPLAY_RUNS]["total_amounts"].dataType)


def replay_range(spark: SparkSession, config: ReplayConfig, first: date, last: date, *,
                 from_kafka: bool = False) -> list[ReplayResult]:
    """Replay every day in ``[first, last]`` (a backfill without Airflow), oldest first."""
    return [replay_day(spark, config, day, from_kafka=from_kafka)
            for day in days_between(first, last)]
