"""Nightly compaction: a closed day's partitions of the stream's tables rewritten into a few
large files.

The stream commits every micro-batch, and each commit adds a file per task to every table it
writes: a day at 1,000 events/s with a 5 s trigger leaves ~70,000 files of ~1,250 rows in
``event_log`` alone. Spark lists, opens and schedules per file, so the nightly replay of
such a day pays per file (a 1M-event day in 800 files of 1,250 rows: replay 11.5 s, 8.3 s
once compacted, the compaction 4.6 s, about what it saves on the first replay; every later
reader gains; see BENCHMARKS.md, workload 7). Compaction is Delta's OPTIMIZE (bin-packing)
limited to one day's partition of each table: the rows and every reader's result stay as they
are (a ``dataChange = false`` commit: no change-feed rows, time travel to older versions still
works until a VACUUM), and a partition already compacted is left alone, so a re-run is a no-op.

Which partitions, and why it is safe next to the running stream:

* ``event_log`` (event_date), ``quarantine`` (arrival_date) and ``late_events``
  (window_date) only ever receive blind appends, which never conflict with a compaction;
  late events of the day that arrive afterwards land in new files, compacted by the next
  night's lookback run. The stream compacts event_log's days from its watermark's on
  itself (below), so a day of event_log is left to it until its watermark has left the day.
* ``provisional_totals`` (window_date) is rewritten by the stream's MERGE, which conflicts
  with a compaction of a partition it reads. The MERGE reads only the windows its batch
  touches, and once the watermark has passed the end of the day's last window plus grace
  (``spark.progress.required_watermark``) no batch touches the day again; before that, the
  partition is skipped and the result says why. One MERGE is not bounded below: a new
  stream query's first watermark (no watermark before it). Should that one meet a
  compaction of the same partition, Delta fails one of the two commits, and both are
  idempotent to re-run (the stream's batch after its restart, the compaction the next
  night).

During the day the stream compacts event_log's current days itself every
``event_log_compact_every`` batches (``compact_recent_event_log``), since its de-duplication
re-reads the last hour of event_log in every batch; the nightly compaction then finds little
left to do in event_log. At the same moment it splits the watermark's day of
provisional_totals into the windows no MERGE can touch again and the rest
(``settle_open_provisional``), which keeps its MERGE from rewriting the day's FINAL windows in
every batch; this runs between two batches in the stream's own thread, so it never meets that
query's MERGE (a second query MERGE-ing the same day at that moment would fail one of the two
commits, each idempotent to re-run).

VACUUM (deleting the replaced files from storage) is not done here but by ``reckon vacuum``
(spark.retention), with a retention of the operator's choosing: the audit pins table versions,
``reckon explain`` reads a window's history through the change feed, and how long those must
stay answerable is the operator's decision.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import date
from typing import Any

from pyspark.sql import SparkSession

from reckon.config import Settings
from reckon.errors import UsageError
from reckon.timeutil import days_from_flags, format_micros, from_micros
from spark import tables as tb
from spark.session import session_conf

__all__ = ["COMPACTED", "RECENT_MIN_FILE_BYTES", "TARGET_FILE_BYTES", "CompactionResult",
           "PartitionCompaction", "cmd_compact", "compact_day", "compact_recent_event_log",
           "settle_open_provisional"]

#: (table, the date column it is partitioned by); provisional_totals last, since it is the one
#: that waits for the day to close
COMPACTED: tuple[tuple[str, str], ...] = (
    (tb.EVENT_LOG, "event_date"), (tb.QUARANTINE, "arrival_date"),
    (tb.LATE_EVENTS, "window_date"), (tb.PROVISIONAL_TOTALS, "window_date"))

#: Files are packed up to this size, and files this big are never rewritten again. Spark reads
#: 128 MB per task by default, so a bigger file adds no read parallelism; smaller bins also let
#: the compaction itself run on every core (one task per output file).
TARGET_FILE_BYTES = 128 * 1024 * 1024
#: The stream's own compaction of the current days leaves files this big alone: a file is
#: rewritten until it reaches this size, not 128 MB, so each run rewrites at most ~16 MB of
#: earlier output (the nightly compaction packs the day into TARGET_FILE_BYTES files).
RECENT_MIN_FILE_BYTES = 16 * 1024 * 1024
_SIZE_CONFS = ("spark.databricks.delta.optimize.maxFileSize",
               "spark.databricks.delta.optimize.minFileSize")


@dataclass(frozen=True)
class PartitionCompaction:
    """One table's partition of the day: live files before and after, or why it was skipped."""

    table: str
    partition: str
    files_before: int
    files_after: int
    bytes_rewritten: int  # the small files replaced
    bytes_written: int  # the files that replace them
    skipped: str | None = None


@dataclass(frozen=True)
class CompactionResult:
    day: date
    partitions: tuple[PartitionCompaction, ...]
    duration_seconds: float

    def to_dict(self) -> dict[str, Any]:
        """Flat and JSON-safe (an Airflow task passes it on): files before/after per table."""
        out: dict[str, Any] = {"day": self.day.isoformat(),
                               "duration_seconds": round(self.duration_seconds, 3)}
        for p in self.partitions:
            out[f"{p.table}_files_before"] = p.files_before
            out[f"{p.table}_files_after"] = p.files_after
        out["skipped"] = [f"{p.table}: {p.skipped}" for p in self.partitions if p.skipped]
        return out

    def describe(self) -> str:
        parts = []
        for p in self.partitions:
            if p.skipped:
                parts.append(f"{p.table} skipped ({p.skipped})")
            else:
                parts.append(f"{p.table} {p.files_before} -> {p.files_after} files "
                             f"({p.bytes_rewritten / 1e6:.1f} MB rewritten)")
        return f"{self.day}: " + "; ".join(parts) + f" | {self.duration_seconds:.1f}s"


def compact_day(spark: SparkSession, settings: Settings, day: date) -> CompactionResult:
    """Compact ``day``'s partition of every stream table that exists (see the module doc for
    which partitions are safe when). Idempotent: a compacted partition is left alone."""
    from spark.progress import latest_watermark, required_watermark

    started = time.monotonic()
    wh = settings.warehouse_path
    if not tb.table_exists(wh, tb.EVENT_LOG):
        raise UsageError(f"no event_log in warehouse {str(wh)!r}: nothing to compact (check "
                         "--warehouse, or run `reckon stream` first)")
    required = required_watermark(settings, day)
    seen = latest_watermark(spark, settings)
    results = []
    with _target_file_size(spark):
        for name, column in COMPACTED:
            partition = f"{column}={day.isoformat()}"
            if not tb.table_exists(wh, name):
                results.append(PartitionCompaction(name, partition, 0, 0, 0, 0,
                                                   "table does not exist"))
            elif (name == tb.EVENT_LOG and settings.event_log_compact_every
                  and tb.table_exists(wh, tb.WATERMARK_PROGRESS)  # a stream has run
                  and (seen is None or from_micros(seen).date() <= day)):
                # two OPTIMIZEs of one partition at once: Delta fails one of them
                results.append(PartitionCompaction(
                    name, partition, 0, 0, 0, 0,
                    "the stream compacts this day's event_log itself until its watermark "
                    f"leaves the day (now {'undefined' if seen is None else format_micros(seen)})"))
            elif name == tb.PROVISIONAL_TOTALS and (seen is None or seen < required):
                results.append(PartitionCompaction(
                    name, partition, 0, 0, 0, 0,
                    f"day not closed: the stream may still MERGE into it until its watermark "
                    f"reaches {format_micros(required)} (now "
                    f"{'undefined' if seen is None else format_micros(seen)})"))
            else:
                results.append(_compact_partition(spark, settings, name, column, day))
    return CompactionResult(day, tuple(results), time.monotonic() - started)


def _compact_partition(spark: SparkSession, settings: Settings, name: str, column: str,
                       day: date) -> PartitionCompaction:
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, tb.table_path(settings.warehouse_path, name))
    # OPTIMIZE answers with one row of metrics (a summary, never data)
    metrics = (table.optimize().where(f"{column} = '{day.isoformat()}'").executeCompaction()
               .select("metrics.*").first())
    assert metrics is not None
    considered = int(metrics["totalConsideredFiles"])
    removed, added = int(metrics["numFilesRemoved"]), int(metrics["numFilesAdded"])
    return PartitionCompaction(name, f"{column}={day.isoformat()}", considered,
                               considered - removed + added,
                               int(metrics["filesRemoved"]["totalSize"] or 0),
                               int(metrics["filesAdded"]["totalSize"] or 0))


def compact_recent_event_log(spark: SparkSession, settings: Settings, since: date) -> int:
    """What the stream runs every ``event_log_compact_every`` batches, between a batch's
    writes and its progress row (when no batch mark is set): bin-pack the small files of
    event_log's partitions from ``since`` on. Every batch re-reads the last dedup horizon of
    event_log, and an hour of a 5 s trigger is ~2,900 small files (3.5 s a batch to read,
    against 0.34 s for 80; BENCHMARKS.md, workload 7). ``since`` is the day of the watermark
    before the batch, so a day the nightly run may compact (its watermark passed the day) is
    never compacted here too. Returns the number of files removed."""
    return _bin_pack_small_files(spark, settings, tb.EVENT_LOG,
                                 f"event_date >= '{since.isoformat()}'")


def settle_open_provisional(spark: SparkSession, settings: Settings, day: date,
                            cutoff_us: int) -> bool:
    """Run by the stream next to ``compact_recent_event_log``: rewrite ``day`` of
    provisional_totals with the windows starting before ``cutoff_us`` (which no later MERGE
    can touch: the lowest window start a batch's MERGE reads only rises with the watermark) in
    a file of their own, the rest after them. Returns whether it rewrote anything.

    A MERGE rewrites every row of each file it touches, and its output files mix the windows
    it updated with every other row of the files it read, so the rows of windows long FINAL
    ride along into the next batch's touched files, and the next: left alone, by evening each
    batch copies the whole day (a day of 2M rows: MERGE 9-12 s a batch, against 3-4 s with
    only recent windows in the touched files). Once settled, the FINAL windows sit in a file
    whose window_start range ends below every later batch's MERGE bound, so data skipping
    never opens it again. The rows and every reader's result are unchanged: one
    ``dataChange = false`` commit (no change-feed rows, no batch mark). A day in which no file
    holds windows on both sides of the cutoff is left as it is, so a re-run commits nothing.
    The larger side is written first and no file may hold more rows than it: exactly two
    files, whichever side is larger."""
    from pyspark.sql import functions as F

    name = tb.PROVISIONAL_TOTALS
    where = f"window_date = '{day.isoformat()}'"
    rows = tb.read_table(spark, settings.warehouse_path, name).where(where)
    settled = F.col("window_start") < F.timestamp_micros(F.lit(cutoff_us))
    per_file = (rows.select(F.input_file_name().alias("file"), settled.cast("long").alias("s"))
                .groupBy("file").agg(F.sum("s").alias("settled"), F.count(F.lit(1)).alias("n")))
    found = per_file.agg(
        F.sum("settled").alias("settled"), F.sum("n").alias("rows"),
        F.max((F.col("settled") > 0) & (F.col("settled") < F.col("n"))).alias("straddles"),
    ).first()
    if found is None or not found.straddles:
        return False
    settled_n, open_n = int(found.settled), int(found.rows) - int(found.settled)
    first = settled if settled_n >= open_n else ~settled
    # one task, the larger side first: the first file takes exactly it, the second the rest
    (rows.coalesce(1)
     .sortWithinPartitions("window_date", F.when(first, 0).otherwise(1), "window_start")
     .write.format("delta").mode("overwrite").option("replaceWhere", where)
     .option("dataChange", "false").option("maxRecordsPerFile", max(settled_n, open_n))
     .save(tb.table_path(settings.warehouse_path, name)))
    return True


def compact_watermark_progress(spark: SparkSession, settings: Settings) -> int:
    """Bin-pack watermark_progress (one small file per batch: ~17,000 a day at a 5 s trigger),
    which every restart's state restore and every nightly watermark poll read whole. Run by
    the stream next to ``compact_recent_event_log``; the table is small (a row per batch), so
    rewriting what is left of it takes about a second. Returns the number of files removed."""
    return _bin_pack_small_files(spark, settings, tb.WATERMARK_PROGRESS, None)


def _bin_pack_small_files(spark: SparkSession, settings: Settings, name: str,
                          where: str | None) -> int:
    """OPTIMIZE ``name`` (the partitions ``where`` selects), rewriting only files under
    RECENT_MIN_FILE_BYTES; returns the number of files removed (0: nothing committed)."""
    from delta.tables import DeltaTable

    optimize = DeltaTable.forPath(spark, tb.table_path(settings.warehouse_path, name)).optimize()
    if where is not None:
        optimize = optimize.where(where)
    with _target_file_size(spark, min_bytes=RECENT_MIN_FILE_BYTES):
        metrics = optimize.executeCompaction().select("metrics.numFilesRemoved").first()
    return int(metrics[0]) if metrics is not None else 0


def _target_file_size(spark: SparkSession, min_bytes: int = TARGET_FILE_BYTES
                      ) -> AbstractContextManager[None]:
    max_conf, min_conf = _SIZE_CONFS
    return session_conf(spark, {max_conf: str(TARGET_FILE_BYTES), min_conf: str(min_bytes)})


def cmd_compact(args: argparse.Namespace, settings: Settings) -> int:
    """`reckon compact`: compact a day's (or a range's) partitions of the stream tables."""
    from spark.session import get_spark

    days = days_from_flags(args.date, args.date_from, args.date_to)
    spark = get_spark(settings, app_name="reckon-compact")
    results = []
    for day in days:
        r = compact_day(spark, settings, day)
        results.append(r)
        if not args.json:
            print(r.describe())
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    print(f"[compact] {len(results)} day(s) done", file=sys.stderr)
    return 0
