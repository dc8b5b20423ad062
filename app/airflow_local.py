"""A real Airflow on loopback: scheduler, dag-processor, triggerer and api-server, as users run it.

``app.airflow_env.run_dag_for_day`` runs the DAG with ``dag.test``: one process, no
scheduler, no executor, no API. That proves the tasks but not the deployment: the scheduler
queueing the run, the LocalExecutor forking workers, the task processes talking to the
execution API with a JWT, the triggerer taking deferred sensors, the REST API and its auth.
This module starts that deployment from the venv, on this machine only:

* the Airflow home of ``prepare_airflow_home`` (SQLite metadata DB inside it, this
  repository's ``dags/``, DB migrated once); LocalExecutor with SQLite is supported in
  Airflow 3 (it is what ``airflow standalone`` runs): task processes never open the DB, they
  call the api-server's execution API;
* the four components as subprocesses of this Python, each in its own session (so that
  ``stop`` finds and kills every process it spawned, task processes and Spark JVMs too), their
  output in ``<home>/process-logs/<name>.log``;
* the api-server on 127.0.0.1 and a free port, the SimpleAuthManager (Airflow 3's default)
  with one admin user whose password this module writes, a JWT secret shared by the
  api-server (which checks task tokens) and the scheduler (which signs them).

Example::

    from app.airflow_env import logical_date_for_day, settings_env
    with start_local_airflow(tmp / "airflow", settings_env(settings)) as af:
        run_id = af.trigger("reckon_nightly", logical_date_for_day(day),
                            conf={"lookback_days": 0})
        assert af.wait("reckon_nightly", run_id, timeout=900) == "success"
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from app.airflow_env import DAG_ID, prepare_airflow_home, run_note
from reckon.config import PROJECT_ROOT
from reckon.errors import ReckonError

__all__ = ["COMPONENTS", "LocalAirflow", "local_airflow_config", "start_local_airflow"]

# started in this order; the api-server first because workers and the triggerer call it
log = logging.getLogger(__name__)

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
USERNAME = "reckon"
_TERMINAL = frozenset({"success", "failed"})
_TAIL_LINES = 20
_HTTP_TIMEOUT = 30.0
#: A read (GET) that times out is asked again while every component is alive: on a busy
#: machine (a replay's JVM on both cores) the api-server can miss one 30 s timeout, and a
#: demo or a test following a run must not fail on that. Writes are never repeated.
_READ_ATTEMPTS = 4


# ----------------------------------------------------------------------------- configuration


def _free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the process that binds it comes a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def local_airflow_config(home: Path, *, port: int, parallelism: int,
                         use_schedule: bool) -> dict[str, str]:
    """The ``AIRFLOW__*`` settings a multi-process deployment needs on top of the home's.

    Why each: the executor must be a real one (LocalExecutor forks ``parallelism`` workers
    at start, default 32); the execution API URL is where task processes report, and it must
    name the api-server's real port (the default is ``http://localhost:8080/execution/``);
    the JWT secret must be the same in the api-server and the scheduler, or every task fails
    with 403 (airflow.cfg holds a generated one; it is set here so nothing depends on it);
    the log-server ports default to 8793/8794 and would collide with another Airflow on the
    machine. ``use_schedule=False`` keeps the scheduler from creating timetable runs (with
    ``catchup=False`` unpausing would start the run of the last complete day at once);
    triggered runs and backfills still run.

    Example: ``local_airflow_config(home, port=8080, parallelism=2, use_schedule=False)``.
    """
    base_url = f"http://127.0.0.1:{port}"
    return {
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": str(parallelism),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
        "AIRFLOW__CORE__AUTH_MANAGER": ("airflow.api_fastapi.auth.managers.simple."
                                        "simple_auth_manager.SimpleAuthManager"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USERNAME}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": base_url,
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__SECRET_KEY": _secret(home, "api-secret-key"),
        "AIRFLOW__API_AUTH__JWT_SECRET": _secret(home, "jwt-secret"),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "True" if use_schedule else "False",
    }


def _secret(home: Path, name: str) -> str:
    """A random secret kept in ``<home>/.secrets/<name>`` (mode 0600), the same on restarts."""
    folder = home / ".secrets"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / name
    if not path.is_file():
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(64))  # >= 64 bytes: HS512 wants it
    return path.read_text().strip()


def _write_password(home: Path) -> str:
    """The SimpleAuthManager passwords file with our user: ``{"reckon": "<random>"}``.

    The manager only generates (and prints) passwords for users missing from this file, so
    writing it first gives a known password without scraping the api-server's output."""
    path = home / "passwords.json"
    path.touch(mode=0o600)
    known = json.loads(path.read_text() or "{}")
    if USERNAME not in known:
        known[USERNAME] = secrets.token_urlsafe(18)
        path.write_text(json.dumps(known) + "\n")
    return str(known[USERNAME])


# ----------------------------------------------------------------------------- processes


def _session_members(sids: Sequence[int]) -> list[int]:
    """Live (non-zombie) processes of the sessions ``sids``: what our components spawned.

    Task processes call setpgid (a group of their own) but stay in the session, and an
    orphan keeps its session after init adopts it, so the session id finds all of them."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # state ppid pgrp session ...
        if fields[0] != "Z" and int(fields[3]) in sids:
            found.append(int(entry.name))
    return found


def _signal_all(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _tail(path: Path, lines: int = _TAIL_LINES) -> str:
    if not path.is_file():
        return "(no log file)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _spawn(name: str, env: Mapping[str, str], log_dir: Path) -> subprocess.Popen[bytes]:
    """``python -m airflow <name>`` in a new session, stdout and stderr to its log file."""
    argv = [sys.executable, "-m", "airflow", name]
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / f"{name}.log").open("ab") as log:
        return subprocess.Popen(argv, env=dict(env), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=str(PROJECT_ROOT),
                                start_new_session=True)


# ----------------------------------------------------------------------------- HTTP


def _http(method: str, url: str, *, token: str | None = None, body: Any = None,
          timeout: float | None = None) -> tuple[int, Any]:
    """(status, parsed JSON or text) of one request; HTTP errors are returned, not raised."""
    data = None if body is None else json.dumps(body, default=str).encode()
    headers = {"Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout or _HTTP_TIMEOUT) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    text = raw.decode(errors="replace")
    try:
        return status, json.loads(text) if text else None
    except json.JSONDecodeError:
        return status, text


def _iso(value: date | datetime) -> str:
    """A timezone-aware ISO timestamp: a date is its midnight UTC, a naive datetime is UTC."""
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()


def _log_text(content: Sequence[Any]) -> str:
    """Airflow's structured log lines (dicts: timestamp, level, event, extras) as text."""
    lines = []
    for item in content:
        if not isinstance(item, Mapping):
            lines.append(str(item))
            continue
        extra = " ".join(f"{k}={v}" for k, v in item.items()
                         if k not in ("timestamp", "level", "event", "logger"))
        head = " ".join(str(item[k]) for k in ("timestamp", "level", "event") if item.get(k))
        lines.append(f"{head} {extra}".rstrip())
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the handle


@dataclass
class LocalAirflow:
    """A running local Airflow: its processes, base URL and credentials. ``stop`` ends it."""

    home: Path
    base_url: str
    password: str = field(repr=False)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    username: str = USERNAME
    _token: str | None = field(default=None, init=False, repr=False)
    _stopped: bool = field(default=False, init=False, repr=False)

    @property
    def pids(self) -> dict[str, int]:
        """{component: pid}; each pid is also its session id (see ``stop``)."""
        return {name: proc.pid for name, proc in self.processes.items()}

    def log_path(self, component: str) -> Path:
        return self.home / "process-logs" / f"{component}.log"

    def spawned_pids(self) -> list[int]:
        """Every live process the components started (task processes, Spark JVMs included)."""
        return _session_members(list(self.pids.values()))

    # -- REST API ------------------------------------------------------------------------

    def token(self, *, renew: bool = False) -> str:
        """A JWT from ``POST /auth/token`` (SimpleAuthManager), cached; valid 24 h."""
        if self._token is None or renew:
            status, body = _http("POST", f"{self.base_url}/auth/token",
                                 body={"username": self.username, "password": self.password})
            if status != 201 or not isinstance(body, dict):
                raise ReckonError(f"Airflow login at {self.base_url}/auth/token failed: "
                                  f"HTTP {status} {body}")
            self._token = str(body["access_token"])
        return self._token

    def api(self, method: str, path: str, body: Any = None, *,
            ok: Sequence[int] = (200, 201)) -> Any:
        """One REST call under ``/api/v2`` with the token (renewed once on 401); a status not
        in ``ok`` raises ReckonError with Airflow's detail. Example: ``api("GET", "/dags")``."""
        url = f"{self.base_url}/api/v2{path}"
        attempts = _READ_ATTEMPTS if method == "GET" else 1
        for attempt in range(1, attempts + 1):
            try:
                status, data = _http(method, url, token=self.token(), body=body)
                if status == 401:
                    status, data = _http(method, url, token=self.token(renew=True), body=body)
                break
            except OSError as exc:  # refused, reset, timed out: say which component died
                self.check_alive()
                if attempt == attempts:
                    tried = (f"asked {attempts} times" if attempts > 1
                             else "a write is never repeated")
                    raise ReckonError(f"Airflow API {method} {path} unreachable: {exc} ({tried}"
                                      f"; process logs in {self.home / 'process-logs'})"
                                      ) from exc
                log.info("Airflow API %s %s: %s; asking again (%d of %d)", method, path, exc,
                         attempt + 1, attempts)
        if status not in ok:
            detail = data.get("detail", data) if isinstance(data, dict) else data
            raise ReckonError(f"Airflow API {method} {path}: HTTP {status}: {detail}")
        return data

    def unpause(self, dag_id: str = DAG_ID) -> None:
        """Unpause ``dag_id`` (DAGs start paused): the scheduler starts no run of a paused
        DAG, not even a triggered one."""
        self.api("PATCH", f"/dags/{_q(dag_id)}", {"is_paused": False})

    def trigger(self, dag_id: str = DAG_ID, logical_date: date | datetime | None = None,
                conf: Mapping[str, Any] | None = None, note: str | None = None) -> str:
        """Trigger a run through ``POST /api/v2/dags/{dag_id}/dagRuns``; returns its run id.

        The data interval is inferred from ``logical_date`` by the DAG's timetable, as in the
        UI (``app.airflow_env.logical_date_for_day`` gives the one for a day). ``None``
        makes a run without logical date or data interval, as the UI's form does (the nightly
        DAG then processes its ``day``, else the last complete day).
        A run whose ``conf`` names a ``day`` gets the note ``day <day>`` (or ``note``), which
        the UI's grid and run page show (``app.airflow_env.run_note``; a run triggered
        without one, from the UI's form, gets it from the plugin ``plugins/reckon_run_notes.py``).
        Example: ``af.trigger("reckon_nightly", datetime(2026, 1, 2, tzinfo=UTC))``.
        """
        body: dict[str, Any] = {"logical_date": None if logical_date is None
                                else _iso(logical_date), "conf": dict(conf or {})}
        note = run_note(conf) if note is None else note  # the grid shows a manual run's day
        if note:
            body["note"] = note
        run = self.api("POST", f"/dags/{_q(dag_id)}/dagRuns", body)
        return str(run["dag_run_id"])

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.api("GET", f"/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")["state"])

    def wait(self, dag_id: str, run_id: str, timeout: float = 1800.0,
             poll: float = 3.0) -> str:
        """Poll the run until it is ``success`` or ``failed`` and return that state. Raises
        ReckonError at ``timeout`` (seconds) naming the task states, or when a component died
        (the run could never finish)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.run_state(dag_id, run_id)
            if state in _TERMINAL:
                return state
            self.check_alive()
            if time.monotonic() >= deadline:
                raise ReckonError(f"{dag_id} run {run_id} still {state} after {timeout:.0f}s: "
                                  f"{self.task_states(dag_id, run_id)}")
            time.sleep(poll)

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """The run's task instances as the API returns them (state, try_number, dates...)."""
        data = self.api("GET", f"/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances"
                               "?limit=100")
        return list(data["task_instances"])

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        """{task_id: state} of a run (``"none"`` for a task not scheduled yet)."""
        return {ti["task_id"]: str(ti["state"]).lower()
                for ti in self.task_instances(dag_id, run_id)}

    def task_log(self, dag_id: str, run_id: str, task_id: str,
                 try_number: int | None = None) -> str:
        """The text of one task try's log (default: its latest try), as the UI shows it.

        The api-server reads the file the task wrote under ``<home>/logs``. Example:
        ``assert "reckon replay" in af.task_log(DAG_ID, run_id, "replay")``."""
        if try_number is None:
            tis = {ti["task_id"]: ti for ti in self.task_instances(dag_id, run_id)}
            try_number = max(1, int(tis[task_id].get("try_number") or 1))
        data = self.api("GET", f"/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/"
                               f"{_q(task_id)}/logs/{try_number}?full_content=true")
        return _log_text(data.get("content") or [])

    def runs(self, dag_id: str = DAG_ID, run_type: str | None = None) -> list[dict[str, Any]]:
        """The DAG's runs (oldest first), optionally of one run type (``manual``,
        ``scheduled``, ``backfill``)."""
        query = "?limit=100&order_by=id" + (f"&run_type={run_type}" if run_type else "")
        return list(self.api("GET", f"/dags/{_q(dag_id)}/dagRuns{query}")["dag_runs"])

    def backfill(self, dag_id: str, from_date: date, to_date: date, *,
                 conf: Mapping[str, Any] | None = None, reprocess: str = "none",
                 max_active_runs: int = 1) -> list[str]:
        """Backfill logical dates ``from_date``..``to_date`` (``POST /api/v2/backfills``; the
        ``airflow backfill create`` CLI does the same in the DB); returns the ids of the
        backfill runs with logical dates in that range, oldest first (the API does not say
        which runs a backfill made: an earlier backfill's runs of those dates are listed too).

        With the nightly DAG's data-interval timetable the logical date is the interval
        start, i.e. the day processed; the run id names the interval end
        (``backfill__<D+1>T00:00``). ``reprocess`` is ``none``, ``failed`` or ``completed``
        (also re-run days that succeeded). The scheduler runs them; ``wait`` on each id.
        Example: ``af.backfill("reckon_nightly", date(2026, 1, 1), date(2026, 1, 3))``.
        """
        self.api("POST", "/backfills", {
            "dag_id": dag_id, "from_date": _iso(from_date), "to_date": _iso(to_date),
            "dag_run_conf": dict(conf or {}), "reprocess_behavior": reprocess,
            "max_active_runs": max_active_runs})
        low, high = _iso(from_date)[:10], _iso(to_date)[:10]
        return [r["dag_run_id"] for r in self.runs(dag_id, "backfill")
                if low <= str(r.get("logical_date") or "")[:10] <= high]

    # -- processes -----------------------------------------------------------------------

    def check_alive(self) -> None:
        """Raise ReckonError naming the first component that exited, with its log's tail."""
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise ReckonError(f"airflow {name} (pid {proc.pid}) exited with "
                                  f"{proc.returncode}; last lines of {self.log_path(name)}:\n"
                                  f"{_tail(self.log_path(name))}")

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM every process of the components' sessions, SIGKILL what is left after
        ``grace`` seconds, reap the components. Idempotent; also run by ``__exit__``."""
        if self._stopped:
            return
        sids = list(self.pids.values())
        _signal_all(_session_members(sids), signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _session_members(sids) and time.monotonic() < deadline:
            time.sleep(0.25)
        for _ in range(20):  # a dying parent may still fork: repeat until the sessions are empty
            left = _session_members(sids)
            if not left:
                break
            _signal_all(left, signal.SIGKILL)
            time.sleep(0.25)
        for proc in self.processes.values():
            proc.wait()
        self._stopped = True

    def __enter__(self) -> LocalAirflow:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


# ----------------------------------------------------------------------------- start


def _wait_ready(af: LocalAirflow, dag_ids: Sequence[str], deadline: float) -> None:
    """Until the health endpoint shows every component heartbeating and each DAG is parsed;
    a component that exits meanwhile raises at once (ReckonError with its log)."""
    waiting_for = "the api-server to answer"
    while time.monotonic() < deadline:
        af.check_alive()
        try:
            status, health = _http("GET", f"{af.base_url}/api/v2/monitor/health", timeout=5)
        except OSError:  # not listening yet
            status, health = 0, None
        if status == 200 and isinstance(health, dict):
            unhealthy = [k for k, v in health.items() if (v or {}).get("status") != "healthy"]
            waiting_for = f"healthy components (not yet: {', '.join(unhealthy)})"
            if not unhealthy:
                missing = [d for d in dag_ids if _http(
                    "GET", f"{af.base_url}/api/v2/dags/{_q(d)}", token=af.token())[0] != 200]
                waiting_for = f"the dag-processor to parse {', '.join(missing)}"
                if not missing:
                    return
        time.sleep(1.0)
    raise ReckonError(f"local Airflow in {af.home} not ready: still waiting for {waiting_for}; "
                      f"process logs in {af.home / 'process-logs'}")


def start_local_airflow(home: Path, env: Mapping[str, str], *,
                        parallelism: int | None = None, use_schedule: bool = True,
                        dag_ids: Sequence[str] = (DAG_ID,), timeout: float = 300.0,
                        ) -> LocalAirflow:
    """Start scheduler, dag-processor, triggerer and api-server for the Airflow home ``home``;
    return when the API answers, every component heartbeats and ``dag_ids`` are parsed and
    unpaused.

    ``env`` (e.g. ``settings_env(settings)``) is layered last over this process's environment,
    the home's and ``local_airflow_config``: every component and task sees it (the DAG file
    reads RECKON_* when parsed). Airflow's own defaults otherwise: the timetable schedules
    (unpausing starts the run of the last complete day at once, as for a user; its wait for
    the watermark holds no worker slot), the DAG's retries apply. ``parallelism`` defaults to
    ``max(2, os.cpu_count())``. On any failure, what
    was started is stopped and ReckonError names the component and its log's tail.
    Example: ``with start_local_airflow(tmp / "af", {"RECKON_WAREHOUSE": wh}) as af: ...``
    """
    home = Path(home).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    port, password = _free_port(), _write_password(home)
    full = {**os.environ, **prepare_airflow_home(home),
            **local_airflow_config(home, port=port, use_schedule=use_schedule,
                                   parallelism=parallelism or max(2, os.cpu_count() or 2)),
            **env}
    full["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), full.get("PATH", "")])
    full.setdefault("AIRFLOW_CONN_RECKON_SPARK", json.dumps(
        {"conn_type": "spark", "host": full.get("RECKON_SPARK_MASTER", "local[*]")}))
    af = LocalAirflow(home=home, base_url=f"http://127.0.0.1:{port}", password=password)
    try:
        for name in COMPONENTS:
            af.processes[name] = _spawn(name, full, home / "process-logs")
        _wait_ready(af, dag_ids, time.monotonic() + timeout)
        for dag_id in dag_ids:
            af.unpause(dag_id)
    except BaseException:
        af.stop()
        raise
    return af
