"""VACUUM: delete the data files no recent version of a table uses any more.

Every compaction replaces small files by large ones (the stream's own, every few batches, and
the nightly one), and a re-run audit or replay replaces a day's rows. Delta keeps the replaced files so that older versions stay
readable, so without a VACUUM the warehouse only grows. ``reckon vacuum`` deletes, in each of
reckon's tables, the files that no version newer than the retention uses.

Choosing the retention decides what stays answerable. Within it everything works. Past it,
two things stop working (``reckon explain``'s history of a window is not one of them: it is
told from the appended provisional_deltas rows, which a VACUUM never removes):
- time travel to those versions;
- an audit re-run against a replay whose pinned event_log version is older than the
  retention. The audit says to replay the day again first.

The default (``vacuum_retain``, 30 days) matches Delta's own log retention, so every version
whose commit is still in the log also keeps its files. Below 7 days (Delta's
``deletedFileRetentionDuration`` default) the command refuses, as Delta does. A stream could
still be about to re-run a batch against a version that old, after a long outage.
Writers need not stop: VACUUM only deletes files that the current version does not use and
that are older than the retention.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from reckon.errors import UsageError
from reckon.timeutil import MICROS_PER_DAY, format_duration, parse_duration
from spark import tables as tb
from spark.session import session_conf
from storage import commits

__all__ = ["MIN_RETAIN_MICROS", "VacuumResult", "VacuumedTable",
           "vacuum_warehouse"]

MIN_RETAIN_MICROS = 7 * MICROS_PER_DAY
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
_PARALLEL_DELETE = "spark.databricks.delta.vacuum.parallelDelete.enabled"
_LISTING_TASKS = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


@dataclass(frozen=True)
class VacuumedTable:
    table: str
    # data files deleted (in a dry run: to delete); None: Delta did not say
    files: int | None
    seconds: float


@dataclass(frozen=True)
class VacuumResult:
    retain: str
    dry_run: bool
    tables: tuple[VacuumedTable, ...]

    @property
    def files(self) -> int:
        return sum(t.files or 0 for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        return {"retain": self.retain, "dry_run": self.dry_run, "files": self.files,
                "tables": [asdict(t) for t in self.tables]}

    def describe(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        lines = [f"vacuum (files unused for {self.retain}): {verb} {self.files} file(s)"]
        lines += [f"  {t.table:<22} {'?' if t.files is None else t.files:>8}  {t.seconds:.1f}s"
                  for t in self.tables]
        return "\n".join(lines)


def vacuum_warehouse(spark: SparkSession, warehouse: Path, *, retain: str,
                     dry_run: bool = False, progress: bool = False) -> VacuumResult:
    """VACUUM every reckon table of ``warehouse`` with one retention (a duration: the app
    layer passes ``--retain``, else the ``vacuum_retain`` setting). A dry run counts the files
    without deleting any.

    Example: ``vacuum_warehouse(spark, settings.warehouse_path, retain="30d", dry_run=True)``.
    """
    text = retain
    micros = parse_duration(text, "retain")
    checked = str(spark.conf.get(_RETENTION_CHECK, "true")).lower() != "false"
    if micros < MIN_RETAIN_MICROS and checked:
        raise UsageError(
            f"a retention of {text} is below {format_duration(MIN_RETAIN_MICROS)}: a stream "
            "batch re-run after an outage, or an audit of a recent replay, could need the "
            "files it would delete. Keep at least 7d (vacuum_retain / --retain). If nothing "
            f"reads older versions, set {_RETENTION_CHECK}=false in extra_spark_conf")
    hours = micros / 3_600_000_000
    wh = warehouse
    # The deletes run as a Spark job on the executors, not one by one on the driver. Delta
    # lists a table's files in as many tasks as partition discovery may use, 10,000 by
    # default: on 2 cores ~20 s a table however small; one task per core lists as fast.
    confs = {_PARALLEL_DELETE: "true",
             _LISTING_TASKS: str(max(2, spark.sparkContext.defaultParallelism))}
    done: list[VacuumedTable] = []
    for name in tb.SCHEMAS:
        if not tb.table_exists(wh, name):
            continue
        t0 = time.monotonic()
        if progress:
            print(f"[vacuum] {name}", file=sys.stderr, flush=True)
        path = tb.table_path(wh, name).replace("`", "``")
        with session_conf(spark, confs):
            if dry_run:
                # Delta's dry run also lists folders (partition and _change_data ones) that a
                # real run deletes only once they are empty: counted are the names with an
                # extension (data files; reckon's partition values are dates, without a dot)
                listed = spark.sql(f"VACUUM delta.`{path}` RETAIN {hours} HOURS DRY RUN")
                files: int | None = listed.filter(
                    F.regexp_extract("path", r"[^/]*$", 0).contains(".")).count()
            else:
                before = commits.current_version(wh, name)
                spark.sql(f"VACUUM delta.`{path}` RETAIN {hours} HOURS")
                files = _deleted_files(wh, name, before)
        done.append(VacuumedTable(name, files, round(time.monotonic() - t0, 3)))
    return VacuumResult(format_duration(micros), dry_run, tuple(done))


def _deleted_files(warehouse: Path, name: str, before: int | None) -> int | None:
    """The file count of the VACUUM END commit that followed version ``before`` (Delta logs
    a VACUUM as two commits, START and END, with its metrics), read from the commit files."""
    for _version, info in commits.commit_infos(warehouse, name,
                                          -1 if before is None else before):
        if info.get("operation") == "VACUUM END":
            value = (info.get("operationMetrics") or {}).get("numDeletedFiles")
            return None if value is None else int(value)
    return None
