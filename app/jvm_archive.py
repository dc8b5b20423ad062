"""Training the driver JVM's class-data archive (spark/class_archive.py says why): ``make
setup`` runs ``python -m app.jvm_archive build``, which trains it in a child process unless
it is current.

Example::

    python -m app.jvm_archive build   # [setup] the JVM class archive is current
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from reckon.config import PROJECT_ROOT, Settings
from spark.class_archive import ARCHIVE_NAME, QUIET_CDS, archive_path, training_stamp

__all__ = ["build_archive", "main"]


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
             *QUIET_CDS]).strip(), "RECKON_SPARK_CLASS_ARCHIVE": "false"}
        done = subprocess.run([sys.executable, "-m", "app.jvm_archive", "train", work],
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
    from app import pipeline
    from app.demo import DEMO_DAY, demo_generator_config
    from app.generate import generate_landing
    from app.settings import load_settings
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
        from app.settings import load_settings

        jars = {"jars_dir": os.environ["RECKON_JARS_DIR"]} if "RECKON_JARS_DIR" in os.environ \
            else {}
        build_archive(load_settings(env={}, **jars), say=lambda line: print(f"[setup] {line}"))
        return 0
    print("usage: python -m app.jvm_archive build", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
