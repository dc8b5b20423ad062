"""The driver JVM's class-data archive: Spark, Delta and reckon's classes, parsed and verified
once at setup instead of at every start.

Why: each ``reckon`` command, nightly task and test subprocess starts its own driver JVM, which
loads about 24,000 classes before its first query; a third of a small day's replay is that
start. A HotSpot dynamic CDS archive (JDK 13+) holds the classes a representative run loaded,
already parsed and verified, and every later JVM maps it in. ``make setup`` trains it once per
checkout (``python -m app.jvm_archive build``: a small stream and a nightly day in one JVM,
dumped at exit). The JVM checks the archive against its own version and class path and ignores it,
silently, when they differ; setting ``spark_class_archive = false`` never uses it.

Example::

    >>> from reckon.config import settings_of
    >>> archive_java_options(settings_of(spark_class_archive=False))
    []
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from reckon.config import PROJECT_ROOT, Settings

__all__ = ["ARCHIVE_NAME", "QUIET_CDS", "archive_java_options", "archive_path", "training_stamp"]

ARCHIVE_NAME = "reckon.jsa"
#: Unified-logging tags the archive's checks write to (a mismatch is a warning on stdout).
QUIET_CDS = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


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
    return [f"-XX:SharedArchiveFile={path}", *QUIET_CDS]


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
    digest.update(Path(__file__).parent.parent.joinpath("app", "jvm_archive.py").read_bytes())
    return digest.hexdigest()
