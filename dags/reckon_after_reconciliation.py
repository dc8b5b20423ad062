"""An example downstream DAG: runs each time the nightly DAG's audit updates the
``reckon.reconciliation`` Asset, and reads which day is ready from the asset event's extra.

Copy it as the start of your own (a finance extract, a data-mart load): schedule on
``nightly_assets()["reconciliation"]`` (or ``canonical_totals``, ``report``), and take the day
from ``triggering_asset_events``, never from the clock. It starts paused, as every new DAG
does; unpause it to use it. Parsing it touches neither Spark nor a database.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import dag, get_current_context, task

from app.airflow_assets import nightly_assets

__all__ = ["DAG_ID"]

log = logging.getLogger("reckon.airflow")

DAG_ID = "reckon_after_reconciliation"
RECONCILIATION = nightly_assets()["reconciliation"]


@dag(dag_id=DAG_ID, schedule=[RECONCILIATION], start_date=datetime(2026, 1, 1, tzinfo=UTC),
     catchup=False, max_active_runs=1, tags=["reckon", "example"], doc_md=__doc__,
     default_args={"owner": "reckon", "retries": 0})
def reckon_after_reconciliation() -> None:
    @task(task_id="days_ready")
    def days_ready() -> dict[str, Any]:
        """The days whose reconciliation the triggering events announce (D first)."""
        events = get_current_context()["triggering_asset_events"][RECONCILIATION]
        days = sorted({str(e.extra.get("day")) for e in events if e.extra.get("day")},
                      reverse=True)
        log.info("reckon reconciliation ready for %s (%d asset event(s))",
                 ", ".join(days) or "no day named", len(events))
        return {"days": days, "events": len(events)}

    days_ready()


reckon_after_reconciliation()
