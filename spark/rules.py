"""The event-time rules of ``reckon.eventtime`` as Spark columns. No rule is restated here:
each column is built by calling the pure predicate on Column arguments, so the stream, the
replay and the reference share one definition (checked by the property tests)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from reckon.eventtime import (
    Disposition,
    WindowSpec,
    WindowStatus,
    is_beyond_allowed_lateness,
    is_open,
)
from reckon.reconcile import FALLBACK_STATUS, STATUS_RULES, Measure

__all__ = ["arrival_order", "disposition_col", "recon_status_col", "status_col",
           "window_starts_col"]


def arrival_order(time: str = "arrival_time") -> tuple[str, ...]:
    """The columns that order the copies of an event_id by arrival, ties broken as the
    reference does (``reckon.reference.arrival_order``); a landing file's offset is a line
    number within ``input_file``. The first copy in this order is the one that counts."""
    return (time, "partition", "input_file", "offset")


def window_starts_col(event_us: Column, spec: WindowSpec) -> Column:
    """An array of the start (microseconds) of every window containing the event."""
    return F.array(*spec.window_starts(event_us))


def _by_watermark(window_end_us: Column, watermark: int | Column | None, allowed_lateness: int, *,
                  open_: str, beyond_allowed_lateness: str, within_allowed_lateness: str) -> Column:
    """The three-way split every verdict makes: end > WM, end + G <= WM, or in between.
    The watermark in microseconds, as a number or a column (spark.constants)."""
    if watermark is None:
        return F.lit(open_)
    wm = watermark if isinstance(watermark, Column) else F.lit(watermark)
    return (F.when(is_open(window_end_us, wm), F.lit(open_))
            .when(is_beyond_allowed_lateness(window_end_us, wm, allowed_lateness), F.lit(beyond_allowed_lateness))
            .otherwise(F.lit(within_allowed_lateness)))


def disposition_col(window_end_us: Column, watermark: int | Column | None,
                    allowed_lateness: int) -> Column:
    """on_time / revision / late against the watermark left by the previous batch."""
    return _by_watermark(window_end_us, watermark, allowed_lateness, open_=Disposition.ON_TIME.value,
                         beyond_allowed_lateness=Disposition.LATE.value,
                         within_allowed_lateness=Disposition.REVISION.value)


def status_col(window_end_us: Column, watermark: int | None, allowed_lateness: int) -> Column:
    """OPEN / CLOSED / FINAL under the watermark after the current batch."""
    return _by_watermark(window_end_us, watermark, allowed_lateness, open_=WindowStatus.OPEN.value,
                         beyond_allowed_lateness=WindowStatus.FINAL.value,
                         within_allowed_lateness=WindowStatus.CLOSED.value)


def recon_status_col(measure: Measure) -> Column:
    """The reconciliation status column, built from reckon.reconcile.STATUS_RULES (first rule
    that holds wins) on a Measure of Columns: the very rules the reference applies."""
    status: Column = F.lit(FALLBACK_STATUS.value)
    for rule, value in reversed(STATUS_RULES):
        status = F.when(F.coalesce(rule(measure), F.lit(False)), F.lit(value.value)) \
            .otherwise(status)
    return status
