"""What the nightly DAG produces, as Airflow Assets a user's DAG can be scheduled on.

Each asset is a Delta table (or the reports' folder) of the warehouse, by a stable name
(``reckon.canonical_totals``, ``reckon.reconciliation``, ``reckon.report``) and its ``file://``
URI. The nightly DAG's ``replay``, ``audit`` and ``report`` tasks declare them as outlets;
each asset event carries the run's day in its extra (``day``: D, ``days``: the lookback's
days, plus the step's versions or paths), so a downstream DAG reads which day is ready from
``triggering_asset_events`` (see ``dags/reckon_after_reconciliation.py``).

Example::

    from airflow.sdk import dag
    from app.airflow_assets import nightly_assets
    @dag(schedule=[nightly_assets()["reconciliation"]])
    def my_dag(): ...
"""

from __future__ import annotations

from airflow.sdk import Asset

from app.settings import load_settings
from reckon.config import Settings

__all__ = ["ASSET_TABLES", "nightly_assets"]

#: asset key -> the folder under the warehouse it stands for
ASSET_TABLES = {"canonical_totals": "canonical_totals", "reconciliation": "reconciliation",
                "report": "reports"}


def nightly_assets(settings: Settings | None = None) -> dict[str, Asset]:
    """{key: Asset} for the warehouse of ``settings`` (default: the environment's)."""
    wh = (settings or load_settings()).warehouse_path.resolve()
    return {key: Asset(name=f"reckon.{key}", uri=f"file://{wh}/{folder}", group="reckon")
            for key, folder in ASSET_TABLES.items()}
