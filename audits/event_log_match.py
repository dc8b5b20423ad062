"""canonical_totals against the event log its replay read: the ``event_log_mismatch`` check.

Each canonical row is set beside its grain's sum in ``event_log`` at the version the row's
replay pinned (``replay_runs.event_log_version``), summed as the replay sums it (valid events,
one copy per event_id, per window and currency). A row whose total adds another currency's
amounts (or another key's, window's, a lost or doubled event) differs and is named. A row whose
replay pinned no version, or whose version can no longer be read, is not comparable: a warning,
never a pass nobody sees. Apart from ``audits.suites`` because it is the one check that reads
another table at another version.

>>> [c.kwargs["column"] for c in event_log_checks()]
['event_log_mismatch', 'event_log_comparable']
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from audits.suite_model import BLOCKING, GRAIN, WARNING, Check, DayScope, offending
from reckon.engine_config import ReplayConfig
from spark.money import amount_text_col
from spark.tables import (
    EVENT_LOG,
    REPLAY_RUNS,
    TOTAL,
    is_missing_file_error,
    read_table,
    table_exists,
)

__all__ = ["against_event_log", "event_log_checks", "event_log_totals"]

# a pinned event_log version that can no longer be read: its commits or data files are gone
_UNREADABLE_VERSION = ("DELTA_VERSION_NOT_FOUND", "DELTA_LOG_FILE_NOT_FOUND",
                       "DELTA_NO_RECREATABLE_HISTORY_FOUND",
                       "DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION")


def event_log_totals(spark: SparkSession, config: ReplayConfig, day: date,
                     version: int) -> DataFrame:
    """(window_start, key, currency, log_amount, log_count) of ``day``'s windows, summed from
    ``event_log`` at ``version`` by the replay's own exact path (spark/replay.py
    ``day_totals_from_log``, read by the replay's ``config``). Day-scoped: nothing is
    collected. Example: ``event_log_totals(spark, settings.replay_config(), day, 1)``."""
    from spark.replay import day_totals_from_log

    return (day_totals_from_log(spark, config, day, version)
            .withColumnsRenamed({"total_amount": "log_amount", "event_count": "log_count"}))


def _pinned_versions(scope: DayScope, totals: DataFrame) -> dict[str, int | None]:
    """replay_id -> the event_log version that replay pinned, for each replay that wrote the
    day's rows (None: it pinned none, or its run record is missing). A handful of rows."""
    ids = [r.replay_id for r in totals.select("replay_id").distinct().collect()
           if r.replay_id is not None]
    wh = scope.replay.warehouse
    if not ids or not table_exists(wh, REPLAY_RUNS):
        return dict.fromkeys(ids)
    runs = {r.replay_id: r.event_log_version for r in read_table(scope.spark, wh, REPLAY_RUNS)
            .filter((F.col("window_date") == F.lit(scope.day)) & F.col("replay_id").isin(ids))
            .select("replay_id", "event_log_version").collect()}
    return {i: None if runs.get(i) is None else int(runs[i]) for i in ids}


def _unreadable(exc: Exception) -> bool:
    text = str(exc)
    return is_missing_file_error(exc) or any(marker in text for marker in _UNREADABLE_VERSION)


def _log_sums(scope: DayScope, versions: Mapping[str, int | None]
              ) -> tuple[DataFrame | None, list[str]]:
    """``event_log_totals`` at each pinned version, tagged with its replay_id (kept), and the
    replay_ids whose version could be read (None and [] when none could)."""
    frames: list[DataFrame] = []
    read: list[str] = []
    for replay_id, version in sorted(versions.items()):
        if version is None or not table_exists(scope.replay.warehouse, EVENT_LOG):
            continue
        try:
            frames.append(scope.keep(event_log_totals(
                scope.spark, scope.replay, scope.day, version)
                .withColumn("replay_id", F.lit(replay_id))))
        except Exception as exc:  # a py4j error is not a PySparkException
            if not _unreadable(exc):
                raise
            continue
        read.append(replay_id)
    if not frames:
        return None, []
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union, read


def against_event_log(df: DataFrame, scope: DayScope) -> DataFrame:
    """canonical_totals rows with ``event_log_comparable`` and ``event_log_mismatch`` (see the
    module docstring): each row beside its grain's sum in the event log its replay read."""
    sums, read = _log_sums(scope, _pinned_versions(scope, df))
    if sums is None:
        return df.withColumns({"event_log_comparable": F.lit(False),
                               "event_log_mismatch": F.lit(None).cast("string")})
    comparable = F.col("replay_id").isin(read)
    log_amount = F.coalesce(F.col("log_amount"), F.lit(0).cast(TOTAL))
    log_count = F.coalesce(F.col("log_count"), F.lit(0).cast("long"))
    agrees = (F.col("total_amount") == log_amount) & (F.col("event_count") == log_count)
    text = F.concat(F.lit("event log: "), F.col("currency"), F.lit(" "),
                    amount_text_col(log_amount, F.col("currency")), F.lit(" in "),
                    log_count.cast("string"), F.lit(" event(s)"))
    return (df.join(sums, ["replay_id", *GRAIN], "left")
            .withColumns({"event_log_comparable": comparable,
                          "event_log_mismatch": F.when(comparable, offending(agrees, text))})
            .drop("log_amount", "log_count"))


def event_log_checks() -> tuple[Check, ...]:
    return (
        Check("ExpectColumnValuesToBeNull", {"column": "event_log_mismatch"}, BLOCKING,
              "total_amount and event_count = the sum and count of the grain's de-duplicated "
              "valid events in the event log the replay read, in the row's currency: a total "
              "that adds two currencies (or loses or doubles an event) differs"),
        Check("ExpectColumnValuesToBeInSet",
              {"column": "event_log_comparable", "value_set": [True]}, WARNING,
              "the row's replay pinned an event_log version that can still be read (a replay "
              "from Kafka pins none), so its totals were compared with the event log"),
    )

