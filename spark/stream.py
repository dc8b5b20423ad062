"""The streaming aggregator: provisional windowed totals under per-partition watermarks.

Spark Structured Streaming reads a source (spark/sources.py: a landing folder of NDJSON files
in name order, or a Kafka topic); every micro-batch goes through ``BatchProcessor`` in
``foreachBatch``, which does, in this order:

1. parse and validate (spark/parse.py); bad rows -> ``quarantine`` with a reason;
2. de-duplicate by event_id within the dedup horizon (earlier copies in ``event_log`` from
   earlier batches, or earlier in this batch in arrival order);
3. archive every valid row to ``event_log`` (duplicates flagged), the log the replay reads;
4. classify each (event, window) against the watermark left by the previous batch;
5. append this batch's sums of on-time events and revisions (within the allowed lateness) per (window, key, currency) to
   ``provisional_deltas`` and its late rows to ``late_events``. Nothing is rewritten:
   ``provisional_totals`` is the fold of the deltas, its statuses derived from the recorded
   watermarks (spark/provisional.py), so a window that closes needs no write at all;
6. every ``event_log_compact_every`` batches, bin-pack the small files of the current days of
   event_log (its dedup read above opens them every batch) and provisional_deltas (a read of
   the open windows folds them), and after step 7 watermark_progress;
7. advance the per-input watermark (reckon.eventtime.advance_watermark; inputs are partitions,
   or (partition, source) pairs, each with its own bound) and record the batch, and the input
   holding the watermark back, in ``watermark_progress``.

The writes of steps 1, 3 and 5 (quarantine, event_log, provisional_deltas, late_events) are
independent of one another and run concurrently once their inputs are known; the
``watermark_progress`` row is written only after all of them have committed.

Spark's own watermark is global, max-based and has no idle handling, so it is not used: the
platform's watermark state is stored in ``watermark_progress`` (written last in each batch)
and restored from the row of batch n-1, so a re-run batch is judged exactly as before.
Every write is idempotent by (query id, table, batch id): each commit carries a batch mark
(spark/tables.py), and the one batch that can be a re-run -- the first a processor runs after
a restart -- skips the tables whose commit files already carry its mark.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pyspark import StorageLevel
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from reckon.config import Settings
from reckon.dedup_state import StateCoverage, state_suffices, state_ttl
from reckon.engine_config import StreamConfig
from reckon.errors import ConcurrentWriterError, ConfigError, UsageError
from reckon.eventtime import (
    Disposition,
    EventTimeRules,
    PartitionObservation,
    WatermarkState,
    advance_watermark,
)
from reckon.schema import TOTAL_IDENTITY
from reckon.timeutil import from_micros, parse_duration, to_micros
from spark import tables as tb
from spark.batch_metrics import BatchMetrics, input_metrics, print_progress
from spark.checkpoint_paths import relocate_checkpoint
from spark.concurrent_writes import ConcurrentWrites
from spark.constants import batch_constant, batch_timestamp
from spark.dedup import StateSeed, coverage_of_query, judge_by_archive, judged_stream
from spark.parse import parse_events, quarantine_payload
from spark.progress_row import PROGRESS_COUNTS, partition_maxima, progress_row
from spark.rules import disposition_col, window_starts_col
from spark.sources import (
    RAW_COLUMNS,
    StreamSource,
    keep_admitting,
    landing_admitter,
    sweep_committed_admissions,
)
from storage import commits
from storage.writer_lock import WriterLock, stream_refusal, writer_scope

__all__ = ["STREAM_TABLES", "BatchProcessor", "processing_time", "run_stream", "stream_lock"]

STREAM_TABLES = (tb.EVENT_LOG, tb.QUARANTINE, tb.PROVISIONAL_DELTAS, tb.LATE_EVENTS,
                 tb.WATERMARK_PROGRESS)
_EVENT_COLUMNS = ("event_id", "key", "amount", "currency", "event_time", "source",
                  "partition", "offset", "arrival_time", "input_file")


@dataclass(frozen=True)
class _BatchSummary:
    """What the batch's summary job found: counts, and per watermark input the maxima of its
    valid rows (``valid_rows``: the job's rows, ``observations``: as the watermark takes
    them); ``rows``: every row of the job, per input and quarantine reason (None: valid)."""

    rows_in: int
    valid: int
    quarantined: int
    valid_rows: list[Row]
    observations: list[PartitionObservation]
    rows: list[Row]


@dataclass
class _Batch:
    """One micro-batch's own values, made when it starts (``BatchProcessor._begin``) and
    handed to each step; the processor keeps only what outlives a batch (the rules, the
    query, the last state, the dedup state's coverage). Why: a step reads what its batch
    read, never what the previous batch left on the processor.

    ``written``: the stream tables that already hold this batch (a re-run); ``reads``: the
    versions of event_log and watermark_progress it reads and its clock (its batch marks
    record them); ``steps``: seconds per named step (the progress line); ``dedup_by``: what
    judged its duplicates, "state" or "archive"."""

    batch_id: int
    started: float
    written: frozenset[str]
    reads: dict[str, int]
    before: WatermarkState
    processed_at: datetime
    id_col: Column
    processed_at_col: Column
    watermark_before_col: Column | None
    steps: dict[str, float] = field(default_factory=dict)
    dedup_by: str = "archive"

    @property
    def watermark_before(self) -> int | None:
        return self.before.watermark

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block as step ``name`` (added up when a step runs more than once)."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.steps[name] = self.steps.get(name, 0.0) + time.monotonic() - t0


class BatchProcessor:
    """The foreachBatch function. Callable on any DataFrame with RAW_COLUMNS, so tests can
    drive it with static DataFrames exactly as the stream does."""

    def __init__(self, spark: SparkSession, config: StreamConfig, *,
                 query_id: str | None = None, checkpoint: str | None = None,
                 on_batch: Callable[[BatchMetrics], None] | None = None,
                 writer_lock: WriterLock | None = None) -> None:
        """A processor for a warehouse whose stream tables exist and whose spec is recorded
        (``BatchProcessor.of`` does both)."""
        self.spark = spark
        self.config = config
        self.warehouse = config.warehouse
        self.rules: EventTimeRules = config.rules
        self._writer_lock = writer_lock  # checked before each batch writes
        # the lock's own error when a lost lock stopped the query: Spark wraps what
        # foreachBatch raises in a StreamingQueryException that carries the whole trace
        self.stopped_by: ConcurrentWriterError | None = None
        self._query_id = query_id
        self._checkpoint = checkpoint
        self._cache: tuple[int, WatermarkState] | None = None
        # the newest batch any stream table held when this processor last read the marks
        self._marked_up_to: int | None = None
        self._seed: StateSeed | None = None  # where the query's dedup state started
        self._coverage: StateCoverage | None = None  # what the dedup state vouches for
        self.on_batch = on_batch

    @classmethod
    def of(cls, spark: SparkSession, settings: Settings, *, change_spec: bool = False,
           query_id: str | None = None, checkpoint: str | None = None,
           on_batch: Callable[[BatchMetrics], None] | None = None,
           writer_lock: WriterLock | None = None) -> BatchProcessor:
        """The stream's edge: refuse a warehouse of another layout, create the stream tables,
        record (or keep) the warehouse's event-time spec, then build the processor from the
        recorded rules (``Settings.stream_config``).

        Example: ``BatchProcessor.of(spark, settings, query_id="q")(raw_batch, 0)``.
        """
        from spark.spec import establish_spec

        warehouse = settings.warehouse_path
        tb.require_layout(spark, warehouse, STREAM_TABLES)
        for name in STREAM_TABLES:
            tb.ensure_table(spark, warehouse, name)
        # the warehouse's event-time spec: recorded on its first start, kept ever after
        recorded = establish_spec(spark, settings, change=change_spec)
        return cls(spark, recorded.stream_config(), query_id=query_id, checkpoint=checkpoint,
                   on_batch=on_batch, writer_lock=writer_lock)

    # ------------------------------------------------------------------ identity and state
    @property
    def query_id(self) -> str:
        if self._query_id is None:
            if self._checkpoint is None:
                raise UsageError("BatchProcessor needs a query_id or a checkpoint")
            meta = Path(self._checkpoint) / "metadata"
            self._query_id = json.loads(meta.read_text().splitlines()[0])["id"]
        return self._query_id

    @property
    def app_id(self) -> str:
        return f"reckon-stream:{self.query_id}"

    def restore_state(self, batch_id: int, reads: dict[str, int]) -> WatermarkState:
        """The watermark state after batch ``batch_id - 1`` (from memory or the progress table,
        read at the version in ``reads``).

        A query's first batch starts from the newest state another query left in the
        warehouse, if any: a query started on a new checkpoint (the old one lost) re-reads
        what its predecessor already counted, and judged from no watermark every re-read row
        would be on time, added again to windows long FINAL and audited. It inherits the
        watermark instead, so those rows are duplicates of their archived copies or late."""
        if self._cache is not None and self._cache[0] == batch_id - 1:
            return self._cache[1]
        progress = tb.read_table(self.spark, self.warehouse, tb.WATERMARK_PROGRESS,
                                 version=reads[tb.WATERMARK_PROGRESS])
        rows = (progress.filter((F.col("query_id") == self.query_id)
                                & (F.col("batch_id") < batch_id))
                .orderBy(F.col("batch_id").desc()).select("state_json").limit(1).collect())
        if not rows:
            rows = (progress.filter(F.col("query_id") != self.query_id)
                    .orderBy(F.col("processed_at").desc(), F.col("batch_id").desc())
                    .select("state_json").limit(1).collect())
        return WatermarkState.from_json(rows[0].state_json if rows else None)

    def batch_reads(self, batch_id: int, written: frozenset[str]) -> dict[str, int]:
        """The versions of event_log (earlier copies, for de-duplication) and
        watermark_progress (the state to resume from) that batch ``batch_id`` reads.

        A new batch reads them as they are now; a re-run batch reads what its first run read,
        as the marks of its commits record it. Another query may have committed to either
        table in between, and judged against those rows the re-run would classify its events
        differently from the tables its first run already wrote: an event counted in
        provisional_totals but archived as a duplicate, or the reverse."""
        inputs = {tb.EVENT_LOG, tb.WATERMARK_PROGRESS}
        found: dict[str, tuple[int, dict[str, int]] | None] = {}
        for name in sorted(written):
            found[name] = commits.marked_commit(self.warehouse, name, self.app_id, batch_id)
            commit = found[name]
            if commit is not None and inputs <= commit[1].keys():
                return dict(commit[1])
        reads = {name: commits.current_version(self.warehouse, name) for name in sorted(inputs)}
        if tb.EVENT_LOG in written:
            own = found[tb.EVENT_LOG]
            if own is None:
                raise RuntimeError(
                    f"event_log holds batches of stream query {self.app_id} up to or past "
                    f"batch {batch_id}, but no commit of batch {batch_id} itself (its commit "
                    "files expired, or the checkpoint was restored from an older copy), so its "
                    "events cannot be told from their own archived copies. Start the stream "
                    "with a new checkpoint location: a new query re-reads the source and flags "
                    "every delivery already archived as a duplicate")
            # its marks predate the record of reads: event_log as of just before its own
            # commit, as then
            reads[tb.EVENT_LOG] = own[0] - 1
        missing = [name for name, version in reads.items() if version is None]
        if missing:
            raise RuntimeError(f"{', '.join(missing)} in {str(self.warehouse)!r} has no "
                               "commit: the stream creates its tables before the first batch")
        return {name: int(version) for name, version in reads.items() if version is not None}

    @staticmethod
    def _processing_time(reads: dict[str, int]) -> datetime:
        """The batch's processing time: now, recorded with the versions it reads (its batch
        marks carry both), or, for a re-run batch, the time its first run recorded. Every
        row the batch writes carries it (its deltas, its progress row), and provisional_totals
        orders a window's deltas by it, so a re-run writes what its first run would have."""
        recorded = reads.get(commits.CLOCK_READ)
        if recorded is not None:
            return from_micros(recorded)
        now = datetime.now(UTC)
        reads[commits.CLOCK_READ] = to_micros(now)
        return now

    def already_written(self, batch_id: int) -> frozenset[str]:
        """The stream tables that already hold batch ``batch_id`` of this query.

        Only a batch this processor cannot vouch for reads the marks: Spark plans batch n+1
        only after batch n is committed and re-runs an uncommitted batch first on restart, so
        after the processor itself finished batch n-1, and n is past every mark it has seen,
        no table can hold n yet and nothing is read."""
        fresh = (self._cache is not None and self._cache[0] == batch_id - 1
                 and self._marked_up_to is not None and batch_id > self._marked_up_to)
        if fresh:
            return frozenset()
        marks = {name: commits.last_marked_batch(self.warehouse, name, self.app_id)
                 for name in STREAM_TABLES}
        self._marked_up_to = max((m for m in marks.values() if m is not None), default=-1)
        return frozenset(name for name, m in marks.items() if m is not None and m >= batch_id)

    def _append(self, df: DataFrame, name: str, batch: _Batch) -> None:
        if name not in batch.written:
            tb.marked_append(df, self.warehouse, name, self.app_id, batch.batch_id, batch.reads)

    # ------------------------------------------------------------------ the batch
    def __call__(self, raw: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        if self._writer_lock is not None:
            try:
                self._writer_lock.check()  # still the warehouse's one writer
            except ConcurrentWriterError as exc:
                self.stopped_by = exc  # what the stream ends with, in one line
                _quiet_query_failure_log(raw.sparkSession)
                raise
        batch = self._begin(batch_id, started)
        # the stream's frames come parsed and judged by the dedup state (judged_stream)
        judged = "is_duplicate" in raw.columns
        parsed = (raw if judged else self._parse(raw)).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            self._process(parsed, batch)
        finally:
            parsed.unpersist()

    def _begin(self, batch_id: int, started: float) -> _Batch:
        """The batch's own values: what it already wrote (a re-run), what it reads, the state
        it starts from, its processing time, and those as columns whose generated code is the
        same in every batch (spark.constants)."""
        t0 = time.monotonic()
        written = self.already_written(batch_id)
        reads = self.batch_reads(batch_id, written)
        before = self.restore_state(batch_id, reads)
        restore_seconds = time.monotonic() - t0
        processed_at = self._processing_time(reads)
        wm_before = before.watermark
        return _Batch(
            batch_id=batch_id, started=started, written=written, reads=reads, before=before,
            processed_at=processed_at, id_col=batch_constant(self.spark, batch_id),
            processed_at_col=batch_timestamp(self.spark, processed_at),
            watermark_before_col=(None if wm_before is None
                                  else batch_constant(self.spark, wm_before)),
            steps={"restore": restore_seconds})

    def _parse(self, raw: DataFrame) -> DataFrame:
        """Raw rows -> typed, validated rows with event_us and arrival_us (spark.parse)."""
        return (parse_events(raw.select(*RAW_COLUMNS), self.config.parse)
                .withColumn("event_us", F.unix_micros("event_time"))
                .withColumn("arrival_us", F.unix_micros("arrival_time")))

    def judged_stream(self, raw: DataFrame) -> DataFrame:
        """The streaming query's plan ahead of foreachBatch: parse, then flag each valid row
        ``is_duplicate`` by the query's dedup state (spark.dedup, decision 0009), which a new
        checkpoint seeds from the archive's last horizon."""
        assert self._checkpoint is not None  # run_stream gives one
        self._seed = StateSeed.of(self.spark, self.warehouse, self._checkpoint)
        seed = self._seed.rows(self.spark, self.warehouse, self.rules.dedup_horizon)
        return judged_stream(self.spark, self._parse(raw), self.rules, seed,
                             buckets=self._seed.buckets)

    def _process(self, parsed: DataFrame, batch: _Batch) -> None:
        """The batch's steps in order: summarise, advance the watermark, write the rows,
        compact when due, record the progress row, then remember the new state."""
        summary = self._summarise(parsed, batch)
        after = advance_watermark(batch.before, summary.observations, self.rules.watermark)
        counts, by_input = self._write_rows(parsed, batch, summary)
        every = self.config.compact_every
        wm_before = batch.watermark_before
        compacting = bool(every and wm_before is not None
                          and batch.batch_id % every == every - 1)
        if compacting and wm_before is not None:
            with batch.step("compact"):
                self.compact_open_days(wm_before)
        metrics = self._metrics(batch, summary, counts, by_input, after)
        with batch.step("progress"):
            self._write_progress(batch, metrics, after)
        if compacting:
            # watermark_progress gains a file per batch and is read whole on every restart
            # and nightly poll; compacted after this batch's row, so that a re-run of the batch
            # finds nothing left to compact (and commits nothing)
            from spark.compaction import compact_watermark_progress

            with batch.step("compact"):
                compact_watermark_progress(self.spark, self.warehouse)
        self._end(batch, summary, after, metrics)

    def _metrics(self, batch: _Batch, summary: _BatchSummary, counts: dict[str, int],
                 by_input: list[Row], after: WatermarkState) -> BatchMetrics:
        """What the batch reports (the progress row, the progress line, the metrics port)."""
        maxima, arrivals = partition_maxima(after)
        return BatchMetrics(
            batch_id=batch.batch_id, rows_in=summary.rows_in, valid=summary.valid,
            quarantined=summary.quarantined, duplicates=counts["duplicate"],
            on_time=counts["on_time"], revised=counts["revision"], late=counts["late"],
            watermark=after.watermark, duration_seconds=time.monotonic() - batch.started,
            step_seconds=batch.steps, dedup_by=batch.dedup_by,
            processed_at=to_micros(batch.processed_at),
            inputs=input_metrics(summary.rows, by_input, self.rules.watermark.by_source),
            partition_max_event_time=maxima, partition_last_arrival=arrivals)

    def _end(self, batch: _Batch, summary: _BatchSummary, after: WatermarkState,
             metrics: BatchMetrics) -> None:
        """What outlives the batch: its state (the next batch starts from it without a
        read), the dedup state's coverage, and the report to ``on_batch``."""
        self._cache = (batch.batch_id, after)
        if self._coverage is not None and summary.valid:
            self._coverage = self._coverage.after_batch(
                to_micros(batch.processed_at), max(r.max_arrival for r in summary.valid_rows))
        if self.on_batch:
            self.on_batch(metrics)

    def _summarise(self, parsed: DataFrame, batch: _Batch) -> _BatchSummary:
        """One small job: per watermark input, the maxima of its valid rows, the counts (of the
        quarantined, per reason) and the earliest arrival (the parse it computes stays cached
        for the writes)."""
        by_source = self.rules.watermark.by_source
        inputs = ["partition", "source"] if by_source else ["partition"]
        with batch.step("parse+summary"):
            rows = (parsed.groupBy(*inputs, "reason")
                    .agg(F.count(F.lit(1)).alias("n"), F.max("event_us").alias("max_event"),
                         F.max("arrival_us").alias("max_arrival"),
                         F.min("arrival_us").alias("min_arrival"))
                    .collect())
        valid_rows = [r for r in rows if r.reason is None]
        rows_in, valid = sum(r.n for r in rows), sum(r.n for r in valid_rows)
        observations = [PartitionObservation(r.partition, r.max_event, r.max_arrival,
                                             r.min_arrival, r.source if by_source else None)
                        for r in valid_rows]
        return _BatchSummary(rows_in=rows_in, valid=valid, quarantined=rows_in - valid,
                             valid_rows=valid_rows, observations=observations, rows=rows)

    def _write_rows(self, parsed: DataFrame, batch: _Batch,
                    summary: _BatchSummary) -> tuple[dict[str, int], list[Row]]:
        """Write the batch's rows: quarantine, event_log, late_events, provisional_deltas.
        Returns the count of each disposition, and its rows per input (the same job).

        The writes are independent (each is idempotent by its own batch mark), so they run
        concurrently: most of a small commit's time is Delta's driver-side bookkeeping, which
        overlaps. The progress row, which a restart trusts, waits for all of them."""
        writes = ConcurrentWrites(batch.step)
        counts = {d.value: 0 for d in Disposition}
        deduped: DataFrame | None = None
        agg: list[Row] = []
        inputs = ["partition", "source"] if self.rules.watermark.by_source else ["partition"]
        try:
            if summary.quarantined:
                writes.start("quarantine", self._write_quarantine, parsed, batch)
            if summary.valid:
                deduped, batch.dedup_by = self._deduplicate(parsed, batch, summary.valid_rows)
                classified = self._classify(deduped, batch)
                with batch.step("dedup+classify"):
                    agg = (classified.groupBy(*inputs, "disposition")
                           .agg(F.count(F.lit(1)).alias("n")).collect())
                for r in agg:
                    counts[r.disposition] += r.n
                writes.start("event_log", self._write_event_log, deduped, batch)
                if counts["late"]:
                    writes.start("late_events", self._write_late, classified, batch)
                if counts["on_time"] or counts["revision"]:
                    writes.start("deltas", self._write_deltas, classified, batch)
        finally:
            writes.wait()  # every started write has ended (or failed) before anything else
            if deduped is not None:
                deduped.unpersist()
        writes.raise_first_error()
        return counts, agg

    def _deduplicate(self, parsed: DataFrame, batch: _Batch,
                     valid_rows: list[Row]) -> tuple[DataFrame, str]:
        """Valid rows with ``is_duplicate``: an earlier copy (earlier batch, or earlier in this
        batch in arrival order) arrived within the dedup horizon; by the query's state when it
        can vouch for the batch, else against event_log at the version the batch read when it
        started (a re-run batch: its first run; batch_reads). Judged by the state, the rows
        are a filter of the batch's cache (no second copy); judged by the archive, persisted
        (the join is not re-run by each write). Returns the rows and which judged them,
        "state" or "archive"."""
        valid = parsed.filter(F.col("reason").isNull()).drop("reason", "detail")
        min_arrival = min(r.min_arrival for r in valid_rows)
        if "is_duplicate" in valid.columns:
            if self._state_suffices(min_arrival, batch):
                return valid, "state"
            valid = valid.drop("is_duplicate")
        return judge_by_archive(
            self.spark, self.warehouse, valid, event_log_version=batch.reads[tb.EVENT_LOG],
            min_arrival=min_arrival, horizon=self.rules.dedup_horizon,
        ).persist(StorageLevel.MEMORY_AND_DISK), "archive"

    def _state_suffices(self, min_arrival: int, batch: _Batch) -> bool:
        """Whether the dedup state alone can judge a batch whose first arrival is
        ``min_arrival`` (reckon.dedup_state)."""
        assert self._seed is not None  # judged frames come from judged_stream
        if self._coverage is None:
            self._coverage = coverage_of_query(
                self.spark, self.warehouse, self._seed, self.query_id,
                batch.reads[tb.WATERMARK_PROGRESS])
        horizon = self.rules.dedup_horizon
        return state_suffices(self._coverage, min_arrival=min_arrival,
                              processed_at=batch.reads[commits.CLOCK_READ], horizon=horizon,
                              ttl=state_ttl(horizon))

    def _classify(self, deduped: DataFrame, batch: _Batch) -> DataFrame:
        """One row per (event, window) with its disposition; a duplicate keeps one row with
        disposition 'duplicate' and no window."""
        rules = self.rules
        starts = F.when(F.col("is_duplicate"), F.array(F.lit(None).cast("long"))).otherwise(
            window_starts_col(F.col("event_us"), rules.windows))
        exploded = deduped.withColumn("ws_us", F.explode(starts)).withColumn(
            "we_us", F.col("ws_us") + F.lit(rules.windows.size))
        disposition = F.when(F.col("is_duplicate"), F.lit(Disposition.DUPLICATE.value)).otherwise(
            disposition_col(F.col("we_us"), batch.watermark_before_col, rules.allowed_lateness))
        return exploded.withColumn("disposition", disposition)

    # ------------------------------------------------------------------ writes
    def _write_quarantine(self, parsed: DataFrame, batch: _Batch) -> None:
        bad = parsed.filter(F.col("reason").isNotNull()).select(
            "reason", "detail", *quarantine_payload(), "partition", "offset", "arrival_time",
            "input_file", batch.id_col.alias("batch_id"),
            F.lit("stream").alias("origin"), batch.processed_at_col.alias("quarantined_at"),
            "event_id", "event_time",
            F.to_date(F.coalesce("arrival_time", batch.processed_at_col)).alias("arrival_date"))
        self._append(bad, tb.QUARANTINE, batch)

    def _write_event_log(self, deduped: DataFrame, batch: _Batch) -> None:
        log = deduped.select(*_EVENT_COLUMNS, "payload", batch.id_col.alias("batch_id"),
                             "is_duplicate", F.to_date("event_time").alias("event_date"))
        self._append(log, tb.EVENT_LOG, batch)

    def _write_late(self, classified: DataFrame, batch: _Batch) -> None:
        wm = batch.watermark_before_col
        assert wm is not None  # a late event needs a watermark
        late = classified.filter(F.col("disposition") == Disposition.LATE.value).select(
            *_EVENT_COLUMNS,
            F.timestamp_micros("ws_us").alias("window_start"),
            F.timestamp_micros("we_us").alias("window_end"),
            F.timestamp_micros(wm).alias("watermark"),
            ((wm - F.col("we_us")).cast("decimal(20,0)") / F.lit(1_000_000))
            .cast(tb.SECONDS).alias("lateness_seconds"),
            batch.id_col.alias("batch_id"),
            F.to_date(F.timestamp_micros("ws_us")).alias("window_date"))
        self._append(late, tb.LATE_EVENTS, batch)

    def _write_deltas(self, classified: DataFrame, batch: _Batch) -> None:
        """This batch's counted events summed per (window, key, currency), appended to
        provisional_deltas: provisional_totals is their fold (spark.provisional), so no row
        is ever rewritten and a window's status needs no write when the watermark moves. The
        sum runs at the total's precision, which no day can overflow (reckon.money)."""
        size = self.rules.windows.size
        deltas = (classified
                  .filter(F.col("disposition").isin(Disposition.ON_TIME.value,
                                                    Disposition.REVISION.value))
                  .groupBy("ws_us", *TOTAL_IDENTITY)
                  .agg(F.sum(F.col("amount").cast(tb.TOTAL)).alias("total_amount"),
                       F.count(F.lit(1)).alias("event_count"),
                       F.max(F.when(F.col("disposition") == Disposition.REVISION.value, 1)
                             .otherwise(0)).alias("revised"))
                  .select(F.timestamp_micros("ws_us").alias("window_start"),
                          F.timestamp_micros(F.col("ws_us") + F.lit(size)).alias("window_end"),
                          *TOTAL_IDENTITY, "total_amount", "event_count", "revised",
                          batch.id_col.alias("batch_id"),
                          F.lit(self.query_id).alias("query_id"),
                          batch.processed_at_col.alias("processed_at"),
                          F.to_date(F.timestamp_micros("ws_us")).alias("window_date")))
        self._append(deltas, tb.PROVISIONAL_DELTAS, batch)

    def compact_open_days(self, wm_before: int) -> None:
        """From the watermark's day on: bin-pack the small files of event_log, so the next
        batches' de-duplication read opens few files, and of provisional_deltas, which a read
        of the open windows folds (spark.compaction). The stream runs it every
        event_log_compact_every batches, once every write of the batch has ended: no batch
        mark is set then, so these commits carry none; a re-run finds nothing left to do and
        commits nothing."""
        from spark.compaction import compact_recent_stream_days

        compact_recent_stream_days(self.spark, self.warehouse,
                                   from_micros(wm_before).date())

    def _write_progress(self, batch: _Batch, m: BatchMetrics, after: WatermarkState) -> None:
        counts = {name: getattr(m, name) for name in PROGRESS_COUNTS}
        row = progress_row(self.spark, batch_id=batch.batch_id, query_id=self.query_id,
                           processed_at=batch.processed_at,
                           watermark_before=batch.watermark_before, after=after,
                           rules=self.rules, counts=counts)
        self._append(row, tb.WATERMARK_PROGRESS, batch)


# ---------------------------------------------------------------------------- the query


def processing_time(trigger: str) -> str:
    """``--trigger`` in reckon's duration syntax ('500ms', '5s', '1m') as the interval text
    Spark's processingTime trigger accepts ('5000 milliseconds'; it rejects '5s')."""
    micros = parse_duration(trigger, "--trigger")
    if micros < 1000:
        raise UsageError(f"--trigger {trigger!r} is shorter than Spark's 1 ms resolution: "
                         "give at least 1ms (e.g. 5s)")
    return f"{micros // 1000} milliseconds"


def run_stream(spark: SparkSession, settings: Settings, source: StreamSource, *,
               available_now: bool = True, trigger: str | None = None,
               checkpoint: str | None = None,
               on_batch: Callable[[BatchMetrics], None] | None = print_progress,
               timeout_seconds: float | None = None, change_spec: bool = False,
               writer_lock: WriterLock | None = None) -> str:
    """Run the stream until the source is drained (available-now) or forever (trigger).
    ``change_spec``: record the given lateness/allowed_lateness/idle timeout/partitions as the
    warehouse's new event-time spec (reckon.spec). Returns the checkpoint location. One
    stream per warehouse (storage.writer_lock): a second one is refused before it writes.
    With ``metrics_port`` set, its batches are served in the Prometheus text format on that
    loopback port while it runs (spark.metrics_exporter)."""
    held = (nullcontext(writer_lock) if writer_lock
            else stream_lock(settings.warehouse_path, source))
    with held as lock, _metrics_served(settings.metrics_port, on_batch) as on_batch:
        return _run_stream(spark, settings, source, lock, interval=processing_time(trigger)
                           if trigger else None, available_now=available_now,
                           checkpoint=checkpoint, on_batch=on_batch,
                           timeout_seconds=timeout_seconds, change_spec=change_spec)


@contextmanager
def _metrics_served(port: int, on_batch: Callable[[BatchMetrics], None] | None,
                    ) -> Iterator[Callable[[BatchMetrics], None] | None]:
    """``on_batch``, filing each batch with a metrics endpoint on ``port`` first (0: none);
    the endpoint stops with the stream. A port already taken is refused in one line."""
    if not port:
        yield on_batch
        return
    from spark.metrics_exporter import LOOPBACK, StreamExporter

    try:
        exporter = StreamExporter.serve(port)
    except OSError as exc:
        raise ConfigError(f"metrics_port={port} is not valid: cannot serve metrics on "
                          f"{LOOPBACK}:{port} ({exc.strerror}); choose a free port "
                          "(RECKON_METRICS_PORT) or 0 for none") from None
    print(f"[stream] metrics on http://{LOOPBACK}:{port}/metrics", file=sys.stderr, flush=True)
    try:
        yield exporter.observing(on_batch)
    finally:
        exporter.close()


@contextmanager
def stream_lock(warehouse: Path, source: StreamSource) -> Iterator[WriterLock]:
    """The warehouse's stream lock (storage.writer_lock), creating the warehouse if need be."""
    warehouse.mkdir(parents=True, exist_ok=True)
    wh, what = warehouse, source.describe()
    with WriterLock.take(wh, writer_scope("stream"), f"reckon stream of {what}",
                         refused=lambda holder: stream_refusal(what, wh, holder)) as lock:
        yield lock


def _quiet_query_failure_log(spark: SparkSession) -> None:
    """Silence Spark's streaming loggers for the rest of this process: the query is about
    to stop on an error reckon reports in one line, and Spark would log it at ERROR with
    its Java and Python stacks (~190 lines) first."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.execution.streaming", jvm.org.apache.logging.log4j.Level.OFF)


def _start_without_empty_batches(spark: SparkSession, writer: DataStreamWriter) -> StreamingQuery:
    """Start the query with Spark's no-data micro-batches off. The dedup state forgets entries
    on processing time (its buckets' prune timers, or the event_id layout's TTL), and Spark
    would otherwise run an empty batch after every batch to fire them: an available-now
    stream would never end, and each empty batch writes a progress row. The next batch with
    data prunes instead.
    The query copies the session's settings when it starts; the session's own is restored."""
    key = "spark.sql.streaming.noDataMicroBatches.enabled"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "false")
    try:
        return writer.start()
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _run_stream(spark: SparkSession, settings: Settings, source: StreamSource,
                lock: WriterLock, *, interval: str | None, available_now: bool,
                checkpoint: str | None, on_batch: Callable[[BatchMetrics], None] | None,
                timeout_seconds: float | None, change_spec: bool) -> str:
    cp = checkpoint or str(settings.warehouse_path / "_checkpoints" / f"stream-{source.name}")
    moved = relocate_checkpoint(Path(cp)) if Path(cp).is_dir() else None
    if moved is not None:  # a copied or restored warehouse: resume where it is now
        print(f"[stream] checkpoint {cp} was copied from {moved.old}: resuming here "
              f"({moved.files} of its log files now name this place)",
              file=sys.stderr, flush=True)
    processor = BatchProcessor.of(spark, settings, checkpoint=cp, on_batch=on_batch,
                                  change_spec=change_spec, writer_lock=lock)
    admitter = landing_admitter(source, Path(cp))
    if admitter is not None:
        sweep_committed_admissions(Path(cp), admitter.files_dir)
        admitter.admit()  # what landed before the start, in name order
    raw = source.read(spark, settings.trigger_limits(), admitter.files_dir if admitter else None)
    if StateSeed.fits(cp):
        raw = processor.judged_stream(raw)
    else:
        print(f"[stream] checkpoint {cp} was written before the dedup state: duplicates are "
              "judged against event_log, as it was; start with a new --checkpoint (its first "
              "batch seeds the state from the archive) to judge them by the state",
              file=sys.stderr, flush=True)
    writer = (raw.writeStream.foreachBatch(processor)
              .option("checkpointLocation", cp)
              .queryName(f"reckon-stream-{source.name}"))
    if interval:
        writer = writer.trigger(processingTime=interval)
    elif available_now:
        writer = writer.trigger(availableNow=True)
    query = _start_without_empty_batches(spark, writer)
    looking = keep_admitting(query, admitter) if admitter and interval else None
    try:
        # pyspark's stub says int, but it takes seconds as a float (int(timeout * 1000) ms)
        query.awaitTermination(timeout_seconds) if timeout_seconds else query.awaitTermination()  # type: ignore[arg-type]
    except CapturedException:
        if processor.stopped_by is not None:  # the lock was lost: its one line, no trace
            raise processor.stopped_by from None
        raise
    finally:
        if query.isActive:
            query.stop()
        if looking is not None:
            looking.join()
        if admitter is not None:
            sweep_committed_admissions(Path(cp), admitter.files_dir)
    return cp
