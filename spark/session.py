"""One SparkSession factory for every job, test and benchmark.

Local by default (``local[*]``, Delta enabled, a few shuffle partitions, UI off); any
cluster master from configuration (``spark://``, ``yarn``, ``k8s://``) without code changes.
JVM jars come from the local cache that ``make setup`` fills with mvn; Spark is never asked
to download packages at start-up.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from pyspark import SparkContext
from pyspark.sql import SparkSession

from reckon.config import PROJECT_ROOT, Settings
from reckon.errors import ConfigError

__all__ = ["few_cores_conf", "get_spark", "local_jars", "no_fork_files_conf", "stop_spark"]

_REQUIRED_JARS = ("delta-spark_", "delta-storage-")
# reckon's own JVM code (jvm/parse: the one-pass line parser), built by scripts/setup.sh
RECKON_JAR = "reckon-jvm.jar"


def local_jars(settings: Settings, *, kafka: bool = True) -> list[str]:
    """The jar files Spark needs, from the mvn cache. Raises with what to run if missing."""
    base = Path(settings.jars_dir).expanduser()
    root = base if base.is_absolute() else PROJECT_ROOT / base
    folder = root / "spark"
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    missing = [prefix for prefix in _REQUIRED_JARS
               if not any(Path(j).name.startswith(prefix) for j in jars)]
    if missing:
        raise ConfigError(
            f"Delta Lake jars are missing from {folder} (looked for {', '.join(missing)}*). "
            "Run `make setup` (or scripts/setup.sh) to fetch them with mvn, or set "
            "RECKON_JARS_DIR to a folder that has a spark/ subfolder of jars."
        )
    own = root / "reckon" / RECKON_JAR
    if not own.is_file():
        raise ConfigError(
            f"reckon's own JVM code is not built: {own} is missing. Run `make setup` (or "
            "scripts/setup.sh), which compiles jvm/parse with javac.")
    jars.append(str(own))
    if not kafka:
        jars = [j for j in jars if "kafka" not in Path(j).name and "pool2" not in Path(j).name]
    return jars


def few_cores_conf(settings: Settings) -> dict[str, str]:
    """What local mode sets for a machine with a few cores. Delta reconstructs table snapshots
    with 50 tasks by default: on 2 cores that alone costs seconds per commit, and one task per
    shuffle partition is plenty."""
    return {"spark.databricks.delta.snapshotPartitions": str(settings.shuffle_partitions),
            "spark.sql.files.maxPartitionBytes": str(64 * 1024 * 1024)}


def no_fork_files_conf(jars: list[str]) -> dict[str, str]:
    """What local mode sets so that a ``file:`` path costs no child process: Hadoop's local
    file system, without its native library, runs ``chmod`` for each file it creates and
    ``readlink`` for each rename a checkpoint or a Delta commit makes (about 280 processes a
    stream micro-batch). reckon.jvm.NoForkLocalFileSystem does both in process
    (jvm/parse/src/reckon/jvm/NoForkLocalFileSystem.java); its jar goes on the driver's class
    path, where Hadoop's class loader finds it from any thread.

    Example:
        >>> no_fork_files_conf(["/c/delta-spark.jar", "/c/reckon-jvm.jar"])["spark.hadoop.fs.file.impl"]
        'reckon.jvm.NoForkLocalFileSystem'
    """
    own = [j for j in jars if Path(j).name == RECKON_JAR]
    return {"spark.hadoop.fs.file.impl": "reckon.jvm.NoForkLocalFileSystem",
            "spark.hadoop.fs.AbstractFileSystem.file.impl": "reckon.jvm.NoForkLocalFs",
            "spark.driver.extraClassPath": os.pathsep.join(own)}


def get_spark(settings: Settings, app_name: str = "reckon") -> SparkSession:
    """Get or create the process-wide SparkSession configured for reckon."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    jars = local_jars(settings)
    local = settings.spark_master.startswith("local")
    builder = (
        SparkSession.builder.appName(app_name)
        .master(settings.spark_master)
        .config("spark.jars", ",".join(jars))
        .config("spark.jars.packages", "")  # never download at start-up
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog",
                "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
        .config("spark.default.parallelism", str(max(2, settings.shuffle_partitions)))
        .config("spark.ui.enabled", "true" if settings.spark_ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
        # A batch's state commit writes the keys it changed (a changelog) instead of a
        # snapshot of the store's files; snapshots are taken in the background. The stream's
        # dedup state changes every key it sees, so every commit otherwise flushed and
        # copied new files. Safe to turn on or off for an existing checkpoint (Spark reads
        # both kinds).
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        # Counting the state's rows makes RocksDB look a key up before every write, to know
        # whether the write adds a row; the dedup state writes every id it sees, and nothing
        # reads the count (only the state operator's progress metric would show it).
        .config("spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows", "false")
        .config("spark.sql.adaptive.enabled", "true")
        # A stream micro-batch generates ~175 classes (its own stages and Delta's MERGE and
        # commit); with Spark's default cache of 100 every batch compiled them all again
        # (1.8-2.7 s of Janino a batch, and fresh classes start cold in the JIT).
        .config("spark.sql.codegen.cache.maxEntries", "2000")
        # HotSpot never JIT-compiles a method over 8,000 bytes of bytecode. The parse's fused
        # stage (spark/parse.py: ~30 checks over one JSON struct) generated a larger one, which
        # then ran in the bytecode interpreter: a third of the parse's samples. At 8,000 Spark
        # splits such a stage instead (its documented setting for HotSpot): parsing 1M lines
        # 12.9 -> 8.2 s; the replay and audit, whose stages are smaller, are unchanged.
        .config("spark.sql.codegen.hugeMethodLimit", "8000")
        # The batches and day summaries reckon persists are used a few times each and then
        # dropped: compressing them cost more CPU than it saved (the stream spent ~15% of its
        # JVM samples gathering dictionary and run-length statistics on unique payloads).
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        # Parquet tries a dictionary on every column of a file until it overflows. The raw
        # line and the event id are unique per row: hashing them into a dictionary that is
        # then thrown away was a tenth of the stream's JVM samples.
        .config("spark.hadoop.parquet.enable.dictionary#payload", "false")
        .config("spark.hadoop.parquet.enable.dictionary#event_id", "false")
        .config("spark.databricks.delta.schema.autoMerge.enabled", "false")
        .config("spark.databricks.delta.properties.defaults.enableChangeDataFeed", "false")
        .config("spark.sql.warehouse.dir", str(settings.warehouse_path / "_spark_sql"))
        # Hadoop sets each file's mode itself (0644 under its own umask, 022), whatever the
        # process's umask: a warehouse shared by a group (storage.sharing) needs 002 here too,
        # or the next account's replay cannot replace what this one wrote
        .config("spark.hadoop.fs.permissions.umask-mode",
                "002" if settings.shared_warehouse == "group" else "022")
        .config("spark.driver.extraJavaOptions", _driver_java_options(settings))
    )
    if local:
        builder = builder.config("spark.driver.memory", settings.spark_driver_memory)
        for key, value in {**few_cores_conf(settings), **no_fork_files_conf(jars)}.items():
            builder = builder.config(key, value)
    else:
        # On a cluster the executors need the same jars; spark.jars ships them.
        builder = builder.config("spark.executorEnv.PYSPARK_PYTHON",
                                 os.environ.get("RECKON_EXECUTOR_PYTHON", sys.executable))
    for key, value in settings.extra_spark_conf.items():
        builder = builder.config(key, value)
    with _jvm_stderr_to_stdout(settings.spark_log_to_stdout):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def _jvm_stderr_to_stdout(on: bool) -> Iterator[None]:
    """Under Airflow (``on``: setting ``spark_log_to_stdout``), the JVM Spark launches gets
    this process's stdout as its stderr. pyspark starts ``spark-submit`` (and through it the
    JVM) with the process's own file descriptors, and the java launcher writes ``WARNING:
    Using incubator modules: jdk.incubator.vector`` to its stderr before log4j exists, which
    Airflow files as ERROR in every Spark task. So fd 2 points at fd 1 while the JVM is
    launched, and back afterwards: Python's own stderr (tracebacks, warnings) is untouched,
    while everything the JVM writes to its stderr later (log4j's errors included) reads as
    the task's stdout, with its level in the text. Off (a terminal) it does nothing, and once
    a JVM runs there is nothing to launch.

    Example: ``with _jvm_stderr_to_stdout(True): SparkSession.builder.getOrCreate()``.
    """
    if not on or SparkContext._gateway is not None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(1, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


_LOG4J_STDOUT = Path(__file__).with_name("log4j2-stdout.properties")


def _driver_java_options(settings: Settings) -> str:
    """The driver JVM's options: Derby inside the warehouse, and under Airflow (setting
    ``spark_log_to_stdout``) a log4j configuration that writes Spark's log lines with their
    level in the text (see spark/log4j2-stdout.properties); the JVM's stderr itself is the
    task's stdout then (``_jvm_stderr_to_stdout``), as Airflow files stderr as ERROR; and
    the class-data archive ``make setup`` trains (spark/class_archive.py), when there is one."""
    from spark.class_archive import archive_java_options

    options = [f"-Dderby.system.home={settings.warehouse_path / '_derby'}",
               *archive_java_options(settings)]
    if settings.spark_log_to_stdout:
        options.append(f"-Dlog4j2.configurationFile=file:{_LOG4J_STDOUT}")
    return " ".join(options)


_T = TypeVar("_T")
_BUILT_PER_JVM: dict[tuple[Hashable, ...], object] = {}


def built_once_per_jvm(key: tuple[Hashable, ...], build: Callable[[], _T]) -> _T:
    """``build()``, run once per ``key`` and running JVM. For columns a job reuses in every
    micro-batch: building a Column is a py4j call per function and cast, thousands a batch,
    while the built (unresolved) Column can be applied to any frame. A Column belongs to the
    JVM that made it, so a new session's JVM (a restart, a test that stops Spark) builds
    its own. ``key`` must hold everything the columns are built from."""
    full_key = (id(SparkContext._jvm), *key)
    if full_key not in _BUILT_PER_JVM:
        _BUILT_PER_JVM[full_key] = build()
    return _BUILT_PER_JVM[full_key]  # type: ignore[return-value]


@contextmanager
def session_conf(spark: SparkSession, values: Mapping[str, str]) -> Iterator[None]:
    """SQL settings for the length of one operation, then back as they were (unset if they
    were): a maintenance command tunes Delta for itself, not for the jobs that follow."""
    previous = {key: spark.conf.get(key, None) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def stop_spark() -> None:
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
