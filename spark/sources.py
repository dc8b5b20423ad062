"""Where the stream and the replay read: a landing folder of NDJSON files or a Kafka topic,
as rows of ``RAW_COLUMNS`` (one per line or record, with its transport's partition, offset,
time and file).

A landing folder is read in name order through admission (storage.admission): files are
admitted to a folder in the query's checkpoint, and Spark's file source reads that folder;
``sweep_committed_admissions`` removes what committed batches read. Kafka is read with Spark's
own source; partitions and offsets come from the broker's Admin client, so a batch read of a
topic (the replay) reads the same records however often it runs.

>>> StreamSource(landing="/data/in").describe()  # doctest: +SKIP
'landing folder /data/in'
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from reckon.engine_config import TriggerLimits
from reckon.errors import UsageError
from storage.admission import ADMISSION_POLL_SECONDS, LandingAdmitter
from storage.landing import EVENT_FILE_GLOB

__all__ = ["RAW_COLUMNS", "StreamSource", "kafka_offsets", "kafka_partitions",
           "kafka_raw_columns", "keep_admitting", "landing_admitter", "landing_lines",
           "sweep_committed_admissions"]

_BOM_LATIN = "\u00ef\u00bb\u00bf"  # a UTF-8 byte order mark's bytes, read as ISO-8859-1

#: The columns every source yields, one row per line or record.
RAW_COLUMNS = ("payload", "transport_partition", "offset", "transport_time", "input_file")


@dataclass(frozen=True)
class StreamSource:
    """Where the stream reads: a landing directory of NDJSON files, or a Kafka topic."""

    landing: str | None = None
    kafka_bootstrap: str | None = None
    topic: str | None = None

    def __post_init__(self) -> None:
        if bool(self.landing) == bool(self.kafka_bootstrap):
            raise UsageError("give exactly one source: --landing DIR or --kafka BOOTSTRAP")
        if self.kafka_bootstrap and not self.topic:
            raise UsageError("--kafka needs --topic")
        if self.landing and not Path(self.landing).is_dir():
            raise UsageError(f"--landing {self.landing!r} is not a directory")

    @property
    def name(self) -> str:
        return "landing" if self.landing else f"kafka-{self.topic}"

    def describe(self) -> str:
        """What a person calls it: ``landing folder /data/in``, ``Kafka topic events at
        broker:9092``."""
        if self.landing:
            return f"landing folder {Path(self.landing).resolve()}"
        return f"Kafka topic {self.topic} at {self.kafka_bootstrap}"

    def read(self, spark: SparkSession, limits: TriggerLimits,
             admitted: Path | None = None) -> DataFrame:
        """A streaming DataFrame with RAW_COLUMNS. The stream's landing source reads the
        folder its files are ``admitted`` to (storage.admission), in name order, and names each
        line's input_file by its landing path; Spark deletes each admitted file (never the
        landing file) once the batch that read it has committed. Without ``admitted``, the
        landing dir itself in Spark's own order (modification time; the benchmark's native
        contender reads it so). ``limits``: how much one trigger reads at most, e.g.
        ``source.read(spark, settings.trigger_limits())``."""
        if self.landing:
            reader = (spark.readStream.format("text").option("wholetext", "true")
                      .option("maxFilesPerTrigger", str(limits.max_files))
                      .option("maxFileAge", "36500d")
                      # event files only (admission takes nothing else; Spark skips names
                      # starting with '.' or '_': a file being admitted)
                      .option("pathGlobFilter", EVENT_FILE_GLOB))
            if admitted is None:
                return landing_lines(reader.load(str(Path(self.landing).resolve())))
            files = reader.option("cleanSource", "delete").load(str(admitted.resolve()))
            return landing_lines(files, shown_dir=_hadoop_uri(spark, Path(self.landing)))
        if not self.topic:  # __post_init__ already refuses --kafka without --topic
            raise UsageError("--kafka needs --topic")
        return (spark.readStream.format("kafka")
                .option("kafka.bootstrap.servers", self.kafka_bootstrap)
                .option("subscribe", self.topic)
                .option("startingOffsets", "earliest")
                .option("failOnDataLoss", "true")
                .option("maxOffsetsPerTrigger", str(limits.max_offsets))
                .load()
                .select(*kafka_raw_columns(self.topic)))


def _hadoop_uri(spark: SparkSession, folder: Path) -> str:
    """``folder`` as Spark's file source names it in ``_metadata.file_path``
    ('file:/work/landing', special characters percent-encoded)."""
    jvm: Any = spark._jvm
    return str(jvm.org.apache.hadoop.fs.Path(f"file:{folder.resolve()}").toUri().toString())


def landing_lines(files: DataFrame, shown_dir: str | None = None) -> DataFrame:
    """Landing files read by Spark's text source with ``wholetext`` (a row per file) as
    RAW_COLUMNS, a row per line: the stream's source, and a batch read of the same files (the
    benchmark feeds them to BatchProcessor directly). The file's path is its input_file (in
    ``shown_dir``, when given: the landing dir an admitted file came from), its modification
    time the transport time: ``files`` must come straight from the file source, whose
    ``_metadata`` column this reads."""
    path = F.col("_metadata.file_path")
    if shown_dir is not None:
        path = F.concat(F.lit(shown_dir.rstrip("/") + "/"), F.substring_index(path, "/", -1))
    files = files.select("value", path.alias("input_file"),
                         F.col("_metadata.file_modification_time").alias("transport_time"),
                         F.is_valid_utf8("value").alias("utf8"))
    # A file that is not all valid UTF-8 is cut into lines byte for byte: read as ISO-8859-1
    # (one character per byte; no UTF-8 sequence holds the bytes of '\n' or '\r'), split, and
    # each line encoded back to its own bytes. Splitting the text itself would decode it, and
    # every invalid byte would become U+FFFD: 'merchant-\xff' and 'merchant-\xfe' one key.
    # Each line's bytes reach the parser as they landed (quarantined as invalid_utf8).
    latin = F.decode(F.col("value").cast("binary"), "ISO-8859-1")
    # A UTF-8 byte order mark opens a file, not its first event (RFC 8259 section 8.1).
    # The file is split once, into a column: an expression over the whole text next
    # to the explode would be evaluated again for every line (quadratic in the file).
    # (Java tries a regex at every position of a text it does not match, even one
    # anchored with '^': both run only where a plain prefix or substring test says
    # they can match)
    text = (F.when(~F.col("utf8"), F.when(F.startswith(latin, F.lit(_BOM_LATIN)),
                                          F.substring(latin, len(_BOM_LATIN) + 1, 2**31 - 1))
                   .otherwise(latin))
            .when(F.startswith("value", F.lit("\ufeff")),
                  F.regexp_replace("value", "^\\x{FEFF}", "")).otherwise(F.col("value")))
    parts = files.select("input_file", "transport_time", "utf8",
                         F.split(text, "\n").alias("parts"))
    parts = parts.select("*", F.size("parts").alias("n"))
    lines = parts.select("input_file", "transport_time", "n", "utf8",
                         F.posexplode("parts").alias("offset", "line"))
    # one final '\r' (a CRLF file); a regex '\r$' would also take a '\r' before a final
    # U+0085 or U+2028, which Java's '$' counts as a line end
    line = F.when(F.endswith("line", F.lit("\r")),
                  F.col("line").substr(F.lit(1), F.length("line") - 1)).otherwise(F.col("line"))
    return (lines.filter(~((F.col("offset") == F.col("n") - 1) & (F.col("line") == "")))
            .select(F.when(F.col("utf8"), line)
                    .otherwise(F.encode(line, "ISO-8859-1").cast("string")).alias("payload"),
                    F.lit(None).cast("int").alias("transport_partition"),
                    F.col("offset").cast("long").alias("offset"),
                    "transport_time", "input_file"))


def _kafka_error(exc: Any, bootstrap: str, topic: str) -> UsageError:
    cause = str(exc.java_exception.toString())
    if "UnknownTopicOrPartition" in cause:
        return UsageError(f"--topic={topic!r} is not valid: no such topic on {bootstrap} "
                          "(create it, or check --topic / RECKON_KAFKA_TOPIC)")
    return UsageError(f"could not read topic {topic!r}'s metadata from {bootstrap} "
                      f"({cause.splitlines()[0]}): check --kafka / RECKON_KAFKA_BOOTSTRAP")


@contextmanager
def _kafka_admin(spark: SparkSession, bootstrap: str, topic: str,
                 timeout_seconds: int) -> Iterator[Any]:
    """A Kafka Admin client (the Kafka client Spark's Kafka source ships), closed on exit;
    a failed request is a UsageError saying what to check."""
    from py4j.protocol import Py4JJavaError

    jvm: Any = spark._jvm  # a py4j JVMView (typed Optional: None only once Spark is stopped)
    props = jvm.java.util.Properties()
    props.setProperty("bootstrap.servers", bootstrap)
    for name in ("request.timeout.ms", "default.api.timeout.ms"):
        props.setProperty(name, str(timeout_seconds * 1000))
    try:
        admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
    except Py4JJavaError as exc:
        raise _kafka_error(exc, bootstrap, topic) from None
    try:
        yield admin
    except Py4JJavaError as exc:
        raise _kafka_error(exc, bootstrap, topic) from None
    finally:
        admin.close()


def _topic_partitions(admin: Any, jvm: Any, topic: str, timeout_seconds: int) -> list[int]:
    described = admin.describeTopics(jvm.java.util.Collections.singletonList(topic))
    topics = described.allTopicNames().get(timeout_seconds,
                                            jvm.java.util.concurrent.TimeUnit.SECONDS)
    infos = topics.get(topic).partitions()
    return sorted(int(infos.get(i).partition()) for i in range(infos.size()))


def kafka_partitions(spark: SparkSession, bootstrap: str, topic: str,
                     timeout_seconds: int = 30) -> list[int]:
    """The partition numbers of ``topic``, from the broker's metadata. A Kafka stream expects
    every one of them before its watermark is defined: a partition still empty at start-up
    would otherwise not be waited for, and its first backlog would be judged against the
    others' watermark, i.e. late."""
    with _kafka_admin(spark, bootstrap, topic, timeout_seconds) as admin:
        return _topic_partitions(admin, spark._jvm, topic, timeout_seconds)


def kafka_offsets(spark: SparkSession, bootstrap: str, topic: str, *, latest: bool,
                  timeout_seconds: int = 30) -> dict[int, int]:
    """Partition -> the earliest (or latest: the next to be written) offset of ``topic`` now.
    A batch read given these as JSON offsets reads the same records however often it runs;
    given "earliest"/"latest" it asks the broker again at every action."""
    jvm: Any = spark._jvm  # a py4j JVMView (typed Optional: None only once Spark is stopped)
    spec = jvm.org.apache.kafka.clients.admin.OffsetSpec
    with _kafka_admin(spark, bootstrap, topic, timeout_seconds) as admin:
        partitions = _topic_partitions(admin, jvm, topic, timeout_seconds)
        wanted = jvm.java.util.HashMap()
        for p in partitions:
            wanted.put(jvm.org.apache.kafka.common.TopicPartition(topic, p),
                       spec.latest() if latest else spec.earliest())
        found = admin.listOffsets(wanted).all().get(timeout_seconds,
                                                    jvm.java.util.concurrent.TimeUnit.SECONDS)
        return {p: int(found.get(jvm.org.apache.kafka.common.TopicPartition(topic, p)).offset())
                for p in partitions}


def kafka_raw_columns(topic: str) -> list[Column]:
    """A Kafka record as RAW_COLUMNS: partition and offset from Kafka's own metadata, the
    record timestamp as transport time (the stream and the replay read the topic alike)."""
    return [F.col("value").cast("string").alias("payload"),
            F.col("partition").cast("int").alias("transport_partition"),
            F.col("offset").cast("long").alias("offset"),
            F.col("timestamp").alias("transport_time"),
            F.lit(topic).alias("input_file")]


def sweep_committed_admissions(checkpoint: Path, files_dir: Path) -> int:
    """Delete the admitted files of committed batches that Spark's ``cleanSource`` has not:
    it cleans a batch's files when it plans the next batch, so the last batch of a run keeps
    them. Reads the checkpoint's source log (``sources/0``: a ``v1`` line, then a JSON line per
    file with its batchId) and commit log. Returns how many files it deleted."""
    commits = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*") if p.name.isdigit()]
    if not commits:
        return 0
    committed, deleted = max(commits), 0
    for log in (checkpoint / "sources" / "0").glob("[0-9]*"):
        for line in log.read_text().splitlines()[1:]:
            entry = json.loads(line) if line.startswith("{") else {}
            if entry.get("batchId", committed + 1) > committed:
                continue
            admitted = files_dir / unquote(str(entry["path"]).rsplit("/", 1)[-1])
            if admitted.is_file():
                admitted.unlink()
                deleted += 1
    return deleted


def landing_admitter(source: StreamSource, checkpoint: Path) -> LandingAdmitter | None:
    """The admission step of a landing source (storage.admission), kept in the checkpoint;
    None for Kafka. A checkpoint whose query read the landing dir directly (before admission)
    is refused: read through admission, every file it read would be read again."""
    if not source.landing:
        return None
    state = checkpoint / "admitted"
    if not state.exists() and any((checkpoint / "commits").glob("[0-9]*")):
        raise UsageError(
            f"checkpoint {checkpoint} was written by a reckon that read the landing dir "
            "directly, not in name order: finish that stream with the reckon that started it, "
            "or stream the landing dir into a new --warehouse")
    return LandingAdmitter(Path(source.landing), state)


def keep_admitting(query: Any, admitter: LandingAdmitter) -> _Admitting:
    """Admit new landing files every ADMISSION_POLL_SECONDS while ``query`` runs. A failure
    stops the query, and ``spark.stream.run_stream`` raises it, rather than leaving files unread."""
    failed: list[str] = []

    def look() -> None:
        while query.isActive:
            try:
                admitter.admit()
            except (OSError, UsageError) as exc:
                failed.append(str(exc))
                query.stop()
                return
            time.sleep(ADMISSION_POLL_SECONDS)

    thread = threading.Thread(target=look, name="reckon-landing-admission", daemon=True)
    thread.start()
    return _Admitting(thread=thread, failed=failed)


@dataclass(frozen=True)
class _Admitting:
    """The thread that admits landing files while a triggered stream runs."""

    thread: threading.Thread
    failed: list[str]

    def join(self) -> None:
        """Wait for the thread (it ends with the query); raise what stopped it, if anything."""
        self.thread.join()
        if self.failed:
            raise UsageError(f"the stream stopped: admitting landing files failed: "
                             f"{self.failed[0]}")
