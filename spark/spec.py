"""The ``event_time_spec`` table: where a warehouse keeps its event-time spec (reckon.spec).

Each version is one row, appended in one commit whose ``userMetadata`` holds the same row as
JSON, so any step reads the spec from the commit files alone, before (or without) starting
Spark: the nightly DAG's watermark sensor does. The stream writes version 1 when it first
starts, and a new version on an explicit ``--change-spec``.

Example:
    >>> settings = resolved_settings(load_settings(), "audit")  # doctest: +SKIP
    >>> settings.window   # what the warehouse's stream windows by, not the default
    '1m'
"""

from __future__ import annotations

import getpass
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from reckon.config import Settings
from reckon.errors import UsageError
from reckon.spec import changed_spec, describe_change, resolve, spec_of, with_spec
from reckon.timeutil import format_micros
from spark import tables as tb
from spark.spec_log import SpecVersion, current_spec, recorded_versions

__all__ = ["SpecVersion", "current_spec", "establish_spec", "recorded_versions",
           "resolved_settings"]

from spark.spec_log import _META_KEY


def resolved_settings(settings: Settings, step: str) -> Settings:
    """``settings`` with the warehouse's spec; a given value that disagrees is refused."""
    return resolve(settings, current_spec(settings.warehouse_path), step)


_NO_SPEC_TO_CHANGE = ("--change-spec: this warehouse has no event-time spec yet; its first "
                      "stream records one: start it without --change-spec")


def settings_after_change(settings: Settings) -> Settings:
    """What a stream started with ``--change-spec`` runs with: the warehouse's spec with the
    given values, read without Spark and recording nothing (``establish_spec`` records it).
    Its start-up line shows these, not the built-in defaults of what was not given: a
    warehouse recorded with ``watermark_bound 0s`` and 1m windows, restarted with
    ``--change-spec --watermark-bound-by-source http=5s``, runs with bound 0s and 1m windows.
    A change that would be refused is refused here, in the same words."""
    current = current_spec(settings.warehouse_path)
    if current is None:
        raise UsageError(_NO_SPEC_TO_CHANGE)
    return with_spec(settings, changed_spec(current, settings))


def establish_spec(spark: SparkSession, settings: Settings, *, change: bool = False
                   ) -> Settings:
    """The stream's start: record the spec on a warehouse's first start, else run with the
    recorded one (a disagreeing given value refused); with ``change``, record the given
    values as a new version applying after the last batch written, at its watermark."""
    wh = settings.warehouse_path
    versions = recorded_versions(wh)
    if not versions:
        if change:
            raise UsageError(_NO_SPEC_TO_CHANGE)
        _record(spark, settings, spec=spec_of(settings), version=1, change="first start",
                after_batch_id=None, after_watermark=None)
        return with_spec(settings, spec_of(settings))
    current = versions[-1].spec
    if not change:
        return resolve(settings, current, "stream")
    new = changed_spec(current, settings)
    what = describe_change(current, new)
    after_batch_id, after_watermark = _last_batch(spark, wh)
    _record(spark, settings, spec=new, version=versions[-1].version + 1, change=what,
            after_batch_id=after_batch_id, after_watermark=after_watermark)
    wm = "none" if after_watermark is None else format_micros(after_watermark)
    print(f"[stream] event-time spec version {versions[-1].version + 1}: {what}, from the "
          f"batch after {after_batch_id} (watermark {wm})", file=sys.stderr, flush=True)
    return with_spec(settings, new)


def _record(spark: SparkSession, settings: Settings, *, spec: dict[str, Any], version: int,
            change: str, after_batch_id: int | None, after_watermark: int | None) -> None:
    now = datetime.now(UTC)
    origins = {k: v for k, v in settings.origins.items() if k in spec}
    row = {"spec_version": version, "spec_json": json.dumps(spec, sort_keys=True),
           "change": change, "after_batch_id": after_batch_id,
           "after_watermark": None if after_watermark is None
           else datetime.fromtimestamp(after_watermark / 1e6, UTC),
           "recorded_at": now, "recorded_by": getpass.getuser(),
           "origins_json": json.dumps(origins, sort_keys=True)}
    meta = {"spec_version": version, "spec": spec, "change": change,
            "after_batch_id": after_batch_id, "after_watermark": after_watermark,
            "recorded_at": format_micros(int(now.timestamp() * 1e6)),
            "recorded_by": row["recorded_by"]}
    tb.ensure_table(spark, settings.warehouse_path, tb.EVENT_TIME_SPEC)
    (tb.single_row(spark, tb.EVENT_TIME_SPEC, row).write.format("delta").mode("append")
     .option("userMetadata", json.dumps({_META_KEY: meta}, sort_keys=True))
     .save(tb.table_path(settings.warehouse_path, tb.EVENT_TIME_SPEC)))


def _last_batch(spark: SparkSession, wh: Path) -> tuple[int | None, int | None]:
    """(batch id, watermark in microseconds) of the newest batch in watermark_progress."""
    from pyspark.sql import functions as F

    if not tb.table_exists(wh, tb.WATERMARK_PROGRESS):
        return None, None
    rows = (tb.read_table(spark, wh, tb.WATERMARK_PROGRESS)
            .orderBy(F.col("processed_at").desc(), F.col("batch_id").desc())
            .select("batch_id", F.unix_micros("watermark").alias("wm")).limit(1).collect())
    return (None, None) if not rows else (int(rows[0].batch_id), rows[0].wm)
