"""Spark tier: the session factory loads Delta from the local jar cache."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.settings import load_settings
from reckon.errors import ConfigError


def test_delta_round_trip_writes_a_transaction_log(spark, warehouse):
    path = warehouse / "roundtrip"
    df = spark.createDataFrame([("a", Decimal("1.10")), ("b", Decimal("2.25"))],
                               "key string, amount decimal(18,2)")
    df.write.format("delta").save(str(path))
    log = sorted(p.name for p in (path / "_delta_log").glob("*.json"))
    assert log == ["00000000000000000000.json"]
    back = spark.read.format("delta").load(str(path)).orderBy("key").collect()
    assert [(r.key, r.amount) for r in back] == [("a", Decimal("1.10")), ("b", Decimal("2.25"))]
    assert str(spark.read.format("delta").load(str(path)).schema["amount"].dataType) == \
        "DecimalType(18,2)"


def test_jars_come_from_the_local_cache_not_a_download(spark):
    conf = spark.sparkContext.getConf()
    jars = conf.get("spark.jars")
    assert "delta-spark_4.1_2.13" in jars and ".cache/jars/spark" in jars
    assert not conf.get("spark.jars.packages", "")
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


def test_missing_jars_tell_the_user_what_to_run(tmp_path):
    from spark.session import local_jars

    with pytest.raises(ConfigError, match="make setup"):
        local_jars(load_settings(env={}, jars_dir=str(tmp_path)))


def test_local_mode_sizes_delta_and_splits_for_a_few_cores(spark, spark_settings):
    """The local session carries few_cores_conf (Delta's snapshot tasks = shuffle partitions,
    64 MB splits); the benchmark's cluster driver reuses the same dict."""
    from spark.session import few_cores_conf

    wanted = few_cores_conf(spark_settings)
    assert wanted["spark.databricks.delta.snapshotPartitions"] == str(
        spark_settings.shuffle_partitions)
    conf = spark.sparkContext.getConf()
    assert {key: conf.get(key) for key in wanted} == wanted


def test_persisted_frames_are_cached_uncompressed(spark):
    """What the stream and the replay persist is read a few times and dropped; the session
    does not spend CPU compressing it."""
    assert spark.conf.get("spark.sql.inMemoryColumnarStorage.compressed") == "false"


def test_no_generated_stage_outgrows_the_jit(spark):
    """HotSpot interprets any method over 8,000 bytes of bytecode; the session makes Spark
    split such a whole-stage method instead (the parse's fused stage was one: BENCHMARKS.md)."""
    assert spark.conf.get("spark.sql.codegen.hugeMethodLimit") == "8000"


def test_columns_are_built_once_per_key_and_per_jvm(monkeypatch):
    from pyspark import SparkContext

    from spark import session

    builds: list[str] = []

    def build(what: str):
        return lambda: builds.append(what) or what

    monkeypatch.setattr(session, "_BUILT_PER_JVM", {})
    monkeypatch.setattr(SparkContext, "_jvm", object())
    assert session.built_once_per_jvm(("t", 1), build("a")) == "a"
    assert session.built_once_per_jvm(("t", 1), build("again")) == "a"  # reused
    assert session.built_once_per_jvm(("t", 2), build("b")) == "b"  # another key
    monkeypatch.setattr(SparkContext, "_jvm", object())  # a new session's JVM
    assert session.built_once_per_jvm(("t", 1), build("c")) == "c"
    assert builds == ["a", "b", "c"]


def test_every_table_is_conformed_to_its_own_schema_in_one_session(spark):
    from pyspark.sql import types as T

    from spark import tables as tb

    # Every column any table has (no name has two types), in an order no table uses.
    declared = {f.name: f.dataType for schema in tb.SCHEMAS.values() for f in schema.fields}
    every_column = spark.createDataFrame([], T.StructType(
        [T.StructField(n, declared[n]) for n in sorted(declared, reverse=True)]))
    for _ in range(2):  # the second round gets the columns built in the first
        for table, schema in tb.SCHEMAS.items():
            conformed = tb.conform(every_column, table).schema
            assert [(f.name, f.dataType) for f in conformed.fields] == \
                [(f.name, f.dataType) for f in schema.fields], table


@pytest.mark.spark
def test_under_airflow_the_jvm_writes_nothing_to_stderr(tmp_path):
    """Airflow files a task's stderr as ERROR. With spark_log_to_stdout (the nightly DAG's
    tasks), nothing the JVM writes reaches stderr: Spark's start-up warnings and errors go to
    stdout with their own level in the text, and so does the java launcher's line about
    incubator modules (written before log4j exists); Python's own stderr is back after the
    launch. On a terminal (the default), Spark keeps its own configuration and the launcher's
    line stays on stderr."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from app.settings import load_settings\n"
            "from spark.session import get_spark\n"
            f"s = get_spark(load_settings(env={{}}, warehouse={str(tmp_path / 'wh')!r}, "
            "spark_log_to_stdout=sys.argv[1] == 'on'))\n"
            "s.sparkContext._jvm.org.apache.log4j.LogManager.getLogger('reckon.test')"
            ".error('an error keeps its level')\n"
            "print('python stderr is back', file=sys.stderr)\n")
    runs = {mode: subprocess.run([sys.executable, "-c", code, mode], capture_output=True,
                                 text=True, timeout=300, cwd=tmp_path) for mode in ("on", "off")}
    on = runs["on"]
    assert on.returncode == 0, on.stderr
    assert "spark WARN NativeCodeLoader" in on.stdout
    assert "WARNING: Using incubator modules: jdk.incubator.vector" in on.stdout
    assert "spark ERROR test: an error keeps its level" in on.stdout
    assert [line for line in on.stderr.splitlines() if line.strip()] == [
        "python stderr is back"]
    off = runs["off"]
    assert "Using Spark's default log4j profile" in off.stderr
    assert "WARNING: Using incubator modules: jdk.incubator.vector" in off.stderr
