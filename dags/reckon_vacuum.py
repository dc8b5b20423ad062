"""The weekly retention DAG: VACUUM of every reckon table (spark.retention).

The compactions (the stream's and the nightly one) and re-run nightly days leave replaced files behind, so the warehouse only
grows until a VACUUM deletes the files no table version within ``vacuum_retain`` uses. Once a
week is enough. The writers need not stop for it, and a re-run finds nothing left to do.
Parsing this file touches neither Spark nor any database.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import CronDataIntervalTimetable, Param, dag, get_current_context, task

from app.pipeline import task_retries
from app.settings import load_settings

__all__ = ["DAG_ID", "reckon_vacuum"]

log = logging.getLogger("reckon.airflow")

DAG_ID = "reckon_vacuum"

DOC_MD = """
# reckon_vacuum: the warehouse's unused files deleted, once a week

Runs `reckon vacuum` (Sundays 03:00 UTC): in every reckon table, the files that no
version newer than `vacuum_retain` uses are deleted (default 30d; at least 7d). Older
versions stop being readable:
- time travel to them;
- the change-feed history `reckon explain` tells. It then tells what is left and says where
  the history was cut;
- a re-audit of a day whose replay pinned such a version. The audit asks for a new replay.

Trigger it with `dry_run` set to count the files without deleting any. Without Airflow:
`reckon vacuum --warehouse WH [--retain 30d] [--dry-run]`.
"""


def _on_failure(context: Any) -> None:
    """One greppable line per failed task (alerting reads logs)."""
    ti = context.get("task_instance") or context.get("ti")
    log.error("reckon_vacuum FAILED: dag=%s task=%s logical_date=%s try=%s error=%s", DAG_ID,
              getattr(ti, "task_id", "?"), context.get("logical_date"),
              getattr(ti, "try_number", "?"), context.get("exception"))


@dag(
    dag_id=DAG_ID,
    schedule=CronDataIntervalTimetable("0 3 * * 0", timezone="UTC"),
    start_date=datetime(2026, 1, 4, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    doc_md=DOC_MD,
    tags=["reckon", "retention"],
    params={"dry_run": Param(False, type="boolean",
                             description="count the files it would delete, delete none")},
    default_args={
        "owner": "reckon",
        "retries": task_retries(os.environ),
        "retry_delay": timedelta(minutes=10),
        "execution_timeout": timedelta(hours=3),
        "on_failure_callback": _on_failure,
    },
)
def reckon_vacuum() -> None:
    @task(task_id="vacuum")
    def vacuum() -> dict[str, Any]:
        """VACUUM of every reckon table with the configured retention."""
        from app import pipeline

        context = get_current_context()
        when = context.get("data_interval_end") or context.get("logical_date")
        day = (when or datetime.now(UTC)).astimezone(UTC).date()
        result = pipeline.run_vacuum(load_settings(spark_log_to_stdout=True), day,
                                     dry_run=bool(context["params"].get("dry_run")))
        log.info("reckon vacuum: %s", result.summary)
        return result.to_dict()

    vacuum()


reckon_vacuum()
