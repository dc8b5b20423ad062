"""The warehouse's recorded event-time spec, read from its commit files: no JVM.

The spec lives in the ``event_time_spec`` table. Each version is one row, appended in one
commit whose ``userMetadata`` holds the same row as JSON, so any step reads the spec from the
commit files alone, before (or without) starting Spark: the nightly DAG's watermark sensor,
the report, ``reckon explain`` on DuckDB. Every command, DAG step, the bound what-if and the
audit's break stories take their rules from here: the settings a step runs with
(``settings_for``) or the rules in force at a version (``rules_in_force``, bounds per input
included). A version is read in the names code uses, whichever names it was recorded by
(``reckon.vocabulary.from_stored``: the warehouse records the settings' first names,
``STORED_KEYS``). What a recorded spec *means* is the pure rule in reckon.spec (``rules_of``,
``with_spec``, ``changed_spec``); writing a version needs Spark and is spark/spec.py's.

Example (on a warehouse whose stream windows by one minute, ``http`` bounded by 8 s)::

    settings_for(load_settings(), "audit").window        # '1m', not the default
    rules_in_force(wh).watermark.bound((0, "http"))      # 8000000 (microseconds)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from reckon.config import Settings
from reckon.errors import UsageError
from reckon.eventtime import EventTimeRules
from reckon.spec import changed_spec, describe_change, resolve, rules_of, with_spec
from reckon.timeutil import format_micros
from reckon.vocabulary import from_stored
from storage import commits
from storage import table_names as tb

__all__ = ["META_KEY", "NO_SPEC_TO_CHANGE", "SpecVersion", "recorded_versions",
           "rules_in_force", "settings_for", "spec_at"]

META_KEY = "reckon_spec"


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
        if not raw or META_KEY not in raw:
            continue
        row = json.loads(raw)[META_KEY]
        versions.append(SpecVersion(
            version=int(row["spec_version"]), spec=from_stored(row["spec"]), change=row["change"],
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


def spec_at(warehouse: str | Path, version: int | None = None) -> dict[str, Any] | None:
    """Spec version ``version`` (None: the newest, the one in force now); None when the
    warehouse has none recorded."""
    versions = recorded_versions(warehouse)
    if version is None:
        return versions[-1].spec if versions else None
    for v in versions:
        if v.version == version:
            return v.spec
    raise UsageError(f"the warehouse {str(warehouse)!r} has no event-time spec version "
                     f"{version} (it has {', '.join(str(v.version) for v in versions) or 'none'})")


def rules_in_force(warehouse: str | Path, base: EventTimeRules | None = None,
                   version: int | None = None) -> EventTimeRules:
    """The rules of the warehouse's spec version ``version`` (None: the newest, what its
    stream runs with now), bounds per input included; ``base`` (the built-in defaults when
    None) when no stream has recorded a spec yet. Why: a story of what the stream did
    (``reckon explain``, the audit's break stories) and every read of provisional_totals
    must judge events by the rules the stream ran with, not today's configuration.

    Example: ``read_provisional(spark, wh, rules_in_force(wh))``.
    """
    return rules_of(spec_at(warehouse, version), base)


NO_SPEC_TO_CHANGE = ("--change-spec: this warehouse has no event-time spec yet; its first "
                      "stream records one: start it without --change-spec")


def settings_for(settings: Settings, step: str, *, change: bool = False) -> Settings:
    """The settings ``step`` runs with on its warehouse: the recorded spec's values (a given
    value that disagrees is refused, naming both); with ``change`` (``reckon stream
    --change-spec``), the spec with the given values changed, read without Spark and
    recording nothing (``establish_spec`` records it), so the stream's start-up line shows
    what it will run with: a warehouse recorded with ``watermark_bound 0s`` and 1m windows,
    restarted with ``--change-spec --watermark-bound-by-source http=5s``, runs with bound 0s
    and 1m windows. A change that would be refused is refused here, in the same words."""
    current = spec_at(settings.warehouse_path)
    if not change:
        return resolve(settings, current, step)
    if current is None:
        raise UsageError(NO_SPEC_TO_CHANGE)
    return with_spec(settings, changed_spec(current, settings))
