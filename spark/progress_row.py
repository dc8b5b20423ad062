"""A micro-batch's row in ``watermark_progress``: the watermark before and after it, the
per-partition maxima and last arrivals, the state a restart resumes from, its counts, the
rules it ran under and the input that held the watermark back.

The stream writes it last in every batch, once every other write of the batch has committed:
a restart trusts it (spark.stream), the nightly wait reads it (spark.progress).

>>> progress_row(spark, batch_id=7, query_id="q", processed_at=now, watermark_before=None,
...              after=state, rules=rules, counts=counts)  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from reckon.eventtime import (
    EventTimeRules,
    WatermarkPolicy,
    WatermarkState,
    input_label,
    input_partition,
    watermark_hold,
)
from reckon.timeutil import from_micros
from spark import tables as tb
from spark.constants import batch_timestamp

__all__ = ["PROGRESS_COUNTS", "partition_maxima", "progress_row"]

#: The batch's counts the row carries (BatchMetrics' fields of the same names).
PROGRESS_COUNTS = ("rows_in", "valid", "quarantined", "duplicates", "on_time", "revised",
                   "late", "duration_seconds")


def progress_row(spark: SparkSession, *, batch_id: int, query_id: str, processed_at: datetime,
                 watermark_before: int | None, after: WatermarkState, rules: EventTimeRules,
                 counts: Mapping[str, int | float]) -> DataFrame:
    """The batch's one row, as a DataFrame of watermark_progress's schema."""
    idle = list(after.idle_partitions(rules.watermark))
    maxima, arrivals = partition_maxima(after)
    row = {
        "batch_id": batch_id, "query_id": query_id, "processed_at": processed_at,
        "watermark_before": _moment(watermark_before), "watermark": _moment(after.watermark),
        "partition_max_event_time": _micros_map(spark, maxima),
        "partition_last_arrival": _micros_map(spark, arrivals),
        "idle_partitions": F.array(*[F.lit(p) for p in idle]),
        "state_json": after.to_json(),
        **{name: counts[name] for name in PROGRESS_COUNTS if name != "duration_seconds"},
        "duration_seconds": float(counts["duration_seconds"]),
        "rules_json": json.dumps(rules.to_record(), sort_keys=True),
        **_hold_columns(after, rules.watermark),
    }
    return tb.single_row(spark, tb.WATERMARK_PROGRESS, row)


def partition_maxima(after: WatermarkState) -> tuple[dict[int, int], dict[int, int]]:
    """Per partition, over its inputs: the newest event time and the last arrival the
    watermark state has seen (epoch microseconds). The progress row's two maps, and what the
    stream's metrics export per partition (BatchMetrics)."""
    maxima: dict[int, int] = {}
    arrivals: dict[int, int] = {}
    for key, pr in after.partitions.items():
        p = input_partition(key)
        maxima[p] = max(maxima.get(p, pr.max_event_time), pr.max_event_time)
        arrivals[p] = max(arrivals.get(p, pr.last_arrival), pr.last_arrival)
    return maxima, arrivals


def _hold_columns(after: WatermarkState, policy: WatermarkPolicy) -> dict[str, object]:
    """``held_by``, ``held_back_seconds``: which input holds the watermark back after the
    batch and by how much (``reckon.eventtime.watermark_hold``)."""
    hold = watermark_hold(after, policy)
    return {"held_by": None if hold is None else input_label(hold.input),
            "held_back_seconds": None if hold is None or hold.held_back is None
            else Decimal(hold.held_back) / 1_000_000}


def _moment(micros: int | None) -> datetime | None:
    return None if micros is None else from_micros(micros)


def _micros_map(spark: SparkSession, values: dict[int, int]) -> Column:
    """{partition: epoch microseconds} as a map<int, timestamp> column; the times stay out of
    the generated code (spark.constants), the partitions, which rarely change, do not."""
    if not values:
        return F.create_map().cast("map<int,timestamp>")
    items: list[Column] = []
    for p, us in sorted(values.items()):
        items += [F.lit(p).cast("int"), batch_timestamp(spark, us)]
    return F.create_map(*items)
