"""The warehouse's Delta tables: names, schemas, locations, and idempotent writes.

Every table lives at ``<warehouse>/<name>``. Micro-batch writes are idempotent by batch id:
appends pass the writer options ``txnAppId``/``txnVersion``; MERGE and UPDATE use the session
settings ``spark.databricks.delta.write.txnAppId``/``txnVersion``. Delta skips a write whose
version is not above the last one it recorded for that app id, so a batch re-run after a
crash changes nothing twice. One app id per (query, table).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from reckon.schema import AMOUNT_PRECISION, AMOUNT_SCALE

__all__ = [
    "CANONICAL_TOTALS",
    "EVENT_LOG",
    "LATE_EVENTS",
    "PROVISIONAL_TOTALS",
    "QUARANTINE",
    "RECONCILIATION",
    "REPLAY_CONFLICTS",
    "REPLAY_RUNS",
    "SCHEMAS",
    "TABLES",
    "WATERMARK_PROGRESS",
    "conform",
    "ensure_table",
    "idempotent_append",
    "idempotent_dml",
    "read_table",
    "single_row",
    "table_exists",
    "table_path",
]

EVENT_LOG = "event_log"
QUARANTINE = "quarantine"
PROVISIONAL_TOTALS = "provisional_totals"
LATE_EVENTS = "late_events"
WATERMARK_PROGRESS = "watermark_progress"
CANONICAL_TOTALS = "canonical_totals"
RECONCILIATION = "reconciliation"
REPLAY_RUNS = "replay_runs"
REPLAY_CONFLICTS = "replay_conflicts"

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
    ),
    PROVISIONAL_TOTALS: _fields(
        ("window_start", T.TimestampType(), False),
        ("window_end", T.TimestampType(), False),
        ("key", T.StringType(), False),
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
    ),
    CANONICAL_TOTALS: _fields(
        ("window_start", T.TimestampType(), False),
        ("window_end", T.TimestampType(), False),
        ("key", T.StringType(), False),
        ("total_amount", TOTAL, False),
        ("event_count", T.LongType(), False),
        ("window_date", T.DateType(), False),
        ("replay_id", T.StringType(), False),
    ),
    # One row per (window, key) of a day; reckon.reconcile owns the arithmetic and statuses.
    RECONCILIATION: _fields(
        ("window_start", T.TimestampType(), False),
        ("window_end", T.TimestampType(), False),
        ("key", T.StringType(), False),
        ("provisional_amount", TOTAL, True),        # null: the stream has no row
        ("provisional_count", T.LongType(), True),
        ("provisional_status", T.StringType(), True),  # OPEN / CLOSED / FINAL
        ("provisional_revision", T.IntegerType(), True),
        ("canonical_amount", TOTAL, True),          # null: the replay has no row
        ("canonical_count", T.LongType(), True),
        ("gap_amount", TOTAL, False),               # canonical - provisional
        ("gap_count", T.LongType(), False),
        ("late_amount", TOTAL, False),              # late side output of this window and key
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
        ("windows", T.LongType(), False),
        ("total_amount", TOTAL, False),
        ("started_at", T.TimestampType(), False),
        ("duration_seconds", T.DoubleType(), False),
        ("rules_json", T.StringType(), False),
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

TABLES = (EVENT_LOG, QUARANTINE, PROVISIONAL_TOTALS, LATE_EVENTS, WATERMARK_PROGRESS,
          CANONICAL_TOTALS, RECONCILIATION, REPLAY_RUNS, REPLAY_CONFLICTS)

_PARTITION_BY = {EVENT_LOG: ["event_date"], QUARANTINE: ["arrival_date"],
                 PROVISIONAL_TOTALS: ["window_date"], LATE_EVENTS: ["window_date"],
                 CANONICAL_TOTALS: ["window_date"], RECONCILIATION: ["window_date"],
                 REPLAY_CONFLICTS: ["window_date"]}
# The stream commits to its tables every micro-batch (provisional_totals twice). Delta's default
# checkpoint every 10 commits then costs a 3-4 s state reconstruction and Parquet write every
# few batches on 2 cores (~1.5 s per batch amortized); every 100 commits it is ~0.2 s, and a
# cold reader replays at most 100 small JSON commits on top of the last checkpoint.
STREAM_CHECKPOINT_INTERVAL = 100
_STREAM_WRITTEN = (EVENT_LOG, QUARANTINE, PROVISIONAL_TOTALS, LATE_EVENTS, WATERMARK_PROGRESS)
_PROPERTIES: dict[str, dict[str, str]] = {
    name: {"delta.checkpointInterval": str(STREAM_CHECKPOINT_INTERVAL)}
    for name in _STREAM_WRITTEN}
_PROPERTIES[PROVISIONAL_TOTALS]["delta.enableChangeDataFeed"] = "true"


def table_path(warehouse: str | Path, name: str) -> str:
    return str(Path(warehouse) / name)


def table_exists(warehouse: str | Path, name: str) -> bool:
    return (Path(warehouse) / name / "_delta_log").is_dir()


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


def read_table(spark: SparkSession, warehouse: str | Path, name: str) -> DataFrame:
    return spark.read.format("delta").load(table_path(warehouse, name))


def single_row(spark: SparkSession, name: str, values: dict[str, object]) -> DataFrame:
    """One row of table ``name`` built from literals (a value may also be a Column). Unlike
    ``createDataFrame`` on Python data it needs no Python worker process: a per-batch record
    costs one small JVM job."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    cols = []
    for f in SCHEMAS[name].fields:
        value = values[f.name]
        col = value if isinstance(value, Column) else F.lit(value)
        cols.append(col.cast(f.dataType).alias(f.name))
    return spark.range(1).select(*cols)


def conform(df: DataFrame, name: str) -> DataFrame:
    """Select the table's columns in its order, cast to its declared types. A missing column
    is a bug in the writer and fails here, before anything is written."""
    from pyspark.sql import functions as F

    schema = SCHEMAS[name]
    missing = [f.name for f in schema.fields if f.name not in df.columns]
    if missing:
        raise ValueError(f"writer for {name} lacks columns {missing}")
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def idempotent_append(df: DataFrame, warehouse: str | Path, name: str, app_id: str,
                      version: int) -> None:
    """Append once per (app_id, version): a retried batch is skipped by Delta itself."""
    if name in SCHEMAS:
        df = conform(df, name)
    (df.write.format("delta").mode("append")
       .option("txnAppId", f"{app_id}:{name}").option("txnVersion", str(version))
       .save(table_path(warehouse, name)))


@contextmanager
def idempotent_dml(spark: SparkSession, app_id: str, name: str, version: int) -> Iterator[None]:
    """MERGE/UPDATE/DELETE inside this block run at most once per (app_id, table, version)."""
    spark.conf.set("spark.databricks.delta.write.txnAppId", f"{app_id}:{name}")
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(version))
    try:
        yield
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
