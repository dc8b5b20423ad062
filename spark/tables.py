"""The warehouse's Delta tables: names, schemas, locations, layout, and reads and writes.

Every table lives at ``<warehouse>/<name>``, in the layout this module declares (schema,
partitioning, table properties); ``require_layout`` refuses a warehouse of another. Writes
conform rows to the schema first (``conform``); a stream's writes carry a batch mark
(``marked_append``), so that a re-run batch is skipped.

The commit-file readers and batch marks live in ``storage.commits``, the side-by-side writes in
``spark.concurrent_writes``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spark.session import built_once_per_jvm
from storage import layout
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
    "marked_append",
    "read_table",
    "replace_rows",
    "require_layout",
    "single_row",
    "table_exists",
    "table_path",
    "window_day",
]


_PRIMITIVES: dict[str, T.DataType] = {
    "string": T.StringType(), "bigint": T.LongType(), "int": T.IntegerType(),
    "boolean": T.BooleanType(), "date": T.DateType(), "timestamp": T.TimestampType(),
    "double": T.DoubleType()}


def spark_type(simple: str) -> T.DataType:
    """A Spark type from its simple string (storage/layout.py writes the layout in them),
    without a JVM: primitives, ``decimal(p,s)``, ``array<...>`` and ``map<...,...>``.

    >>> spark_type("map<string,decimal(38,3)>").simpleString()
    'map<string,decimal(38,3)>'
    """
    if simple in _PRIMITIVES:
        return _PRIMITIVES[simple]
    if simple.startswith("decimal(") and simple.endswith(")"):
        precision, scale = simple[len("decimal("):-1].split(",")
        return T.DecimalType(int(precision), int(scale))
    if simple.startswith("array<") and simple.endswith(">"):
        return T.ArrayType(spark_type(simple[len("array<"):-1]))
    if simple.startswith("map<") and simple.endswith(">"):
        inner, depth = simple[len("map<"):-1], 0
        for i, char in enumerate(inner):
            depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(char, 0)
            if char == "," and depth == 0:
                return T.MapType(spark_type(inner[:i]), spark_type(inner[i + 1:]))
    raise ValueError(f"not a type storage/layout.py writes: {simple!r}")


AMOUNT = spark_type(layout.AMOUNT)
TOTAL = spark_type(layout.TOTAL)
SECONDS = spark_type(layout.SECONDS)  # exact seconds at microsecond precision

#: Each table's StructType, built from the one layout (storage/layout.py ``LAYOUT``).
SCHEMAS: dict[str, T.StructType] = {
    name: T.StructType([T.StructField(column, spark_type(kind), nullable)
                        for column, kind, nullable in columns])
    for name, columns in layout.LAYOUT.items()}

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
ADDED_COLUMNS = layout.ADDED_COLUMNS


def layout_problem(actual: T.StructType, name: str) -> str | None:
    """How table ``name``'s actual schema differs from the layout this reckon writes
    (``storage.layout.layout_problem`` on the schema's simple strings), or None."""
    return layout.layout_problem({f.name: f.dataType.simpleString() for f in actual.fields},
                                 name)


def require_layout(spark: SparkSession, warehouse: str | Path,
                   names: Iterable[str] = TABLES) -> None:
    """Refuse a warehouse whose existing tables were written by an earlier layout (totals per
    (window, key) that added currencies together, amounts at scale 2): their rows can never be
    mixed with per-currency totals. Tables that do not exist yet are fine (they are created in
    the current layout). Reads each table's schema from its Delta log (no data); a reader
    without a JVM calls ``storage.layout.require_logged_layout``, the same refusal."""
    layout.refuse_earlier_layout(warehouse, names, lambda name: {
        f.name: f.dataType.simpleString()
        for f in spark.read.format("delta").load(table_path(warehouse, name)).schema.fields})


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


