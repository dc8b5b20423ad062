"""The warehouse's table names and where each lives, without Spark.

A reader that needs no JVM (``reports.duck``, ``reckon sql``'s checks, the CLI's "does this
warehouse exist") imports the names from here; ``spark.tables`` re-exports them beside the
schemas. A table lives at ``<warehouse>/<name>``, its Delta log at ``<name>/_delta_log``.

>>> table_path("/wh", RECONCILIATION)
'/wh/reconciliation'
"""

from __future__ import annotations

from pathlib import Path

from storage.commits import table_exists

__all__ = ["CANONICAL_TOTALS", "EVENT_LOG", "EVENT_TIME_SPEC", "LATE_EVENTS",
           "PROVISIONAL_DELTAS", "PROVISIONAL_TOTALS", "QUARANTINE", "RECONCILIATION",
           "REPLAY_CONFLICTS", "REPLAY_RUNS", "TABLES", "UNCAUGHT_DUPLICATES",
           "WATERMARK_PROGRESS", "table_exists", "table_path"]

EVENT_LOG = "event_log"
QUARANTINE = "quarantine"
PROVISIONAL_TOTALS = "provisional_totals"   # derived on read (spark.provisional), no folder
PROVISIONAL_DELTAS = "provisional_deltas"
LATE_EVENTS = "late_events"
WATERMARK_PROGRESS = "watermark_progress"
CANONICAL_TOTALS = "canonical_totals"
RECONCILIATION = "reconciliation"
REPLAY_RUNS = "replay_runs"
REPLAY_CONFLICTS = "replay_conflicts"
UNCAUGHT_DUPLICATES = "uncaught_duplicates"
EVENT_TIME_SPEC = "event_time_spec"

TABLES = (EVENT_LOG, QUARANTINE, PROVISIONAL_DELTAS, LATE_EVENTS, WATERMARK_PROGRESS,
          CANONICAL_TOTALS, UNCAUGHT_DUPLICATES, RECONCILIATION, REPLAY_RUNS, REPLAY_CONFLICTS,
          EVENT_TIME_SPEC)


def table_path(warehouse: str | Path, name: str) -> str:
    return str(Path(warehouse) / name)

