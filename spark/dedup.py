"""The stream's de-duplication in Spark: by its state store, or against the archive.

One rule (``reckon.eventtime.is_duplicate_of_recent``: an earlier copy of the event_id arrived
within the dedup horizon), two ways to know the earlier copies:

* the running query's state store (``judged_stream``: reckon.jvm.BucketedDedupState ahead of
  foreachBatch keeps each event_id's latest arrival, in ``STATE_BUCKETS`` hash buckets; a
  checkpoint whose state began keyed by event_id keeps reckon.jvm.DedupState; a new
  checkpoint's state starts from the archive's last horizon, ``StateSeed``);
* the archive (``judge_by_archive``: event_log read back one horizon from the batch's first
  arrival), for static frames and for a batch the state cannot vouch for
  (``reckon.dedup_state``; ``coverage_of_query`` says what it vouches for).

Decision 0009 says why the state is the default and what it costs.

>>> seed = StateSeed.of(spark, wh, checkpoint)  # doctest: +SKIP
>>> flagged = judged_stream(spark, parsed_stream, rules,
...                         seed.rows(spark, wh, rules.dedup_horizon), seed.buckets)  # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from reckon.dedup_state import StateCoverage, state_ttl
from reckon.eventtime import EventTimeRules, is_duplicate_of_recent
from spark import tables as tb
from spark.rules import arrival_order
from storage import commits

__all__ = ["STATE_BUCKETS", "StateSeed", "archive_scan_start", "coverage_of_query", "judge_by_archive",
           "judged_stream"]

# The state's TTL runs on Spark's batch time; the processing time reckon records is a little
# later, so the state keeps entries this much longer than the rule (reckon.dedup_state) counts.
_TTL_MARGIN = 10 * 60 * 1_000_000

# How many groups a new checkpoint's dedup state keys its entries by (a hash of event_id):
# few enough that a batch calls the state's processor a few thousand times rather than once
# an id, enough that a bucket's entries stay a small map. Recorded with the checkpoint
# (StateSeed.buckets): an id must stay in its bucket while the state lives.
STATE_BUCKETS = 1024


def archive_scan_start(first_arrival: int, horizon: int) -> int:
    """Where a batch's de-duplication starts reading the archive: the horizon before its
    first arrival, rounded down to an eighth of the horizon.

    Rounded so that the read's filter, a literal in the code Spark generates, stays the same
    for many batches and its compiled code is reused (spark.constants); reading a little more
    changes no verdict: only the latest earlier copy of an event counts, and a copy from
    before the horizon never makes a duplicate.

    >>> archive_scan_start(first_arrival=10_000, horizon=3_600)
    6300
    """
    step = max(1, horizon // 8)
    start = first_arrival - horizon
    return start - start % step


def judge_by_archive(spark: SparkSession, warehouse: Path, valid: DataFrame, *,
                     event_log_version: int, min_arrival: int, horizon: int) -> DataFrame:
    """``valid`` rows with ``is_duplicate``, judged against event_log at
    ``event_log_version`` and against the batch's own earlier copies (in arrival order).

    Pinned to a version: the batch's own event_log commit would otherwise make Spark
    re-compute a persisted result with the batch's events as their own earlier copies. Only
    the archived copies of the batch's ids matter, so the horizon (rate x horizon rows)
    is semi-joined with the batch's ids and only the matches are shuffled."""
    prior = (tb.read_table(spark, warehouse, tb.EVENT_LOG, version=event_log_version)
             .filter(F.col("arrival_time")
                     >= F.timestamp_micros(F.lit(archive_scan_start(min_arrival, horizon))))
             .join(valid.select("event_id"), "event_id", "left_semi")
             .groupBy("event_id")
             .agg(F.max(F.unix_micros("arrival_time")).alias("prior_arrival")))
    order = Window.partitionBy("event_id").orderBy(*arrival_order("arrival_us")).rowsBetween(
        Window.unboundedPreceding, -1)
    latest_prior = F.greatest(F.col("prior_arrival"), F.max("arrival_us").over(order))
    return (valid.join(prior, "event_id", "left")
            .withColumn("is_duplicate", F.coalesce(
                is_duplicate_of_recent(latest_prior, F.col("arrival_us"), horizon),
                F.lit(False)))
            .drop("prior_arrival"))


@dataclass(frozen=True)
class StateSeed:
    """Where a checkpoint's dedup state started: the archive's version and its latest arrival
    then (``archived_until``; None: an empty archive), and how its entries are keyed
    (``buckets``: that many hash buckets of event_id; None: by event_id itself, as states
    begun before the buckets are). Recorded in the checkpoint when the state begins
    (``reckon/dedup_state.json``), so a re-run first batch reads the same seed and every
    later start knows what the state was seeded with and how it is laid out: Spark refuses
    another layout on the same checkpoint."""

    event_log_version: int | None
    archived_until: int | None
    buckets: int | None

    @staticmethod
    def record_of(checkpoint: str | Path) -> Path:
        return Path(checkpoint) / "reckon" / "dedup_state.json"

    @classmethod
    def fits(cls, checkpoint: str | Path) -> bool:
        """Whether the query on ``checkpoint`` can run with the dedup state: a new checkpoint,
        or one whose state began with it. A checkpoint written by a query without the state
        cannot take a stateful operator (Spark refuses its missing operator metadata), so its
        query goes on judging duplicates against the archive."""
        commits_dir = Path(checkpoint) / "commits"
        new = not commits_dir.is_dir() or not any(commits_dir.iterdir())
        return new or cls.record_of(checkpoint).is_file()

    @classmethod
    def of(cls, spark: SparkSession, warehouse: Path, checkpoint: str | Path) -> StateSeed:
        """The checkpoint's seed, recorded now from event_log if the checkpoint has none."""
        record = cls.record_of(checkpoint)
        if record.is_file():
            recorded = json.loads(record.read_text())
            return cls(event_log_version=recorded["event_log_version"],
                       archived_until=recorded["archived_until"],
                       buckets=recorded.get("buckets"))
        version = commits.current_version(warehouse, tb.EVENT_LOG)
        latest = None
        if version is not None:
            latest = (tb.read_table(spark, warehouse, tb.EVENT_LOG, version=version)
                      .agg(F.max(F.unix_micros("arrival_time")).alias("m")).first())
        seed = cls(event_log_version=version,
                   archived_until=None if latest is None else latest.m, buckets=STATE_BUCKETS)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"event_log_version": seed.event_log_version,
                                      "archived_until": seed.archived_until,
                                      "buckets": seed.buckets}))
        return seed

    def rows(self, spark: SparkSession, warehouse: Path, horizon: int) -> DataFrame:
        """(event_id, latest_us) of the copies that arrived at most a horizon before
        ``archived_until``: all an arrival from then on can be a duplicate of."""
        log = tb.read_table(spark, warehouse, tb.EVENT_LOG, version=self.event_log_version)
        if self.archived_until is None:
            log = log.limit(0)
        else:
            log = log.filter(F.col("arrival_time")
                             >= F.timestamp_micros(F.lit(self.archived_until - horizon)))
        return log.groupBy("event_id").agg(
            F.max(F.unix_micros("arrival_time")).alias("latest_us"))


def judged_stream(spark: SparkSession, parsed: DataFrame, rules: EventTimeRules,
                  seed: DataFrame, buckets: int | None) -> DataFrame:
    """The parsed stream with ``is_duplicate`` from the query's state store (quarantined rows
    pass through), its state starting from ``seed`` (``StateSeed.rows``) and keeping an entry
    at least ``state_ttl`` after its last update: reckon.jvm.BucketedDedupState in ``buckets``
    hash buckets of event_id, or reckon.jvm.DedupState keyed by event_id (``buckets`` None,
    the layout of states begun before the buckets)."""
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    horizon = rules.dedup_horizon
    keep = jvm.java.time.Duration.ofMillis((state_ttl(horizon) + _TTL_MARGIN) // 1000)
    if buckets is None:
        flagged = jvm.reckon.jvm.DedupState.flag(parsed._jdf, seed._jdf, horizon, keep)
    else:
        flagged = jvm.reckon.jvm.BucketedDedupState.flag(
            parsed._jdf, seed._jdf, horizon, keep, buckets)
    return ClassicDataFrame(flagged, spark)


def coverage_of_query(spark: SparkSession, warehouse: Path, seed: StateSeed, query_id: str,
                      progress_version: int) -> StateCoverage:
    """What a query's state vouches for when its processor starts: the seed's
    ``archived_until``, and ``started`` and ``min_lag`` from the query's rows in
    watermark_progress (a batch's lag: its processing time minus the latest arrival the
    watermark state had then, no more than the batch's own)."""
    lag = F.unix_micros("processed_at") - F.array_max(F.transform(
        F.map_values("partition_last_arrival"), F.unix_micros))
    row = (tb.read_table(spark, warehouse, tb.WATERMARK_PROGRESS, version=progress_version)
           .filter(F.col("query_id") == query_id)
           .agg(F.min(F.unix_micros("processed_at")).alias("started"),
                F.min(lag).alias("min_lag"))
           .first())
    return StateCoverage(archived_until=seed.archived_until,
                         started=None if row is None else row.started,
                         min_lag=None if row is None else row.min_lag)
