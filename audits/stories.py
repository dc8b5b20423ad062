"""The story of every break of an audit run, recorded in the report database so that the
workbench shows what ``reckon explain`` prints without Spark (audits/break_story.py).

``reckon explain`` reads one window with small queries; here the same inputs are read for
every break of the run at once, as of the table versions the audit read (the event log its
replay pinned, late_events at the same cut, the provisional deltas and watermark progress it
folded), each table joined once to the run's broken cells on (window_start, key, currency).
Each cell's inputs then become an ``audits.chapters.WindowReads`` on the executors, and the
one story builder, ``audits.chapters.chapter_of``, tells it: the lines are the terminal's.
The stories are written by the recorder's module-level writer (audits/ledger.py), which opens
the database from its URL on each executor.
``reckon explain`` run later reads the tables as they are then, so a straggler that arrived
after the audit is in its story and not in the recorded one. Quarantined lines are read from
the day before the window's day on (the quarantine is partitioned by arrival day; a line that
arrived earlier than that, with an event time days ahead, is only in ``reckon explain``).

Example:
    >>> record_break_stories(spark, wh, rules, day, written, reads, recorder,
    ...                      run_id)  # doctest: +SKIP
    108
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from audits.break_story import story_of
from audits.chapters import (
    QuarantinedRow,
    WindowReads,
    chapter_of,
    exact_amounts,
    history_of,
    watermarks_before_of,
)
from audits.ledger import AuditRecorder, StoriesWriter
from audits.records import BreakStory
from reckon.eventtime import EventTimeRules
from reckon.reconcile import ReconStatus
from reckon.timeutil import from_micros
from spark import tables as tb
from spark.rules import window_starts_col
from storage.spec_log import rules_in_force

__all__ = ["StoryInputs", "record_break_stories"]

_CELL = ("window_start", "key", "currency")
_RECON = ("status", "gap_amount", "gap_count", "late_amount", "late_count", "duplicate_amount",
          "duplicate_count", "residual_amount", "residual_count", "audit_run_id")
_PROV = ("total_amount", "event_count", "status", "revision", "last_batch_id",
         "closed_batch_id", "finalized_batch_id")


@dataclass(frozen=True)
class StoryInputs:
    """The frames the audit read (None: the table does not exist), and the versions."""

    provisional: DataFrame | None          # the day's provisional_totals, as folded
    late: DataFrame | None                 # late_events at the audit's cut
    canonical: DataFrame | None
    event_log_version: int | None          # the version the replay pinned
    deltas_version: int | None
    progress_version: int | None


def _us(name: str) -> Column:
    return F.unix_micros(F.col(name)).alias(name)


def _day_events(spark: SparkSession, wh: Path, rules: EventTimeRules, day: date,
                version: int | None, cells: DataFrame) -> DataFrame:
    """(cell, events): every event_log row of each broken cell, the columns explain reads."""
    lo, hi = rules.windows.day_event_times(day)
    rows = (tb.read_table(spark, wh, tb.EVENT_LOG, version=version)
            .filter((F.col("event_date") >= F.lit(from_micros(lo).date()))
                    & (F.col("event_date") <= F.lit(from_micros(hi - 1).date()))
                    & (F.col("event_time") >= F.timestamp_micros(F.lit(lo)))
                    & (F.col("event_time") < F.timestamp_micros(F.lit(hi))))
            .withColumn("_ws", F.explode(window_starts_col(F.unix_micros("event_time"),
                                                           rules.windows)))
            .withColumn("window_start", F.timestamp_micros("_ws")))
    return (rows.join(cells, list(_CELL), "left_semi").groupBy(*_CELL).agg(F.collect_list(
        F.struct("event_id", _us("event_time"), _us("arrival_time"), "partition", "offset",
                 "input_file", "batch_id", "amount", "currency", "source", "is_duplicate"))
        .alias("events")))


def _late(late: DataFrame, day: date, cells: DataFrame) -> DataFrame:
    return (late.filter(F.col("window_date") == F.lit(day)).join(cells, list(_CELL), "left_semi")
            .groupBy(*_CELL).agg(F.collect_list(F.struct(
                "event_id", _us("watermark"), "lateness_seconds", "batch_id",
                _us("arrival_time"), "partition", "offset", "input_file")).alias("late")))


def _deltas(spark: SparkSession, wh: Path, version: int | None, day: date,
            cells: DataFrame) -> DataFrame:
    return (tb.read_table(spark, wh, tb.PROVISIONAL_DELTAS, version=version)
            .filter(F.col("window_date") == F.lit(day)).join(cells, list(_CELL), "left_semi")
            .groupBy(*_CELL).agg(F.collect_list(F.struct(
                "currency", "batch_id", "query_id", _us("processed_at"), "total_amount",
                "event_count", "revised")).alias("deltas")))


def _quarantined(spark: SparkSession, wh: Path, rules: EventTimeRules, day: date,
                 cells: DataFrame) -> DataFrame | None:
    if not tb.table_exists(wh, tb.QUARANTINE):
        return None
    lo, hi = rules.windows.day_event_times(day)
    named = F.coalesce(F.get_json_object("payload", "$.currency"), F.lit(""))
    rows = (tb.read_table(spark, wh, tb.QUARANTINE)
            .filter((F.col("arrival_date") >= F.lit(from_micros(lo).date() - timedelta(days=1)))
                    & F.col("event_time").isNotNull()
                    & (F.col("event_time") >= F.timestamp_micros(F.lit(lo)))
                    & (F.col("event_time") < F.timestamp_micros(F.lit(hi))))
            .withColumn("key", F.get_json_object("payload", "$.key"))
            .withColumn("currency", named)
            .withColumn("_ws", F.explode(window_starts_col(F.unix_micros("event_time"),
                                                           rules.windows)))
            .withColumn("window_start", F.timestamp_micros("_ws")))
    return (rows.join(cells, list(_CELL), "left_semi").groupBy(*_CELL).agg(F.collect_list(
        F.struct("reason", "detail", "event_id", _us("event_time"), _us("arrival_time"),
                 "partition", "offset", "batch_id", "origin", "currency")).alias("quarantined")))


def _progress(spark: SparkSession, wh: Path, version: int | None,
              batches: DataFrame) -> tuple[dict[int, int | None], dict[tuple[str, int], Any]]:
    """The watermark each batch of the cells judged its events against (before) and left
    (after), from the watermark_progress rows of those batches only."""
    if not tb.table_exists(wh, tb.WATERMARK_PROGRESS):
        return {}, {}
    rows = (tb.read_table(spark, wh, tb.WATERMARK_PROGRESS, version=version)
            .join(batches, ["batch_id"], "left_semi")
            .select("query_id", "batch_id", _us("watermark_before"), _us("watermark"))
            .collect())
    before = watermarks_before_of({(r.batch_id, r.watermark_before) for r in rows})
    return before, {(r.query_id, r.batch_id): r.watermark for r in rows}


def _cells(written: DataFrame) -> DataFrame:
    """The run's breaks with the reconciliation row explain shows, and the provisional and
    canonical rows joined in later."""
    return (written.filter(F.col("status") != F.lit(ReconStatus.MATCHED.value))
            .select(*_CELL, F.unix_micros("window_start").alias("start_us"), _us("window_end"),
                    F.struct(*_RECON).alias("recon")))


def _joined(spark: SparkSession, wh: Path, rules: EventTimeRules, day: date,
            cells: DataFrame, reads: StoryInputs) -> tuple[DataFrame, DataFrame]:
    """Each broken cell with its inputs' lists (empty when a table has none), and the batch
    ids its events and deltas name."""
    keys = cells.select(*_CELL)
    out = cells
    parts: list[DataFrame] = [_day_events(spark, wh, rules, day, reads.event_log_version, keys)]
    if reads.late is not None:
        parts.append(_late(reads.late, day, keys))
    if reads.deltas_version is not None:
        parts.append(_deltas(spark, wh, reads.deltas_version, day, keys))
    quarantined = _quarantined(spark, wh, rules, day, keys)
    if quarantined is not None:
        parts.append(quarantined)
    for part in parts:
        out = out.join(part, list(_CELL), "left")
    if reads.provisional is not None:
        out = out.join(reads.provisional.filter(F.col("window_date") == F.lit(day)).select(
            *_CELL, F.struct(*_PROV, _us("closed_at"), _us("watermark_at_close"),
                             _us("finalized_at")).alias("prov")), list(_CELL), "left")
    if reads.canonical is not None:
        out = out.join(reads.canonical.filter(F.col("window_date") == F.lit(day)).select(
            *_CELL, F.struct("total_amount", "event_count", "replay_id").alias("canon")),
            list(_CELL), "left")
    out = out.cache()
    batches = None
    for name, field in (("events", "batch_id"), ("deltas", "batch_id")):
        if name in out.columns:
            ids = out.select(F.explode(name).alias("_x")).select(F.col(f"_x.{field}")
                                                                 .alias("batch_id"))
            batches = ids if batches is None else batches.unionByName(ids)
    if batches is None:
        batches = spark.createDataFrame([], "batch_id long")
    return out, batches.filter(F.col("batch_id").isNotNull()).distinct()


def record_break_stories(spark: SparkSession, wh: Path, configured: EventTimeRules, day: date,
                         written: DataFrame, reads: StoryInputs, recorder: AuditRecorder,
                         run_id: str) -> int:
    """Tell every break of ``written`` (this run's reconciliation rows of ``day``) and write
    the stories to the report database from the executors; returns how many were written.
    The stories judge events by the rules the stream ran with, bounds per input included,
    ``configured`` when it recorded none (``storage.spec_log.rules_in_force``)."""
    url = recorder.ledger.url
    rules = rules_in_force(wh, configured)
    cells = _cells(written)
    joined, batches = _joined(spark, wh, rules, day, cells, reads)
    try:
        before, after = _progress(spark, wh, reads.progress_version, batches)
        stories = joined.rdd.mapPartitions(
            _Teller(run_id=run_id, day=day, rules=rules, before=before, after=after))
        if url.startswith("sqlite"):
            # SQLite takes one writer at a time: the stories are told in parallel, then
            # gathered into one partition (a shuffle; a plain coalesce would tell them,
            # and join their inputs, in that one task too)
            stories = stories.coalesce(1, shuffle=True)
        write = _Writer(run_id=run_id, url=url, write=recorder.write_stories)
        return int(sum(stories.mapPartitions(write).collect()))
    finally:
        joined.unpersist()  # once every story is written


@dataclass(frozen=True)
class _Writer:
    """Runs on the executors: writes a partition's stories with ``write`` (module-level:
    pickled by reference, it opens ``url`` there) and yields how many it wrote."""

    run_id: str
    url: str
    write: StoriesWriter

    def __call__(self, stories: Any) -> Any:
        yield self.write(self.url, self.run_id, stories)


@dataclass(frozen=True)
class _Teller:
    """Runs on the executors: each cell's rows -> WindowReads -> chapter_of -> story_of."""

    run_id: str
    day: date
    rules: EventTimeRules
    before: dict[int, int | None]
    after: dict[tuple[str, int], Any]

    def __call__(self, rows: Any) -> Any:
        return (self.story(r) for r in rows)

    def story(self, row: Any) -> BreakStory:
        code, key = row["currency"], row["key"]
        start, end = int(row["start_us"]), int(row["window_end"])
        fields = row.asDict()

        def listed(name: str) -> list[Any]:
            return _plain(fields.get(name) or [])

        events = sorted(listed("events"), key=lambda e: (
            e.arrival_time, e.partition, _nulls_first(e.input_file), _nulls_first(e.offset),
            e.event_id))
        late = {(r.event_id, r.batch_id, r.partition, r.offset, r.input_file): r
                for r in listed("late")}
        prov = fields.get("prov")
        current = {} if prov is None else {code: prov.asDict()}
        deltas = sorted(listed("deltas"), key=lambda d: d.processed_at)
        history = {} if not deltas else {code: history_of(
            deltas, self.after, current.get(code), start + self.rules.windows.size,
            self.rules.allowed_lateness)}
        canon = fields.get("canon")
        quarantined = sorted((QuarantinedRow(q.reason, q.detail, q.event_id, q.event_time,
                                             q.arrival_time, q.partition, q.offset, q.batch_id,
                                             q.origin, q.currency)
                              for q in listed("quarantined")),
                             key=lambda q: (q.arrival_time, q.partition,
                                            _nulls_first(q.offset)))
        reads = WindowReads(
            events=events, late=late, before=self.before, current=current, history=history,
            canonical={} if canon is None else {code: exact_amounts(canon.asDict(), code)},
            recon={code: exact_amounts(row["recon"].asDict(), code)},
            quarantined=quarantined)
        return story_of(self.run_id, self.day, chapter_of(reads, key, start, end, code,
                                                          self.rules))


def _plain(rows: list[Any]) -> list[Any]:
    """Spark Rows of one struct type as named tuples with the same fields: a story reads each
    field several times, and a Row looks its name up in the field list on every read."""
    if not rows:
        return []
    kind = _tuple_type(tuple(rows[0].__fields__))
    return [kind._make(row) for row in rows]


@cache
def _tuple_type(fields: tuple[str, ...]) -> Any:
    return namedtuple("StoryInput", fields)  # type: ignore[misc]


def _nulls_first(value: Any) -> tuple[bool, Any]:
    """A sort key that puts None first, as Spark's ascending order does."""
    return (value is not None, value if value is not None else 0)
