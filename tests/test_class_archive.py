"""The driver JVM's class-data archive (spark/class_archive.py): `make setup` trains it, every
reckon JVM maps it in, the setting turns it off, and a stale one is trained again."""

from __future__ import annotations

import os
from pathlib import Path

from app.settings import load_settings
from spark.class_archive import archive_java_options, archive_path, training_stamp


def _settings(jars: Path, **values):
    return load_settings(env={}, jars_dir=str(jars), **values)


def test_no_archive_no_option_and_the_setting_turns_it_off(tmp_path):
    settings = _settings(tmp_path)
    assert archive_java_options(settings) == []  # not trained: the JVM starts as before
    archive_path(settings).parent.mkdir(parents=True)
    archive_path(settings).write_bytes(b"archive")
    options = archive_java_options(settings)
    assert options[0] == f"-XX:SharedArchiveFile={archive_path(settings)}"
    assert "-Xlog:cds=off" in options  # a JDK or class path it does not fit: ignored quietly
    assert archive_java_options(_settings(tmp_path, spark_class_archive=False)) == []
    env = load_settings(env={"RECKON_SPARK_CLASS_ARCHIVE": "false", "RECKON_JARS_DIR": str(tmp_path)})
    assert archive_java_options(env) == []


def test_a_changed_jar_makes_the_archive_stale(tmp_path):
    (tmp_path / "spark").mkdir()
    jar = tmp_path / "spark" / "delta-spark_4.1_2.13-4.4.0.jar"
    jar.write_bytes(b"v1")
    settings = _settings(tmp_path)
    before = training_stamp(settings)
    assert training_stamp(settings) == before
    jar.write_bytes(b"v2 longer")
    os.utime(jar, ns=(1, 1))
    assert training_stamp(settings) != before


def test_the_session_jvm_maps_the_archive_setup_trained(spark, spark_settings):
    """The tests' own JVM started as every reckon command's does: with the archive `make
    setup` trained in this checkout mapped into its memory (the JVM maps it only when it fits
    its version and class path)."""
    archive = archive_path(spark_settings)
    assert archive.is_file(), f"{archive} is missing: `make setup` trains it"
    jvm = spark.sparkContext._gateway.proc.pid
    assert str(archive.resolve()) in Path(f"/proc/{jvm}/maps").read_text()
