"""The bound what-if on real data: what other watermark bounds would have done (how many events
late, how long windows wait), over a file of events (``reckon bound-whatif-curve``) or a day
of the warehouse's event log (``reckon bound-whatif``).

The arithmetic is ``reckon.whatif`` (numpy, per-event granularity, the rules of
``reckon.eventtime``). For the warehouse it runs inside Spark with ``applyInPandas``: one group
holds the whole day for the overall curve, one group per partition for per-partition curves,
and only the small curve rows come back to the driver; the log itself is never collected.

Both start from an empty watermark state at the first row they read (a file, or the day's first
arrival): the what-if is "had the stream started here with bound L". Duplicate copies the
stream flagged (``is_duplicate``) are left out of the warehouse analysis altogether.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from reckon.engine_config import WhatIfConfig
from reckon.errors import NoEventsError, UsageError, invalid
from reckon.eventtime import EventTimeRules, WindowSpec
from reckon.timeutil import MICROS_PER_SECOND, format_duration
from reckon.whatif import (
    DEFAULT_BOUNDS,
    CurvePoint,
    candidate_bounds,
    default_bounds,
    lateness_curve,
    recommend,
)
from reckon.whatif_inputs import PerInputRecommendation, recommend_per_input

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from audits.bound_whatif_batches import BatchCurve
    from audits.records import AttributionRow

__all__ = [
    "DEFAULT_BOUNDS",
    "LatenessAnalysis",
    "PartitionCurve",
    "analysis_json",
    "analyze_day",
    "analyze_inputs",
    "batch_curve_of_day",
    "completeness_target",
    "curve_of_events",
    "curves_json",
    "default_bounds",
    "render_analysis",
    "render_curve",
    "render_per_input",
]

_OVERALL = "all"


def curve_of_events(rules: EventTimeRules, event_us: np.ndarray, arrival_us: np.ndarray,
                    partition: np.ndarray | None, bounds: Sequence[int]) -> list[CurvePoint]:
    """``reckon bound-whatif-curve``'s what-if per bound over events read from a file, with the
    rules' windows, allowed_lateness, idle timeout and expected partitions.

    Example: ``curve_of_events(rules, *read_events_file("events.csv"), [0, 2_000_000])`` (``audits.bound_whatif_file``).
    """
    return _curve(rules, event_us, arrival_us, partition, bounds)


def render_curve(source: str, events: int, rules: EventTimeRules,
                 points: Sequence[CurvePoint], target: Decimal) -> str:
    """The human-readable form of ``reckon bound-whatif-curve``: what was read, the curve, and the
    recommended bound for ``target``."""
    return "\n".join([f"{source}: {events} events, {rules.windows.describe()} windows, "
                      f"allowed lateness {format_duration(rules.allowed_lateness)}, "
                      f"idle timeout {format_duration(rules.watermark.idle_timeout)}",
                      _table(points),
                      _recommendation_line(recommend(points, target), target)])


def _curve(rules: EventTimeRules, event_us: np.ndarray, arrival_us: np.ndarray,
           partition: np.ndarray | None, bounds: Sequence[int],
           expected: Iterable[int] | None = None) -> list[CurvePoint]:
    return lateness_curve(
        event_us, arrival_us, partition, rules.windows, bounds, allowed_lateness=rules.allowed_lateness,
        idle_timeout=rules.watermark.idle_timeout,
        expected_partitions=rules.watermark.expected_partitions if expected is None else expected)


def _table(points: Sequence[CurvePoint]) -> str:
    lines = [f"{'bound':>8}  {'completeness':>12}  {'admitted':>10}  {'dropped':>9}  "
             f"{'avg emit latency':>16}"]
    for pt in points:
        latency = "-" if pt.avg_emit_latency is None else f"{pt.avg_emit_latency:.3f}s"
        lines.append(f"{format_duration(pt.bound):>8}  {pt.completeness:>12.4%}  "
                     f"{pt.admitted:>10}  {pt.dropped:>9}  {latency:>16}")
    return "\n".join(lines)


def _recommendation_line(best: CurvePoint | None, target: Decimal) -> str:
    if best is None:
        return f"no candidate bound reaches completeness {target}: try larger bounds"
    return (f"recommended bound for completeness {target}: {format_duration(best.bound)} "
            f"({best.completeness:.4%})")


# --------------------------------------------------------------------------- warehouse


@dataclass(frozen=True)
class PartitionCurve:
    """One partition on its own (its watermark as if it were the only partition)."""

    partition: int
    events: int
    points: tuple[CurvePoint, ...]
    recommended: CurvePoint | None

    def to_json_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "events": self.events,
                "recommended_bound_seconds": _seconds(self.recommended),
                "points": [pt.to_json_dict() for pt in self.points]}


@dataclass(frozen=True)
class LatenessAnalysis:
    """The what-if for one day of the event log: the overall curve (min rule over all
    partitions), the smallest bound reaching ``target``, and the same per partition."""

    day: date
    target: Decimal
    configured_bound: int
    events: int
    points: tuple[CurvePoint, ...]
    recommended: CurvePoint | None
    partitions: tuple[PartitionCurve, ...]

    @property
    def configured(self) -> CurvePoint | None:
        """The point of the bound the stream runs with (always among the candidates by default)."""
        return next((pt for pt in self.points if pt.bound == self.configured_bound), None)

    def to_json_dict(self) -> dict[str, Any]:
        return {"day": self.day.isoformat(), "target": str(self.target),
                "events": self.events,
                "configured_bound_seconds": self.configured_bound / MICROS_PER_SECOND,
                "recommended_bound_seconds": _seconds(self.recommended),
                "points": [pt.to_json_dict() for pt in self.points],
                "partitions": [pc.to_json_dict() for pc in self.partitions]}


def _seconds(point: CurvePoint | None) -> float | None:
    return None if point is None else point.bound / MICROS_PER_SECOND


def _as_target(value: Decimal | float | str | None, default: Decimal) -> Decimal:
    if value is None:
        return default
    try:
        target = Decimal(str(value))
    except InvalidOperation:
        raise invalid("target", value, "a completeness > 0 and <= 1, e.g. 0.999") from None
    if not (target.is_finite() and Decimal(0) < target <= Decimal(1)):
        raise invalid("target", value, "a completeness > 0 and <= 1, e.g. 0.999")
    return target


_CURVE_SCHEMA = ("scope string, events long, bound_us long, completeness double, "
                 "admitted long, dropped long, avg_emit_latency double")


def _curve_group(windows: WindowSpec, bounds: list[int], allowed_lateness: int, idle_timeout: int,
                 expected: tuple[int, ...]) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The applyInPandas function: one group (the day, or one partition) -> its curve rows."""

    def run(group: pd.DataFrame) -> pd.DataFrame:
        scope = str(group["scope"].iloc[0])
        arrival = group["arrival_us"].to_numpy(np.int64)
        part = group["partition"].to_numpy(np.int64)
        # arrival order (spark.rules.arrival_order): arrival, partition, file, line
        order = np.lexsort((group["offset"].to_numpy(np.int64),
                            group["file_rank"].to_numpy(np.int64), part, arrival))
        points = lateness_curve(
            group["event_us"].to_numpy(np.int64)[order], arrival[order], part[order], windows,
            bounds, allowed_lateness=allowed_lateness, idle_timeout=idle_timeout,
            expected_partitions=expected if scope == _OVERALL else ())
        return pd.DataFrame({
            "scope": [scope] * len(points), "events": [len(group)] * len(points),
            "bound_us": [pt.bound for pt in points],
            "completeness": [pt.completeness for pt in points],
            "admitted": [pt.admitted for pt in points],
            "dropped": [pt.dropped for pt in points],
            "avg_emit_latency": [pt.avg_emit_latency for pt in points],
        })

    return run


def analyze_day(spark: SparkSession, config: WhatIfConfig, day: date,
                bounds: Iterable[int | str] | None = None,
                target: Decimal | float | str | None = None) -> LatenessAnalysis:
    """Bound what-if over the day's event log (``event_date == day``, duplicates flagged by
    the stream left out), in arrival order ``(arrival_time, partition, input_file, offset)``.

    Runs ``reckon.whatif.lateness_curve`` inside Spark (``groupBy().applyInPandas``), one
    group for the day and one per partition; only the curve rows reach the driver.
    """
    from pyspark.sql import functions as F

    from spark import tables

    rules = config.rules
    goal = _as_target(target, config.target)
    run = curve_groups(config, bounds)  # bad bounds refused before the log is read
    # Landing lines without their own arrival time share their file's: such ties are broken
    # by file name, then line, as the stream read them (_day_log ranks the day's files).
    log = _day_log(spark, config, day).drop("source")
    scoped = log.withColumn("scope", F.lit(_OVERALL)).unionByName(
        log.withColumn("scope", F.col("partition").cast("string")))
    rows = scoped.groupBy("scope").applyInPandas(run, schema=_CURVE_SCHEMA).collect()
    return analysis_of_rows(rows, day, goal, rules.watermark.watermark_bound,
                            tables.table_path(config.warehouse, "event_log"))


def analysis_of_rows(rows: Sequence[Mapping[str, Any]], day: date, goal: Decimal,
                     configured_bound: int, log_path: str) -> LatenessAnalysis:
    """The analysis from the curve rows of every scope (``_CURVE_SCHEMA``: the day's, "all",
    and one per partition), whichever engine grouped them: Spark's ``applyInPandas`` or
    ``audits.bound_whatif_duck`` on DuckDB. No rows is ``NoEventsError``.

    Example: ``analysis_of_rows([], day, Decimal("0.99"), 0, "wh/event_log")`` raises
    ``NoEventsError`` ("no events of 2026-01-01 in wh/event_log").
    """
    if not rows:
        raise NoEventsError(day, f"no events of {day.isoformat()} in {log_path}")
    curves: dict[str, list[CurvePoint]] = {}
    events: dict[str, int] = {}
    for r in sorted(rows, key=lambda r: (r["scope"], r["bound_us"])):
        curves.setdefault(r["scope"], []).append(CurvePoint(
            int(r["bound_us"]), float(r["completeness"]), int(r["admitted"]),
            int(r["dropped"]),
            None if r["avg_emit_latency"] is None else float(r["avg_emit_latency"])))
        events[r["scope"]] = int(r["events"])
    overall = tuple(curves.pop(_OVERALL))
    partitions = tuple(
        PartitionCurve(int(scope), events[scope], tuple(points), recommend(points, goal))
        for scope, points in sorted(curves.items(), key=lambda kv: int(kv[0])))
    return LatenessAnalysis(
        day=day, target=goal, configured_bound=configured_bound,
        events=events[_OVERALL], points=overall, recommended=recommend(overall, goal),
        partitions=partitions)


def curve_groups(config: WhatIfConfig, bounds: Iterable[int | str] | None
                 ) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The function that turns one group of the day's log (columns of ``_day_log`` and
    ``scope``: "all" or a partition) into its curve rows, for the candidate ``bounds``.

    Example: ``curve_groups(config, None)(day_frame.assign(scope="all"))`` has one row per
    candidate bound (``analysis_of_rows`` reads them).
    """
    rules = config.rules
    return _curve_group(rules.windows, candidate_bounds(bounds, rules.watermark.watermark_bound),
                        rules.allowed_lateness, rules.watermark.idle_timeout,
                        rules.watermark.expected_partitions)


def completeness_target(value: Decimal | float | str | None, default: Decimal) -> Decimal:
    """``--target`` as a completeness in (0, 1] (``default``, the ``target_completeness``
    setting, when None), refused
    in one line otherwise, so that ``reckon bound-whatif`` refuses it before Spark starts.

    Example: ``completeness_target("0.999", Decimal("0.99"))`` is ``Decimal("0.999")``.
    """
    return _as_target(value, default)


def _day_log(spark: SparkSession, config: WhatIfConfig, the_day: date) -> Any:
    """The day's event log without the copies the stream flagged as duplicates, with each
    row's arrival-order keys (arrival, partition, file rank, offset) and its source. Landing
    lines without their own arrival time share their file's: the day's file names are few
    (one row each), so they are ranked once and the rank, a number, rides with every event."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from spark import tables

    if not tables.table_exists(config.warehouse, tables.EVENT_LOG):
        raise invalid("warehouse", str(config.warehouse),
                      "a warehouse with an event_log table (run `reckon stream` first)")
    day_log = (tables.read_table(spark, config.warehouse, tables.EVENT_LOG)
               .filter((F.col("event_date") == F.lit(the_day))
                       & ~F.coalesce(F.col("is_duplicate"), F.lit(False))))
    files = (day_log.select("input_file").distinct()
             .withColumn("file_rank", F.dense_rank().over(
                 Window.orderBy(F.col("input_file").asc_nulls_first()))))
    return (day_log.join(F.broadcast(files),
                         day_log["input_file"].eqNullSafe(files["input_file"]))
            .select(F.unix_micros("event_time").alias("event_us"),
                    F.unix_micros("arrival_time").alias("arrival_us"),
                    F.col("partition").cast("long").alias("partition"),
                    F.col("file_rank").cast("long").alias("file_rank"),
                    F.coalesce(F.col("offset"), F.lit(-1).cast("long")).alias("offset"),
                    F.coalesce(F.col("source"), F.lit("")).alias("source")))


def inputs_of_day(spark: SparkSession, config: WhatIfConfig, day: date
                  ) -> tuple[set[int], set[str]]:
    """(partitions, sources) that sent events on ``day``: what a configured bound per input
    is checked against (reckon.spec ``unseen_bounds``: a misspelt source is never seen).

    Example: ``inputs_of_day(spark, settings.whatif_config(), day)`` -> ``({0, 1}, {"sat"})``.
    """
    rows = _day_log(spark, config, day).select("partition", "source").distinct().collect()
    return {int(r.partition) for r in rows}, {str(r.source) for r in rows if r.source}


def analyze_inputs(spark: SparkSession, config: WhatIfConfig, day: date,
                   bounds: Iterable[int | str] | None = None,
                   target: Decimal | float | str | None = None,
                   by_source: bool = True) -> PerInputRecommendation:
    """A bound per source (or partition) for the day, against the best single bound
    (``reckon.whatif_inputs.recommend_per_input``), on the day's event log in arrival
    order, as a stream already running at the day's start (every input of the day known from
    its first arrival: a source first heard of at 00:00:05 is not late-by-start-up). The day is one ``applyInPandas`` group, as for the overall curve; only the
    recommendation (JSON, a few hundred bytes) reaches the driver."""
    from pyspark.sql import functions as F

    run = per_input_group(config, bounds, _as_target(target, config.target), by_source)
    rows = (_day_log(spark, config, day).withColumn("scope", F.lit(_OVERALL))
            .groupBy("scope").applyInPandas(run, schema="json string").collect())
    if not rows:
        raise NoEventsError(day, f"no events of {day.isoformat()} in the event log")
    return PerInputRecommendation.from_json_dict(json.loads(rows[0]["json"]))


def per_input_group(config: WhatIfConfig, bounds: Iterable[int | str] | None, goal: Decimal,
                    by_source: bool) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The function that turns the whole day's log (columns of ``_day_log``) into one row,
    the per-input recommendation as JSON, whichever engine read the day.

    Example: ``per_input_group(config, None, Decimal("0.99"), True)(day_frame)["json"][0]``.
    """
    rules = config.rules
    candidates = candidate_bounds(bounds, rules.watermark.watermark_bound)

    def run(group: pd.DataFrame) -> pd.DataFrame:
        arrival = group["arrival_us"].to_numpy(np.int64)
        part = group["partition"].to_numpy(np.int64)
        order = np.lexsort((group["offset"].to_numpy(np.int64),
                            group["file_rank"].to_numpy(np.int64), part, arrival))
        rec = recommend_per_input(
            group["event_us"].to_numpy(np.int64)[order], arrival[order], part[order],
            group["source"].to_numpy(object)[order], rules.windows, candidates, goal,
            allowed_lateness=rules.allowed_lateness, idle_timeout=rules.watermark.idle_timeout,
            expected_partitions=rules.watermark.expected_partitions, by_source=by_source,
            running=True)
        return pd.DataFrame({"json": [json.dumps(rec.to_json_dict())]})

    return run


def render_per_input(rec: PerInputRecommendation, day: date,
                     batches: Mapping[str, CurvePoint] | None = None,
                     batches_why_not: str | None = None, configured: str | None = None,
                     unheard: Sequence[str] = ()) -> str:
    """``reckon bound-whatif --per-source``: the bound per source, then what it buys, per event
    and (given ``batches``, audits.bound_whatif_batches.per_source_batches) per micro-batch, the
    day's batches replayed under each, with the stream as ``configured`` last; ``unheard``:
    sources with a configured bound that sent nothing that day (reckon.spec ``unseen_inputs``)."""
    from audits.bound_whatif_batches import BEST_PER_BATCH_ROWS, PER_SOURCE_ROWS

    unit = "source" if rec.by_source else "partition"
    lines = [f"bounds per {unit} for {day.isoformat()}, target completeness {rec.target} "
             f"(each {unit} judged with every other's bound, min rule):",
             f"  {unit:<12} {'events':>10} {'bound':>8} {'own completeness':>17} "
             f"{'dropped':>8}"]
    for b in rec.bounds:
        lines.append(f"  {b.unit!s:<12} {b.events:>10} {format_duration(b.bound):>8} "
                     f"{b.own.completeness:>17.4%} {b.dropped:>8}")
    single = rec.single or rec.single_fallback
    per_batch = batches or {}
    lines += ["", f"  {'':<34} {'per event':>30}" + (f" {'per micro-batch':>30}"
                                                    if per_batch else ""),
              f"  {'':<34} {'completeness':>12} {'avg emit latency':>17}"
              + (f" {'completeness':>12} {'avg emit latency':>17}" if per_batch else ""),
              _compare_line(f"bounds per {unit}", rec.per_input,
                            per_batch.get(PER_SOURCE_ROWS[0])),
              _compare_line(f"one bound {format_duration(single.bound)}"
                            + ("" if rec.single else " (misses target)"), single,
                            per_batch.get(PER_SOURCE_ROWS[1]))]
    if rec.by_partition is not None:
        lines.append(_compare_line(f"one bound {format_duration(rec.by_partition.bound)}, "
                                   "by partition", rec.by_partition,
                                   per_batch.get(PER_SOURCE_ROWS[2])))
    for row in BEST_PER_BATCH_ROWS.values():
        if row in per_batch:
            lines.append(_compare_line(f"one bound {format_duration(per_batch[row].bound)}, "
                                       "best per batch" + ("" if row == BEST_PER_BATCH_ROWS[True]
                                                           else ", by partition"),
                                       None, per_batch[row]))
    if PER_SOURCE_ROWS[3] in per_batch:
        lines.append(_compare_line("the stream as configured", None,
                                   per_batch[PER_SOURCE_ROWS[3]]))
        if configured:
            lines.append(f"  ({configured})")
    if per_batch:
        lines.append("per micro-batch: the day's batches as the stream ran them, replayed "
                     "under each row's bounds")
    elif batches_why_not:
        lines.append(f"per micro-batch: not available ({batches_why_not})")
    if not rec.reached:
        lines.append("no combination of the candidate bounds reaches the target: try larger "
                     "bounds")
    if unheard:
        lines.append(f"configured bounds of sources that sent no event on {day.isoformat()}: "
                     f"{', '.join(unheard)} (a misspelt name? a bound applies to the events' "
                     "source field exactly)")
    return "\n".join([*lines, "", *_configure_lines(rec)])


def _configure_lines(rec: PerInputRecommendation) -> list[str]:
    """How to set the recommended bounds: the setting's value (as RECKON_* takes it), the
    same in reckon.toml and as flags, and how a warehouse's recorded bounds change.

    Example (bounds by source http 10s, radar 0s)::

        configure: watermark_bound_by_source = http=10s,radar=0s  (with watermark_inputs = "source")
          reckon.toml: watermark_bound_by_source = { http = "10s", radar = "0s" }
          flags:       --watermark-inputs source --watermark-bound-by-source http=10s,radar=0s
    """
    name = "watermark_bound_by_source" if rec.by_source else "watermark_bound_by_partition"
    pairs = [(str(b.unit), format_duration(b.bound)) for b in rec.bounds]
    value = ",".join(f"{unit}={bound}" for unit, bound in pairs)
    toml = ", ".join(f'{unit if unit.isalnum() else json.dumps(unit)} = "{bound}"'
                     for unit, bound in pairs)
    inputs = "--watermark-inputs source " if rec.by_source else ""
    return [f"configure: {name} = {value}"
            + ("  (with watermark_inputs = \"source\")" if rec.by_source else ""),
            f"  reckon.toml: {name} = {{ {toml} }}"
            + ("  and watermark_inputs = \"source\"" if rec.by_source else ""),
            f"  flags:       {inputs}--{name.replace('_', '-')} {value}",
            "  (a warehouse keeps its recorded bounds: change them with reckon stream "
            "--change-spec and these flags)"]


def _compare_line(label: str, point: CurvePoint | None,
                  per_batch: CurvePoint | None = None) -> str:
    def cells(pt: CurvePoint | None) -> str:
        if pt is None:
            return f"{'':>12} {'':>17}"
        latency = "-" if pt.avg_emit_latency is None else f"{pt.avg_emit_latency:.3f}s"
        return f"{pt.completeness:>12.4%} {latency:>17}"

    line = f"  {label:<34} {cells(point)}" + ("" if per_batch is None else f" {cells(per_batch)}")
    return line.rstrip()


def analysis_json(analysis: LatenessAnalysis, attribution: Sequence[AttributionRow] = (),
                  batches: BatchCurve | None = None, why_not: str | None = None
                  ) -> dict[str, Any]:
    """The JSON form of ``reckon bound-whatif``: the per-event analysis, both curves (per batch
    first, as in the report) and who is late."""
    payload = analysis.to_json_dict()
    payload.update(curves_json(analysis, batches, why_not))
    payload["attribution"] = [_attribution_json(row) for row in attribution]
    return payload


def batch_curve_of_day(spark: SparkSession, config: WhatIfConfig, day: date,
                       bounds: Iterable[int] | None) -> tuple[BatchCurve | None, str | None]:
    """``reckon bound-whatif``'s per-batch curve over the same bounds, or None and the one line
    that says why it cannot be had (no archived events, batches of several stream queries)."""
    from audits.bound_whatif_batches import analyze_day_batches

    try:
        return analyze_day_batches(spark, config, day, bounds=bounds), None
    except UsageError as exc:
        return None, str(exc)


def curves_json(analysis: LatenessAnalysis, batches: BatchCurve | None,
                why_not: str | None) -> dict[str, Any]:
    """Both curves for ``--json``, per batch first as in the report, with why they differ.
    ``points`` (the per-event curve) stays at the top level for existing readers.

    Example: ``[c["granularity"] for c in curves_json(a, b, None)["curves"]]`` is
    ``["per_batch", "per_event"]``; a missing per-batch curve has no points and a ``note``."""
    from audits.bound_whatif_batches import (
        CURVES_NOTE,
        PER_BATCH,
        PER_EVENT,
        batch_curve_json,
        no_batch_curve,
    )

    per_batch = ({**batch_curve_json(batches), "note": None} if batches is not None else
                 {"granularity": "per_batch", "label": PER_BATCH, "points": [],
                  "note": no_batch_curve(why_not or "")})
    per_event = {"granularity": "per_event", "label": PER_EVENT, "events": analysis.events,
                 "points": [pt.to_json_dict() for pt in analysis.points], "note": None}
    return {"curves": [per_batch, per_event], "curves_note": CURVES_NOTE}


def _curve_lines(analysis: LatenessAnalysis, batches: BatchCurve | None,
                 why_not: str | None) -> list[str]:
    """Both curves as text, each under its label; why they differ, or why one is missing."""
    from audits.bound_whatif_batches import CURVES_NOTE, PER_BATCH, PER_EVENT, no_batch_curve

    lines = ["", f"Completeness {PER_BATCH}:"]
    if batches is None:
        lines.append(no_batch_curve(why_not or ""))
    else:
        lines += [f"({batches.batches} batches, {batches.events} events judged)",
                  _table(batches.points)]
    lines += ["", f"Completeness {PER_EVENT}:", f"({analysis.events} events)",
              _table(analysis.points),
              _recommendation_line(analysis.recommended, analysis.target)]
    return [*lines, "", *textwrap.wrap(CURVES_NOTE, width=100)]


def render_analysis(analysis: LatenessAnalysis,
                    attribution: Sequence[AttributionRow] = (),
                    batches: BatchCurve | None = None, why_not: str | None = None) -> str:
    """The human-readable form of ``reckon bound-whatif``: both curves (per batch, per event) with
    why they differ, the recommendation, per partition, who is late."""
    lines = [f"bound what-if of {analysis.day.isoformat()}: {analysis.events} events, "
             f"configured bound {format_duration(analysis.configured_bound)}, "
             f"target completeness {analysis.target}",
             *_curve_lines(analysis, batches, why_not),
             "", "per partition (each on its own watermark, per event):"]
    for pc in analysis.partitions:
        best = ("none reaches the target" if pc.recommended is None
                else format_duration(pc.recommended.bound))
        lines.append(f"  partition {pc.partition}: {pc.events} events, recommended bound {best}")
    return "\n".join([*lines, *_attribution_lines(attribution)])


def _attribution_lines(attribution: Sequence[AttributionRow]) -> list[str]:
    if not attribution:
        return []
    lines = ["", "who is late (lift = late share / event share):",
             f"  {'dimension':<16} {'value':<12} {'late':>8} {'events':>10} "
             f"{'late share':>10} {'event share':>11} {'lift':>8}"]
    for row in attribution:
        lift = "-" if row.lift is None else str(row.lift)
        lines.append(f"  {row.dimension:<16} {row.value:<12} {row.late_events:>8} "
                     f"{row.all_events:>10} {row.late_share!s:>10} "
                     f"{row.event_share!s:>11} {lift:>8}")
    return lines


def _attribution_json(row: AttributionRow) -> dict[str, Any]:
    """One attribution row as JSON. Late amounts stay per currency (currency -> exact decimal
    text): amounts of two currencies are never added, event counts may be."""
    return {"dimension": row.dimension, "value": row.value, "late_events": row.late_events,
            "late_amounts": {code: str(amount)
                             for code, amount in sorted(row.late_amounts.items())},
            "all_events": row.all_events,
            "late_share": str(row.late_share), "event_share": str(row.event_share),
            "lift": None if row.lift is None else str(row.lift)}
