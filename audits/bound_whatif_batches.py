"""The bound what-if of a warehouse day at the stream's granularity: per micro-batch.

``audits.bound_whatif`` replays the day one event at a time; this module replays the batches the
stream actually ran (``reckon.whatif_batches``), so its row at the configured bound is what
the stream did: its dropped pairs are the day's ``late_events`` and its completeness the
audit's headline (on a day without uncaught duplicates and without a spec change).

Steps, none of which brings a whole table to the driver:
1. the day's judged events (event times its windows cover, not flagged as duplicates, with a
   batch id) give the range of batches to replay (one aggregate row);
2. every valid row of those batches (every day, duplicates too: all moved the watermark) is
   summarised per (batch, partition) in Spark; that small table comes to the driver;
3. the state the stream started the range from is the ``watermark_progress`` row before it;
4. the driver walks the batches once (``batch_steps``, pure ``advance_watermark``);
5. the judged pairs are classified in Spark against the watermark before their batch
   (a broadcast of one row per batch), one aggregate row of counts per bound comes back,
   and the distinct ends of the day's windows (one per window, for the emit latency).

Bounds per input (issue 41): the summaries are per (batch, partition, source), so a walk
takes the configured inputs (partitions, or (partition, source) pairs), and each row of the
curve is one bound for every one of those inputs. When the configured bounds differ by input,
one more walk under the configured policy itself gives ``BatchCurve.configured``, what the
stream did. ``batch_points`` replays the same batches under any policies (the report's bounds
per source, as the stream ran).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol, cast

from reckon.engine_config import WhatIfConfig
from reckon.errors import NoEventsError, UsageError, invalid
from reckon.eventtime import PartitionObservation, WatermarkPolicy, WatermarkState
from reckon.spec import recorded_bound
from reckon.timeutil import day_bounds, from_micros
from reckon.whatif import CurvePoint, candidate_bounds, normalize_bounds
from reckon.whatif_batches import (
    BatchStep,
    batch_steps,
    curve_points,
    policy_point,
    shift_state,
    state_under,
)
from reckon.whatif_inputs import PerInputRecommendation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["BEST_PER_BATCH_ROWS", "CURVES_NOTE", "PER_BATCH", "PER_EVENT", "PER_SOURCE_ROWS",
           "BatchCurve", "analyze_day_batches", "batch_curve_json", "batch_points",
           "no_batch_curve",
           "per_source_batches", "per_source_policies", "whatif_of_day"]

#: The two bound what-if curves, labelled as every output shows them (the report's HTML,
#: PDF and CSV, and ``reckon bound-whatif``; issue 39), per batch first: what the stream did.
PER_BATCH = "per micro-batch, as the stream ran"
PER_EVENT = "per event, as if every event moved the watermark"
CURVES_NOTE = ("The two curves differ because the stream moves its watermark once per "
               "micro-batch, judging every event of a batch against the watermark the previous "
               "batch left, while the per-event replay moves it after every event, closing "
               "windows sooner and so dropping more at the same bound; the per-batch row at "
               "the configured bound is what the stream did, and matches the headline.")


@dataclass(frozen=True)
class BatchCurve:
    """The per-batch what-if of one day: ``batches`` replayed (first..last holding a judged
    event), ``events`` judged, one point per bound (one bound for every input);
    ``configured_point``: under the configured policy, when its bounds differ by input."""

    day: date
    configured_bound: int
    batches: int
    events: int
    points: tuple[CurvePoint, ...]
    configured_point: CurvePoint | None = None

    @property
    def configured(self) -> CurvePoint | None:
        """What the stream did: the point of the policy it ran with (bounds per input and
        all), or with one bound for all the point of that bound."""
        if self.configured_point is not None:
            return self.configured_point
        return next((pt for pt in self.points if pt.bound == self.configured_bound), None)


def _judged_events(spark: SparkSession, config: WhatIfConfig, day: date) -> DataFrame:
    """The day's events whose pairs are counted: event times the day's windows cover, not
    flagged as duplicates, archived by a stream batch."""
    from pyspark.sql import functions as F

    from spark import tables as tb

    lo, hi = config.rules.windows.day_event_times(day)
    t = F.unix_micros("event_time")
    return (tb.read_table(spark, config.warehouse, tb.EVENT_LOG)
            .filter(F.col("event_date").between(F.lit(from_micros(lo).date()),
                                                F.lit(from_micros(hi - 1).date())))
            .filter((t >= F.lit(lo)) & (t < F.lit(hi))
                    & ~F.coalesce(F.col("is_duplicate"), F.lit(False))
                    & F.col("batch_id").isNotNull())
            .select(t.alias("event_us"), F.col("batch_id")))


def _summaries(spark: SparkSession, config: WhatIfConfig, lo: int, hi: int
               ) -> list[tuple[int, list[PartitionObservation]]]:
    """Per batch in ``[lo, hi]`` (in order): its per-(partition, source) observations over
    every valid row it archived (a policy with inputs by partition merges a partition's).
    One row per (batch, partition, source) reaches the driver."""
    from pyspark.sql import functions as F

    from spark import tables as tb

    rows = (tb.read_table(spark, config.warehouse, tb.EVENT_LOG)
            .filter(F.col("batch_id").between(lo, hi))
            .groupBy("batch_id", "partition", F.coalesce(F.col("source"), F.lit(""))
                     .alias("src"))
            .agg(F.max(F.unix_micros("event_time")).alias("t"),
                 F.max(F.unix_micros("arrival_time")).alias("a"),
                 F.min(F.unix_micros("arrival_time")).alias("a0"))
            .orderBy("batch_id", "partition", "src").collect())
    batches: dict[int, list[PartitionObservation]] = {}
    for r in rows:
        batches.setdefault(int(r.batch_id), []).append(
            PartitionObservation(int(r.partition), int(r.t), int(r.a), int(r.a0), r.src))
    return sorted(batches.items())


def _start_state(spark: SparkSession, config: WhatIfConfig, lo: int, hi: int
                 ) -> tuple[WatermarkState, int]:
    """The state the stream judged batch ``lo`` with, and the bound it was recorded at: the
    progress row before ``lo`` (that query's, else the newest other query's, as the stream
    restores it). Refused when the range's batch ids belong to several queries."""
    from pyspark.sql import functions as F

    from spark import tables as tb

    configured = config.rules.watermark.watermark_bound
    wh = config.warehouse
    if not tb.table_exists(wh, tb.WATERMARK_PROGRESS):
        return WatermarkState(), configured
    progress = tb.read_table(spark, wh, tb.WATERMARK_PROGRESS)
    queries = [r.query_id for r in progress.filter(F.col("batch_id").between(lo, hi))
               .select("query_id").distinct().limit(2).collect()]
    if len(queries) > 1:
        raise UsageError(f"batches {lo}..{hi} were written by more than one stream query "
                         "(a restart on a new checkpoint): their events cannot be told apart "
                         "by batch id, so the per-batch what-if is not computed")
    row = [] if not queries else (
        progress.filter((F.col("query_id") == F.lit(queries[0])) & (F.col("batch_id") < lo))
        .orderBy(F.col("batch_id").desc()).select("state_json", "rules_json").limit(1)
        .collect())
    if not row and queries:
        row = (progress.filter(F.col("query_id") != F.lit(queries[0]))
               .orderBy(F.col("processed_at").desc(), F.col("batch_id").desc())
               .select("state_json", "rules_json").limit(1).collect())
    if not row:
        return WatermarkState(), configured
    return (WatermarkState.from_json(row[0].state_json),
            recorded_bound(row[0].rules_json, configured))


def _dropped(judged: DataFrame, walks: list[list[BatchStep]], config: WhatIfConfig, day: date,
             bounds: list[list[int]], spark: SparkSession
             ) -> tuple[int, list[dict[int, int]], list[int]]:
    """(judged pairs in the day's windows, late pairs per bound of each walk, distinct window
    ends): under walk k a pair is late at bound L when ``end + G <= before_k - L``, i.e.
    ``before_k - end - G >= L`` (a walk under a policy of its own takes ``[0]``)."""
    from pyspark.sql import functions as F

    from spark.rules import window_starts_col

    rules = config.rules
    d0, d1 = day_bounds(day)
    marks = spark.createDataFrame(
        [(steps[0].batch, *(step.before for step in steps))
         for steps in zip(*walks, strict=True)],
        "batch_id long, " + ", ".join(f"before{k} long" for k in range(len(walks))))
    pairs = (judged.join(F.broadcast(marks), "batch_id")
             .withColumn("ws", F.explode(window_starts_col(F.col("event_us"), rules.windows)))
             .filter((F.col("ws") >= F.lit(d0)) & (F.col("ws") < F.lit(d1)))
             .withColumn("we", F.col("ws") + F.lit(rules.windows.size)))

    def slack(k: int) -> Any:  # null: no watermark yet
        return F.col(f"before{k}") - F.col("we") - F.lit(rules.allowed_lateness)

    counts = pairs.agg(F.count(F.lit(1)).alias("n"), *[
        F.sum(F.when(slack(k) >= F.lit(b), 1).otherwise(0)).alias(f"d{k}_{i}")
        for k, walk_bounds in enumerate(bounds) for i, b in enumerate(walk_bounds)]).first()
    ends = [int(r.we) for r in pairs.select("we").distinct().collect()]  # one per window
    n = 0 if counts is None else int(counts["n"])
    return n, [{b: int(counts[f"d{k}_{i}"] or 0) if counts else 0
                for i, b in enumerate(walk_bounds)} for k, walk_bounds in enumerate(bounds)], ends


@dataclass(frozen=True)
class _DayBatches:
    """What every per-batch walk of a day starts from: the judged events, the batches'
    summaries, the state the stream judged the first of them with and the default bound it
    recorded that state at."""

    judged: Any  # the judged events, as the engine that read them holds them
    events: int
    summaries: list[tuple[int, list[PartitionObservation]]]
    start: WatermarkState
    start_bound: int


class BatchReads(Protocol):
    """What the per-batch walks read from a warehouse, per engine: Spark (``_SparkReads``, the
    functions above) or DuckDB (``audits.bound_whatif_duck.DuckReads``). The walks themselves
    (``batch_steps``, ``curve_points``) are pure and shared, so both engines replay alike.

    Example: ``analyze_day_batches(DuckReads(wh), config, day)`` runs without a JVM.
    """

    def day_batches(self, config: WhatIfConfig, the_day: date) -> _DayBatches:
        """The day's judged events, their batches' summaries and the start state."""

    def dropped(self, judged: Any, walks: list[list[BatchStep]], config: WhatIfConfig,
                day: date, bounds: list[list[int]]
                ) -> tuple[int, list[dict[int, int]], list[int]]:
        """(judged pairs, late pairs per bound of each walk, distinct window ends)."""

    def rules_json(self, config: WhatIfConfig, day: date) -> set[str]:
        """The distinct ``rules_json`` recorded for the day's batches (at most two)."""


class _SparkReads:
    """``BatchReads`` on a Spark session."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def day_batches(self, config: WhatIfConfig, the_day: date) -> _DayBatches:
        return _day_batches(self.spark, config, the_day)

    def dropped(self, judged: Any, walks: list[list[BatchStep]], config: WhatIfConfig,
                day: date, bounds: list[list[int]]
                ) -> tuple[int, list[dict[int, int]], list[int]]:
        return _dropped(judged, walks, config, day, bounds, self.spark)

    def rules_json(self, config: WhatIfConfig, day: date) -> set[str]:
        from pyspark.sql import functions as F

        from spark import tables as tb

        span = (_judged_events(self.spark, config, day)
                .agg(F.min("batch_id").alias("lo"), F.max("batch_id").alias("hi")).first())
        if span is None or span.lo is None:
            return set()
        return {r.rules_json for r in tb.read_table(self.spark, config.warehouse,
                                                    tb.WATERMARK_PROGRESS)
                .filter(F.col("batch_id").between(int(span.lo), int(span.hi))
                        & F.col("rules_json").isNotNull())
                .select("rules_json").distinct().limit(2).collect()}


def _reads(engine: SparkSession | BatchReads) -> BatchReads:
    """The engine's reads: a ``BatchReads`` as it is, a Spark session wrapped."""
    if hasattr(engine, "day_batches"):
        return cast("BatchReads", engine)
    return _SparkReads(cast("SparkSession", engine))


def _day_batches(spark: SparkSession, config: WhatIfConfig, the_day: date) -> _DayBatches:
    from pyspark.sql import functions as F

    from spark import tables as tb

    if not tb.table_exists(config.warehouse, tb.EVENT_LOG):
        raise invalid("warehouse", str(config.warehouse),
                      "a warehouse with an event_log table (run `reckon stream` first)")
    judged = _judged_events(spark, config, the_day)
    span = judged.agg(F.min("batch_id").alias("lo"), F.max("batch_id").alias("hi"),
                      F.count(F.lit(1)).alias("n")).first()
    if span is None or not span.n:
        raise NoEventsError(the_day, "the stream archived no events of "
                            f"{the_day.isoformat()}")
    lo, hi = int(span.lo), int(span.hi)
    start, start_bound = _start_state(spark, config, lo, hi)
    return _DayBatches(judged, int(span.n), _summaries(spark, config, lo, hi), start,
                       start_bound)


def _fits(state: WatermarkState, policy: WatermarkPolicy) -> bool:
    """The state's inputs are of the policy's kind (partitions, or (partition, source))."""
    return all(isinstance(k, int) != policy.by_source for k in state.partitions)


def _start_under(db: _DayBatches, policy: WatermarkPolicy, configured: WatermarkPolicy
                 ) -> WatermarkState:
    """The start of a walk under ``policy``: the recorded state as it is under the configured
    policy; shifted by the difference of one bound for all from the recorded one (exact: the
    rules commute with subtracting a constant); else re-keyed (``state_under``)."""
    if policy == configured:
        return db.start
    if policy.uniform and configured.uniform and _fits(db.start, policy):
        return shift_state(db.start, db.start_bound - policy.watermark_bound)
    return state_under(db.start, policy)


def analyze_day_batches(spark: SparkSession | BatchReads, config: WhatIfConfig, day: date,
                        bounds: Iterable[int | str] | None = None) -> BatchCurve:
    """The per-batch what-if of ``day`` for ``bounds`` (default: the standard ladder plus the
    configured bound), each one bound for every configured input. A day without
    stream-archived events is ``NoEventsError`` (a quiet day, "the stream archived no events
    of D"); one whose batches several stream queries wrote is refused with one line
    (``UsageError``).

    Example: ``analyze_day_batches(spark, config, date(2026, 1, 1)).configured.dropped`` is the
    number of the day's late_events rows, also after a ``--change-spec`` since: the day is
    replayed under the rules its batches recorded (``whatif_of_day``); the default bounds
    are the current spec's ladder (the per-event curve's rows) plus the day's bound.
    """
    ran = whatif_of_day(spark, config, day)  # not a spec changed since
    configured = ran.rules.watermark
    candidates = candidate_bounds(bounds, config.rules.watermark.watermark_bound)
    if bounds is None:  # and the day's bound: the configured row is one of the rows
        candidates = normalize_bounds([*candidates, configured.watermark_bound])
    reads = _reads(spark)
    db = reads.day_batches(ran, day)
    zero = WatermarkPolicy(0, configured.idle_timeout, configured.expected_partitions,
                           by_source=configured.by_source)
    walks = [batch_steps(db.summaries, zero, _start_under(db, zero, configured))]
    if not configured.uniform:  # what the stream did is none of the rows: walk it too
        walks.append(batch_steps(db.summaries, configured, db.start))
    pairs, dropped, ends = reads.dropped(db.judged, walks, ran, day,
                                         [candidates, [0]][:len(walks)])
    return BatchCurve(day=day, configured_bound=configured.watermark_bound,
                      batches=len(walks[0]), events=db.events,
                      points=tuple(curve_points(walks[0], candidates, pairs, dropped[0], ends)),
                      configured_point=None if configured.uniform else policy_point(
                          walks[1], configured, pairs, dropped[1][0], ends))


def batch_points(spark: SparkSession | BatchReads, config: WhatIfConfig, day: date,
                 policies: Mapping[str, WatermarkPolicy]) -> dict[str, CurvePoint]:
    """The day's batches, as the stream ran them, replayed under each of ``policies`` (bounds
    per input and all; by name): completeness and average emit latency per micro-batch, what
    a stream with that policy reading the same batches would have counted and when it would
    have emitted (exactly, when the day's first batch started the stream; else from the
    recorded state, see ``_start_under``). Refused as ``analyze_day_batches`` refuses.

    Example: ``batch_points(spark, config, day, {"now": rules.watermark})["now"]`` is
    ``analyze_day_batches(...).configured``.
    """
    configured = config.rules.watermark
    reads = _reads(spark)
    db = reads.day_batches(config, day)
    names = list(policies)
    walks = [batch_steps(db.summaries, policies[n], _start_under(db, policies[n], configured))
             for n in names]
    pairs, dropped, ends = reads.dropped(db.judged, walks, config, day,
                                         [[0]] * len(walks))
    return {n: policy_point(walks[k], policies[n], pairs, dropped[k][0], ends)
            for k, n in enumerate(names)}


#: The rows of the per-source comparison (``reckon bound-whatif --per-source``, the report), in
#: order: the recommended bounds per source, the best single bound (same inputs), one bound
#: with inputs by partition (the default rule), and the stream as configured.
PER_SOURCE_ROWS = ("bounds per source", "one bound", "one bound, inputs by partition",
                   "the stream as configured")
#: The row of the single bound that is best per micro-batch (found by replaying the day's
#: batches under each candidate), by its inputs (by source?); shown before the stream's own.
BEST_PER_BATCH_ROWS = {True: "one bound, best per micro-batch",
                       False: "one bound, best per micro-batch, inputs by partition"}


def per_source_policies(rec: PerInputRecommendation, configured: WatermarkPolicy
                        ) -> dict[str, WatermarkPolicy]:
    """The policies of the per-source comparison, by row (``PER_SOURCE_ROWS``): the
    recommendation's, its single bounds, and ``configured`` (the stream's own)."""
    idle, expected = configured.idle_timeout, configured.expected_partitions
    single = rec.single or rec.single_fallback
    policies = {PER_SOURCE_ROWS[0]: rec.policy(idle, expected),
                PER_SOURCE_ROWS[1]: WatermarkPolicy(single.bound, idle, expected,
                                                    by_source=rec.by_source)}
    if rec.by_partition is not None:
        policies[PER_SOURCE_ROWS[2]] = WatermarkPolicy(rec.by_partition.bound, idle, expected)
    policies[PER_SOURCE_ROWS[3]] = configured
    return policies


def whatif_of_day(spark: SparkSession | BatchReads, config: WhatIfConfig, day: date
                  ) -> WhatIfConfig:
    """``config`` with the event-time rules the stream ran the day's batches with (the
    ``rules_json`` its ``watermark_progress`` recorded for them), when they ran under one
    version; unchanged when they ran under several (a ``--change-spec`` during the day), or
    nothing is recorded. A spec changed after the day (the warehouse's current one) is not
    what the day ran with: the per-source comparison's "the stream as configured" row and
    the per-batch what-if's configured row (``analyze_day_batches``) are replayed under
    these, so they stay what the stream did.

    Example: a day streamed with ``http=8s``, then ``--change-spec`` to ``http=6s``:
    ``whatif_of_day(...).rules.watermark.bound((0, "http"))`` is 8 s.
    """
    from dataclasses import replace

    from reckon.spec import rules_of
    from storage import table_names as tb

    wh = config.warehouse
    if not (tb.table_exists(wh, tb.EVENT_LOG) and tb.table_exists(wh, tb.WATERMARK_PROGRESS)):
        return config
    ran = _reads(spark).rules_json(config, day)
    if len(ran) != 1:
        return config
    return replace(config, rules=rules_of(json.loads(ran.pop()), config.rules))


def per_source_batches(spark: SparkSession | BatchReads, config: WhatIfConfig, day: date,
                       rec: PerInputRecommendation,
                       bounds: Iterable[int | str] | None = None
                       ) -> tuple[dict[str, CurvePoint], str | None]:
    """The per-source comparison per micro-batch: ``per_source_policies`` replayed on the
    day's batches (``batch_points``), and the single bound (from ``bounds``, default the
    standard ladder plus the configured bound; inputs by source and by partition) that is
    best per micro-batch: the earliest average emit that reaches the recommendation's target,
    under ``BEST_PER_BATCH_ROWS`` (absent when none reaches it). Or nothing and the one line
    that says why.

    The best single bound per event (the recommendation's own) is chosen on the stricter
    per-event judging; per micro-batch a smaller one may reach the target, so this row is
    the fair single bound to set a stream's bounds per source against."""
    configured = config.rules.watermark
    policies = per_source_policies(rec, configured)
    candidates = candidate_bounds(bounds, config.rules.watermark.watermark_bound)
    sweep = {(by_source, b): WatermarkPolicy(b, configured.idle_timeout,
                                              configured.expected_partitions,
                                              by_source=by_source)
             for by_source in (True, False) for b in candidates}
    named = {f"sweep {int(k[0])} {k[1]}": pol for k, pol in sweep.items()}
    try:
        points = batch_points(spark, config, day, {**policies, **named})
    except UsageError as exc:
        return {}, str(exc)
    swept = {k: points.pop(f"sweep {int(k[0])} {k[1]}") for k in sweep}
    goal = Fraction(str(rec.target))
    reaching = [k for k, pt in swept.items() if pt.avg_emit_latency is not None and (
        pt.admitted + pt.dropped == 0
        or Fraction(pt.admitted, pt.admitted + pt.dropped) >= goal)]
    out = {k: v for k, v in points.items() if k != PER_SOURCE_ROWS[3]}
    if reaching:
        best = min(reaching, key=lambda k: (swept[k].avg_emit_latency, k[1], not k[0]))
        out[BEST_PER_BATCH_ROWS[best[0]]] = swept[best]
    out[PER_SOURCE_ROWS[3]] = points[PER_SOURCE_ROWS[3]]
    return out, None


def no_batch_curve(why_not: str) -> str:
    """The note every format shows in place of the per-batch curve, one sentence.

    >>> no_batch_curve("the stream archived no events of 2026-11-25")
    'No per-batch curve: the stream archived no events of 2026-11-25.'
    """
    return f"No per-batch curve: {why_not.rstrip('.')}."


def batch_curve_json(curve: BatchCurve) -> dict[str, Any]:
    """The per-batch curve as JSON (``reckon bound-whatif --json`` carries it), labelled.

    Example: ``batch_curve_json(curve)["granularity"] == "per_batch"``."""
    return {"granularity": "per_batch", "label": PER_BATCH, "batches": curve.batches,
            "events": curve.events, "points": [pt.to_json_dict() for pt in curve.points]}
