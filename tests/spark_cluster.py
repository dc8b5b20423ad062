"""A real Spark standalone cluster on loopback, started from the pyspark installation: one
master and N workers as separate JVMs (``spark-class ...deploy.master.Master`` / ``Worker``), so
the scale-out path (``spark://`` master, executors in other processes fetching ``spark.jars``,
Python workers launched by executors) is exercised without Docker.

Everything binds to 127.0.0.1 on free ports; work, log and local dirs live in one temporary
folder; every process runs in its own process group and is stopped (SIGTERM, then SIGKILL) when
the context ends, even after a failure.

    with spark_cluster(workers=2) as cluster:
        env = {**os.environ, "RECKON_SPARK_MASTER": cluster.master_url}
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reckon.errors import ConfigError

__all__ = ["SparkCluster", "cluster_state", "free_port", "spark_cluster", "spark_home"]

HOST = "127.0.0.1"


@dataclass(frozen=True)
class SparkCluster:
    """A running cluster: where to connect, where its logs are."""

    master_url: str          # spark://127.0.0.1:<port>
    webui_url: str           # http://127.0.0.1:<port>  (JSON at /json/)
    workers: int
    cores_per_worker: int
    base_dir: Path           # work, logs and local dirs

    def state(self) -> dict[str, Any]:
        return cluster_state(self.webui_url)

    def logs(self, tail: int = 40) -> str:
        """The last lines of every daemon log: for failure messages."""
        parts = []
        for log in sorted((self.base_dir / "logs").glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-tail:]
            parts.append(f"--- {log.name}\n" + "\n".join(lines))
        return "\n".join(parts)


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark package (has bin/spark-class)."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file():
        raise ConfigError(f"pyspark at {home} has no bin/spark-class: install the full pyspark "
                          "package (pip install pyspark), not pyspark-client")
    return home


def free_port() -> int:
    """A TCP port free on loopback right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def cluster_state(webui_url: str, timeout: float = 5.0) -> dict[str, Any]:
    """The master's JSON status (workers, cores, running applications)."""
    with urllib.request.urlopen(f"{webui_url}/json/", timeout=timeout) as resp:
        return dict(json.loads(resp.read().decode()))


def _env(base: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=HOST,
        SPARK_LOCAL_HOSTNAME="localhost",
        SPARK_WORKER_DIR=str(base / "work"),
        SPARK_LOG_DIR=str(base / "logs"),
        SPARK_LOCAL_DIRS=str(base / "local"),
        SPARK_PID_DIR=str(base / "pids"),
        SPARK_NO_DAEMONIZE="1",
        PYSPARK_PYTHON=sys.executable,
        SPARK_DAEMON_MEMORY="256m",
    )
    env.pop("SPARK_CONF_DIR", None)
    return env


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the process group, SIGKILL it if it is still there after ``grace`` seconds."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):  # executors the worker forked, if any remain
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


@contextlib.contextmanager
def spark_cluster(workers: int = 2, cores: int = 1, memory: str = "1g",
                  timeout: float = 240.0) -> Iterator[SparkCluster]:
    """Start a master and ``workers`` workers on loopback; yield once every worker is ALIVE.

    Raises TimeoutError (with the daemon logs) if they do not register within ``timeout``."""
    if workers < 1:
        raise ValueError(f"workers={workers} is not valid: give at least 1")
    base = Path(tempfile.mkdtemp(prefix="reckon-spark-cluster-"))
    for sub in ("work", "logs", "local", "pids"):
        (base / sub).mkdir()
    env = _env(base)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, ui_port = free_port(), free_port()
    master_url, webui_url = f"spark://{HOST}:{port}", f"http://{HOST}:{ui_port}"
    procs: list[subprocess.Popen[bytes]] = []
    cluster = SparkCluster(master_url, webui_url, workers, cores, base)
    try:
        procs.append(_start([spark_class, "org.apache.spark.deploy.master.Master",
                             "--host", HOST, "--port", str(port), "--webui-port", str(ui_port)],
                            env, base / "logs" / "master.log"))
        for i in range(workers):
            procs.append(_start([spark_class, "org.apache.spark.deploy.worker.Worker", master_url,
                                 "--cores", str(cores), "--memory", memory, "--host", HOST,
                                 "--webui-port", str(free_port()),
                                 "--work-dir", str(base / "work" / f"worker-{i}")],
                                env, base / "logs" / f"worker-{i}.log"))
        deadline = time.monotonic() + timeout
        while True:
            dead = [p.args for p in procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a cluster daemon exited at start: {dead}\n{cluster.logs()}")
            with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
                alive = [w for w in cluster.state().get("workers", [])
                         if w.get("state") == "ALIVE"]
                if len(alive) >= workers:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{workers} workers did not register with {master_url} "
                                   f"within {timeout:.0f}s\n{cluster.logs()}")
            time.sleep(0.5)
        yield cluster
    finally:
        for proc in reversed(procs):  # workers first (they stop their executors), then master
            _stop(proc)
        shutil.rmtree(base, ignore_errors=True)
