"""The nightly DAG: it parses cleanly with the expected shape, and the real DAG run (dag.test in
a fresh Airflow process) on a warehouse written by the real stream gives the reference's
canonical totals and is idempotent."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from app.settings import load_settings
from reckon.config import PROJECT_ROOT

pytestmark = pytest.mark.airflow

DAGS = PROJECT_ROOT / "dags"
EXPECTED_UPSTREAM = {
    "wait_for_watermark": set(),
    "compact": {"wait_for_watermark"},
    "replay": {"compact"},
    "audit": {"replay"},
    "check": {"audit"},
    "report": {"check"},
    "quality_gate": {"report"},
}


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Airflow configured for this process (before airflow is imported), retries 0."""
    from app.airflow_env import prepare_airflow_home

    env = prepare_airflow_home(tmp_path_factory.mktemp("airflow-home"), migrate=False)
    env["RECKON_AIRFLOW_RETRIES"] = "0"
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _bag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def test_dag_folder_imports_cleanly_with_the_expected_shape(airflow_env):
    from airflow.sdk import CronDataIntervalTimetable

    bag = _bag()
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {"reckon_nightly", "reckon_vacuum", "reckon_after_reconciliation"}
    dag = bag.dags["reckon_nightly"]
    assert {t: set(dag.task_dict[t].upstream_task_ids) for t in dag.task_dict} \
        == EXPECTED_UPSTREAM
    assert isinstance(dag.timetable, CronDataIntervalTimetable)
    assert dag.timetable.expression == "0 0 * * *"
    assert str(dag.timetable.timezone) in ("UTC", "Timezone('UTC')")
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    assert dag.start_date is not None and dag.start_date.utcoffset() == timedelta(0)
    assert dag.params["lookback_days"] == load_settings().lookback_days
    doc = dag.doc_md or ""
    for needle in ("airflow backfill create --dag-id reckon_nightly", "lookback_days",
                   "RECKON_REPLAY_MODE=spark-submit", "wait_for_watermark", "Re-run day D",
                   "the UTC date of the run's logical date", "reschedule", "no events"):
        assert needle in doc
    assert dag.params["day"] == ""  # the trigger form's way to name the day
    wait = dag.task_dict["wait_for_watermark"]
    assert wait.mode == "reschedule" and wait.retries == 0  # frees its slot between looks
    for task in dag.tasks:
        assert task.retries == 0
        assert task.retry_exponential_backoff
        assert task.execution_timeout is not None
        assert task.on_failure_callback


def test_the_vacuum_dag_runs_weekly_with_the_retries_and_alerts_of_the_nightly(
        airflow_env, monkeypatch):
    from airflow.sdk import CronDataIntervalTimetable

    monkeypatch.setenv("RECKON_AIRFLOW_RETRIES", "3")
    bag = _bag()
    assert bag.import_errors == {}
    dag = bag.dags["reckon_vacuum"]
    assert isinstance(dag.timetable, CronDataIntervalTimetable)
    assert dag.timetable.expression == "0 3 * * 0"
    assert dag.catchup is False and dag.max_active_runs == 1
    assert dag.params["dry_run"] is False
    [task] = dag.tasks
    assert task.task_id == "vacuum" and task.retries == 3
    assert task.execution_timeout is not None and task.on_failure_callback
    assert "reckon vacuum --warehouse" in (dag.doc_md or "")


def test_retries_come_from_the_environment(airflow_env, monkeypatch):
    monkeypatch.setenv("RECKON_AIRFLOW_RETRIES", "3")
    dag = _bag().dags["reckon_nightly"]
    assert {t.task_id: t.retries for t in dag.tasks} == {
        **{t: 3 for t in EXPECTED_UPSTREAM},
        "wait_for_watermark": 0,  # a look is quick; a retry would only wait again
        "quality_gate": 0}  # a data failure stays failed


def test_bad_switch_values_are_import_errors_that_say_what_is_allowed(airflow_env, monkeypatch):
    monkeypatch.setenv("RECKON_REPLAY_MODE", "yarn")
    errors = _bag().import_errors  # every DAG that reads the settings says it
    assert str(DAGS / "reckon_nightly.py") in errors
    for error in errors.values():
        assert ("replay_mode='yarn' is not valid: one of python, spark-submit "
                "(RECKON_REPLAY_MODE)") in error


def _shape(dag) -> dict[str, tuple[str, set[str]]]:
    return {t.task_id: (type(t).__name__, set(t.upstream_task_ids)) for t in dag.tasks}


def test_the_dag_has_one_shape_whatever_environment_parses_it(airflow_env, monkeypatch):
    """The replay mode, the notifications and the connection are the worker's when a task
    runs: a dag-processor whose environment differs from the workers' draws the same DAG."""
    default = _shape(_bag().dags["reckon_nightly"])
    for var, value in (("RECKON_REPLAY_MODE", "spark-submit"), ("RECKON_NOTIFY_ON_FAILURE", "true"),
                       ("RECKON_NOTIFY_EMAIL", "ops@example.com"), ("RECKON_SPARK_CONN_ID", "elsewhere")):
        monkeypatch.setenv(var, value)
    bag = _bag()
    assert bag.import_errors == {}
    assert _shape(bag.dags["reckon_nightly"]) == default
    assert {task: upstream for task, (_, upstream) in default.items()} == EXPECTED_UPSTREAM


def test_spark_submit_mode_submits_the_entry_script_through_airflows_hook(airflow_env,
                                                                           monkeypatch, tmp_path):
    """With ``RECKON_REPLAY_MODE=spark-submit`` in the worker's environment, the replay task
    runs the real spark-submit (Airflow's Spark hook, connection ``RECKON_SPARK_CONN_ID``) on
    app/submit_replay.py with D, the lookback and the Delta jars. The warehouse is mistyped,
    so the entry script says so in one line and the submit fails, before any SparkContext."""
    from airflow.exceptions import AirflowException

    spark_submit = Path(sys.executable).parent / "spark-submit"
    monkeypatch.setenv("PATH", f"{spark_submit.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("RECKON_REPLAY_MODE", "spark-submit")
    monkeypatch.setenv("RECKON_SPARK_CONN_ID", "reckon_test_spark")
    monkeypatch.setenv("AIRFLOW_CONN_RECKON_TEST_SPARK",
                       '{"conn_type": "spark", "host": "local[1]"}')
    monkeypatch.setenv("RECKON_WAREHOUSE", str(tmp_path / "no-such-warehouse"))
    replay = _bag().dags["reckon_nightly"].task_dict["replay"]
    plan = {"newest": "2026-01-02", "days": ["2026-01-01", "2026-01-02"]}
    with pytest.raises(AirflowException) as failed:
        replay.python_callable(plan)
    command = str(failed.value)
    assert "--master local[1]" in command and "--jars" in command and "delta-spark" in command
    assert str(PROJECT_ROOT / "app" / "submit_replay.py") in command
    assert command.rstrip().endswith("--date 2026-01-02 --lookback-days 1") or \
        "--date 2026-01-02 --lookback-days 1" in command
    assert "Error code is: 2" in command


def test_spark_submit_entry_script_runs_as_a_file_and_names_a_bad_argument():
    """spark-submit runs the entry as a file (its folder first on sys.path); it must still
    import reckon and spark as packages, and reject a bad day before starting Spark."""
    entry = PROJECT_ROOT / "app" / "submit_replay.py"
    out = subprocess.run([sys.executable, str(entry), "--date", "2026-02-30"],
                         capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 2
    assert "--date='2026-02-30' is not valid: a date written YYYY-MM-DD" in out.stderr


def test_the_run_for_a_day_processes_exactly_that_utc_day(airflow_env):
    """run_dag_for_day's logical date is the day's midnight, which the scheduled run of D has
    too (its data interval [D, D+1) under the DAG's timetable), and the DAG's rule
    (app.pipeline.nightly_days) turns it into D."""
    from airflow.serialization.encoders import coerce_to_core_timetable

    from app.airflow_env import logical_date_for_day
    from app.pipeline import nightly_days

    timetable = coerce_to_core_timetable(_bag().dags["reckon_nightly"].timetable)
    day = date(2026, 3, 29)  # a DST change in Europe: irrelevant in UTC
    scheduled = timetable.infer_manual_data_interval(run_after=datetime(2026, 3, 30, tzinfo=UTC))
    assert (scheduled.start, scheduled.end) == (datetime(2026, 3, 29, tzinfo=UTC),
                                                datetime(2026, 3, 30, tzinfo=UTC))
    assert logical_date_for_day(day) == scheduled.start
    assert nightly_days(day=None, logical_date=logical_date_for_day(day),
                        run_after=datetime(2026, 11, 26, tzinfo=UTC), lookback_days=0)[0] == day


def test_parsing_the_dag_file_starts_no_spark_and_is_quick(airflow_env):
    code = (
        "import sys, time\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        "t = time.monotonic()\n"
        f"bag = DagBag(dag_folder={str(DAGS)!r})\n"
        "print(bag.import_errors == {}, 'pyspark' in sys.modules, time.monotonic() - t)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **airflow_env},
                         capture_output=True, text=True, check=True, timeout=300)
    ok, spark_loaded, seconds = out.stdout.strip().splitlines()[-1].split()
    assert ok == "True"
    assert spark_loaded == "False"
    assert float(seconds) < 30  # generous: the machine may be busy; it is ~1s when idle


def test_each_days_report_goes_to_its_own_folder(airflow_env):
    """With report_out set and a lookback, the days of one run must not overwrite each other's
    report files (each day records its HTML's SHA-256)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("reckon_nightly_dag", DAGS / "reckon_nightly.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    days = ["2026-01-01", "2026-01-02"]
    folders = [module.report_folder("/srv/reports", day) for day in days]
    assert folders == ["/srv/reports/2026-01-01", "/srv/reports/2026-01-02"]
    assert module.report_folder("", days[0]) is None  # the default: <warehouse>/reports/<day>


def test_settings_env_round_trips_through_load_settings(tmp_path):
    from app.airflow_env import settings_env

    settings = load_settings(env={}, warehouse=str(tmp_path / "wh"), watermark_bound="5s",
                             expected_partitions="0,1,2", tolerance_abs="0.01",
                             extra_spark_conf='{"spark.a": "1", "spark.sql.extensions": '
                                              '"a.B,c.D"}')
    assert settings.extra_spark_conf == {"spark.a": "1", "spark.sql.extensions": "a.B,c.D"}
    assert load_settings(env=settings_env(settings)) == settings


# ----------------------------------------------------------------------------- the real run

DAY = date(2026, 1, 1)


def _table_state(spark, settings) -> dict[str, object]:
    """Row counts of every table, the day's canonical and reconciliation rows (without run ids)."""
    from pyspark.sql import functions as F

    from spark import tables as tb

    wh = settings.warehouse_path
    state: dict[str, object] = {name: tb.read_table(spark, wh, name).count()
                                for name in (tb.EVENT_LOG, tb.QUARANTINE, tb.PROVISIONAL_DELTAS,
                                             tb.LATE_EVENTS, tb.WATERMARK_PROGRESS,
                                             tb.CANONICAL_TOTALS, tb.RECONCILIATION)}
    state["canonical_rows"] = sorted(tuple(r) for r in tb.read_table(
        spark, wh, tb.CANONICAL_TOTALS).filter(F.col("window_date") == F.lit(DAY)).collect())
    state["reconciliation_rows"] = sorted(tuple(r) for r in tb.read_table(
        spark, wh, tb.RECONCILIATION).filter(F.col("window_date") == F.lit(DAY))
        .drop("audit_run_id").collect())
    return state


@pytest.mark.slow
@pytest.mark.soak
def test_nightly_dag_run_on_a_streamed_warehouse_is_correct_and_idempotent(spark, tmp_path):
    """Soak tier (~6 min): the default tier runs the real DAG once, inside the demo test
    (tests/test_demo.py), with the same checks against the reference; here it runs on its own
    warehouse and then again, which must change nothing."""
    from app.airflow_env import run_dag_for_day, settings_env
    from app.demo import demo_generator_config
    from app.generate import generate_landing
    from reports.db.repository import ReportDB
    from spark.sources import StreamSource
    from spark.stream import run_stream
    from storage.landing import MANIFEST_NAME
    from tests.streamkit import canonical_rows, landing_reference_canonical

    landing = tmp_path / "landing"
    # the demo's timeline (events cross midnight, so the stream closes the day); every line
    # parseable, so the pure reference can read the landing directly
    cfg = dataclasses.replace(demo_generator_config(2_000, DAY), malformed_rate=0.0,
                              future_rate=0.002, seed=11)
    manifest = generate_landing(landing, cfg)
    for i, name in enumerate(manifest.files):
        os.utime(landing / name, (1_800_000_000 + i, 1_800_000_000 + i))
    (landing / MANIFEST_NAME).replace(tmp_path / "manifest.json")  # not an event file
    # two files a micro-batch (3 batches, not 6): the DAG's outputs do not depend on the
    # stream's batching (canonical totals never do; every late event is still explained)
    settings = load_settings(env={}, warehouse=str(tmp_path / "wh"), shuffle_partitions=2,
                             max_files_per_trigger=2,
                             expected_partitions=",".join(map(str, manifest.expected_partitions)))
    run_stream(spark, settings, StreamSource(landing=str(landing)), on_batch=None)

    env = {**settings_env(settings), "RECKON_WATERMARK_WAIT_TIMEOUT": "30s"}
    home = tmp_path / "airflow"
    first = run_dag_for_day(DAY, env, airflow_home=home, lookback_days=0)
    assert first.succeeded, f"{first.describe()}\n{first.log_tail}"
    assert set(first.task_states) == set(EXPECTED_UPSTREAM)
    assert first.returns["wait_for_watermark"]["days"] == [DAY.isoformat()]
    assert first.returns["report"]["days"] == [DAY.isoformat()]

    expected = landing_reference_canonical(spark, landing, settings, DAY)
    assert expected  # the day has windows
    assert canonical_rows(spark, settings, DAY) == expected
    with ReportDB.from_settings(settings) as db:
        audit = db.current_audit_run(DAY)
    assert audit is not None and audit.unexplained == 0
    per_currency: dict[str, Decimal] = {}
    for (_, _, currency), (total, _) in expected.items():
        per_currency[currency] = per_currency.get(currency, Decimal(0)) + total
    assert {c.currency: c.canonical_total for c in audit.currencies} == per_currency

    before = _table_state(spark, settings)
    second = run_dag_for_day(DAY, env, airflow_home=home, lookback_days=0)
    assert second.succeeded, f"{second.describe()}\n{second.log_tail}"
    assert _table_state(spark, settings) == before
    with ReportDB.from_settings(settings) as db:
        again = db.current_audit_run(DAY)
    assert again is not None and again.run_id != audit.run_id
    assert (again.currencies, again.status_counts) == (audit.currencies, audit.status_counts)
    assert len(audit.currencies) >= 2  # the demo day's money, per currency


def test_a_mistake_fails_at_once_and_anything_else_is_retried_naming_step_and_day(
        airflow_env, monkeypatch):
    """A ReckonError (the input or the configuration: a retry finds the same) becomes
    Airflow's fail-now exception naming the step and the day; a concurrent audit and any other
    error (a lost executor, a database timeout) stay retryable, with the step and day noted."""
    from airflow.sdk.exceptions import AirflowFailException

    import dags.reckon_nightly as nightly
    from app import pipeline
    from reckon.errors import ConcurrentAuditError, LayoutError

    plan = {"newest": "2026-01-02", "days": ["2026-01-01", "2026-01-02"]}
    failures: dict[str, BaseException] = {
        "layout": LayoutError("warehouse '/wh' was written by an earlier reckon layout"),
        "concurrent": ConcurrentAuditError("another audit of 2026-01-01 replaced them"),
        "transient": OSError("database timeout")}
    for name, error in failures.items():
        def failing(settings, day, error=error):
            raise error

        monkeypatch.setattr(pipeline, "run_replay", failing)
        with pytest.raises(BaseException) as caught:
            nightly._run_step("replay", plan)
        if name == "layout":
            assert isinstance(caught.value, AirflowFailException)
            assert str(caught.value).startswith("replay of 2026-01-01 failed: warehouse '/wh'")
        else:
            assert caught.value is error  # Airflow retries it
            if name == "transient":
                assert "reckon: replay of 2026-01-01 failed; the task is retried" in \
                    caught.value.__notes__
