"""The nightly reconciliation DAG: wait for the stream, compact, replay, audit, check, report.

One DAG per file. Every task calls one step function of ``app.pipeline`` (the same ones
the ``reckon`` CLI calls) for every day of its lookback window, and passes on only dates
and small JSON dicts. Parsing this file touches neither Spark nor any database: settings
are read from the environment, heavy imports happen inside the tasks.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import (
    BaseSensorOperator,
    CronDataIntervalTimetable,
    Param,
    PokeReturnValue,
    dag,
    get_current_context,
    task,
)
from airflow.sdk.exceptions import AirflowFailException

from app import notify
from app.airflow_assets import nightly_assets
from app.pipeline import nightly_days, task_retries
from app.settings import load_settings
from reckon.config import PROJECT_ROOT, Settings
from reckon.errors import (
    ConcurrentAuditError,
    ConcurrentWriterError,
    DataQualityError,
    ReckonError,
)
from reckon.timeutil import MICROS_PER_SECOND, describe_duration, parse_duration

__all__ = ["DAG_ID", "STEP_TASKS", "reckon_nightly"]

log = logging.getLogger("reckon.airflow")

DAG_ID = "reckon_nightly"
STEP_TASKS = ("wait_for_watermark", "compact", "replay", "audit", "check", "report")
SUBMIT_ENTRY = PROJECT_ROOT / "app" / "submit_replay.py"

RETRIES = task_retries(os.environ)

_SETTINGS: Settings = load_settings()  # env + optional TOML only: no Spark, no database
_WAIT_SECONDS = parse_duration(_SETTINGS.watermark_wait_timeout) // MICROS_PER_SECOND
_POLL_SECONDS = max(1, parse_duration(_SETTINGS.watermark_poll) // MICROS_PER_SECOND)
_SMALL_LIST = 20  # lists longer than this stay out of XCom
ASSETS = nightly_assets(_SETTINGS)


DOC_MD = f"""
# reckon_nightly: canonical totals and the audit, once per UTC day

**Which day.** A run processes day **D**, the same way however it was started:

1. the run's `day` param, if given (`--conf '{{"day": "2026-01-01"}}'`, or the trigger form);
2. else **the UTC date of the run's logical date**: the scheduled run for
   `[D 00:00, D+1 00:00)` (it starts just after midnight at the end of D; its logical date is
   `D 00:00` UTC), a backfill of D, `airflow dags trigger {DAG_ID} --logical-date D`, the REST
   API with `"logical_date": "D"`, and `dag.test(logical_date=D)`;
3. else (a run triggered without a logical date) the last complete UTC day before the trigger.

A run triggered with a `day` (the trigger form too) shows the note `day D` in the grid
(the scheduler's listener, `plugins/reckon_run_notes.py`).

**Re-run day D**: `airflow dags trigger {DAG_ID} --conf '{{"day": "D"}}' --run-id manual__day-D`
(a new run, any time, its id naming the day; or `--logical-date D` if no run of D exists
yet), or clear its run:
`airflow tasks clear {DAG_ID} --start-date D --end-date D --yes`.

**Lookback.** Each step runs for every day of `[D - lookback_days, D]` (oldest first):
late events keep arriving for a while, and re-running yesterday is cheap and idempotent.
Param `lookback_days` (default {_SETTINGS.lookback_days}, from `RECKON_LOOKBACK_DAYS`);
set it per run in the trigger form or with `--conf '{{"lookback_days": 3}}'`. Param
`report_out` (default empty: `<warehouse>/reports/<day>`) sends each day's report to
`<report_out>/<day>` instead.

- `wait_for_watermark`: a sensor in *reschedule* mode: every
  {describe_duration(_POLL_SECONDS * MICROS_PER_SECOND)} (`RECKON_WATERMARK_POLL`) it looks
  whether the stream's global watermark passed the end of D's last window + allowed lateness
  (midnight + allowed lateness for tumbling windows), so no event of D can still change a
  provisional total; between looks it holds no worker slot, and a look reads the Delta log's
  statistics (no Spark). Fails without retry after
  {describe_duration(_WAIT_SECONDS * MICROS_PER_SECOND)} (`RECKON_WATERMARK_WAIT_TIMEOUT`)
  naming the day and the watermark it saw: check the stream is running and every partition
  delivers.
- `compact`: rewrites the day's partitions of the stream tables (`event_log`, `quarantine`,
  `late_events`, `provisional_totals`), written as a few small files per micro-batch, into a few
  large files (Delta OPTIMIZE; rows unchanged, a compacted partition is left alone), so the
  replay and later queries open few files.
- `replay`: recomputes `canonical_totals` for each day from the full `event_log`, and in the
  same pass `uncaught_duplicates` (what the stream counted twice); replaces only that day's
  partitions.
- `audit`: reconciles provisional against canonical totals per (window, key, currency) from
  those per-window tables alone (amounts of two currencies are never added), writes
  `reconciliation` and the report DB rows.
- `check`: runs the Great Expectations suites of every day and records the results (Data Docs
  too); it does not fail on a blocking expectation, so that the report still comes out.
- `report`: renders the day's report (HTML, PDF, CSV, with the check results: a day with
  unexplained breaks is the day finance needs it) and records its SHA-256 in the report DB.
- `quality_gate`: fails the run, without retries, naming every day whose current check run had a
  blocking failure; the report of that day says which expectations. It reads the verdict the
  check recorded (`reckon/quality_verdict.py`), the one Data Docs and the report show.

Every step is idempotent per day, so retries, re-runs and backfills are safe. **A day with no
events** is a day like any other: the replay writes an empty day, the audit, the checks and
the report say "no events" (the checks' verdict: "passed (no events on the day)", each suite
"passed (no events)", green in Data Docs). **Failures**: a mistake in the input or the
configuration (a day
not replayed, a bad setting, a warehouse of an earlier layout, a blocking data-quality
failure) fails the task at once, without retries, naming the step and the day; anything else
(a lost Spark executor, a database timeout) is retried {RETRIES} times with exponential
backoff from 5 minutes (`RECKON_AIRFLOW_RETRIES`).

**Backfill** days D1..D2 (logical dates = the days):
`airflow backfill create --dag-id {DAG_ID} --from-date D1 --to-date D2`
(add `--reprocess-behavior completed` to redo days that already succeeded).

**Without Airflow**, the same steps for day D from a shell:
`reckon compact --date D && reckon replay --date D && reckon audit --date D &&
reckon check --date D && reckon report --date D --out DIR`.

**Configuration** comes from the environment of the workers (`RECKON_*`, see
`reckon.example.toml`, `reckon/config.py`); set at least `RECKON_WAREHOUSE` to an absolute path (or URI).

**Spark-submit switch.** The DAG's shape is the same whatever the environment that parses it;
the `replay` task reads how to run when it runs, from the worker's settings. By default
(`RECKON_REPLAY_MODE=python`) it replays inside the task (local Spark). With
`RECKON_REPLAY_MODE=spark-submit` it submits `app/submit_replay.py` (a small entry script
calling the same `app.pipeline.run_replay`) through Airflow's Spark hook
(apache-airflow-providers-apache-spark 5.x; 6.x is avoided because it pulls `pyspark-client`,
which overwrites the pinned pyspark's files), on the Airflow connection `RECKON_SPARK_CONN_ID`
(default `reckon_spark`), e.g.
`AIRFLOW_CONN_RECKON_SPARK='{{"conn_type": "spark", "host": "spark://master:7077"}}'`, with
`spark-submit` on the worker's PATH and the Delta jars from `RECKON_JARS_DIR`.

A failing task logs one line `reckon_nightly FAILED: dag=... task=... logical_date=... day=...`
(logger `reckon.airflow`). **Notifications** (mail through the SMTP connection, a Slack incoming
webhook), each off until turned on: a task's final failure (`RECKON_NOTIFY_ON_FAILURE`), unexplained
or material breaks (`RECKON_NOTIFY_ON_BREAKS`), a failed quality gate
(`RECKON_NOTIFY_ON_QUALITY_GATE`), a day's report ready (`RECKON_NOTIFY_REPORT_READY`); see the
README, Notifications.

**Assets**: `replay` updates `reckon.canonical_totals`, `audit` `reckon.reconciliation`, `report`
`reckon.report`; each event's extra has the `day` (D) and the lookback's `days`, so a DAG
scheduled on them knows which day is ready (example: `reckon_after_reconciliation`).
"""


# ----------------------------------------------------------------------------- helpers


def _task_settings() -> Settings:
    """The settings a task runs with: the worker's environment, and Spark's log lines and
    its JVM's stderr on stdout (Airflow files everything a task writes to stderr as
    ERROR; spark.session). A warehouse shared by several OS accounts (``shared_warehouse =
    "group"``) gets group-writable files from the task too, as from ``reckon``."""
    from storage.sharing import share_process

    settings = load_settings(spark_log_to_stdout=True)
    share_process(settings.shared_warehouse)
    return settings


def _day_of(context: Any) -> str:
    """The run's day D for a message, or "?" when it cannot be told."""
    try:
        return _window(context)[0].isoformat()
    except (ReckonError, KeyError, TypeError, ValueError):
        return "?"


def _on_failure(context: Any) -> None:
    """One greppable line per failed task try (the notice, if on, is the FailureNotifier's)."""
    ti = context.get("task_instance") or context.get("ti")
    day = _day_of(context)
    log.error("reckon_nightly FAILED: dag=%s task=%s logical_date=%s day=%s try=%s error=%s",
              getattr(ti, "dag_id", DAG_ID), getattr(ti, "task_id", "?"),
              context.get("logical_date"), day, getattr(ti, "try_number", "?"),
              context.get("exception"))


def _window(context: Any) -> tuple[date, list[date]]:
    """(D, the days [D - lookback_days, D] oldest first) for the running task: the rule of
    ``app.pipeline.nightly_days`` (the DAG's doc says it in words)."""
    dag_run = context.get("dag_run")
    params = context["params"]
    return nightly_days(day=str(params.get("day") or ""),
                        logical_date=context.get("logical_date"),
                        run_after=getattr(dag_run, "run_after", None) or datetime.now(UTC),
                        lookback_days=int(params["lookback_days"]))


def _plan(context: Any) -> dict[str, Any]:
    newest, days = _window(context)
    return {"newest": newest.isoformat(), "days": [d.isoformat() for d in days]}


class WatermarkSensor(BaseSensorOperator):
    """Waits until the stream's watermark passed the end of D's last window + allowed_lateness.

    Reschedule mode: each look is a short task try that gives its worker slot back until the
    next one, so a day whose watermark is hours away (the first night, a stopped stream) holds
    nothing. A look reads the Delta log's statistics, not Spark. After ``wait_seconds`` since
    the first look it fails without retry (a retry would wait again), saying in words how
    long it waited and which watermark it saw. Returns the run's plan (D and the lookback's
    days) to the next task."""

    def __init__(self, *, wait_seconds: int, poll_seconds: int, **kwargs: Any) -> None:
        super().__init__(mode="reschedule", poke_interval=poll_seconds,
                         timeout=wait_seconds + 3 * poll_seconds, **kwargs)
        self.wait_seconds = wait_seconds

    def poke(self, context: Any) -> PokeReturnValue | bool:
        from app import pipeline

        plan = _plan(context)
        settings = _task_settings()
        newest = date.fromisoformat(plan["newest"])
        result = pipeline.check_watermark(settings, newest)
        if result is not None:
            log.info("reckon wait_for_watermark %s", result.describe())
            return PokeReturnValue(is_done=True,
                                   xcom_value={**plan, "watermark": _small(result.summary)})
        first = context["ti"].get_first_reschedule_date(context)
        waited = 0.0 if first is None else (datetime.now(UTC) - first).total_seconds()
        if waited >= self.wait_seconds:
            raise AirflowFailException(pipeline.watermark_not_ready(settings, newest, waited))
        return False


def _small(summary: dict[str, Any]) -> dict[str, Any]:
    """What goes to XCom: scalars and short lists of scalars; never rows of data."""
    scalar = (str, int, float, bool, type(None))
    out: dict[str, Any] = {}
    for key, value in summary.items():
        if isinstance(value, scalar):
            out[key] = value
        elif (isinstance(value, list | tuple) and len(value) <= _SMALL_LIST
              and all(isinstance(v, scalar) for v in value)):
            out[key] = list(value)
    return out


def _run_step(step: str, plan: dict[str, Any],
              per_day: Callable[[str], dict[str, Any]] | None = None,
              after: Callable[[Settings, Any], None] | None = None) -> dict[str, Any]:
    """Call one app.pipeline step for every day of the plan (``per_day(day)``: that day's
    extra arguments; ``after(settings, result)``: told each day's StepResult); pass on dates
    and summaries, and mark the task's assets' events with the day."""
    from app import pipeline

    functions: dict[str, Any] = {"compact": pipeline.run_compact, "replay": pipeline.run_replay,
                                 "audit": pipeline.run_audit, "check": pipeline.run_check,
                                 "report": pipeline.run_report}
    settings = _task_settings()
    results: dict[str, dict[str, Any]] = {}
    summaries: list[dict[str, Any]] = []
    for text in plan["days"]:
        kwargs = per_day(text) if per_day else {}
        try:
            result = functions[step](settings, date.fromisoformat(text), **kwargs)
        except (ConcurrentAuditError, ConcurrentWriterError):
            raise  # another run of the day's step overtook or holds it: a retry is the fix
        except ReckonError as exc:  # the input or the configuration: a retry finds the same
            raise AirflowFailException(f"{step} of {text} failed: {exc}") from exc
        except Exception as exc:  # transient (Spark, a database): retried with backoff
            exc.add_note(f"reckon: {step} of {text} failed; the task is retried")
            raise
        sentence = result.describe()  # the CLI's words; a day's sentence gets the step's name
        log.info("reckon %s", sentence if sentence.startswith(step) else f"{step} {sentence}")
        if result.summary.get("replaced_signed_off_run"):
            log.warning("reckon %s %s replaced run %s (%s): the day needs a new sign-off (its "
                        "report says what changed)", step, text,
                        result.summary["replaced_signed_off_run"],
                        result.summary.get("replaced_run_state", "signed off"))
        results[text] = _small(result.summary)
        summaries.append(result.summary)
        if after is not None:
            after(settings, result)
    _mark_assets(plan, results)
    from app import lineage

    written = {d: str(s["html_path"]) for d, s in zip(plan["days"], summaries, strict=True)
               if s.get("html_path")}
    lineage.attach(get_current_context()["task"],
                   lineage.step_lineage(settings.warehouse_path, step, summaries, written))
    return {"newest": plan["newest"], "days": list(plan["days"]), "step": step,
            "results": results}


def _mark_assets(plan: dict[str, Any], results: dict[str, dict[str, Any]]) -> None:
    """The extra of each asset event the running task emits: the day D, the lookback's days,
    and for D what the step recorded (versions, the report's path)."""
    context = get_current_context()
    outlets = getattr(context.get("task"), "outlets", None) or []
    newest = results.get(plan["newest"], {})
    keep = ("event_log_version", "run_id", "html_path", "out_dir", "sha256", "windows",
            "unexplained", "rows")
    extra = {"day": plan["newest"], "days": list(plan["days"]),
             **{k: newest[k] for k in keep if k in newest}}
    for asset in outlets:
        context["outlet_events"][asset].extra.update(extra)


def _notify_breaks(settings: Settings, result: Any) -> None:
    """The ``breaks`` notice of an audited day (unexplained or material breaks), if on."""
    if not notify.enabled(settings, "breaks"):
        return
    from reckon.materiality import thresholds
    from reports.db.repository import ReportDB

    audit = result.detail
    material: dict[str, int] = {}
    if audit.breaks_recorded:  # the run's own rule, as the report and the workbench mark them
        with ReportDB.from_settings(settings) as db:
            material = notify.material_of_run(db, audit.run_id,
                                              thresholds(settings.material_gap))
    notify.send(settings, notify.breaks_notice(day=audit.day, run_id=audit.run_id,
                                               unexplained=audit.unexplained,
                                               material=material),
                get_current_context())


def _notify_report(settings: Settings, result: Any) -> None:
    """The ``report_ready`` notice of a rendered day: its per-currency headline, its path
    (and the workbench's links with ``workbench_url``)."""
    if not notify.enabled(settings, "report_ready"):
        return
    from reports.db.repository import ReportDB

    report = result.detail
    with ReportDB.from_settings(settings) as db:
        run = db.current_audit_run(date.fromisoformat(result.day))
    notice = notify.report_ready_notice(
        day=result.day, run_id=report.audit_run_id,
        headline=notify.currency_headline(run.currencies if run else ()),
        path=report.html_path, unexplained=run.unexplained if run else 0,
        workbench_url=settings.workbench_url)
    notify.send(settings, notice, get_current_context())


def report_folder(base: str, day: str) -> str | None:
    """Where the report task writes ``day``'s report: ``<base>/<day>``, one folder per day so
    the lookback's days never overwrite one another's files (and the SHA-256 each records stays
    true); None (the default ``<warehouse>/reports/<day>``) without a base."""
    return str(Path(base) / day) if base else None


def submit_replay_command(settings: Settings, plan: dict[str, Any]) -> dict[str, Any]:
    """What the replay task hands Airflow's Spark hook in spark-submit mode: the entry
    script, the day D and the lookback, the Delta jars, on the settings' connection.

    The entry replays ``[D - lookback, D]``, the plan's days (``plan["days"]``, oldest first).
    """
    from spark.session import local_jars

    return {"conn_id": settings.spark_conn_id, "application": str(SUBMIT_ENTRY),
            "jars": ",".join(local_jars(settings)), "name": f"reckon-replay-{plan['newest']}",
            "application_args": ["--date", plan["newest"],
                                 "--lookback-days", str(len(plan["days"]) - 1)]}


def _submit_replay(plan: dict[str, Any]) -> dict[str, Any]:
    """The replay through spark-submit (``replay_mode = "spark-submit"``): the worker's
    settings name the connection; a failed submit fails the task (retried like any other)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    command = submit_replay_command(_task_settings(), plan)
    hook = SparkSubmitHook(conn_id=command["conn_id"], jars=command["jars"],
                           name=command["name"], application_args=command["application_args"])
    hook.submit(application=command["application"])
    log.info("reckon replay %s submitted through %s: days %s", command["application"],
             command["conn_id"], ", ".join(plan["days"]))
    return {"newest": plan["newest"], "days": list(plan["days"]), "step": "replay",
            "mode": "spark-submit", "results": {}}


# ----------------------------------------------------------------------------- the DAG


@dag(
    dag_id=DAG_ID,
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    doc_md=DOC_MD,
    tags=["reckon", "reconciliation"],
    params={"day": Param("", type="string", pattern=r"^(\d{4}-\d{2}-\d{2})?$",
                         description="the UTC day to process, YYYY-MM-DD (empty: the day of "
                         "the run's logical date)"),
            "lookback_days": Param(_SETTINGS.lookback_days, type="integer", minimum=0,
                                   maximum=31, description="also re-run this many days "
                                   "before D (late events keep arriving)"),
            "report_out": Param("", type="string",
                                description="folder for the reports (empty: the default, "
                                "<warehouse>/reports/<day>)")},
    default_args={
        "owner": "reckon",
        "retries": RETRIES,
        "retry_delay": timedelta(minutes=5),
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": timedelta(hours=1),
        "execution_timeout": timedelta(hours=2),
        "on_failure_callback": [_on_failure, notify.FailureNotifier(_task_settings, _day_of)],
    },
)
def reckon_nightly() -> None:
    # a look is quick: Airflow's retries would only wait again
    wait = WatermarkSensor(task_id="wait_for_watermark", wait_seconds=_WAIT_SECONDS,
                           poll_seconds=_POLL_SECONDS, retries=0,
                           execution_timeout=timedelta(minutes=10))

    @task(task_id="compact", execution_timeout=timedelta(hours=1))
    def compact(plan: dict[str, Any]) -> dict[str, Any]:
        """Each day's small files of the stream tables rewritten into a few large ones."""
        return _run_step("compact", plan)

    @task(task_id="replay", execution_timeout=timedelta(hours=3),
          outlets=[ASSETS["canonical_totals"]])
    def replay(plan: dict[str, Any]) -> dict[str, Any]:
        """canonical_totals for each day from the full event log (replaceWhere that day), in
        this task or through spark-submit, as the worker's ``replay_mode`` says."""
        if _task_settings().replay_mode == "spark-submit":
            return _submit_replay(plan)
        return _run_step("replay", plan)

    @task(task_id="audit", execution_timeout=timedelta(hours=1),
          outlets=[ASSETS["reconciliation"]])
    def audit(plan: dict[str, Any]) -> dict[str, Any]:
        """Reconciliation of provisional vs canonical totals, recorded in the report DB."""
        return _run_step("audit", plan, after=_notify_breaks)

    @task(task_id="check", execution_timeout=timedelta(hours=1))
    def check(plan: dict[str, Any]) -> dict[str, Any]:
        """Great Expectations suites of every day, recorded; failures are the gate's to raise."""
        return _run_step("check", plan, lambda day: {"fail_on_blocking": False})

    @task(task_id="report", execution_timeout=timedelta(hours=1), outlets=[ASSETS["report"]])
    def report(plan: dict[str, Any]) -> dict[str, Any]:
        """HTML/PDF/CSV report of each day, hashed and recorded in the report DB."""
        base = str(get_current_context()["params"].get("report_out") or "").strip()
        return _run_step("report", plan, lambda day: {"out": report_folder(base, day)},
                         after=_notify_report)

    # a data-quality failure is the data's, not the machine's: a retry finds the same
    @task(task_id="quality_gate", retries=0, execution_timeout=timedelta(minutes=15))
    def quality_gate(plan: dict[str, Any]) -> dict[str, Any]:
        """Fails the run when a day's checks had a blocking failure (after its report)."""
        from app import pipeline

        settings = _task_settings()
        try:
            result = pipeline.quality_gate(settings,
                                           [date.fromisoformat(d) for d in plan["days"]])
        except DataQualityError as exc:
            notify.send(settings, notify.quality_gate_notice(days=list(plan["days"]),
                                                             reason=str(exc)),
                        get_current_context())
            raise
        log.info("reckon %s", result.describe())
        return {"newest": plan["newest"], "days": list(plan["days"]), "step": "quality_gate",
                "results": _small(result.summary)}

    plan: Any = wait.output
    audited = audit(replay(compact(plan)))  # type: ignore[arg-type]  # an XComArg is the dict
    quality_gate(report(check(audited)))  # type: ignore[arg-type]


reckon_nightly()
