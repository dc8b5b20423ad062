"""`reckon bound-whatif` without a JVM: the reads of ``audits.bound_whatif``,
``audits.bound_whatif_batches`` and ``audits.attribution``, through DuckDB over the warehouse's
Delta tables (delta-rs, ``audits.duck_tables``).

Why: the what-if of a day is a postmortem question; starting Spark for it took most of two
minutes on the demo warehouse, while the day's log is a few columns DuckDB scans in well under
a second. Every rule stays where it lives, so both engines answer alike:

* the per-event curves (the day's, one per partition) and the per-input recommendation are
  the same functions the Spark path runs inside ``applyInPandas`` (``curve_groups``,
  ``per_input_group``: ``reckon.whatif``'s numpy walk), fed the same columns in the same
  arrival order; only the day's six columns are read, into numpy arrays, never
  Python lists; their rows become the analysis through ``analysis_of_rows``;
* the per-batch walks are ``audits.bound_whatif_batches``' (``BatchReads``): this module only
  reads the judged events' span, the batches' summaries, the start state and counts the late
  pairs in SQL (window starts from ``WindowSpec.window_starts`` written as SQL by
  ``audits.duck_tables.SqlExpr``);
* who is late is ``audits.attribution``'s arithmetic (``attribution_of_rows``) over the same
  per (dimension, value, currency) counts, amounts summed per currency as DECIMAL(38, 3).

Orders are Spark's: ascending puts nulls first (said here with ``NULLS FIRST``), descending
last. tests/test_bound_whatif_duck.py compares the two engines' output on streamed warehouses.

Example::

    reads = DuckReads(Path("wh"))
    analysis = analyze_day_duck(reads, settings.whatif_config(), date(2026, 1, 1))
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from audits.attribution import LATENESS_BUCKETS, attribution_of_rows
from audits.bound_whatif import (
    _OVERALL,
    LatenessAnalysis,
    _as_target,
    analysis_of_rows,
    curve_groups,
    per_input_group,
)
from audits.bound_whatif_batches import BatchStep, _DayBatches
from audits.duck_tables import SqlExpr, TableRef, connect, lock
from audits.duck_tables import load_table as _load
from audits.records import AttributionRow
from reckon.engine_config import WhatIfConfig
from reckon.errors import NoEventsError, UsageError, invalid
from reckon.eventtime import EventTimeRules, PartitionObservation, WatermarkState
from reckon.schema import AMOUNT_SCALE
from reckon.spec import recorded_bound
from reckon.timeutil import MICROS_PER_DAY, day_bounds, from_micros
from reckon.whatif_inputs import PerInputRecommendation
from storage import table_names as tb

__all__ = ["DuckReads", "analyze_day_duck", "analyze_inputs_duck", "batch_curve_of_day_duck",
           "inputs_of_day_duck", "late_attribution_duck"]

_TABLES = (tb.EVENT_LOG, tb.LATE_EVENTS, tb.WATERMARK_PROGRESS)
_HOUR_MICROS = 3_600_000_000


class DuckReads:
    """A locked, in-memory DuckDB connection over the warehouse's event_log (required),
    late_events and watermark_progress (when present); the ``BatchReads`` of the per-batch
    walks. Refuses, in one line and before any scan, a warehouse without an event_log.

    ``versions`` pins tables (name -> Delta version; None or absent: the newest), so a what-if
    recorded with an audit run reads what that run read (``audits.day_whatif``).

    Example: ``DuckReads(Path("wh")).present`` is ``{"event_log", "late_events",
    "watermark_progress"}`` on a streamed warehouse;
    ``DuckReads(Path("wh"), versions={"event_log": 12})`` reads the log as of version 12.
    """

    def __init__(self, warehouse: Path, versions: Mapping[str, int | None] | None = None
                 ) -> None:
        if not tb.table_exists(warehouse, tb.EVENT_LOG):
            raise invalid("warehouse", str(warehouse),
                          "a warehouse with an event_log table (run `reckon stream` first)")
        self.warehouse = warehouse
        self.conn = connect()
        self.present = {t for t in _TABLES if tb.table_exists(warehouse, t)}
        for name in sorted(self.present):
            self.conn.register(name, _load(warehouse, TableRef(
                name=name, version=(versions or {}).get(name))))
        self._marks = 0

    def frame(self, sql: str, params: list[Any]) -> pd.DataFrame:
        """The rows of ``sql`` as a pandas frame (numpy columns). Every value is a bound
        parameter; the text only names tables and the rules' integers."""
        return self.conn.execute(sql, params).df()

    def rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        cursor = self.conn.execute(sql, params)
        names = [d[0] for d in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    # ------------------------------------------------------------------ BatchReads

    def day_batches(self, config: WhatIfConfig, the_day: date) -> _DayBatches:
        """``audits.bound_whatif_batches._day_batches`` on DuckDB: the judged events stay a SQL
        relation (their text and parameters), only the span and summaries come back."""
        judged = _judged_sql(config, the_day)
        (span,) = self.rows(f"SELECT min(batch_id) AS lo, max(batch_id) AS hi, count(*) AS n "
                            f"FROM ({judged[0]})", judged[1])
        if not span["n"]:
            raise NoEventsError(the_day, "the stream archived no events of "
                                f"{the_day.isoformat()}")
        lo, hi = int(span["lo"]), int(span["hi"])
        start, start_bound = self._start_state(config, lo, hi)
        return _DayBatches(judged, int(span["n"]), self._summaries(lo, hi), start, start_bound)

    def _summaries(self, lo: int, hi: int) -> list[tuple[int, list[PartitionObservation]]]:
        rows = self.rows(f"""
            SELECT batch_id, "partition", coalesce(source, '') AS src,
                   max(epoch_us(event_time)) AS t, max(epoch_us(arrival_time)) AS a,
                   min(epoch_us(arrival_time)) AS a0
            FROM {tb.EVENT_LOG} WHERE batch_id BETWEEN ? AND ?
            GROUP BY ALL ORDER BY batch_id, "partition" NULLS FIRST, src""", [lo, hi])
        batches: dict[int, list[PartitionObservation]] = {}
        for r in rows:
            batches.setdefault(int(r["batch_id"]), []).append(PartitionObservation(
                int(r["partition"]), int(r["t"]), int(r["a"]), int(r["a0"]), r["src"]))
        return sorted(batches.items())

    def _start_state(self, config: WhatIfConfig, lo: int, hi: int
                     ) -> tuple[WatermarkState, int]:
        configured = config.rules.watermark.watermark_bound
        if tb.WATERMARK_PROGRESS not in self.present:
            return WatermarkState(), configured
        progress = tb.WATERMARK_PROGRESS
        queries = [r["query_id"] for r in self.rows(
            f"SELECT DISTINCT query_id FROM {progress} WHERE batch_id BETWEEN ? AND ? LIMIT 2",
            [lo, hi])]
        if len(queries) > 1:
            raise UsageError(f"batches {lo}..{hi} were written by more than one stream query "
                             "(a restart on a new checkpoint): their events cannot be told "
                             "apart by batch id, so the per-batch what-if is not computed")
        row = [] if not queries else self.rows(
            f"SELECT state_json, rules_json FROM {progress} WHERE query_id = ? AND batch_id < ? "
            "ORDER BY batch_id DESC NULLS LAST LIMIT 1", [queries[0], lo])
        if not row and queries:
            row = self.rows(f"SELECT state_json, rules_json FROM {progress} "
                            "WHERE query_id <> ? ORDER BY processed_at DESC NULLS LAST, "
                            "batch_id DESC NULLS LAST LIMIT 1", [queries[0]])
        if not row:
            return WatermarkState(), configured
        return (WatermarkState.from_json(row[0]["state_json"]),
                recorded_bound(row[0]["rules_json"], configured))

    def dropped(self, judged: Any, walks: list[list[BatchStep]], config: WhatIfConfig,
                day: date, bounds: list[list[int]]
                ) -> tuple[int, list[dict[int, int]], list[int]]:
        """``audits.bound_whatif_batches._dropped`` in SQL: each judged event's windows of the
        day, late at bound L under walk k when ``before_k - end - G >= L``."""
        import pyarrow as pa

        rules = config.rules
        d0, d1 = day_bounds(day)
        columns = {"batch_id": [steps[0].batch for steps in zip(*walks, strict=True)]}
        for k, walk in enumerate(walks):
            columns[f"before{k}"] = [step.before for step in walk]
        self._marks += 1
        marks = f"marks_{self._marks}"  # a name of ours, never a value of the query
        self.conn.register(marks, pa.table({c: pa.array(v, pa.int64())
                                            for c, v in columns.items()}))
        starts = ", ".join(str(ws) for ws in rules.windows.window_starts(SqlExpr("event_us")))
        size, allowed_lateness = rules.windows.size, rules.allowed_lateness
        slack = [f"(before{k} - we - {allowed_lateness})" for k in range(len(walks))]
        sums = [f"sum(CASE WHEN {slack[k]} >= {int(b)} THEN 1 ELSE 0 END) AS d{k}_{i}"
                for k, walk_bounds in enumerate(bounds) for i, b in enumerate(walk_bounds)]
        pairs = (f"SELECT m.*, ws + {size} AS we FROM (SELECT j.*, unnest([{starts}]) AS ws "
                 f"FROM ({judged[0]}) j) e JOIN {marks} m USING (batch_id) "
                 f"WHERE ws >= {d0} AND ws < {d1}")
        try:
            (counts,) = self.rows(f"SELECT count(*) AS n, {', '.join(sums)} FROM ({pairs})",
                                  list(judged[1]))
            ends = [int(r["we"]) for r in self.rows(f"SELECT DISTINCT we FROM ({pairs})",
                                                    list(judged[1]))]
        finally:
            self.conn.unregister(marks)
        return int(counts["n"]), [{b: int(counts[f"d{k}_{i}"] or 0)
                                   for i, b in enumerate(walk_bounds)}
                                  for k, walk_bounds in enumerate(bounds)], ends

    def rules_json(self, config: WhatIfConfig, day: date) -> set[str]:
        judged = _judged_sql(config, day)
        (span,) = self.rows(f"SELECT min(batch_id) AS lo, max(batch_id) AS hi "
                            f"FROM ({judged[0]})", judged[1])
        if span["lo"] is None or tb.WATERMARK_PROGRESS not in self.present:
            return set()
        return {r["rules_json"] for r in self.rows(
            f"SELECT DISTINCT rules_json FROM {tb.WATERMARK_PROGRESS} WHERE batch_id "
            "BETWEEN ? AND ? AND rules_json IS NOT NULL LIMIT 2",
            [int(span["lo"]), int(span["hi"])])}


def _judged_sql(config: WhatIfConfig, day: date) -> tuple[str, list[Any]]:
    """``audits.bound_whatif_batches._judged_events``: the day's windows' event times, not
    flagged duplicates, archived by a batch; (SQL, parameters)."""
    lo, hi = config.rules.windows.day_event_times(day)
    return (f"SELECT epoch_us(event_time) AS event_us, batch_id FROM {tb.EVENT_LOG} "
            "WHERE event_date BETWEEN ? AND ? AND epoch_us(event_time) >= ? "
            "AND epoch_us(event_time) < ? AND NOT coalesce(is_duplicate, false) "
            "AND batch_id IS NOT NULL",
            [from_micros(lo).date(), from_micros(hi - 1).date(), lo, hi])


def _day_log(reads: DuckReads, day: date) -> pd.DataFrame:
    """``audits.bound_whatif._day_log``: the day's events without flagged duplicates, with the
    arrival-order keys (the day's input files ranked, nulls first) and the source."""
    return reads.frame(f"""
        WITH d AS (SELECT * FROM {tb.EVENT_LOG}
                   WHERE event_date = ? AND NOT coalesce(is_duplicate, false)),
             f AS (SELECT input_file, dense_rank() OVER (ORDER BY input_file ASC NULLS FIRST)
                          AS file_rank FROM (SELECT DISTINCT input_file FROM d))
        SELECT epoch_us(d.event_time) AS event_us, epoch_us(d.arrival_time) AS arrival_us,
               CAST(d."partition" AS BIGINT) AS "partition",
               CAST(f.file_rank AS BIGINT) AS file_rank,
               CAST(coalesce(d."offset", -1) AS BIGINT) AS "offset",
               coalesce(d.source, '') AS source
        FROM d JOIN f ON d.input_file IS NOT DISTINCT FROM f.input_file""", [day])


def analyze_day_duck(reads: DuckReads, config: WhatIfConfig, day: date,
                     bounds: Iterable[int | str] | None = None,
                     target: Decimal | float | str | None = None) -> LatenessAnalysis:
    """``audits.bound_whatif.analyze_day`` on DuckDB: the same curve function over the day and
    over each partition, the same rows, the same analysis. A quiet day is ``NoEventsError``.

    Example: ``analyze_day_duck(DuckReads(wh), config, day).recommended.bound``.
    """
    goal = _as_target(target, config.target)
    run = curve_groups(config, bounds)
    log = _day_log(reads, day)
    rows: list[dict[str, Any]] = []
    if len(log):
        groups = [log.assign(scope=_OVERALL)] + [
            part.assign(scope=str(p)) for p, part in log.groupby("partition", sort=True)]
        for group in groups:
            curve = run(group.reset_index(drop=True))
            rows += [{k: (None if k == "avg_emit_latency" and pd.isna(v) else v)
                      for k, v in r.items()} for r in curve.to_dict("records")]
    return analysis_of_rows(rows, day, goal, config.rules.watermark.watermark_bound,
                            tb.table_path(config.warehouse, tb.EVENT_LOG))


def analyze_inputs_duck(reads: DuckReads, config: WhatIfConfig, day: date,
                        bounds: Iterable[int | str] | None = None,
                        target: Decimal | float | str | None = None,
                        by_source: bool = True) -> PerInputRecommendation:
    """``audits.bound_whatif.analyze_inputs`` on DuckDB (the same ``per_input_group``).

    Example: ``analyze_inputs_duck(DuckReads(wh), config, day).bounds[0].unit``."""
    run = per_input_group(config, bounds, _as_target(target, config.target), by_source)
    log = _day_log(reads, day)
    if not len(log):
        raise NoEventsError(day, f"no events of {day.isoformat()} in the event log")
    return PerInputRecommendation.from_json_dict(json.loads(run(log)["json"].iloc[0]))


def inputs_of_day_duck(reads: DuckReads, day: date) -> tuple[set[int], set[str]]:
    """``audits.bound_whatif.inputs_of_day`` on DuckDB: (partitions, sources) of the day.

    Example: ``inputs_of_day_duck(reads, day)`` -> ``({0, 1}, {"sat"})``."""
    rows = reads.rows(f"SELECT DISTINCT \"partition\", coalesce(source, '') AS source "
                      f"FROM {tb.EVENT_LOG} WHERE event_date = ? "
                      "AND NOT coalesce(is_duplicate, false)", [day])
    return ({int(r["partition"]) for r in rows}, {str(r["source"]) for r in rows if r["source"]})


def batch_curve_of_day_duck(reads: DuckReads, config: WhatIfConfig, day: date,
                            bounds: Iterable[int] | None) -> tuple[Any, str | None]:
    """``audits.bound_whatif.batch_curve_of_day`` on DuckDB: the per-batch curve, or None and
    the one line that says why not."""
    from audits.bound_whatif_batches import analyze_day_batches

    try:
        return analyze_day_batches(reads, config, day, bounds=bounds), None
    except UsageError as exc:
        return None, str(exc)


def _bucket_sql(column: str = "lateness_seconds") -> str:
    whens = " ".join(f"WHEN {column} <= {upper} THEN '{label}'"
                     for label, upper in LATENESS_BUCKETS if upper is not None)
    return f"CASE {whens} ELSE '{LATENESS_BUCKETS[-1][0]}' END"


def _hour_sql(column: str = "arrival_time") -> str:
    return (f"lpad(CAST((epoch_us({column}) % {MICROS_PER_DAY}) // {_HOUR_MICROS} AS VARCHAR), "
            "2, '0')")


def _long_sql(relation: str, dims: dict[str, str]) -> str:
    return " UNION ALL ".join(
        f"SELECT '{name}' AS dimension, CAST({value} AS VARCHAR) AS value, currency, amount "
        f"FROM {relation}" for name, value in dims.items())


def late_attribution_duck(reads: DuckReads, rules: EventTimeRules, day: date
                          ) -> list[AttributionRow]:
    """``audits.attribution.late_attribution`` on DuckDB (unpinned): the same populations
    (the first copy of each of the windows' events; each late event once, at its largest
    lateness), counted per (dimension, value, currency) here, added up by
    ``attribution_of_rows``. Amounts are summed per currency only.

    Example: ``late_attribution_duck(reads, settings.event_time_rules(), day)[0].dimension``
    is ``"partition"``."""
    if tb.LATE_EVENTS not in reads.present:
        return []
    lo, hi = rules.windows.day_event_times(day)
    dims = {"partition": '"partition"', "source": "source", "currency": "currency"}
    total = f"DECIMAL(38, {AMOUNT_SCALE})"
    sql = f"""
        WITH ev AS (
            SELECT * FROM (
                SELECT *, row_number() OVER (
                    PARTITION BY event_id ORDER BY arrival_time ASC NULLS FIRST,
                    "partition" ASC NULLS FIRST, input_file ASC NULLS FIRST,
                    "offset" ASC NULLS FIRST) AS _copy
                FROM {tb.EVENT_LOG}
                WHERE event_date >= ? AND event_date <= ? AND epoch_us(event_time) >= ?
                  AND epoch_us(event_time) < ? AND NOT coalesce(is_duplicate, false))
            WHERE _copy = 1),
        late AS (
            SELECT event_id, max("partition") AS "partition", max(source) AS source,
                   max(currency) AS currency, max(amount) AS amount,
                   max(arrival_time) AS arrival_time, max(lateness_seconds) AS lateness_seconds
            FROM {tb.LATE_EVENTS} WHERE window_date = ? GROUP BY event_id),
        late_long AS ({_long_sql("late", {**dims, "lateness_bucket": _bucket_sql(),
                                           "arrival_hour": _hour_sql()})}),
        event_long AS ({_long_sql("ev", {**dims, "arrival_hour": _hour_sql()})})
        SELECT dimension, value, currency, count(*) AS late_events,
               sum(CAST(amount AS {total})) AS late_amount, NULL AS all_events
        FROM late_long GROUP BY ALL
        UNION ALL
        SELECT dimension, value, currency, NULL, NULL, count(*) FROM event_long GROUP BY ALL"""
    return attribution_of_rows(reads.rows(sql, [day, from_micros(hi - 1).date(), lo, hi, day]))


def open_reads(warehouse: Path) -> DuckReads:
    """The reads of ``warehouse``, locked once registered (no file or network access after).

    Example: ``open_reads(Path("wh")).present``."""
    reads = DuckReads(warehouse)
    lock(reads.conn)
    return reads

