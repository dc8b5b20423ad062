"""The tables' layout: each column's name, type and nullability, readable without a JVM.

Why here: the layout is what every reader of the warehouse must agree on, and most readers
start no JVM (the report, `reckon sql`, the check of a small day, the layout check before any
step). Types are written as Spark writes them in a schema's simple string (``bigint``,
``decimal(18,3)``, ``map<int,timestamp>``); spark/tables.py builds its StructTypes from this one
table, and ``layout_problem`` compares a table's logged schema (its Delta log, read by delta-rs)
with it.

Example:

>>> dict((n, t) for n, t, _ in LAYOUT[EVENT_LOG])["amount"]
'decimal(18,3)'
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from reckon.errors import LayoutError
from reckon.schema import AMOUNT_PRECISION, AMOUNT_SCALE
from storage.table_names import (
    CANONICAL_TOTALS,
    EVENT_LOG,
    EVENT_TIME_SPEC,
    LATE_EVENTS,
    PROVISIONAL_DELTAS,
    PROVISIONAL_TOTALS,
    QUARANTINE,
    RECONCILIATION,
    REPLAY_CONFLICTS,
    REPLAY_RUNS,
    TABLES,
    UNCAUGHT_DUPLICATES,
    WATERMARK_PROGRESS,
    table_exists,
    table_path,
)

__all__ = ["ADDED_COLUMNS", "AMOUNT", "LAYOUT", "SECONDS", "TOTAL", "Column", "layout_problem",
           "logged_columns", "refuse_earlier_layout", "require_logged_layout", "simple_type"]

#: (name, type as a simple string, nullable)
Column = tuple[str, str, bool]

AMOUNT = f"decimal({AMOUNT_PRECISION},{AMOUNT_SCALE})"
TOTAL = f"decimal(38,{AMOUNT_SCALE})"
SECONDS = "decimal(20,6)"  # exact seconds at microsecond precision

_EVENT = (
    ("event_id", "string", False),
    ("key", "string", False),
    ("amount", AMOUNT, False),
    ("currency", "string", False),
    ("event_time", "timestamp", False),
    ("source", "string", False),
)
_GRAIN = (  # the identity of every total's row: money is kept per (window, key, currency)
    ("window_start", "timestamp", False),
    ("window_end", "timestamp", False),
    ("key", "string", False),
    ("currency", "string", False),
)
_TRANSPORT = (
    ("partition", "int", False),
    ("offset", "bigint", True),
    ("arrival_time", "timestamp", False),
    ("input_file", "string", True),
)

LAYOUT: dict[str, tuple[Column, ...]] = {
    EVENT_LOG: (
        *_EVENT, *_TRANSPORT,
        ("payload", "string", True),          # the raw line, extra fields preserved
        ("batch_id", "bigint", True),           # null when archived by another writer
        ("is_duplicate", "boolean", True),    # the stream caught it as a duplicate
        ("event_date", "date", False),
    ),
    QUARANTINE: (
        ("reason", "string", False),
        ("detail", "string", True),
        ("payload", "string", True),
        *_TRANSPORT,
        ("batch_id", "bigint", True),
        ("origin", "string", False),          # 'stream' or 'replay'
        ("quarantined_at", "timestamp", False),
        ("event_id", "string", True),         # when it could be read
        ("event_time", "timestamp", True),
        ("arrival_date", "date", False),
        # invalid_utf8 only: the line's exact bytes (payload shows them as U+FFFD)
        ("payload_base64", "string", True),
    ),
    PROVISIONAL_TOTALS: (
        *_GRAIN,
        ("total_amount", TOTAL, False),
        ("event_count", "bigint", False),
        ("status", "string", False),
        ("revision", "int", False),
        ("first_batch_id", "bigint", False),
        ("last_batch_id", "bigint", False),
        ("closed_at", "timestamp", True),
        ("closed_batch_id", "bigint", True),
        ("watermark_at_close", "timestamp", True),
        ("finalized_at", "timestamp", True),
        ("finalized_batch_id", "bigint", True),
        ("window_date", "date", False),
    ),
    # What each micro-batch added to each (window, key, currency): appended, never rewritten;
    # provisional_totals folds them (spark.provisional).
    PROVISIONAL_DELTAS: (
        *_GRAIN,
        ("total_amount", TOTAL, False),
        ("event_count", "bigint", False),
        ("revised", "int", False),        # 1: the batch revised a closed window
        ("batch_id", "bigint", False),
        ("query_id", "string", False),
        ("processed_at", "timestamp", False),  # the batch's, as in watermark_progress
        ("window_date", "date", False),
    ),
    LATE_EVENTS: (
        *_EVENT, *_TRANSPORT,
        ("window_start", "timestamp", False),
        ("window_end", "timestamp", False),
        ("watermark", "timestamp", False),     # the watermark the event met
        ("lateness_seconds", SECONDS, False),        # watermark - window_end, > 0 unless G = 0
        ("batch_id", "bigint", False),
        ("window_date", "date", False),
    ),
    WATERMARK_PROGRESS: (
        ("batch_id", "bigint", False),
        ("query_id", "string", False),
        ("processed_at", "timestamp", False),
        ("watermark_before", "timestamp", True),
        ("watermark", "timestamp", True),
        ("partition_max_event_time", "map<int,timestamp>", False),
        ("partition_last_arrival", "map<int,timestamp>", False),
        ("idle_partitions", "array<int>", False),
        ("state_json", "string", False),       # exact restorable state (reckon.eventtime)
        ("rows_in", "bigint", False),
        ("valid", "bigint", False),
        ("quarantined", "bigint", False),
        ("duplicates", "bigint", False),
        ("on_time", "bigint", False),            # (event, window) pairs
        ("revised", "bigint", False),
        ("late", "bigint", False),
        ("duration_seconds", "double", False),
        ("rules_json", "string", False),
        ("held_by", "string", True),          # the input holding the watermark back
        ("held_back_seconds", SECONDS, True),       # how much further it would be without it
    ),
    CANONICAL_TOTALS: (
        *_GRAIN,
        ("total_amount", TOTAL, False),
        ("event_count", "bigint", False),
        ("window_date", "date", False),
        ("replay_id", "string", False),
    ),
    # What the stream counted more than once, per (window, key, currency) of a day: the copies of an
    # event_id it did not catch as duplicates, beyond the first. Written by the replay from the
    # event log version it read, so the audit needs only totals.
    UNCAUGHT_DUPLICATES: (
        *_GRAIN,
        ("duplicate_amount", TOTAL, False),
        ("duplicate_count", "bigint", False),
        ("window_date", "date", False),
        ("replay_id", "string", False),
    ),
    # One row per (window, key, currency) of a day; reckon.reconcile owns the arithmetic and
    # statuses.
    RECONCILIATION: (
        *_GRAIN,
        ("provisional_amount", TOTAL, True),        # null: the stream has no row
        ("provisional_count", "bigint", True),
        ("provisional_status", "string", True),  # OPEN / CLOSED / FINAL
        ("provisional_revision", "int", True),
        ("canonical_amount", TOTAL, True),          # null: the replay has no row
        ("canonical_count", "bigint", True),
        ("gap_amount", TOTAL, False),               # canonical - provisional
        ("gap_count", "bigint", False),
        ("late_amount", TOTAL, False),              # late side output of this row's grain
        ("late_count", "bigint", False),
        ("duplicate_amount", TOTAL, False),         # what the stream counted more than once
        ("duplicate_count", "bigint", False),
        ("residual_amount", TOTAL, False),          # gap - late + duplicate
        ("residual_count", "bigint", False),
        ("status", "string", False),          # reckon.reconcile.ReconStatus
        ("audit_run_id", "string", False),
        ("window_date", "date", False),
    ),
    # One row per replay of a day: what was read and what came of it.
    REPLAY_RUNS: (
        ("replay_id", "string", False),
        ("window_date", "date", False),
        ("source", "string", False),          # 'event_log' or 'kafka:<topic>'
        ("event_log_version", "bigint", True),
        ("rows_read", "bigint", False),
        ("valid_events", "bigint", False),
        ("quarantined", "bigint", False),
        ("duplicate_copies", "bigint", False),
        ("conflicts", "bigint", False),
        ("arrived_after_close", "bigint", False),  # arrived after WM passed day end + G
        ("new_since_previous", "bigint", True),    # valid events the last replay lacked
        ("windows", "bigint", False),           # (window, key, currency) rows written
        ("total_amounts", f"map<string,{TOTAL}>", False),  # per currency, exact
        ("started_at", "timestamp", False),
        ("duration_seconds", "double", False),
        ("rules_json", "string", False),
    ),
    # The rules the stream windows events by (reckon.spec): one row per version, the first
    # written when the stream first starts, each later one by an explicit --change-spec.
    EVENT_TIME_SPEC: (
        ("spec_version", "int", False),
        ("spec_json", "string", False),       # window, slide, lateness, allowed_lateness, ...
        ("change", "string", False),          # 'first start' or 'lateness 5s -> 2s'
        ("after_batch_id", "bigint", True),     # applies to the batches after this one
        ("after_watermark", "timestamp", True),  # the watermark when it was recorded
        ("recorded_at", "timestamp", False),
        ("recorded_by", "string", False),
        ("origins_json", "string", False),    # where each given value came from
    ),
    # event_ids of a day whose copies disagree: reported, never silently merged.
    REPLAY_CONFLICTS: (
        ("event_id", "string", False),
        ("copies", "bigint", False),
        ("payloads", "array<string>", False),
        ("kept_payload", "string", True),
        ("replay_id", "string", False),
        ("window_date", "date", False),
    ),
}


#: Columns added since a table's first layout: a table written before them lacks them and is
#: still this layout (its readers and writers gain them).
ADDED_COLUMNS: Mapping[str, frozenset[str]] = {
    WATERMARK_PROGRESS: frozenset({"held_by", "held_back_seconds"}),
    QUARANTINE: frozenset({"payload_base64"})}

#: Delta's (and Spark's JSON) names of primitive types whose simple string differs
_SIMPLE = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def simple_type(delta_type: Any) -> str:
    """A column's type from a Delta log's schema JSON, as Spark's simple string.

    >>> simple_type("long"), simple_type({"type": "map", "keyType": "integer",
    ...     "valueType": "decimal(38,3)", "valueContainsNull": True})
    ('bigint', 'map<int,decimal(38,3)>')
    """
    if isinstance(delta_type, str):
        return _SIMPLE.get(delta_type, delta_type)
    kind = delta_type["type"]
    if kind == "array":
        return f"array<{simple_type(delta_type['elementType'])}>"
    if kind == "map":
        return (f"map<{simple_type(delta_type['keyType'])},"
                f"{simple_type(delta_type['valueType'])}>")
    fields = ",".join(f"{f['name']}:{simple_type(f['type'])}" for f in delta_type["fields"])
    return f"struct<{fields}>"


def layout_problem(have: Mapping[str, str], name: str) -> str | None:
    """How table ``name``'s columns (name -> simple type) differ from this layout (a column
    missing, or of another type), or None. Nullability is not compared.

    >>> layout_problem({"event_id": "string"}, EVENT_LOG)
    'event_log has no column key'
    """
    for column, wanted, _nullable in LAYOUT[name]:
        found = have.get(column)
        if found is None and column in ADDED_COLUMNS.get(name, ()):
            continue
        if found is None:
            return f"{name} has no column {column}"
        if found != wanted:
            return f"{name}.{column} is {found}, not {wanted}"
    return None


def logged_columns(warehouse: str | Path, name: str) -> dict[str, str]:
    """Table ``name``'s columns (name -> simple type) from its Delta log (its newest metaData,
    checkpoint included), read by delta-rs: no JVM, no data."""
    from deltalake import DeltaTable

    schema = json.loads(DeltaTable(table_path(warehouse, name)).schema().to_json())
    return {f["name"]: simple_type(f["type"]) for f in schema["fields"]}


def refuse_earlier_layout(warehouse: str | Path, names: Iterable[str],
                          columns_of: Callable[[str], Mapping[str, str]]) -> None:
    """LayoutError naming every existing table whose columns (``columns_of(name)``) are not
    this layout's, and a provisional_totals table (now derived on read)."""
    problems = [problem for name in names if table_exists(warehouse, name)
                and (problem := layout_problem(columns_of(name), name))]
    if table_exists(warehouse, PROVISIONAL_TOTALS):
        problems.insert(0, "provisional_totals is a table, which this reckon derives from "
                           "provisional_deltas")
    if problems:
        raise LayoutError(
            f"warehouse {str(warehouse)!r} was written by an earlier reckon layout "
            f"({'; '.join(problems)}), and reckon will not mix its rows with this layout's "
            "(earlier totals added amounts of different currencies together, or were "
            "rewritten in place). Rebuild it: stream the source (landing dir or Kafka topic) "
            "again into a new, empty --warehouse, then replay and audit there; keep the old "
            "one only to read")


def require_logged_layout(warehouse: str | Path, names: Iterable[str] = TABLES) -> None:
    """Refuse a warehouse whose existing tables were written by an earlier layout, each
    table's columns read from its Delta log (no JVM): what every step checks first.

    Example: ``require_logged_layout(settings.warehouse_path)`` before a report."""
    refuse_earlier_layout(warehouse, names, lambda name: logged_columns(warehouse, name))
