"""A real single-node Kafka (KRaft, combined broker + controller) for the Kafka tier.

Started from the jars ``make setup`` fetched with mvn into ``<jars_dir>/kafka-broker`` (no
Docker, no ZooKeeper): ``java -cp '<jars>/*' kafka.Kafka server.properties`` after formatting
the log directory with ``kafka.tools.StorageTool format --standalone``. Both listeners bind
127.0.0.1 only, on free ports picked at start; data lives in a temporary directory that
``close()`` removes. ``stop()`` + ``start()`` restart the SAME broker (same data directory,
same ports, same cluster id), which is how the tests restart a broker under a running stream.

Also: ``produce_events`` writes scenario events to a topic, one Kafka partition per event's
``partition``, and returns where Kafka put each one.
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from reckon.config import PROJECT_ROOT
from reckon.errors import ConfigError, ReckonError, UsageError
from reckon.reference import Event
from tests.streamkit import event_line

__all__ = [
    "DEFAULT_JARS_DIR",
    "KafkaBroker",
    "KafkaBrokerError",
    "Placement",
    "broker_jars",
    "kafka_broker",
    "produce_events",
]

DEFAULT_JARS_DIR = PROJECT_ROOT / ".cache" / "jars" / "kafka-broker"
_START_TIMEOUT = 180.0  # seconds; generous: a JVM on a busy 2-core machine
_STOP_TIMEOUT = 20.0


class KafkaBrokerError(ReckonError):
    """The test broker could not be started, reached or stopped."""


def broker_jars(jars_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding the broker's jars; raises with what to run when they are missing."""
    folder = Path(jars_dir) if jars_dir else Path(
        os.environ.get("RECKON_JARS_DIR", PROJECT_ROOT / ".cache" / "jars")) / "kafka-broker"
    if not any(folder.glob("kafka_2.13-*.jar")) or not any(folder.glob("kafka-clients-*.jar")):
        raise ConfigError(
            f"the Kafka broker jars are missing from {folder} (looked for kafka_2.13-*.jar and "
            "kafka-clients-*.jar). Run `make setup` (scripts/setup.sh) to fetch them with mvn.")
    return folder


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """Runs in the child before exec (Linux): the broker gets SIGTERM when the process that
    started it dies, however it dies, so no JVM outlives a killed test run."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def _cluster_id() -> str:
    """Kafka's cluster id format: a UUID as 22 characters of URL-safe base64 (Kafka, too,
    never issues one starting with '-': command lines would read it as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
"""


class KafkaBroker:
    """One KRaft broker process on loopback. Use as a context manager, or ``start()`` /
    ``stop()`` (keeps data and ports, for restarts) / ``close()`` (stops and deletes data)."""

    def __init__(self, jars_dir: str | os.PathLike[str] | None = None, *,
                 heap: str = "512m", log_level: str = "WARN") -> None:
        self.jars = broker_jars(jars_dir)
        self.heap = heap
        self.workdir = Path(tempfile.mkdtemp(prefix="reckon-kafka-"))
        self.port = _free_port()
        self.controller_port = _free_port()
        while self.controller_port == self.port:
            self.controller_port = _free_port()
        self.cluster_id = _cluster_id()
        self.config = self.workdir / "server.properties"
        self.log_file = self.workdir / "broker.log"
        (self.workdir / "log4j2.properties").write_text(
            _LOG4J2.format(log=self.log_file, level=log_level))
        self.config.write_text(self._properties())
        self._process: subprocess.Popen[bytes] | None = None
        self._formatted = False
        atexit.register(self.close)  # no orphaned JVM if the test process ends abruptly

    # ------------------------------------------------------------------ configuration
    @property
    def bootstrap(self) -> str:
        """``host:port`` of the client listener (what Spark and the producer connect to)."""
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _properties(self) -> str:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.flush.interval.messages": "1",   # data survives a SIGKILL, not only SIGTERM
            # scenario events carry fixed past or future arrival times as record timestamps:
            # keep every record whatever its timestamp (time retention would delete them)
            "log.retention.ms": "-1",
            "log.message.timestamp.before.max.ms": str(2**63 - 1),
            "log.message.timestamp.after.max.ms": str(2**63 - 1),
        }
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _java(self, main: str, *args: str) -> list[str]:
        return ["java", f"-Xmx{self.heap}", "-Xms64m", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.workdir}",
                "-cp", f"{self.jars}/*", main, *args]

    # ------------------------------------------------------------------ lifecycle
    def _format(self) -> None:
        cmd = self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                         "-c", str(self.config), "--standalone")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise KafkaBrokerError(
                f"formatting the KRaft log directory failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-2000:]}")
        self._formatted = True

    def start(self, timeout: float = _START_TIMEOUT) -> KafkaBroker:
        """Start (or restart) the broker and wait until it answers a metadata request."""
        if self.running:
            return self
        if not self.workdir.is_dir():
            raise UsageError(f"broker workdir {str(self.workdir)!r} was removed: it was closed")
        if not self._formatted:
            self._format()
        out = (self.workdir / "stdout.log").open("ab")
        try:
            self._process = subprocess.Popen(
                self._java("kafka.Kafka", str(self.config)), stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=_die_with_parent)
        finally:
            out.close()
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if not self.running:
                raise KafkaBrokerError(f"the broker exited during start-up:\n{self.tail()}")
            try:  # the cheap check first: kafka-python backs off for long on refused ports
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            except OSError as exc:
                last = exc
                time.sleep(0.2)
                continue
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                         request_timeout_ms=5000, client_id="reckon-wait")
                try:
                    if admin.describe_cluster().get("brokers"):
                        return
                finally:
                    admin.close()
            except (KafkaError, OSError) as exc:
                last = exc
            time.sleep(0.5)
        self.stop()
        raise KafkaBrokerError(f"the broker did not answer on {self.bootstrap} within "
                               f"{timeout:.0f}s (last error: {last!r}):\n{self.tail()}")

    def stop(self, timeout: float = _STOP_TIMEOUT) -> None:
        """SIGTERM (a controlled shutdown), then SIGKILL after ``timeout``. Keeps the data."""
        proc, self._process = self._process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def restart(self, timeout: float = _START_TIMEOUT) -> KafkaBroker:
        """Stop and start the same broker: same data directory, ports and cluster id."""
        self.stop()
        return self.start(timeout)

    def close(self) -> None:
        """Stop the broker and delete its data directory."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
        atexit.unregister(self.close)

    def __enter__(self) -> KafkaBroker:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tail(self, lines: int = 40) -> str:
        """The end of the broker's logs, for error messages."""
        text = []
        for name in ("stdout.log", "broker.log"):
            path = self.workdir / name
            if path.is_file():
                text += path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(text)

    # ------------------------------------------------------------------ topics
    def create_topic(self, name: str, partitions: int = 1, timeout: float = 30.0) -> str:
        """Create a topic and wait until every partition has a leader."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        if partitions < 1:
            raise UsageError(f"partitions={partitions!r} is not valid: it must be >= 1")
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="reckon-admin")
        try:
            admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=int(timeout * 1000))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                topics = admin.describe_topics([name])
                parts = topics[0].get("partitions", []) if topics else []
                if len(parts) == partitions and all(p.get("leader_id", -1) >= 0 for p in parts):
                    return name
                time.sleep(0.2)
        finally:
            admin.close()
        raise KafkaBrokerError(f"topic {name!r} has no leader for every partition after "
                               f"{timeout:.0f}s")


@contextmanager
def kafka_broker(jars_dir: str | os.PathLike[str] | None = None, **kwargs: str
                 ) -> Iterator[KafkaBroker]:
    """A started broker for the duration of the block; stopped and deleted afterwards."""
    with KafkaBroker(jars_dir, **kwargs) as broker:
        yield broker


@dataclass(frozen=True)
class Placement:
    """Where Kafka stored one produced event."""

    event_id: str
    partition: int
    offset: int
    timestamp_ms: int


def produce_events(bootstrap: str, topic: str, events: Iterable[Event] | Sequence[Event], *,
                   transport_fields: bool = False) -> list[Placement]:
    """Produce events in the given order, each to Kafka partition ``event.partition``.

    The value is ``tests.streamkit.event_line(event)``. With ``transport_fields=True`` the line
    carries neither ``partition`` nor ``arrival_time``: the stream must then take them from
    Kafka's metadata, so the record timestamp is set to the event's arrival time (Kafka keeps
    milliseconds, so arrival times must be whole milliseconds). Idempotent producer, acks=all,
    one in-flight request: per-partition order is the given order. Returns each placement.
    """
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all",
                             enable_idempotence=True, max_in_flight_requests_per_connection=1,
                             linger_ms=0, retries=10)
    try:
        futures = []
        for e in events:
            if transport_fields and e.arrival_time % 1000:
                raise UsageError(f"arrival_time={e.arrival_time!r} of {e.event_id!r} is not "
                                 "valid with transport_fields=True: Kafka timestamps are whole "
                                 "milliseconds")
            line = event_line(e)
            if transport_fields:
                doc = json.loads(line)
                del doc["partition"], doc["arrival_time"]
                line = json.dumps(doc, separators=(",", ":"))
            futures.append((e, producer.send(topic, value=line.encode(), partition=e.partition,
                                             timestamp_ms=e.arrival_time // 1000)))
        producer.flush()
        placements = []
        for e, fut in futures:
            meta = fut.get(timeout=30)
            placements.append(Placement(e.event_id, meta.partition, meta.offset,
                                        meta.timestamp))
        return placements
    finally:
        producer.close()
