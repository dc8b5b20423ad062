"""The driver JVM's class-data archive: Spark, Delta and reckon's classes, parsed and verified
once at setup instead of at every start.

Why: each ``reckon`` command, nightly task and test subprocess starts its own driver JVM, which
loads about 24,000 classes before its first query; a third of a small day's replay is that
start. A HotSpot dynamic CDS archive (JDK 13+) holds the classes a representative run loaded,
already parsed and verified, and every later JVM maps it in. ``make setup`` trains it once per
checkout (``python -m spark.class_archive``: a small stream and a nightly day in one JVM, dumped
at exit). The JVM checks the archive against its own version and class path and ignores it,
silently, when they differ; setting ``spark_class_archive = false`` never uses it.

Example::

    >>> from reckon.config import load_settings
    >>> archive_java_options(load_settings(env={}, spark_class_archive=False))
    []
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from reckon.config import PROJECT_ROOT, Settings

__all__ = ["archive_java_options", "archive_path", "build_archive", "training_stamp"]

ARCHIVE_NAME = "reckon.jsa"
#: Unified-logging tags the archive's checks write to (a mismatch is a warning on stdout).
_QUIET_CDS = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def _jars_root(settings: Settings) -> Path:
    base = Path(settings.jars_dir).expanduser()
    return base if base.is_absolute() else PROJECT_ROOT / base


def archive_path(settings: Settings) -> Path:
    """Where ``make setup`` puts the archive: next to the jars it was trained with."""
    return _jars_root(settings) / "class-archive" / ARCHIVE_NAME


def archive_java_options(settings: Settings) -> list[str]:
    """The driver JVM options that map the archive in, or none (setting off, or not built)."""
    path = archive_path(settings)
    if not settings.spark_class_archive or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", *_QUIET_CDS]


def training_stamp(settings: Settings) -> str:
    """What the archive depends on: the java binary, every jar on the driver's class path and
    in ``spark.jars`` (name, size, mtime), and this module. A different stamp: train again."""
    import pyspark

    java = shutil.which("java", path=os.path.join(os.environ.get("JAVA_HOME", ""), "bin")) \
        or shutil.which("java") or "java"
    jars = sorted([*Path(pyspark.__file__).parent.joinpath("jars").glob("*.jar"),
                   *_jars_root(settings).glob("*/*.jar")])
    digest = hashlib.sha256(os.path.realpath(java).encode())
    for jar in jars:
        info = jar.stat()
        digest.update(f"{jar.name}:{info.st_size}:{info.st_mtime_ns}\n".encode())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()


def build_archive(settings: Settings, *, say: Callable[[str], None] = print) -> Path | None:
    """Train the archive in a child process unless its stamp is current; returns its path,
    or None when the training failed (said in one line; reckon then starts without it)."""
    target = archive_path(settings)
    stamp_file = target.with_suffix(".stamp")
    stamp = training_stamp(settings)
    if target.is_file() and stamp_file.is_file() and stamp_file.read_text() == stamp:
        say("the JVM class archive is current")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    say(f"training the JVM class archive {target} (once; about a minute)")
    with tempfile.TemporaryDirectory(prefix="reckon-cds-") as work:
        dumped = Path(work) / ARCHIVE_NAME
        env = {**os.environ, "SPARK_SUBMIT_OPTS": " ".join(
            [os.environ.get("SPARK_SUBMIT_OPTS", ""), f"-XX:ArchiveClassesAtExit={dumped}",
             *_QUIET_CDS]).strip(), "RECKON_SPARK_CLASS_ARCHIVE": "false"}
        done = subprocess.run([sys.executable, "-m", "spark.class_archive", "train", work],
                              env=env, cwd=PROJECT_ROOT, capture_output=True, text=True,
                              check=False)
        if done.returncode != 0 or not dumped.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            say(f"the JVM class archive was not built ({last}); reckon starts without it")
            return None
        os.replace(dumped, target)
    stamp_file.write_text(stamp)
    return target


def _train(work: Path) -> None:
    """One JVM through what reckon's commands do: a small stream, then a day's compaction,
    replay, audit, check and report; the JVM dumps what it loaded when it exits."""
    from reckon import pipeline
    from reckon.config import load_settings
    from reckon.demo import DEMO_DAY, demo_generator_config
    from reckon.generate import generate_landing
    from spark.sources import StreamSource

    manifest = generate_landing(work / "landing", demo_generator_config(1_000))
    settings = load_settings(env={}, warehouse=str(work / "wh"), max_files_per_trigger=2,
                             spark_class_archive=False,
                             expected_partitions=tuple(manifest.expected_partitions))
    pipeline.stream(settings, StreamSource(landing=str(work / "landing")), note=lambda _: None,
                    on_start=lambda _s: (lambda _m: None))
    for step in (pipeline.run_compact, pipeline.run_replay, pipeline.run_audit,
                 pipeline.run_check, pipeline.run_report):
        step(settings, DEMO_DAY)
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is not None:
        jvm_process = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
        spark.stop()
        jvm_process.stdin.close()  # the gateway exits on end of input: the archive is written
        jvm_process.wait()


def main(argv: list[str]) -> int:
    """``python -m spark.class_archive build`` (what ``make setup`` runs); ``train DIR`` is
    the child process ``build`` starts."""
    if argv[:1] == ["train"] and len(argv) == 2:
        _train(Path(argv[1]))
        return 0
    if argv == ["build"]:
        from reckon.config import load_settings

        jars = {"jars_dir": os.environ["RECKON_JARS_DIR"]} if "RECKON_JARS_DIR" in os.environ \
            else {}
        build_archive(load_settings(env={}, **jars), say=lambda line: print(f"[setup] {line}"))
        return 0
    print("usage: python -m spark.class_archive build", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
