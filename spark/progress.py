"""How far the stream got: the global watermark it reached, and waiting for a day to close.

The nightly replay of day D may only start once no valid event of D can still change the
stream's totals: the stream's global watermark must have reached the end of the day's last
window plus the allowed lateness G (``end(D) + G`` for tumbling windows; hopping windows
reach ``size - slide`` past midnight). Before that, windows of D can still be revised, and
an audit would report breaks that are only "not yet". The watermark is read from the
``watermark_progress`` Delta table the stream writes last in every micro-batch; the global
watermark never moves backwards, so the largest recorded value is where the stream stands.
"""

from __future__ import annotations

import time
from datetime import date
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from reckon.config import Settings
from reckon.errors import WatermarkNotReadyError, invalid
from reckon.timeutil import (
    MICROS_PER_SECOND,
    format_duration,
    format_micros,
    parse_duration,
)
from spark import tables as tb

__all__ = ["latest_watermark", "required_watermark", "wait_for_day_closed"]


def latest_watermark(spark: SparkSession, settings: Settings) -> int | None:
    """The global watermark the stream reached, in microseconds since the epoch (UTC).

    That is the largest ``watermark`` in ``watermark_progress`` (over every query that wrote
    there). None when the table does not exist yet or no batch has defined a watermark (the
    watermark stays undefined until every expected partition delivered once or went idle).
    Reads one aggregated row, never the table.
    """
    if not tb.table_exists(settings.warehouse_path, tb.WATERMARK_PROGRESS):
        return None
    row = (tb.read_table(spark, settings.warehouse_path, tb.WATERMARK_PROGRESS)
           .agg(F.max(F.unix_micros("watermark")).alias("wm"))
           .first())
    return None if row is None or row["wm"] is None else int(row["wm"])


def required_watermark(settings: Settings, day: date) -> int:
    """The watermark at which every window of ``day`` (every window starting in it) is FINAL:
    the end of its last window plus grace, in microseconds. With tumbling windows that is
    ``end of the UTC day + grace``; hopping windows reach ``size - slide`` into the next day,
    and a replay started before they are final would be audited against totals the stream
    can still revise."""
    rules = settings.event_time_rules()
    _, last_window_end = rules.windows.day_event_times(day)
    return last_window_end + rules.grace


def wait_for_day_closed(spark: SparkSession, settings: Settings, day: date, *,
                        timeout: str, poll: str) -> dict[str, Any]:
    """Poll ``latest_watermark`` until it is >= ``required_watermark``; return what was seen.

    ``timeout`` and ``poll`` are durations ('0s', '30s', '2h'); with ``timeout='0s'`` the
    watermark is checked exactly once. Returns a JSON-safe dict: the day, the required and
    the seen watermark (microseconds and ISO-8601), the seconds waited and the number of
    checks. Raises WatermarkNotReadyError once the timeout has run out, naming the day, the
    required watermark, the one seen (or that there is none yet) and what to do.
    """
    timeout_us = parse_duration(timeout, "timeout")
    poll_us = parse_duration(poll, "poll")
    if poll_us <= 0:
        raise invalid("poll", poll, "a duration > 0, e.g. 30s")
    required = required_watermark(settings, day)
    started = time.monotonic()
    deadline = started + timeout_us / MICROS_PER_SECOND
    checks = 0
    while True:
        seen = latest_watermark(spark, settings)
        checks += 1
        waited = time.monotonic() - started
        if seen is not None and seen >= required:
            return {
                "day": day.isoformat(),
                "required_watermark": required,
                "required_watermark_iso": format_micros(required),
                "watermark": seen,
                "watermark_iso": format_micros(seen),
                "waited_seconds": round(waited, 3),
                "checks": checks,
            }
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WatermarkNotReadyError(_not_ready_message(settings, day, required, seen,
                                                             timeout, waited))
        time.sleep(min(poll_us / MICROS_PER_SECOND, remaining))


def _not_ready_message(settings: Settings, day: date, required: int, seen: int | None,
                       timeout: str, waited: float) -> str:
    grace = format_duration(settings.event_time_rules().grace)
    head = (f"day {day.isoformat()} is not closed yet: the nightly run needs the stream's "
            f"watermark at or past {format_micros(required)} (end of the day's last "
            f"window + grace {grace})")
    table = f"{settings.warehouse_path / tb.WATERMARK_PROGRESS}"
    if seen is None:
        if tb.table_exists(settings.warehouse_path, tb.WATERMARK_PROGRESS):
            where = (f"the stream has recorded no watermark yet in {table} (it stays undefined "
                     "until every expected partition has delivered once or gone idle)")
        else:
            where = f"the stream has not written any progress yet ({table} does not exist)"
    else:
        short = format_duration(required - seen)
        where = f"the latest watermark is {format_micros(seen)} ({short} short)"
    return (f"{head}, but after waiting {waited:.0f}s (timeout {timeout}) {where}. "
            "Is the stream running against this warehouse and are all expected partitions "
            "delivering? Run later, raise the timeout (RECKON_WATERMARK_WAIT_TIMEOUT), or let "
            "the next nightly run pick this day up through its lookback window "
            "(lookback_days).")
