"""The warehouse's event-time spec, written: the stream's first start and ``--change-spec``.

Reading a recorded spec needs no JVM and is storage/spec_log.py's (``rules_in_force``,
``settings_for``, ``recorded_versions``); this module appends a version, which is a Delta
write: version 1 when a stream first starts (``establish_spec``), a new version on an explicit
``--change-spec``, applying after the last batch written, at its watermark.

Example::

    settings = establish_spec(spark, settings)   # the stream runs with what is recorded
"""

from __future__ import annotations

import getpass
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reckon.config import Settings
from reckon.errors import UsageError
from reckon.spec import changed_spec, describe_change, resolve, spec_of, with_spec
from reckon.timeutil import format_micros
from reckon.vocabulary import stored_key, to_stored
from storage import table_names as tb
from storage.spec_log import META_KEY, NO_SPEC_TO_CHANGE, recorded_versions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["establish_spec"]


def establish_spec(spark: SparkSession, settings: Settings, *, change: bool = False
                   ) -> Settings:
    """The stream's start: record the spec on a warehouse's first start, else run with the
    recorded one (a disagreeing given value refused); with ``change``, record the given
    values as a new version applying after the last batch written, at its watermark."""
    wh = settings.warehouse_path
    versions = recorded_versions(wh)
    if not versions:
        if change:
            raise UsageError(NO_SPEC_TO_CHANGE)
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
    # recorded by the settings' first names (reckon.vocabulary): old readers read it unchanged
    origins = {stored_key(k): v for k, v in settings.origins.items() if k in spec}
    spec = to_stored(spec)
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
    from spark import tables

    tables.ensure_table(spark, settings.warehouse_path, tb.EVENT_TIME_SPEC)
    (tables.single_row(spark, tb.EVENT_TIME_SPEC, row).write.format("delta").mode("append")
     .option("userMetadata", json.dumps({META_KEY: meta}, sort_keys=True))
     .save(tb.table_path(settings.warehouse_path, tb.EVENT_TIME_SPEC)))


def _last_batch(spark: SparkSession, wh: Path) -> tuple[int | None, int | None]:
    """(batch id, watermark in microseconds) of the newest batch in watermark_progress."""
    from pyspark.sql import functions as F

    if not tb.table_exists(wh, tb.WATERMARK_PROGRESS):
        return None, None
    from spark import tables

    rows = (tables.read_table(spark, wh, tb.WATERMARK_PROGRESS)
            .orderBy(F.col("processed_at").desc(), F.col("batch_id").desc())
            .select("batch_id", F.unix_micros("watermark").alias("wm")).limit(1).collect())
    return (None, None) if not rows else (int(rows[0].batch_id), rows[0].wm)
