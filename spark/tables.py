"""The warehouse's Delta tables: names, schemas, locations, layout, and reads and writes.

Every table lives at ``<warehouse>/<name>``, in the layout this module declares (schema,
partitioning, table properties); ``require_layout`` refuses a warehouse of another. Writes
conform rows to the schema first (``conform``); a stream's writes carry a batch mark
(``marked_append``), so that a re-run batch is skipped.

The commit-file readers and batch marks live in ``storage.commits``, the side-by-side writes in
``spark.concurrent_writes``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import date
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from reckon.errors import LayoutError
from reckon.schema import AMOUNT_PRECISION, AMOUNT_SCALE
from spark.session import built_once_per_jvm
from storage.commits import batch_mark
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

__all__ = [
    "CANONICAL_TOTALS",
    "EVENT_LOG",
    "EVENT_TIME_SPEC",
    "LATE_EVENTS",
    "PROVISIONAL_DELTAS",
    "PROVISIONAL_TOTALS",
    "QUARANTINE",
    "RECONCILIATION",
    "REPLAY_CONFLICTS",
    "REPLAY_RUNS",
    "SCHEMAS",
    "TABLES",
    "UNCAUGHT_DUPLICATES",
    "WATERMARK_PROGRESS",
    "conform",
    "ensure_table",
    "is_missing_file_error",
    "layout_problem",
    "logged_schema",
    "marked_append",
    "read_table",
    "replace_rows",
    "require_layout",
    "require_logged_layout",
    "single_row",
    "table_exists",
    "table_path",
    "window_day",
]


AMOUNT = T.DecimalType(AMOUNT_PRECISION, AMOUNT_SCALE)
TOTAL = T.DecimalType(38, AMOUNT_SCALE)
SECONDS = T.DecimalType(20, 6)  # exact seconds at microsecond precision


def _fields(*items: tuple[str, T.DataType, bool]) -> T.StructType:
    return T.StructType([T.StructField(n, t, nullable) for n, t, nullable in items])


_EVENT = (
    ("event_id", T.StringType(), False),
    ("key", T.StringType(), False),
    ("amount", AMOUNT, False),
    ("currency", T.StringType(), False),
    ("event_time", T.TimestampType(), False),
    ("source", T.StringType(), False),
)
_GRAIN = (  # the identity of every total's row: money is kept per (window, key, currency)
    ("window_start", T.TimestampType(), False),
    ("window_end", T.TimestampType(), False),
    ("key", T.StringType(), False),
    ("currency", T.StringType(), False),
)
_TRANSPORT = (
    ("partition", T.IntegerType(), False),
    ("offset", T.LongType(), True),
    ("arrival_time", T.TimestampType(), False),
    ("input_file", T.StringType(), True),
)

SCHEMAS: dict[str, T.StructType] = {
    EVENT_LOG: _fields(
        *_EVENT, *_TRANSPORT,
        ("payload", T.StringType(), True),          # the raw line, extra fields preserved
        ("batch_id", T.LongType(), True),           # null when archived by another writer
        ("is_duplicate", T.BooleanType(), True),    # the stream caught it as a duplicate
        ("event_date", T.DateType(), False),
    ),
    QUARANTINE: _fields(
        ("reason", T.StringType(), False),
        ("detail", T.StringType(), True),
        ("payload", T.StringType(), True),
        *_TRANSPORT,
        ("batch_id", T.LongType(), True),
        ("origin", T.StringType(), False),          # 'stream' or 'replay'
        ("quarantined_at", T.TimestampType(), False),
        ("event_id", T.StringType(), True),         # when it could be read
        ("event_time", T.TimestampType(), True),
        ("arrival_date", T.DateType(), False),
        # invalid_utf8 only: the line's exact bytes (payload shows them as U+FFFD)
        ("payload_base64", T.StringType(), True),
    ),
    PROVISIONAL_TOTALS: _fields(
        *_GRAIN,
        ("total_amount", TOTAL, False),
        ("event_count", T.LongType(), False),
        ("status", T.StringType(), False),
        ("revision", T.IntegerType(), False),
        ("first_batch_id", T.LongType(), False),
        ("last_batch_id", T.LongType(), False),
        ("closed_at", T.TimestampType(), True),
        ("closed_batch_id", T.LongType(), True),
        ("watermark_at_close", T.TimestampType(), True),
        ("finalized_at", T.TimestampType(), True),
        ("finalized_batch_id", T.LongType(), True),
        ("window_date", T.DateType(), False),
    ),
    # What each micro-batch added to each (window, key, currency): appended, never rewritten;
    # provisional_totals folds them (spark.provisional).
    PROVISIONAL_DELTAS: _fields(
        *_GRAIN,
        ("total_amount", TOTAL, False),
        ("event_count", T.LongType(), False),
        ("revised", T.IntegerType(), False),        # 1: the batch revised a closed window
        ("batch_id", T.LongType(), False),
        ("query_id", T.StringType(), False),
        ("processed_at", T.TimestampType(), False),  # the batch's, as in watermark_progress
        ("window_date", T.DateType(), False),
    ),
    LATE_EVENTS: _fields(
        *_EVENT, *_TRANSPORT,
        ("window_start", T.TimestampType(), False),
        ("window_end", T.TimestampType(), False),
        ("watermark", T.TimestampType(), False),     # the watermark the event met
        ("lateness_seconds", SECONDS, False),        # watermark - window_end, > 0 unless G = 0
        ("batch_id", T.LongType(), False),
        ("window_date", T.DateType(), False),
    ),
    WATERMARK_PROGRESS: _fields(
        ("batch_id", T.LongType(), False),
        ("query_id", T.StringType(), False),
        ("processed_at", T.TimestampType(), False),
        ("watermark_before", T.TimestampType(), True),
        ("watermark", T.TimestampType(), True),
        ("partition_max_event_time", T.MapType(T.IntegerType(), T.TimestampType()), False),
        ("partition_last_arrival", T.MapType(T.IntegerType(), T.TimestampType()), False),
        ("idle_partitions", T.ArrayType(T.IntegerType()), False),
        ("state_json", T.StringType(), False),       # exact restorable state (reckon.eventtime)
        ("rows_in", T.LongType(), False),
        ("valid", T.LongType(), False),
        ("quarantined", T.LongType(), False),
        ("duplicates", T.LongType(), False),
        ("on_time", T.LongType(), False),            # (event, window) pairs
        ("revised", T.LongType(), False),
        ("late", T.LongType(), False),
        ("duration_seconds", T.DoubleType(), False),
        ("rules_json", T.StringType(), False),
        ("held_by", T.StringType(), True),          # the input holding the watermark back
        ("held_back_seconds", SECONDS, True),       # how much further it would be without it
    ),
    CANONICAL_TOTALS: _fields(
        *_GRAIN,
        ("total_amount", TOTAL, False),
        ("event_count", T.LongType(), False),
        ("window_date", T.DateType(), False),
        ("replay_id", T.StringType(), False),
    ),
    # What the stream counted more than once, per (window, key, currency) of a day: the copies of an
    # event_id it did not catch as duplicates, beyond the first. Written by the replay from the
    # event log version it read, so the audit needs only totals.
    UNCAUGHT_DUPLICATES: _fields(
        *_GRAIN,
        ("duplicate_amount", TOTAL, False),
        ("duplicate_count", T.LongType(), False),
        ("window_date", T.DateType(), False),
        ("replay_id", T.StringType(), False),
    ),
    # One row per (window, key, currency) of a day; reckon.reconcile owns the arithmetic and
    # statuses.
    RECONCILIATION: _fields(
        *_GRAIN,
        ("provisional_amount", TOTAL, True),        # null: the stream has no row
        ("provisional_count", T.LongType(), True),
        ("provisional_status", T.StringType(), True),  # OPEN / CLOSED / FINAL
        ("provisional_revision", T.IntegerType(), True),
        ("canonical_amount", TOTAL, True),          # null: the replay has no row
        ("canonical_count", T.LongType(), True),
        ("gap_amount", TOTAL, False),               # canonical - provisional
        ("gap_count", T.LongType(), False),
        ("late_amount", TOTAL, False),              # late side output of this row's grain
        ("late_count", T.LongType(), False),
        ("duplicate_amount", TOTAL, False),         # what the stream counted more than once
        ("duplicate_count", T.LongType(), False),
        ("residual_amount", TOTAL, False),          # gap - late + duplicate
        ("residual_count", T.LongType(), False),
        ("status", T.StringType(), False),          # reckon.reconcile.ReconStatus
        ("audit_run_id", T.StringType(), False),
        ("window_date", T.DateType(), False),
    ),
    # One row per replay of a day: what was read and what came of it.
    REPLAY_RUNS: _fields(
        ("replay_id", T.StringType(), False),
        ("window_date", T.DateType(), False),
        ("source", T.StringType(), False),          # 'event_log' or 'kafka:<topic>'
        ("event_log_version", T.LongType(), True),
        ("rows_read", T.LongType(), False),
        ("valid_events", T.LongType(), False),
        ("quarantined", T.LongType(), False),
        ("duplicate_copies", T.LongType(), False),
        ("conflicts", T.LongType(), False),
        ("arrived_after_close", T.LongType(), False),  # arrived after WM passed day end + G
        ("new_since_previous", T.LongType(), True),    # valid events the last replay lacked
        ("windows", T.LongType(), False),           # (window, key, currency) rows written
        ("total_amounts", T.MapType(T.StringType(), TOTAL), False),  # per currency, exact
        ("started_at", T.TimestampType(), False),
        ("duration_seconds", T.DoubleType(), False),
        ("rules_json", T.StringType(), False),
    ),
    # The rules the stream windows events by (reckon.spec): one row per version, the first
    # written when the stream first starts, each later one by an explicit --change-spec.
    EVENT_TIME_SPEC: _fields(
        ("spec_version", T.IntegerType(), False),
        ("spec_json", T.StringType(), False),       # window, slide, lateness, allowed_lateness, ...
        ("change", T.StringType(), False),          # 'first start' or 'lateness 5s -> 2s'
        ("after_batch_id", T.LongType(), True),     # applies to the batches after this one
        ("after_watermark", T.TimestampType(), True),  # the watermark when it was recorded
        ("recorded_at", T.TimestampType(), False),
        ("recorded_by", T.StringType(), False),
        ("origins_json", T.StringType(), False),    # where each given value came from
    ),
    # event_ids of a day whose copies disagree: reported, never silently merged.
    REPLAY_CONFLICTS: _fields(
        ("event_id", T.StringType(), False),
        ("copies", T.LongType(), False),
        ("payloads", T.ArrayType(T.StringType()), False),
        ("kept_payload", T.StringType(), True),
        ("replay_id", T.StringType(), False),
        ("window_date", T.DateType(), False),
    ),
}

_PARTITION_BY = {EVENT_LOG: ["event_date"], QUARANTINE: ["arrival_date"],
                 PROVISIONAL_DELTAS: ["window_date"], LATE_EVENTS: ["window_date"],
                 CANONICAL_TOTALS: ["window_date"], UNCAUGHT_DUPLICATES: ["window_date"],
                 RECONCILIATION: ["window_date"],
                 REPLAY_CONFLICTS: ["window_date"]}
# The stream commits to its tables every micro-batch. Delta's default
# checkpoint every 10 commits then costs a 3-4 s state reconstruction and Parquet write every
# few batches on 2 cores (~1.5 s per batch amortized); every 100 commits it is ~0.2 s, and a
# cold reader replays at most 100 small JSON commits on top of the last checkpoint.
STREAM_CHECKPOINT_INTERVAL = 100
_STREAM_WRITTEN = (EVENT_LOG, QUARANTINE, PROVISIONAL_DELTAS, LATE_EVENTS, WATERMARK_PROGRESS)
_PROPERTIES: dict[str, dict[str, str]] = {
    name: {"delta.checkpointInterval": str(STREAM_CHECKPOINT_INTERVAL)}
    for name in _STREAM_WRITTEN}
# Readers select archived events by time, key, partition, offset and batch; min/max of the raw
# line, the amount, the random event ids and the file names skip no file, and gathering them
# (long strings compared byte by byte) was a visible share of every stream batch's write.
_PROPERTIES[EVENT_LOG]["delta.dataSkippingStatsColumns"] = (
    "key,currency,event_time,source,partition,offset,arrival_time,batch_id")
# readers select deltas by window and key; statistics of the figures skip nothing
_PROPERTIES[PROVISIONAL_DELTAS]["delta.dataSkippingStatsColumns"] = (
    "window_start,window_end,key,currency")
# A spec version is read from its commit file (storage.spec_log): with no checkpoint Delta never
# cleans its log up, so every version stays readable (a version is a rare, explicit act)
_PROPERTIES[EVENT_TIME_SPEC] = {"delta.checkpointInterval": "1000000"}
# Reviewers and postmortems select reconciliation rows by window, key and status; min/max stats
# of the other 16 columns (amounts, counts) skip no file but cost ~2 s per 1.7M-row audit
# write. A table created before this keeps stats on every column (harmless, only slower).
_PROPERTIES[RECONCILIATION] = {
    "delta.dataSkippingStatsColumns": "window_start,window_end,key,currency,status"}


_MISSING_FILE_ERRORS = ("FAILED_READ_FILE.FILE_NOT_EXIST", "DELTA_CHANGE_DATA_FILE_NOT_FOUND",
                        "java.io.FileNotFoundException")


def is_missing_file_error(exc: BaseException) -> bool:
    """Whether a read failed on a data file gone from under the table version it read: a
    VACUUM past that version's retention (spark.retention), or a file deleted by hand."""
    text = str(exc)
    return any(marker in text for marker in _MISSING_FILE_ERRORS)


def ensure_table(spark: SparkSession, warehouse: str | Path, name: str,
                 schema: T.StructType | None = None) -> str:
    """Create the table empty (with its partitioning and properties) if it does not exist."""
    from delta.tables import DeltaTable

    path = table_path(warehouse, name)
    if table_exists(warehouse, name):
        return path
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(
        schema or SCHEMAS[name])
    if name in _PARTITION_BY:
        builder = builder.partitionedBy(*_PARTITION_BY[name])
    for key, value in _PROPERTIES.get(name, {}).items():
        builder = builder.property(key, value)
    builder.execute()
    return path


#: Columns added to an existing layout: a table written before them lacks them and is still
#: this layout (they are added by the first append that carries them, with mergeSchema).
ADDED_COLUMNS: Mapping[str, frozenset[str]] = {
    WATERMARK_PROGRESS: frozenset({"held_by", "held_back_seconds"}),
    QUARANTINE: frozenset({"payload_base64"})}


def layout_problem(actual: T.StructType, name: str) -> str | None:
    """How table ``name``'s actual schema differs from the layout this reckon writes (a
    column missing, or of another type), or None. Nullability is not compared."""
    have = {f.name: f.dataType.simpleString() for f in actual.fields}
    for wanted in SCHEMAS[name].fields:
        found = have.get(wanted.name)
        if found is None and wanted.name in ADDED_COLUMNS.get(name, ()):
            continue
        if found is None:
            return f"{name} has no column {wanted.name}"
        if found != wanted.dataType.simpleString():
            return f"{name}.{wanted.name} is {found}, not {wanted.dataType.simpleString()}"
    return None


def require_layout(spark: SparkSession, warehouse: str | Path,
                   names: Iterable[str] = TABLES) -> None:
    """Refuse a warehouse whose existing tables were written by an earlier layout (totals per
    (window, key) that added currencies together, amounts at scale 2): their rows can never be
    mixed with per-currency totals. Tables that do not exist yet are fine (they are created in
    the current layout). Reads each table's schema from its Delta log (no data)."""
    _refuse_layout(warehouse, names, lambda name: spark.read.format("delta").load(
        table_path(warehouse, name)).schema)


def require_logged_layout(warehouse: str | Path, names: Iterable[str] = TABLES) -> None:
    """``require_layout`` without Spark, for a reader that starts no JVM (the report): each
    table's schema as its Delta log records it (``logged_schema``), the same refusal."""
    _refuse_layout(warehouse, names, lambda name: logged_schema(warehouse, name))


def logged_schema(warehouse: str | Path, name: str) -> T.StructType:
    """Table ``name``'s schema from its Delta log (its newest metaData, checkpoint included),
    read by delta-rs: the StructType Spark would load, without a JVM and without data."""
    import json

    from deltalake import DeltaTable

    schema = DeltaTable(table_path(warehouse, name)).schema().to_json()
    return T.StructType.fromJson(json.loads(schema))


def _refuse_layout(warehouse: str | Path, names: Iterable[str],
                   schema_of: Callable[[str], T.StructType]) -> None:
    """LayoutError naming every table whose schema (``schema_of(name)``) is not this layout's
    (``layout_problem``), and a provisional_totals table (now derived on read)."""
    problems = [problem for name in names if table_exists(warehouse, name)
                and (problem := layout_problem(schema_of(name), name))]
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


def empty_frame(spark: SparkSession, schema: T.StructType | str) -> DataFrame:
    """No rows, ``schema``'s columns, and a plan Spark knows is empty: it drops a join with it
    instead of shuffling the other side to match none (a frame built from an empty list
    alone has an unknown size, so Spark plans a sort-merge join against it).

    >>> empty_frame(spark, "batch_id long").count()  # doctest: +SKIP
    0
    """
    return spark.createDataFrame([], schema).limit(0)


def read_table(spark: SparkSession, warehouse: str | Path, name: str, *,
               version: int | None = None) -> DataFrame:
    """Table ``name`` as it is, or as of ``version`` (Delta time travel); a negative version
    is the table before its first commit: no rows, the table's schema."""
    if version is not None and version < 0:
        return empty_frame(spark, SCHEMAS[name])
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(table_path(warehouse, name))


def single_row(spark: SparkSession, name: str, values: dict[str, object]) -> DataFrame:
    """One row of table ``name`` built from values (a value may also be a Column). Unlike
    ``createDataFrame`` on Python data it needs no Python worker process: a per-batch record
    costs one small JVM job, and its numbers and times stay out of the code Spark generates
    (spark.constants), so the next batch's record reuses it."""
    from spark.constants import batch_value

    cols = [batch_value(spark, values[f.name]).cast(f.dataType).alias(f.name)
            for f in SCHEMAS[name].fields]
    return spark.range(1).select(*cols)


def conform(df: DataFrame, name: str) -> DataFrame:
    """Select the table's columns in its order, cast to its declared types. A missing column
    is a bug in the writer and fails here, before anything is written."""
    from pyspark.sql import functions as F

    schema = SCHEMAS[name]
    missing = [f.name for f in schema.fields if f.name not in df.columns]
    if missing:
        raise ValueError(f"writer for {name} lacks columns {missing}")
    # The same columns for every write of a table: built once per JVM (a cast to a DataType
    # is ~5 py4j calls; the stream's appends spent ~1,800 a batch on them).
    columns = built_once_per_jvm(("conform", name), lambda: tuple(
        F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields))
    return df.select(*columns)


def replace_rows(df: DataFrame, warehouse: str | Path, name: str, condition: str) -> None:
    """Overwrite the rows of table ``name`` that match ``condition`` (SQL) with ``df``, in one
    atomic commit (Delta replaceWhere): how the nightly jobs make a re-run of a day replace
    that day, never add to it."""
    writer = df.write.format("delta").mode("overwrite").option("replaceWhere", condition)
    if name in ADDED_COLUMNS:  # a table written before them gains the added columns
        writer = writer.option("mergeSchema", "true")
    writer.save(table_path(warehouse, name))


def window_day(day: date) -> str:
    """The ``replace_rows`` condition for one day of a table partitioned by window_date."""
    return f"window_date = '{day.isoformat()}'"


def marked_append(df: DataFrame, warehouse: str | Path, name: str, app_id: str,
                  batch_id: int, reads: Mapping[str, int] | None = None) -> None:
    """Append as batch ``batch_id`` of ``app_id``: the rows conformed to the table's schema,
    the commit carrying its batch mark (``storage.commits``: ``batch_mark``, and
    ``last_marked_batch`` to skip a batch already in)."""
    if name in SCHEMAS:
        df = conform(df, name)
    writer = df.write.format("delta").mode("append")
    if name in ADDED_COLUMNS:  # a table written before them gains the added columns
        writer = writer.option("mergeSchema", "true")
    (writer.option("userMetadata", batch_mark(app_id, name, batch_id, reads))
       .save(table_path(warehouse, name)))


