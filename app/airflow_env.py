"""Run the real nightly DAG on this machine: an Airflow home, and one DAG run per day.

Airflow reads its configuration once per process, from the environment and
``$AIRFLOW_HOME/airflow.cfg``. So the DAG run happens in a fresh subprocess of this Python
(the venv's), with exactly the environment ``prepare_airflow_home`` returns: a SQLite
metadata DB inside the home, this repository's ``dags/`` folder, no example DAGs. The run
itself is ``dag.test(logical_date=...)``: the real DAG file, parsed by Airflow's DagBag, its
tasks executed in-process one after another (no scheduler, no executor), with their XCom,
retries and callbacks. Retries default to 0 here (``RECKON_AIRFLOW_RETRIES``) so that a
failure shows at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.settings import load_settings
from reckon.config import PROJECT_ROOT, Settings
from reckon.errors import ReckonError, invalid

__all__ = ["DAG_ID", "DagRunOutcome", "logical_date_for_day", "prepare_airflow_home",
           "run_dag_for_day", "run_note", "settings_env"]

DAG_ID = "reckon_nightly"
DAGS_FOLDER = PROJECT_ROOT / "dags"
#: Airflow plugins of this repository: the run-note listener (plugins/reckon_run_notes.py)
PLUGINS_FOLDER = PROJECT_ROOT / "plugins"
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_STAMP = ".reckon-db-migrated"
_TAIL_LINES = 60
_TASK_START = "[DAG TEST] starting task_id="


def _airflow_version() -> str:
    from importlib.metadata import version

    return version("apache-airflow-core")


def prepare_airflow_home(path: str | os.PathLike[str], *, migrate: bool = True
                         ) -> dict[str, str]:
    """Create an Airflow home at ``path``, migrate its SQLite DB once, return its environment.

    Idempotent: the migration runs when the stamp file is missing or names another Airflow
    version, under a file lock (two callers on one home do not migrate twice at once).
    ``migrate=False`` skips it (parsing DAGs needs no database). Raises ReckonError with
    Airflow's output when the migration fails.
    """
    home = Path(path).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        # the listener that notes a manual run's day (the UI's trigger form sets no run id)
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        # dag.test() without use_executor runs tasks in-process and needs no executor; the
        # setting only has to be valid. LocalExecutor is what `airflow standalone` uses.
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        # LocalExecutor starts this many worker processes at once (default 32): one per core
        "AIRFLOW__CORE__PARALLELISM": str(max(2, os.cpu_count() or 2)),
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "TZ": "UTC",
    }
    if not migrate:
        return env
    stamp = home / _STAMP
    wanted = _airflow_version()
    with (home / ".migrate.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.is_file() or stamp.read_text().strip() != wanted:
            done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"],
                                  env={**os.environ, **env}, capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                tail = "\n".join((done.stdout + done.stderr).splitlines()[-_TAIL_LINES:])
                raise ReckonError(f"`airflow db migrate` failed for AIRFLOW_HOME={home} "
                                  f"(exit {done.returncode}):\n{tail}")
            stamp.write_text(wanted + "\n")
    return env


def run_note(conf: Mapping[str, Any] | None) -> str | None:
    """The note a nightly run gets when its conf names the day it processes: the grid and
    the run's page then say which day a manual run was for (a scheduled run's id and logical
    date already do). None when the conf names no day (or no valid one).

    >>> run_note({"day": "2026-01-01", "lookback_days": 0})
    'day 2026-01-01'
    >>> run_note({}) is None and run_note({"day": "tomorrow"}) is None
    True
    """
    day = (conf or {}).get("day")
    return f"day {day}" if isinstance(day, str) and _DAY.match(day) else None


def settings_env(settings: Settings) -> dict[str, str]:
    """The settings a user set (``Settings.user_set``), as RECKON_* variables, so a
    subprocess (or an Airflow worker) loads exactly the same configuration with
    ``load_settings()``; the warehouse always, as an absolute path. A default is never
    exported: the worker would take it as set by the user, and a step on a warehouse whose
    spec differs from the defaults (the demo's expected partitions) would be refused.
    Includes the report DB URL unredacted: pass it only to processes of the same user.

    >>> sorted(settings_env(load_settings(env={}, window="1m", warehouse="/wh")))
    ['RECKON_WAREHOUSE', 'RECKON_WINDOW']
    """
    env: dict[str, str] = {"RECKON_WAREHOUSE": str(settings.warehouse_path)}
    for name, value in settings.user_set().items():
        if name == "warehouse":
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, tuple):
            text = ",".join(str(v) for v in value)
        elif isinstance(value, Mapping):  # JSON: a value may hold a comma
            text = json.dumps(dict(value), sort_keys=True)
        elif isinstance(value, Decimal | int | str):
            text = str(value)
        else:  # pragma: no cover - every Settings field is one of the kinds above
            raise TypeError(f"setting {name} has an unexpected type {type(value).__name__}")
        env["RECKON_" + name.upper()] = text
    return env


@dataclass(frozen=True)
class DagRunOutcome:
    """What one ``dag.test`` run did: the run's state, each task's state and return value."""

    day: str
    logical_date: str
    run_id: str
    state: str
    task_states: dict[str, str]
    returns: dict[str, Any] = field(default_factory=dict)
    duration_seconds: float = 0.0
    returncode: int = 0
    log_path: str = ""
    log_tail: str = ""
    dag_id: str = DAG_ID

    @property
    def succeeded(self) -> bool:
        return (self.returncode == 0 and self.state == "success" and bool(self.task_states)
                and all(s == "success" for s in self.task_states.values()))

    def describe(self) -> str:
        tasks = ", ".join(f"{t}={s}" for t, s in self.task_states.items()) or "no tasks ran"
        return f"{self.dag_id} for {self.day}: {self.state} ({tasks}); log: {self.log_path}"


def logical_date_for_day(day: date) -> datetime:
    """The logical date of the nightly run that processes UTC ``day``: its midnight, as for the
    scheduled run of the interval ``[day, day + 1)``, a backfill of ``day`` and
    ``airflow dags trigger --logical-date day`` (``app.pipeline.nightly_days``)."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


# Runs inside the subprocess: parse dags/ with Airflow's own DagBag, dag.test one day, write
# what happened as JSON. Airflow's log lines go to the subprocess's stdout/stderr (log file).
_RUNNER = r"""
import json, sys, traceback
from datetime import datetime

logical_date = datetime.fromisoformat(sys.argv[1])
conf = json.loads(sys.argv[2])
out_path = sys.argv[3]
result = {"state": "failed", "run_id": "", "task_states": {}, "returns": {}, "error": ""}
try:
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[4])
    if bag.import_errors:
        raise RuntimeError(f"DAG import errors: {bag.import_errors}")
    dag = bag.dags.get(sys.argv[5])
    if dag is None:
        raise RuntimeError(f"no DAG {sys.argv[5]!r} in {sys.argv[4]}")
    dr = dag.test(logical_date=logical_date, run_conf=conf)
    result["state"] = str(getattr(dr.state, "value", dr.state))
    result["run_id"] = dr.run_id
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    with create_session() as session:
        for ti in dr.get_task_instances(session=session):
            result["task_states"][ti.task_id] = str(getattr(ti.state, "value", ti.state))
        query = XComModel.get_many(run_id=dr.run_id, dag_ids=dag.dag_id, key="return_value")
        for xcom in session.scalars(query):
            result["returns"][xcom.task_id] = XComModel.deserialize_value(xcom)
except BaseException as exc:
    result["error"] = "".join(traceback.format_exception(exc))
finally:
    with open(out_path, "w") as fh:
        json.dump(result, fh, default=str)
"""


def _wait(proc: subprocess.Popen[bytes], log_path: Path, deadline: float,
          on_task_start: Callable[[str], None] | None) -> int:
    """Wait for the runner, reporting task starts from its log; TimeoutExpired at deadline."""
    seen = 0
    while True:
        try:
            return proc.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
        if on_task_start is not None:
            with log_path.open("rb") as fh:
                fh.seek(seen)
                chunk = fh.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            seen += len(complete)
            for line in complete.decode(errors="replace").splitlines():
                if _TASK_START in line:
                    on_task_start(line.split(_TASK_START, 1)[1].split()[0])


def run_dag_for_day(day: date, settings_env: Mapping[str, str], *,
                    airflow_home: str | os.PathLike[str] | None = None,
                    lookback_days: int | None = None,
                    run_conf: Mapping[str, Any] | None = None,
                    timeout_seconds: float = 1800.0,
                    on_task_start: Callable[[str], None] | None = None,
                    dag_id: str = DAG_ID) -> DagRunOutcome:
    """Run the real ``reckon_nightly`` DAG (or another of dags/) for UTC ``day`` with
    ``dag.test`` in a subprocess.

    ``settings_env`` is the reckon configuration as RECKON_* variables (at least
    RECKON_WAREHOUSE, made absolute here); it is layered over this process's environment and
    the Airflow home's. The home defaults to ``<warehouse>/_airflow``. ``lookback_days`` is
    passed as the run's param (default: the DAG's default); ``run_conf`` adds other params.
    ``on_task_start`` is called with each task id as the run starts it (read from the log).
    Raises ReckonError when the
    subprocess does not finish within ``timeout_seconds``; a failed run is returned, not
    raised (its task states say which step failed, its log has why).
    """
    if lookback_days is not None and lookback_days < 0:
        raise invalid("lookback_days", lookback_days, "a number of days >= 0")
    settings = load_settings(env=dict(settings_env))
    reckon_env = {k: v for k, v in settings_env.items() if k.startswith("RECKON_")}
    reckon_env["RECKON_WAREHOUSE"] = str(settings.warehouse_path)
    reckon_env.setdefault("RECKON_AIRFLOW_RETRIES", "0")
    home = Path(airflow_home) if airflow_home else settings.warehouse_path / "_airflow"
    env = {**os.environ, **prepare_airflow_home(home), **reckon_env}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([venv_bin, env.get("PATH", "")])  # spark-submit, airflow
    env.setdefault("AIRFLOW_CONN_RECKON_SPARK",
                   json.dumps({"conn_type": "spark", "host": settings.spark_master}))
    logical = logical_date_for_day(day)
    conf = dict(run_conf or {})
    if lookback_days is not None:
        conf["lookback_days"] = lookback_days
    logs = Path(env["AIRFLOW_HOME"]) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    log_path = logs / f"dag-test-{day.isoformat()}-{stamp}.log"
    out_path = logs / f"dag-test-{day.isoformat()}-{stamp}.json"
    cmd = [sys.executable, "-c", _RUNNER, logical.isoformat(), json.dumps(conf), str(out_path),
           str(DAGS_FOLDER), dag_id]
    started = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                cwd=str(PROJECT_ROOT), start_new_session=True)
        try:
            returncode = _wait(proc, log_path, started + timeout_seconds, on_task_start)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise ReckonError(f"{dag_id} for {day} did not finish within {timeout_seconds:.0f}s "
                              f"(stopped); log: {log_path}") from None
    duration = time.monotonic() - started
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-_TAIL_LINES:])
    result: dict[str, Any] = (json.loads(out_path.read_text()) if out_path.is_file()
                              else {"state": "failed", "error": "the runner wrote no result"})
    if result.get("error"):
        tail = f"{tail}\n{result['error']}"
    return DagRunOutcome(
        day=day.isoformat(), logical_date=logical.isoformat(),
        run_id=str(result.get("run_id", "")), state=str(result.get("state", "failed")),
        task_states=dict(result.get("task_states", {})), returns=dict(result.get("returns", {})),
        duration_seconds=round(duration, 1), returncode=returncode, log_path=str(log_path),
        log_tail=tail, dag_id=dag_id)
