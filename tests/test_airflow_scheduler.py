"""The nightly DAG as Airflow users run it: a real scheduler, dag-processor, triggerer and
api-server on loopback (app.airflow_local), the run triggered and watched through the REST
API, the LocalExecutor running the tasks. Asserts on the run's final state and the tables only
(the DAG's tasks may change), and that ``stop`` leaves no process behind."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from app.settings import load_settings

pytestmark = pytest.mark.airflow

DAY = date(2026, 1, 1)
EVENTS = 1_000  # the demo generator's minimum: 6 landing files, 3 micro-batches
RUN_TIMEOUT = 900.0
WORKBENCH = "http://127.0.0.1:8088/wb"  # a reviewer's address of the workbench: only linked


def _identity(pid: int) -> tuple[int, str] | None:
    """(pid, start time) of a live, non-zombie process; None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return None if fields[0] == "Z" else (pid, fields[19])


def _processes_of_home(home: Path) -> list[int]:
    """Live processes whose environment names this Airflow home (ours and our children's)."""
    needle = f"AIRFLOW_HOME={home.resolve()}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes() and _identity(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _streamed_warehouse(spark, tmp_path: Path):
    """A small warehouse written by the real stream: the demo's timeline for DAY (events
    cross midnight, so the watermark passes the end of DAY), two files a micro-batch."""
    from app.demo import demo_generator_config
    from app.generate import generate_landing
    from spark.sources import StreamSource
    from spark.stream import run_stream
    from storage.landing import MANIFEST_NAME

    landing = tmp_path / "landing"
    cfg = dataclasses.replace(demo_generator_config(EVENTS, DAY), malformed_rate=0.0, seed=5)
    manifest = generate_landing(landing, cfg)
    for i, name in enumerate(manifest.files):
        os.utime(landing / name, (1_800_000_000 + i, 1_800_000_000 + i))
    (landing / MANIFEST_NAME).replace(tmp_path / "manifest.json")  # not an event file
    settings = load_settings(env={}, warehouse=str(tmp_path / "wh"), shuffle_partitions=2,
                             max_files_per_trigger=2, spark_driver_memory="1g",
                             expected_partitions=",".join(map(str, manifest.expected_partitions)))
    run_stream(spark, settings, StreamSource(landing=str(landing)), on_batch=None)
    return settings


def _failure_detail(af, dag_id: str, run_id: str) -> str:
    states = af.task_states(dag_id, run_id)
    logs = [f"--- {task} ({state}):\n{af.task_log(dag_id, run_id, task)[-3000:]}"
            for task, state in states.items() if state in ("failed", "up_for_retry")]
    return f"task states {states}\n" + "\n".join(logs)


def _wait_for(probe, timeout: float):
    """Poll ``probe`` until it returns something truthy (returned), at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"nothing after {timeout:.0f}s")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.soak
def test_a_backfill_of_two_days_one_without_events_under_a_real_scheduler(spark, tmp_path):
    """Soak tier (~12 min): a backfill through the REST API of 2025-12-31 (before the stream:
    no events) and 2026-01-01 (the streamed day), each run with the default lookback; both
    succeed, the quiet day's tables and records say "no events", the other day reconciles;
    `stop` leaves no process behind."""
    from app.airflow_env import DAG_ID, settings_env
    from app.airflow_local import COMPONENTS, start_local_airflow
    from reports.db.repository import ReportDB
    from spark import tables as tb

    settings = _streamed_warehouse(spark, tmp_path)
    seen: set[tuple[int, str]] = set()
    with start_local_airflow(tmp_path / "airflow", settings_env(settings),
                             use_schedule=False) as af:
        assert set(af.pids) == set(COMPONENTS)
        runs = af.backfill(DAG_ID, date(2025, 12, 31), DAY)
        assert len(runs) == 2
        for run_id in runs:
            deadline = time.monotonic() + RUN_TIMEOUT
            while (state := af.run_state(DAG_ID, run_id)) not in ("success", "failed"):
                seen.update(i for p in af.spawned_pids() if (i := _identity(p)))
                assert time.monotonic() < deadline, af.task_states(DAG_ID, run_id)
                time.sleep(2)
            assert state == "success", _failure_detail(af, DAG_ID, run_id)
        component_pids = dict(af.pids)
    assert all(_identity(pid) is None for pid in component_pids.values())
    assert not [i for i in seen if _identity(i[0]) == i], "processes left after stop"
    assert _processes_of_home(tmp_path / "airflow") == []

    wh = settings.warehouse_path
    assert tb.read_table(spark, wh, tb.RECONCILIATION).filter(
        f"window_date = DATE'{DAY}'").count() > 0
    with ReportDB.from_settings(settings) as db:
        quiet, busy = db.current_audit_run(date(2025, 12, 31)), db.current_audit_run(DAY)
    assert quiet is not None and (quiet.rows, quiet.currencies) == (0, ())
    assert busy is not None and busy.unexplained == 0 and busy.currencies


def test_a_component_that_cannot_start_is_named_with_its_log(tmp_path):
    """The api-server's port is taken: start fails at once, naming it, and stops the rest."""
    from app.airflow_local import start_local_airflow
    from reckon.errors import ReckonError

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(ReckonError, match=r"airflow api-server \(pid \d+\) exited") as info:
            start_local_airflow(tmp_path / "airflow", {"AIRFLOW__API__PORT": str(port)},
                                timeout=120)
    assert "last lines of" in str(info.value)
    assert _processes_of_home(tmp_path / "airflow") == []


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_scripts_airflow_local_fails_an_unclosed_day_then_runs_a_streamed_one(spark, tmp_path):
    """The README's local Airflow as a user starts it: ``scripts/airflow-local`` with the
    warehouse and the watermark wait set, every event-time setting left at its default, on a
    warehouse whose stream recorded its expected partitions (one real Airflow serves both
    halves: starting one costs a minute of the suite).

    Airflow's default settings: unpausing makes the scheduler start the run of the last
    complete day at once. The stream stopped on 2026-01-02, so that day's watermark never
    comes: the sensor gives its worker slot back between looks (up_for_reschedule), and fails
    after the configured wait (30 s), without retry, naming the day, the watermark it needs and
    the one it saw, in words. A run then triggered through the REST API for the streamed day
    succeeds: the defaults are not exported as if set, so no step finds them disagreeing with
    the warehouse's spec (it used to fail at wait_for_watermark: "spec has
    expected_partitions=[0,1,2,3], but RECKON_EXPECTED_PARTITIONS gives []"). SIGTERM stops
    every process it started.

    Operations as a user turns them on (issue 62): the failure, breaks and report-ready
    notices on, mail and webhook to loopback receivers through AIRFLOW_CONN_*, OpenLineage to
    a file. The failed sensor sends one mail and one webhook; the clean streamed day sends
    only "report ready" (no breaks notice), its run's note names the day, its audit's Asset
    event starts the example downstream DAG, which reads the day from the event, and the
    lineage file follows event_log -> canonical_totals -> reconciliation with versions; its
    "report ready" links the day on the workbench (workbench_url).

    The streamed day's run is triggered as the UI's form does (only a conf: no run id, no
    note); the plugin's listener notes its day. Then one provisional total of the day is
    edited and the run's audit and what follows are cleared: the audit finds the unexplained
    break and sends the breaks notice; the quality gate fails on it (blocking by default)
    and sends the gate's notice, not a failure notice too. One Airflow and one run carry it
    all: starting another costs a minute of CPU, a run its compaction and replay again.
    Its own timeout: two runs' tasks on a 2-core machine shared with other Spark jobs."""
    from tests.notify_receivers import receivers

    settings = _streamed_warehouse(spark, tmp_path)
    with receivers() as got:
        _run_the_local_airflow_script(spark, settings, tmp_path, got)


def _run_the_local_airflow_script(spark, settings, tmp_path: Path, got) -> None:
    import signal
    import subprocess

    from app.airflow_env import DAG_ID
    from app.airflow_local import LocalAirflow
    from reckon.config import PROJECT_ROOT

    downstream = "reckon_after_reconciliation"
    home = tmp_path / "airflow"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    # what a user sets: the warehouse, and a short wait. A look takes well under a second
    # (no Spark import): at a 5 s poll the scheduler re-queued the next look before it
    # processed the last one's end and failed the sensor as "changed externally" (an Airflow
    # race, not the sensor's own timeout); 15 s keeps the looks apart as the default (1m) does
    env.update(RECKON_WAREHOUSE=str(settings.warehouse_path),
               RECKON_WATERMARK_WAIT_TIMEOUT="30s", RECKON_WATERMARK_POLL="15s",
               RECKON_NOTIFY_ON_FAILURE="true", RECKON_NOTIFY_ON_BREAKS="true",
               RECKON_NOTIFY_REPORT_READY="true", RECKON_NOTIFY_ON_QUALITY_GATE="true",
               RECKON_WORKBENCH_URL=WORKBENCH, **got.env(),
               AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(
                   {"type": "file", "log_file_path": str(tmp_path / "lineage.jsonl"),
                    "append": True}))
    yesterday = (datetime.now(UTC) - timedelta(days=1)).date()
    script = subprocess.Popen([str(PROJECT_ROOT / "scripts" / "airflow-local"), str(home)],
                              env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert script.stdout is not None
        said = re.match(r"Airflow (\S+)  user (\S+)  password (\S+)", script.stdout.readline())
        assert said, "scripts/airflow-local printed no address"
        af = LocalAirflow(home=home, base_url=said.group(1), username=said.group(2),
                          password=said.group(3))
        _a_day_not_closed_fails_in_time(af, yesterday)
        got.wait(1, 1)
        assert got.subjects() == [f"{DAG_ID}: wait_for_watermark failed for {yesterday}"]
        assert len(got.hooks) == 1 and f"day {yesterday} is not closed yet" in got.hooks[0]["text"]
        af.unpause(downstream)
        run_id = _trigger_as_the_form_does(af)
        deadline = time.monotonic() + RUN_TIMEOUT
        while (state := af.run_state(DAG_ID, run_id)) not in ("success", "failed"):
            assert time.monotonic() < deadline, af.task_states(DAG_ID, run_id)
            time.sleep(2)
        assert state == "success", _failure_detail(af, DAG_ID, run_id)
        assert af.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}")["note"] == f"day {DAY}"
        got.wait(2, 2)
        assert got.subjects()[1:] == [f"reckon: report of {DAY} ready for review"]
        assert "ready for review: no unexplained breaks" in got.body(got.mails[1])
        assert re.search(r"[A-Z]{3}: canonical [A-Z]{3} [\d,.]+, provisional", got.body(got.mails[1]))
        assert f"Review and sign off: {WORKBENCH}/day/{DAY}\n" in got.body(got.mails[1])
        assert f"Report: {WORKBENCH}/report/{DAY}/nightly/report.html (file " \
               f"{settings.warehouse_path.resolve()}/reports/{DAY}/report.html)" \
               in got.hooks[1]["text"]
        [after] = _wait_for(lambda: af.runs(downstream), 120)
        assert af.wait(downstream, after["dag_run_id"], timeout=300) == "success"
        text = _wait_for(lambda: (t := af.task_log(downstream, after["dag_run_id"],
                                                   "days_ready")) and DAY.isoformat() in t
                         and t, 60)
        assert f"reckon reconciliation ready for {DAY}" in text
        assert len(got.mails) == 2 and len(got.hooks) == 2  # no breaks notice for a clean day
        _a_provisional_total_edited(spark, settings)
        _a_rerun_alerts_the_break_and_the_gate(af, got, run_id)
    finally:
        script.send_signal(signal.SIGTERM)
        script.wait(120)
    _wait_for(lambda: _processes_of_home(home) == [] or None, 60)
    _lineage_follows_the_tables_with_versions(tmp_path / "lineage.jsonl", settings)
    assert len(got.mails) == 5 and len(got.hooks) == 5  # nothing more: no failure notice


def _trigger_as_the_form_does(af) -> str:
    """A run of DAY triggered as the UI's form does: only a conf (no run id, no note, no
    logical date); nothing in its id names the day, the plugin's listener notes it."""
    from app.airflow_env import DAG_ID

    run = af.api("POST", f"/dags/{DAG_ID}/dagRuns",
                 {"logical_date": None, "conf": {"day": DAY.isoformat(), "lookback_days": 0}})
    assert DAY.isoformat() not in run["dag_run_id"] and not run["note"]
    return str(run["dag_run_id"])


def _a_provisional_total_edited(spark, settings) -> None:
    """One USD provisional delta of DAY changed by 0.07 after its run (whole cents; as
    tests/test_replay_audit.py does before one audit): the next audit finds an unexplained
    break."""
    from tests.streamkit import edit_a_provisional_delta

    edit_a_provisional_delta(spark, settings.warehouse_path,
                             f"window_date = DATE'{DAY}' AND currency = 'USD'")


def _a_rerun_alerts_the_break_and_the_gate(af, got, run_id: str) -> None:
    """The run's audit and what follows it cleared, as a user re-runs a day from the grid
    (the DAG's doc: "or clear its run"; compact and replay need not run again): the audit
    finds the unexplained break, the run fails at the quality gate only (an unexplained
    break is blocking by default), and the breaks notice, the report's and the gate's go
    out, one mail and one webhook each, and no failure notice for the gate."""
    from app.airflow_env import DAG_ID

    af.api("POST", f"/dags/{DAG_ID}/clearTaskInstances",
           {"dry_run": False, "dag_run_id": run_id, "task_ids": ["audit"],
            "include_downstream": True, "only_failed": False, "reset_dag_runs": True})
    _wait_for(lambda: af.run_state(DAG_ID, run_id) != "success", 60)
    deadline = time.monotonic() + RUN_TIMEOUT
    while (state := af.run_state(DAG_ID, run_id)) not in ("success", "failed"):
        assert time.monotonic() < deadline, af.task_states(DAG_ID, run_id)
        time.sleep(2)
    states = af.task_states(DAG_ID, run_id)
    assert state == "failed" and states.pop("quality_gate") == "failed", \
        _failure_detail(af, DAG_ID, run_id)
    assert set(states.values()) == {"success"}, _failure_detail(af, DAG_ID, run_id)
    assert af.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}")["note"] == f"day {DAY}"
    got.wait(5, 5)
    assert got.subjects()[2:] == [f"reckon: {DAY} has 1 unexplained break",
                                  f"reckon: report of {DAY} ready for review",
                                  f"reckon: quality gate failed for {DAY}"]
    assert "found 1 unexplained break." in got.body(got.mails[2])
    assert "ready for review: 1 unexplained break." in got.body(got.mails[3])
    assert "blocking" in got.body(got.mails[4])
    assert [h["text"].split("\n", 1)[0] for h in got.hooks[2:]] == [
        f"*{subject}*" for subject in got.subjects()[2:]]


def _lineage_follows_the_tables_with_versions(path: Path, settings) -> None:
    """The COMPLETE events of the nightly run's replay and audit name their tables with the
    Delta versions: event_log vN -> canonical_totals vM -> reconciliation vK."""
    wh = settings.warehouse_path.resolve()
    complete = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        name = event.get("job", {}).get("name", "")
        if event.get("eventType") == "COMPLETE" and name.startswith("reckon_nightly."):
            complete[name.split(".", 1)[1]] = event

    def tables(event, side):
        return {Path(d["name"]).name: d.get("facets", {}).get("version", {}).get(
            "datasetVersion") for d in event[side] if d["name"].startswith(str(wh))}

    replay, audit = complete["replay"], complete["audit"]
    assert tables(replay, "inputs")["event_log"] is not None
    canonical = tables(replay, "outputs")["canonical_totals"]
    assert canonical is not None
    assert tables(audit, "inputs")["canonical_totals"] == canonical
    assert tables(audit, "outputs")["reconciliation"] is not None


def _a_day_not_closed_fails_in_time(af, yesterday: date) -> None:
    """The scheduled run of ``yesterday`` (a day the stream never reached) fails at its
    sensor in time, in reschedule mode, once, saying why in words."""
    from app.airflow_env import DAG_ID

    started = time.monotonic()
    [run] = _wait_for(lambda: af.runs(DAG_ID, "scheduled"), 90)
    assert run["logical_date"][:10] == yesterday.isoformat()
    seen: set[str] = set()
    while (state := af.run_state(DAG_ID, run["dag_run_id"])) not in ("success", "failed"):
        seen.add(af.task_states(DAG_ID, run["dag_run_id"])["wait_for_watermark"])
        assert time.monotonic() - started < 300, seen
        time.sleep(1)
    assert state == "failed" and "up_for_reschedule" in seen  # no slot held between looks
    assert time.monotonic() - started < 240  # the sensor may start before the API is up
    [sensor] = [ti for ti in af.task_instances(DAG_ID, run["dag_run_id"])
                if ti["task_id"] == "wait_for_watermark"]
    assert (sensor["state"], sensor["try_number"]) == ("failed", 1)  # no retry
    # the run's state can flip to failed before the task's last lines reach its log file:
    # read it as a user opening the log a moment later would
    expected = f"day {yesterday} is not closed yet"

    def logged() -> str | None:
        text = af.task_log(DAG_ID, run["dag_run_id"], "wait_for_watermark")
        return text if expected in text else None

    text = _wait_for(logged, 90)
    assert re.search(r"the latest watermark is 2026-01-0[12]T[\d:.]+Z", text)
    said = re.search(r"after waiting (\d+) seconds \(the limit is 30 seconds\)", text)
    assert said and int(said.group(1)) >= 30  # the sensor's own clock: not before its time
    assert "Traceback" not in text.split("is not closed yet")[0][-2000:]


def test_a_read_the_busy_api_server_misses_is_asked_again_and_a_write_never(tmp_path,
                                                                              monkeypatch):
    """A real HTTP server on loopback that answers the first request only after the client's
    timeout (an api-server on a machine whose cores a replay holds): a GET is asked again and
    succeeds; a POST that times out is not repeated (a trigger must not start two runs), and
    says so in one line."""
    import http.server
    import threading

    from app import airflow_local
    from app.airflow_local import LocalAirflow
    from reckon.errors import ReckonError

    seen: list[str] = []

    class Slow(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(f"{self.command} {self.path}")
            if len(seen) == 1 or self.command == "POST":
                time.sleep(1.5)  # past the client's timeout
            body = json.dumps({"state": "running"}).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and hung up: the stall it was meant to see

        do_GET = do_POST = _answer

        def log_message(self, *_args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(airflow_local, "_HTTP_TIMEOUT", 0.5)
    try:
        af = LocalAirflow(home=tmp_path, base_url=f"http://127.0.0.1:{server.server_port}",
                          password="x")
        af._token = "token"  # no login round trip: the API calls are what is tested
        assert af.api("GET", "/dags/d/dagRuns/r") == {"state": "running"}
        assert seen == ["GET /api/v2/dags/d/dagRuns/r"] * 2
        with pytest.raises(ReckonError, match=r"^Airflow API POST /dags/d/dagRuns unreachable: "
                                              r".*timed out \(a write is never repeated"):
            af.api("POST", "/dags/d/dagRuns", {"conf": {}})
        assert seen.count("POST /api/v2/dags/d/dagRuns") == 1
    finally:
        server.shutdown()
