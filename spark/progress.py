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
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reckon.engine_config import ProgressConfig
from reckon.errors import WatermarkNotReadyError, invalid
from reckon.eventtime import EventTimeRules, WatermarkState
from reckon.timeutil import (
    MICROS_PER_SECOND,
    describe_duration,
    format_duration,
    format_micros,
    parse_duration,
    to_micros,
)
from spark import tables as tb
from storage import commits

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["day_closed", "inputs_seen", "latest_watermark", "logged_watermark",
           "not_ready_message", "required_watermark", "wait_for_day_closed"]


def logged_watermark(warehouse: str | Path) -> tuple[bool, int | None]:
    """(known, watermark) from the Delta log alone: no Spark, no JVM, a few small files read.

    Every file Delta adds to ``watermark_progress`` carries min/max statistics, and the
    newest rows hold the newest watermark (the global watermark never moves backwards), so the
    largest maximum among the files the recent commits added (a batch's row, or a compaction's
    file holding every row so far) is where the stream stands. Delta keeps timestamp
    statistics to the millisecond, rounded down: a watermark read this way is at most 1 ms
    behind, never ahead, so "closed" is never said too early. ``known`` is False when the
    statistics cannot settle it (a file without them for the column, or no watermark in the
    recent commits): then ask Spark (``latest_watermark``). (True, None) when the table does
    not exist yet.
    """
    if not tb.table_exists(warehouse, tb.WATERMARK_PROGRESS):
        return True, None
    seen: list[int] = []
    for _version, files in commits.added_file_stats(warehouse, tb.WATERMARK_PROGRESS):
        for stats in files:
            maximum = (stats or {}).get("maxValues", {}).get("watermark")
            if maximum:
                seen.append(to_micros(datetime.fromisoformat(maximum)))
            elif not _all_null(stats, "watermark"):
                return False, None  # no statistics for the column: they cannot settle it
    return (True, max(seen)) if seen else (False, None)


def _all_null(stats: dict[str, Any] | None, column: str) -> bool:
    """The file's statistics say every row has ``column`` null."""
    if not stats or "numRecords" not in stats:
        return False
    return stats.get("nullCount", {}).get(column) == stats["numRecords"]


def latest_watermark(spark: SparkSession | None, warehouse: str | Path) -> int | None:
    """The global watermark the stream reached, in microseconds since the epoch (UTC).

    That is the largest ``watermark`` in ``watermark_progress`` (over every query that wrote
    there). None when the table does not exist yet or no batch has defined a watermark (the
    watermark stays undefined until every expected partition delivered once or went idle).
    With ``spark``: one aggregated row, exact, never the table. Without: the Delta log's
    statistics (``logged_watermark``: to the millisecond, rounded down; None if they cannot
    tell). ``warehouse``: the stream's, e.g. ``latest_watermark(spark, config.warehouse)``.
    """
    if spark is None:
        return logged_watermark(warehouse)[1]
    if not tb.table_exists(warehouse, tb.WATERMARK_PROGRESS):
        return None
    from pyspark.sql import functions as F

    row = (tb.read_table(spark, warehouse, tb.WATERMARK_PROGRESS)
           .agg(F.max(F.unix_micros("watermark")).alias("wm"))
           .first())
    return None if row is None or row["wm"] is None else int(row["wm"])


def required_watermark(rules: EventTimeRules, day: date) -> int:
    """The watermark at which every window of ``day`` is FINAL, in microseconds
    (reckon.eventtime ``EventTimeRules.day_final_at``, which owns the rule): a replay started
    before it would be audited against totals the stream can still revise."""
    return rules.day_final_at(day)


def day_closed(spark: SparkSession | None, config: ProgressConfig,
               day: date) -> dict[str, Any] | None:
    """One look: what was seen when the watermark is >= ``required_watermark(day)`` (a JSON-safe
    dict: the day, the required and the seen watermark, in microseconds and ISO-8601), else
    None. ``spark`` None: the Delta log's statistics alone (``latest_watermark``)."""
    required = required_watermark(config.rules, day)
    seen = latest_watermark(spark, config.warehouse)
    if seen is None or not config.rules.is_day_final(day, seen):
        return None
    return {"day": day.isoformat(), "required_watermark": required,
            "required_watermark_iso": format_micros(required), "watermark": seen,
            "watermark_iso": format_micros(seen)}


def wait_for_day_closed(spark: SparkSession | None, config: ProgressConfig, day: date, *,
                        timeout: str, poll: str) -> dict[str, Any]:
    """Poll ``day_closed`` until the day is closed; return what was seen, with the seconds
    waited and the number of checks.

    ``timeout`` and ``poll`` are durations ('0s', '30s', '2h'); with ``timeout='0s'`` the
    watermark is checked exactly once. Raises WatermarkNotReadyError once the timeout has run
    out, naming the day, the required watermark, the one seen (or that there is none yet),
    how long it waited (in words) and what to do.

    Example: ``wait_for_day_closed(spark, settings.progress_config(), day, timeout="0s",
    poll="1s")["watermark_iso"]``.
    """
    timeout_us = parse_duration(timeout, "timeout")
    poll_us = parse_duration(poll, "poll")
    if poll_us <= 0:
        raise invalid("poll", poll, "a duration > 0, e.g. 30s")
    started = time.monotonic()
    deadline = started + timeout_us / MICROS_PER_SECOND
    checks = 0
    while True:
        closed = day_closed(spark, config, day)
        checks += 1
        waited = time.monotonic() - started
        if closed is not None:
            return {**closed, "waited_seconds": round(waited, 3), "checks": checks}
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WatermarkNotReadyError(not_ready_message(
                config, day, latest_watermark(spark, config.warehouse), timeout, waited))
        time.sleep(min(poll_us / MICROS_PER_SECOND, remaining))


def not_ready_message(config: ProgressConfig, day: date, seen: int | None, timeout: str,
                      waited: float) -> str:
    """Why day ``day`` cannot be processed yet, after waiting ``waited`` seconds: one line
    naming the day, the watermark it needs and the one seen, in words a person reads."""
    required = required_watermark(config.rules, day)
    allowed_lateness = format_duration(config.rules.allowed_lateness)
    head = (f"day {day.isoformat()} is not closed yet: the nightly run needs the stream's "
            f"watermark at or past {format_micros(required)} (end of the day's last "
            f"window + allowed lateness {allowed_lateness})")
    table = f"{config.warehouse / tb.WATERMARK_PROGRESS}"
    if seen is None:
        if tb.table_exists(config.warehouse, tb.WATERMARK_PROGRESS):
            where = (f"the stream has recorded no watermark yet in {table} (it stays undefined "
                     "until every expected partition has delivered once or gone idle)")
        else:
            where = f"the stream has not written any progress yet ({table} does not exist)"
    else:
        short = describe_duration(required - seen)
        where = f"the latest watermark is {format_micros(seen)} ({short} short)"
    waited_words = describe_duration(int(waited * MICROS_PER_SECOND))
    limit = describe_duration(parse_duration(timeout, "timeout"))
    return (f"{head}, but after waiting {waited_words} (the limit is {limit}) {where}. "
            "Is the stream running against this warehouse and are all expected partitions "
            "delivering? Run later, raise the limit (RECKON_WATERMARK_WAIT_TIMEOUT), or let "
            "the next nightly run pick this day up through its lookback window "
            "(lookback_days).")


def inputs_seen(spark: SparkSession, warehouse: Path) -> tuple[set[int], set[str]]:
    """(partitions, sources) the warehouse's stream has seen: the inputs its newest watermark
    state holds (sources only when it ran with inputs by source). Why: a bound for an input
    never seen is likely a misspelt name (reckon.spec ``unseen_bounds``). One small row read.

    Example: ``inputs_seen(spark, wh)`` -> ``({0, 1}, {"http", "sat"})``.
    """
    from pyspark.sql import functions as F

    if not tb.table_exists(warehouse, tb.WATERMARK_PROGRESS):
        return set(), set()
    rows = (tb.read_table(spark, warehouse, tb.WATERMARK_PROGRESS)
            .orderBy(F.col("processed_at").desc(), F.col("batch_id").desc())
            .select("state_json").limit(1).collect())
    state = WatermarkState.from_json(rows[0].state_json if rows else None)
    partitions = {k if isinstance(k, int) else k[0] for k in state.partitions}
    return partitions, {k[1] for k in state.partitions if not isinstance(k, int)}
