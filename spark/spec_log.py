"""The warehouse's recorded event-time spec, read from its commit files: no Spark.

``spark.spec`` records a version (with Spark) and resolves settings against it; reading what
is recorded needs only the Delta log, so a JVM-free reader (``reports.duck``) folds
provisional_totals under the same rules the Spark path does (``warehouse_rules``).

>>> warehouse_rules("/no/such/warehouse").windows.size > 0
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from reckon.config import load_settings
from reckon.eventtime import EventTimeRules
from reckon.spec import describe_change, with_spec
from reckon.timeutil import format_micros
from spark import commits
from spark import table_names as tb

__all__ = ["SpecVersion", "current_spec", "recorded_versions", "warehouse_rules"]

_META_KEY = "reckon_spec"


@dataclass(frozen=True)
class SpecVersion:
    """One recorded version of a warehouse's spec."""

    version: int
    spec: dict[str, Any]
    change: str
    after_batch_id: int | None
    after_watermark: int | None  # microseconds since the epoch, UTC
    recorded_at: str
    recorded_by: str

    def describe(self) -> str:
        """``version 2 (watermark_bound 5s -> 2s) from after batch 41 at watermark ...``."""
        if self.after_batch_id is None:
            return f"version {self.version} ({self.change}), recorded {self.recorded_at}"
        wm = "none" if self.after_watermark is None else format_micros(self.after_watermark)
        return (f"version {self.version} ({self.change}) from after batch "
                f"{self.after_batch_id}, watermark {wm}; recorded {self.recorded_at} by "
                f"{self.recorded_by}")


def recorded_versions(warehouse: str | Path) -> list[SpecVersion]:
    """Every recorded version, oldest first, read from the table's commit files (no Spark).
    Empty when the warehouse has no spec yet."""
    if not tb.table_exists(warehouse, tb.EVENT_TIME_SPEC):
        return []
    versions = []
    for _v, info in commits.commit_infos(warehouse, tb.EVENT_TIME_SPEC, -1):
        raw = info.get("userMetadata")
        if not raw or _META_KEY not in raw:
            continue
        row = json.loads(raw)[_META_KEY]
        versions.append(SpecVersion(
            version=int(row["spec_version"]), spec=dict(row["spec"]), change=row["change"],
            after_batch_id=row.get("after_batch_id"), after_watermark=row.get("after_watermark"),
            recorded_at=row["recorded_at"], recorded_by=row["recorded_by"]))
    return _in_shown_names(sorted(versions, key=lambda v: v.version))


def _in_shown_names(versions: list[SpecVersion]) -> list[SpecVersion]:
    """``versions`` with each change told again from the specs either side of it, so one
    recorded before the settings' renaming (``lateness 5s -> 2s``) reads as a new one
    (``watermark_bound 5s -> 2s``); the first start keeps its recorded words."""
    retold = [replace(v, change=describe_change(before.spec, v.spec) or v.change)
              for before, v in pairwise(versions)]
    return versions[:1] + retold


def current_spec(warehouse: str | Path) -> dict[str, Any] | None:
    """The spec in force (the newest version), or None when none is recorded."""
    versions = recorded_versions(warehouse)
    return versions[-1].spec if versions else None


def warehouse_rules(warehouse: str | Path) -> EventTimeRules:
    """The event-time rules the warehouse's deltas were written under: its recorded spec
    over the built-in defaults, or the defaults' own rules when no stream has recorded a
    spec yet.

    Example: ``read_provisional(spark, wh, warehouse_rules(wh))``.
    """
    base = load_settings(env={}, warehouse=str(warehouse))
    spec = current_spec(warehouse)
    return (with_spec(base, spec) if spec else base).event_time_rules()
