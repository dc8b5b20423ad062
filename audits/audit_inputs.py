"""What the audit of a day reads, all as of one moment: the moment the day's replay read.

The audit compares the stream's provisional totals with the replay's canonical ones. Read at
different moments, the two sides would differ by whatever the stream appended in between, a
break nobody could explain. So each input is pinned at a Delta version and returned with it:
the tables at their current versions, provisional totals derived from the deltas and the
watermark progress, and late_events cut at the version holding exactly the batches in the
event_log version the replay pinned (``_late_events_in_replay_view``).

Example (on a streamed, replayed warehouse)::

    frames, versions, pinned = read_inputs(spark, config.warehouse, config.rules, day)
    versions  # {'canonical_totals': 4, 'late_events': 7, 'uncaught_duplicates': 4, ...}
"""

from __future__ import annotations

from datetime import date
from functools import partial
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from reckon.errors import UsageError
from reckon.eventtime import EventTimeRules
from reckon.timeutil import day_bounds
from spark import tables as tb
from spark.concurrent_writes import side_by_side
from spark.provisional import provisional_versions, read_provisional
from storage import commits

__all__ = ["read_inputs"]


def read_inputs(spark: SparkSession, wh: Path, rules: EventTimeRules, day: date
                 ) -> tuple[dict[str, DataFrame | None], dict[str, int], int | None]:
    """The audit's inputs (table -> frame, None when absent), the Delta versions read, and
    the event log version the day's replay pinned. late_events is read as of the cut that
    replay saw (``_late_events_in_replay_view``), so both sides come from one moment.

    Example:
        >>> frames, versions, pinned = read_inputs(spark, wh, rules, day)  # doctest: +SKIP
    """
    opened = side_by_side({  # each opens a Delta log: driver work that overlaps
        "layout": lambda: tb.require_layout(spark, wh, (
            tb.PROVISIONAL_DELTAS, tb.CANONICAL_TOTALS, tb.LATE_EVENTS,
            tb.UNCAUGHT_DUPLICATES, tb.RECONCILIATION)),
        **{name: partial(_versioned, spark, wh, name)
           for name in (tb.CANONICAL_TOTALS, tb.LATE_EVENTS, tb.UNCAUGHT_DUPLICATES)},
        tb.PROVISIONAL_TOTALS: lambda: _provisional_of_day(spark, wh, rules, day),
        tb.REPLAY_RUNS: lambda: _replay_runs(spark, wh, day),
    })
    versions: dict[str, int] = {}
    frames: dict[str, DataFrame | None] = {}
    for name in (tb.CANONICAL_TOTALS, tb.LATE_EVENTS, tb.UNCAUGHT_DUPLICATES):
        df, version = opened[name]
        frames[name] = df
        if version is not None:
            versions[name] = version
    frames[tb.PROVISIONAL_TOTALS], read = opened[tb.PROVISIONAL_TOTALS]
    versions.update(read)
    for name in (tb.CANONICAL_TOTALS, tb.UNCAUGHT_DUPLICATES):
        if frames[name] is None:
            raise UsageError(f"no {name} in {str(wh)!r}: run `reckon replay --date {day}` "
                             "before auditing the day")
    canonical = frames[tb.CANONICAL_TOTALS]
    assert canonical is not None, "checked just above"  # narrows for mypy
    pinned = _finished_replay(day, canonical, opened[tb.REPLAY_RUNS])
    if frames[tb.LATE_EVENTS] is not None:
        cut = _late_events_in_replay_view(wh, pinned)
        if cut is not None and cut != versions[tb.LATE_EVENTS]:
            frames[tb.LATE_EVENTS] = (
                None if cut < 0 else tb.read_table(spark, wh, tb.LATE_EVENTS, version=cut))
            versions[tb.LATE_EVENTS] = cut
    return frames, versions, pinned


def _versioned(spark: SparkSession, wh: Path, name: str
               ) -> tuple[DataFrame | None, int | None]:
    """The table at its current version (pinned), or (None, None) if it does not exist."""
    version = commits.current_version(wh, name) if tb.table_exists(wh, name) else None
    if version is None:
        return None, None
    return tb.read_table(spark, wh, name, version=version), version


def _provisional_of_day(spark: SparkSession, wh: Path, rules: EventTimeRules, day: date
                        ) -> tuple[DataFrame | None, dict[str, int]]:
    """The day's provisional_totals, derived from the deltas and watermark progress at their
    current versions (pinned, and returned as what the audit read); None if the stream never
    counted anything here."""
    pinned = provisional_versions(wh)
    if pinned.deltas is None:
        return None, {}
    start, end = day_bounds(day)
    df = read_provisional(spark, wh, rules, versions=pinned,
                          since_start=start, until_start=end)
    read = {tb.PROVISIONAL_DELTAS: pinned.deltas}
    if pinned.progress is not None:
        read[tb.WATERMARK_PROGRESS] = pinned.progress
    return df, read


def _replay_runs(spark: SparkSession, wh: Path, day: date) -> dict[str, int | None]:
    """The day's finished replays (replay_runs rows): replay_id -> the event_log version it
    pinned (None for a replay from Kafka)."""
    if not tb.table_exists(wh, tb.REPLAY_RUNS):
        return {}
    return {r.replay_id: r.event_log_version for r in tb.read_table(spark, wh, tb.REPLAY_RUNS)
            .filter(F.col("window_date") == F.lit(day))
            .select("replay_id", "event_log_version").collect()}


def _finished_replay(day: date, canonical: DataFrame, runs: dict[str, int | None]
                     ) -> int | None:
    """Check that the day's canonical_totals come from a replay that finished (one of
    ``runs``, the day's replay_runs rows, which a replay writes last), and return the
    event_log version it pinned (None for a replay from Kafka). A day never replayed would
    otherwise show every provisional window as MISSING_IN_CANONICAL, and a replay that failed
    between its writes would pair new totals with stale duplicates: both as breaks nothing
    explains. uncaught_duplicates needs no look of its own: a replay writes it only after its
    canonical_totals commit, so when the totals' replay finished, the day's duplicates are
    that replay's (or a later one's, which would have replaced the totals first)."""
    rerun = f"run `reckon replay --date {day}`, then audit the day again"
    if not runs:
        raise UsageError(f"--date={day.isoformat()!r}: the day has no finished replay; {rerun}")

    def replay_of(df: DataFrame) -> str | None:
        row = df.filter(F.col("window_date") == F.lit(day)).select("replay_id").first()
        return None if row is None else str(row.replay_id)

    totals_by = replay_of(canonical)
    if totals_by is not None and totals_by not in runs:
        raise UsageError(f"--date={day.isoformat()!r}: the replay {totals_by} that wrote the "
                         f"day's canonical_totals did not finish; {rerun}")
    pinned = runs.get(totals_by) if totals_by is not None else max(
        (v for v in runs.values() if v is not None), default=None)
    return None if pinned is None else int(pinned)


def _late_events_in_replay_view(wh: Path, pinned: int | None) -> int | None:
    """The late_events version that holds exactly the batches whose events the day's replay
    read (the event_log version it pinned), or None to read the table as it is.

    The stream keeps running through the night, and a straggler of the day that lands
    between the replay and the audit would be in late_events but not in the canonical
    totals: a false break (residual = -late) until the next night's lookback re-run. A batch
    commits to event_log and late_events, then its progress row, and the next batch starts
    after that, so with one stream query at a time the batches missing from the replay's
    event_log version are the newest commits of late_events: the version just before the
    first of them is the cut. -1 means none of late_events' batches were in the replay's
    view. A replay from Kafka pins no version: None."""
    if pinned is None:
        return None
    in_view: dict[str, int | None] = {}  # per stream query: newest batch in the pinned log
    oldest: int | None = None  # the oldest late_events commit missing from the replay's view
    for version, (app, _table, batch) in commits.marked_commits(wh, tb.LATE_EVENTS):
        if app not in in_view:
            in_view[app] = commits.last_marked_batch(wh, tb.EVENT_LOG, app,
                                                at_version=pinned)
        newest = in_view[app]
        if newest is not None and batch <= newest:
            return None if oldest is None else version
        oldest = version
    return None if oldest is None else oldest - 1
