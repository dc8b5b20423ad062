"""Spark tier: on the local master, a ``file:`` path costs no child process.

Hadoop's local file system, without its native library, starts ``chmod`` for every file it
creates and ``readlink`` for every rename a FileContext makes (Delta's commits, a stream's
checkpoint). reckon.jvm.NoForkLocalFileSystem does both in process (spark.session
``no_fork_files_conf``). These tests check it is the file system Spark uses, that it answers
as Hadoop's own does, and, with a Java Flight Recording of the session's JVM, that a Delta
commit and a streaming checkpoint start no process while Hadoop's own class would.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def _hadoop(spark):
    jvm = spark._jvm
    return jvm, spark._jsc.hadoopConfiguration(), jvm.org.apache.hadoop.fs.Path


def test_the_session_uses_the_in_process_file_system_for_both_hadoop_apis(spark):
    jvm, conf, _ = _hadoop(spark)
    root = jvm.java.net.URI("file:///")
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(root, conf)
    fc = jvm.org.apache.hadoop.fs.FileContext.getFileContext(root, conf)
    assert fs.getClass().getName() == "reckon.jvm.NoForkLocalFileSystem"
    assert fc.getDefaultFileSystem().getClass().getName() == "reckon.jvm.NoForkLocalFs"


def _status(raw, path) -> tuple[bool, bool, int, str]:
    st = raw.getFileLinkStatus(path)
    return st.isSymlink(), st.isDirectory(), st.getLen(), st.getPath().toString()


def test_it_answers_as_hadoops_own_file_system(spark, tmp_path: Path):
    """Statuses of a file, a folder, a symlink and a missing path, and a permission set,
    are what Hadoop's RawLocalFileSystem gives."""
    jvm, conf, hpath = _hadoop(spark)
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("twelve bytes")
    (tmp_path / "link").symlink_to(tmp_path / "file")
    ours, theirs = jvm.reckon.jvm.NoForkLocalFileSystem.Raw(), jvm.org.apache.hadoop.fs.RawLocalFileSystem()
    for raw in (ours, theirs):
        raw.initialize(jvm.java.net.URI("file:///"), conf)
    for name in ("dir", "file", "link"):
        path = hpath(f"file://{tmp_path / name}")
        assert _status(ours, path) == _status(theirs, path), name
    for raw in (ours, theirs):
        with pytest.raises(Exception, match="FileNotFoundException"):
            raw.getFileLinkStatus(hpath(f"file://{tmp_path / 'missing'}"))
    mode = jvm.org.apache.hadoop.fs.permission.FsPermission.createImmutable(0o640)
    ours.setPermission(hpath(f"file://{tmp_path / 'file'}"), mode)
    assert stat.S_IMODE(os.stat(tmp_path / "file").st_mode) == 0o640


def test_a_created_file_gets_the_mode_hadoop_would_give(spark, tmp_path: Path):
    """Hadoop's default file mode (0666) under its default umask (022): 0644."""
    jvm, conf, hpath = _hadoop(spark)
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    out = fs.create(hpath(f"file://{tmp_path / 'made'}"))
    out.close()
    assert stat.S_IMODE(os.stat(tmp_path / "made").st_mode) == 0o644


def _started_processes(spark, work: Callable[[], None], tmp_path: Path) -> list[str]:
    """The commands the session's JVM started while ``work`` ran (a Java Flight Recording)."""
    jvm = spark._jvm
    bin_dir = Path(jvm.java.lang.System.getProperty("java.home")) / "bin"
    if not (bin_dir / "jcmd").exists():
        pytest.skip("this JDK has no jcmd")
    pid = str(jvm.java.lang.ProcessHandle.current().pid())
    recording = tmp_path / "fs.jfr"
    subprocess.run([str(bin_dir / "jcmd"), pid, "JFR.start", "name=reckon-fs"],
                   check=True, capture_output=True)
    try:
        work()
    finally:
        subprocess.run([str(bin_dir / "jcmd"), pid, "JFR.dump", "name=reckon-fs",
                        f"filename={recording}"], check=True, capture_output=True)
        subprocess.run([str(bin_dir / "jcmd"), pid, "JFR.stop", "name=reckon-fs"],
                       check=True, capture_output=True)
    printed = subprocess.run([str(bin_dir / "jfr"), "print", "--events", "jdk.ProcessStart",
                              str(recording)], check=True, capture_output=True, text=True)
    return [line.split("=", 1)[1].strip().strip('"') for line in printed.stdout.splitlines()
            if line.strip().startswith("command =")]


def test_delta_commits_and_stream_checkpoints_start_no_process(spark, tmp_path: Path):
    def work() -> None:
        table = str(tmp_path / "table")
        spark.range(100).selectExpr("id", "uuid() AS event_id").write.format("delta").save(table)
        spark.range(10).selectExpr("id", "uuid() AS event_id").write.format("delta") \
            .mode("append").save(table)
        query = (spark.readStream.format("delta").load(table).writeStream.format("delta")
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start(str(tmp_path / "copy")))
        query.awaitTermination()

    started = _started_processes(spark, work, tmp_path)
    assert spark.read.format("delta").load(str(tmp_path / "copy")).count() == 110
    assert not [c for c in started if c.startswith(("chmod", "readlink"))], started


def test_the_recording_sees_the_processes_hadoops_own_class_starts(spark, tmp_path: Path):
    """The probe above can fail: Hadoop's own RawLocalFileSystem, asked to set a permission,
    starts a chmod the recording catches."""
    jvm, conf, hpath = _hadoop(spark)
    (tmp_path / "file").write_text("x")
    theirs = jvm.org.apache.hadoop.fs.RawLocalFileSystem()
    theirs.initialize(jvm.java.net.URI("file:///"), conf)
    mode = jvm.org.apache.hadoop.fs.permission.FsPermission.createImmutable(0o600)
    started = _started_processes(
        spark, lambda: theirs.setPermission(hpath(f"file://{tmp_path / 'file'}"), mode),
        tmp_path)
    if jvm.org.apache.hadoop.util.NativeCodeLoader.isNativeCodeLoaded():
        pytest.skip("Hadoop's native library is loaded here: its own class starts nothing")
    assert any(c.startswith("chmod") for c in started), started
