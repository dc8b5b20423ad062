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

* every table compacted here only ever receives blind appends (``provisional_deltas`` too:
  the stream appends what each batch adds and never rewrites a total, spark.provisional),
  which never conflict with a compaction; rows of the day that arrive afterwards land in new
  files, compacted by the next night's lookback run.
* Two OPTIMIZEs of one partition at once do conflict (Delta fails one). During the day the
  stream compacts the partitions of ``event_log`` and ``provisional_deltas`` from its
  watermark's day on itself, every ``event_log_compact_every`` batches
  (``compact_recent_stream_days``): its de-duplication re-reads the last hour of event_log in
  every batch, and the dashboard's read of the open windows folds their deltas. So those two
  tables' days are left to the stream until its watermark has left the day.

VACUUM (deleting the replaced files from storage) is not done here but by ``reckon vacuum``
(spark.retention), with a retention of the operator's choosing: the audit pins table versions,
and how long those must stay answerable is the operator's decision.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from reckon.engine_config import CompactionConfig
from reckon.errors import UsageError
from reckon.timeutil import format_micros, from_micros
from spark import tables as tb
from spark.session import session_conf

__all__ = ["COMPACTED", "RECENT_MIN_FILE_BYTES", "TARGET_FILE_BYTES", "CompactionResult",
           "PartitionCompaction", "compact_day", "compact_recent_stream_days"]

#: (table, the date column it is partitioned by)
COMPACTED: tuple[tuple[str, str], ...] = (
    (tb.EVENT_LOG, "event_date"), (tb.QUARANTINE, "arrival_date"),
    (tb.LATE_EVENTS, "window_date"), (tb.PROVISIONAL_DELTAS, "window_date"))
#: the tables whose current days the stream compacts itself (and the column of their day)
STREAM_COMPACTED: tuple[tuple[str, str], ...] = (
    (tb.EVENT_LOG, "event_date"), (tb.PROVISIONAL_DELTAS, "window_date"))

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


def compact_day(spark: SparkSession, config: CompactionConfig, day: date) -> CompactionResult:
    """Compact ``day``'s partition of every stream table that exists (see the module doc for
    which partitions are safe when). Idempotent: a compacted partition is left alone.

    Example: ``compact_day(spark, settings.compaction_config(), date(2026, 1, 1)).describe()``.
    """
    from spark.progress import latest_watermark

    started = time.monotonic()
    wh = config.warehouse
    if not tb.table_exists(wh, tb.EVENT_LOG):
        raise UsageError(f"no event_log in warehouse {str(wh)!r}: nothing to compact (check "
                         "--warehouse, or run `reckon stream` first)")
    seen = latest_watermark(spark, wh)
    results = []
    with _target_file_size(spark):
        for name, column in COMPACTED:
            partition = f"{column}={day.isoformat()}"
            if not tb.table_exists(wh, name):
                results.append(PartitionCompaction(name, partition, 0, 0, 0, 0,
                                                   "table does not exist"))
            elif ((name, column) in STREAM_COMPACTED and config.stream_compact_every
                  and tb.table_exists(wh, tb.WATERMARK_PROGRESS)  # a stream has run
                  and (seen is None or from_micros(seen).date() <= day)):
                # two OPTIMIZEs of one partition at once: Delta fails one of them
                results.append(PartitionCompaction(
                    name, partition, 0, 0, 0, 0,
                    f"the stream compacts this day's {name} itself until its watermark "
                    f"leaves the day (now {'undefined' if seen is None else format_micros(seen)})"))
            else:
                results.append(_compact_partition(spark, wh, name, column, day))
    return CompactionResult(day, tuple(results), time.monotonic() - started)


def _compact_partition(spark: SparkSession, warehouse: Path, name: str, column: str,
                       day: date) -> PartitionCompaction:
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, tb.table_path(warehouse, name))
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


def compact_recent_stream_days(spark: SparkSession, warehouse: Path, since: date) -> int:
    """What the stream runs every ``event_log_compact_every`` batches, between a batch's
    writes and its progress row (when no batch mark is set): bin-pack the small files of the
    partitions of event_log and provisional_deltas from ``since`` on. Every batch re-reads the
    last dedup horizon of event_log, an hour of a 5 s trigger is ~2,900 small files (3.5 s a
    batch to read, against 0.34 s for 80; BENCHMARKS.md, workload 7), and a read of the open
    windows folds their deltas. ``since`` is the day of the watermark before the batch, so a
    day the nightly run may compact (its watermark passed the day) is never compacted here
    too. Returns the number of files removed."""
    return sum(_bin_pack_small_files(spark, warehouse, name, f"{column} >= '{since.isoformat()}'")
               for name, column in STREAM_COMPACTED)


def compact_watermark_progress(spark: SparkSession, warehouse: Path) -> int:
    """Bin-pack watermark_progress (one small file per batch: ~17,000 a day at a 5 s trigger),
    which every restart's state restore and every nightly watermark poll read whole. Run by
    the stream next to ``compact_recent_stream_days``; the table is small (a row per batch), so
    rewriting what is left of it takes about a second. Returns the number of files removed."""
    return _bin_pack_small_files(spark, warehouse, tb.WATERMARK_PROGRESS, None)


def _bin_pack_small_files(spark: SparkSession, warehouse: Path, name: str,
                          where: str | None) -> int:
    """OPTIMIZE ``name`` (the partitions ``where`` selects), rewriting only files under
    RECENT_MIN_FILE_BYTES; returns the number of files removed (0: nothing committed)."""
    from delta.tables import DeltaTable

    optimize = DeltaTable.forPath(spark, tb.table_path(warehouse, name)).optimize()
    if where is not None:
        optimize = optimize.where(where)
    with _target_file_size(spark, min_bytes=RECENT_MIN_FILE_BYTES):
        metrics = optimize.executeCompaction().select("metrics.numFilesRemoved").first()
    return int(metrics[0]) if metrics is not None else 0


def _target_file_size(spark: SparkSession, min_bytes: int = TARGET_FILE_BYTES
                      ) -> AbstractContextManager[None]:
    max_conf, min_conf = _SIZE_CONFS
    return session_conf(spark, {max_conf: str(TARGET_FILE_BYTES), min_conf: str(min_bytes)})
