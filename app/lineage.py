"""OpenLineage for the nightly steps: which Delta tables, at which versions, each step read and
wrote, through Airflow's OpenLineage provider (apache-airflow-providers-openlineage).

The provider's listener sends a START and a COMPLETE (or FAIL) event for every task; for the
COMPLETE it asks the operator's ``get_openlineage_facets_on_complete(task_instance)``, the
method Airflow's own operators implement. A nightly step only knows the versions once it
ran, so ``attach`` gives the running task that method with the step's inputs and outputs:
each a ``file`` dataset named by the table's absolute path, with the Delta version it read
(the step's own record: the replay's ``event_log_version``, the audit's ``table_versions``)
or wrote (the table's newest version after the step, read from its Delta log, no Spark), as
a ``version`` facet. So a compliance user follows ``reconciliation`` vN back to the
``canonical_totals`` and ``event_log`` versions it was built from.

Where the events go is the provider's setting, e.g. one JSON event a line in a file::

    AIRFLOW__OPENLINEAGE__TRANSPORT='{"type": "file", "log_file_path": "/var/log/ol.jsonl",
                                      "append": true}'

or ``{"type": "http", "url": "http://marquez:5000"}``. Without a transport the provider sends
nothing (it only logs that it is not configured).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["STEP_TABLES", "attach", "step_lineage"]

#: step -> (tables read, tables written)
STEP_TABLES: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "compact": ((), ("event_log", "quarantine", "late_events", "provisional_deltas")),
    "replay": (("event_log",), ("canonical_totals", "uncaught_duplicates")),
    "audit": (("canonical_totals", "provisional_deltas"), ("reconciliation",)),
    "check": ((), ()),  # every table its suites checked, from its result
    "report": (("reconciliation", "canonical_totals"), ()),
}


def _read_versions(step: str, summary: Mapping[str, Any]) -> dict[str, int]:
    """The versions a step's result says it read (the newest day's result)."""
    if step == "replay" and summary.get("event_log_version") is not None:
        return {"event_log": int(summary["event_log_version"])}
    versions = summary.get("table_versions")
    if isinstance(versions, Mapping):
        return {str(k): int(v) for k, v in versions.items() if v is not None}
    suites = summary.get("suites")  # a check run: each suite's table and the version it checked
    if isinstance(suites, Sequence):
        return {str(s["table"]): int(s["table_version"]) for s in suites
                if isinstance(s, Mapping) and s.get("table_version") is not None}
    return {}


#: tables only the nightly steps write: the version at a step's end is the one it read
_NIGHTLY_WRITTEN = frozenset({"canonical_totals", "uncaught_duplicates", "reconciliation"})


def step_lineage(warehouse: Path, step: str, summaries: Sequence[Mapping[str, Any]],
                 written: Mapping[str, str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """{"inputs": [...], "outputs": [...]} of one step over the days it ran (``summaries``,
    oldest day first): each {"namespace": "file", "name": <table path>, "version": N | None}.
    An input's version is the one the step recorded reading; else, for a table only the
    nightly steps write, its version at the step's end; else (a table the stream appends to)
    None rather than a guess.
    ``written``: extra output files by name -> path (the report's HTML).

    >>> step_lineage(Path("/wh"), "replay", [{"event_log_version": 7}])["inputs"]
    [{'namespace': 'file', 'name': '/wh/event_log', 'version': 7}]
    """
    from storage.commits import current_version

    reads, writes = STEP_TABLES.get(step, ((), ()))
    seen: dict[str, int] = {}
    for summary in summaries:  # the newest day's record wins
        seen.update(_read_versions(step, summary))
    names = list(reads) + [t for t in seen if t not in reads]
    inputs = [{"namespace": "file", "name": str(warehouse / t),
               "version": seen[t] if t in seen else
               current_version(warehouse, t) if t in _NIGHTLY_WRITTEN else None}
              for t in names]
    outputs = [{"namespace": "file", "name": str(warehouse / t),
                "version": current_version(warehouse, t)} for t in writes]
    outputs += [{"namespace": "file", "name": path, "version": None}
                for path in (written or {}).values()]
    return {"inputs": inputs, "outputs": outputs}


def attach(task: Any, lineage: Mapping[str, list[dict[str, Any]]]) -> None:
    """Give the running ``task`` the OpenLineage provider's on-complete method, answering
    ``lineage`` (``step_lineage``) as input and output datasets with a version facet each.
    Nothing happens without the provider."""
    try:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import InputDataset, OutputDataset
        from openlineage.client.facet_v2 import dataset_version_dataset
    except ImportError:  # pragma: no cover - the provider is a dependency
        return

    def facets(item: Mapping[str, Any]) -> dict[str, Any]:
        if item.get("version") is None:
            return {}
        return {"version": dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=str(item["version"]))}

    def on_complete(_task_instance: Any) -> Any:
        return OperatorLineage(
            inputs=[InputDataset(namespace=i["namespace"], name=i["name"], facets=facets(i))
                    for i in lineage["inputs"]],
            outputs=[OutputDataset(namespace=o["namespace"], name=o["name"], facets=facets(o))
                     for o in lineage["outputs"]])

    task.get_openlineage_facets_on_complete = on_complete
