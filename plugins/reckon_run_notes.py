"""An Airflow plugin: a nightly run triggered with a ``day`` shows that day in its note.

The UI's trigger form (and ``POST /api/v2/dags/reckon_nightly/dagRuns`` with only a conf)
makes a run whose id is ``manual__<time of the click>`` and whose note is empty, so the grid
cannot tell which day it is for. A DAG's own code cannot fix that: task processes in Airflow
3 reach the database only through the execution API, which can read a run's note but not
write it. A listener can: the scheduler calls ``on_dag_run_running`` (Airflow's listener
hook, from plugins) in its own database session as it starts the run, and what the
listener sets on the run is committed with the run's start.

Airflow loads it from ``[core] plugins_folder``: ``app.airflow_env.prepare_airflow_home``
(``scripts/airflow-local``, the demo) points it at this folder; an Airflow of your own needs
``AIRFLOW__CORE__PLUGINS_FOLDER=<repo>/plugins`` (or this file copied into its plugins
folder). Example: a run triggered with ``{"day": "2026-01-01"}`` shows the note
``day 2026-01-01``; a note the user wrote in the form is kept.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl
from airflow.plugins_manager import AirflowPlugin

log = logging.getLogger("reckon.airflow")


class RunNotes:
    """The listener: notes the day of a starting run of the nightly DAG (``run_note``'s rule)
    when it has none. Never fails the scheduler: a note it cannot set is a warning."""

    @hookimpl
    def on_dag_run_running(self, dag_run: Any, msg: str) -> None:
        from app.airflow_env import DAG_ID, run_note

        if dag_run.dag_id != DAG_ID:
            return
        try:
            note = run_note(dag_run.conf)
            if note and not dag_run.note:
                dag_run.note = note  # committed with the scheduler's start of the run
        except Exception as exc:  # a listener must not take the scheduler down
            log.warning("reckon could not note the day of run %s: %s", dag_run.run_id, exc)


class ReckonRunNotesPlugin(AirflowPlugin):
    """What Airflow's plugin manager finds in this folder."""

    name = "reckon_run_notes"
    listeners = [RunNotes()]
