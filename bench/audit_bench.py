"""The audit workload: ``audit_day`` against DataComPy's SparkSQLCompare on the same
provisional and canonical totals, in turns (harness.alternate); then each once more doing
its full job (the report database and attribution; DataComPy's report).

``run_audit`` is public: the scale curve audits the bench day the same way.
"""

from __future__ import annotations

import shutil
from typing import Any

from pyspark.sql import SparkSession

from bench import datasets as ds
from bench.harness import ROUNDS, Scale, alternate, log, measure, target, timed_with_timeline
from bench.replay_bench import run_replay, small_day
from reckon.config import Settings
from reckon.schema import TOTAL_IDENTITY
from spark import tables as tb

__all__ = ["audited_day", "bench_audit", "run_audit", "warm_up_audit"]


def run_audit(spark: SparkSession, settings: Settings, record: bool) -> Any:
    """reckon's audit of the bench day (``ds.BENCH_DAY``); ``record`` writes the report DB."""
    from audits.audit import audit_day
    from reports.db.repository import audit_recorder

    return audit_day(spark, settings.audit_config(), ds.BENCH_DAY, kind="bench",
                     recorder=audit_recorder(settings) if record else None)


def _datacompy(spark: SparkSession, settings: Settings, *, report: bool) -> dict[str, int]:
    """DataComPy's SparkSQLCompare of provisional against canonical totals at reckon's grain
    (window, key, currency): its row counts, and its report when ``report``."""
    try:
        from datacompy.spark.sql import SparkSQLCompare  # datacompy < 1.0
    except ImportError:
        from datacompy.spark import SparkSQLCompare
    grain = ["window_start", *TOTAL_IDENTITY]  # reckon's: totals per (window, key, currency)
    cols = [*grain, "total_amount", "event_count"]
    prov = ds.day_frame(spark, settings, tb.PROVISIONAL_TOTALS).select(*cols)
    canon = ds.day_frame(spark, settings, tb.CANONICAL_TOTALS).select(*cols)
    cmp = SparkSQLCompare(spark, prov, canon, join_columns=grain,
                          df1_name="provisional", df2_name="canonical")
    out = {"only_provisional": cmp.df1_unq_rows.count(),
           "only_canonical": cmp.df2_unq_rows.count(),
           "intersect_rows": cmp.intersect_rows.count(),
           "matching_rows": cmp.count_matching_rows()}
    if report:
        cmp.report()
    return out


def warm_up_audit(spark: SparkSession, scale: Scale) -> None:
    """Every audit contender once on the small day (replay_bench.small_day), untimed."""
    settings = small_day(spark, scale, "audit")
    if settings is None:
        return
    ds.build_audit_inputs(spark, settings)
    run_audit(spark, settings, False)
    _datacompy(spark, settings, report=False)
    spark.catalog.clearCache()  # DataComPy leaves its joined rows cached (see alternate)


def _prepare_audit(spark: SparkSession, settings: Settings) -> None:
    """The audit's inputs of the bench day: the replay's tables, provisional and late rows."""
    if not all(tb.table_exists(settings.warehouse_path, name)
               for name in (tb.CANONICAL_TOTALS, tb.UNCAUGHT_DUPLICATES)):
        run_replay(spark, settings)
    ds.build_audit_inputs(spark, settings)
    # record=True inserts into the report database, which keeps every run's breaks: start
    # each benchmark run from an empty one, so its insert cost does not grow run after run.
    if not settings.report_db_url:
        shutil.rmtree(settings.warehouse_path / "reports", ignore_errors=True)


def audited_day(spark: SparkSession, scale: Scale) -> Settings:
    """The bench day's warehouse (``ds.day_warehouse`` at ``scale.day_events``) with its
    replay, provisional and late rows and its reconciliation: what a nightly run leaves, for
    readers that only query it (the postmortem_day workload). The audit workload's tables are
    reused as they are when it has run on this data; otherwise the day is audited once here.

    Example: ``audited_day(spark, scale).warehouse_path / "reconciliation"`` exists after.
    """
    settings = ds.day_warehouse(spark, scale.data_dir, scale.day_events)
    if not all(tb.table_exists(settings.warehouse_path, name)
               for name in (tb.LATE_EVENTS, tb.RECONCILIATION)):
        log(f"audit: auditing the {scale.day_events:,}-event day once (for its readers)")
        _prepare_audit(spark, settings)
        run_audit(spark, settings, False)
    return settings


_AUDIT_NOTE = ("audit_day(record=False) = a full outer join of 4 per-window inputs "
               "on (window_start, key, currency) (no event_log scan) + a Delta "
               "replaceWhere write "
               "with the summary observed on it; record=True adds late attribution "
               "(a window over the day's event_log) and the breaks insert")


def bench_audit(spark: SparkSession, scale: Scale) -> dict[str, Any]:
    """audit_day(record=False) against DataComPy in turns, the median run of each; then
    audit_day(record=True) and DataComPy with its report, once each."""
    n = scale.day_events
    warm_up_audit(spark, scale)
    settings = ds.day_warehouse(spark, scale.data_dir, n)
    log(f"audit: preparing provisional/late tables from the {n:,}-event day")
    _prepare_audit(spark, settings)
    timelines: list[dict[str, float]] = []

    def ours_timed() -> tuple[Any, dict[str, Any]]:
        value, m, timeline = timed_with_timeline(
            spark, settings, lambda: run_audit(spark, settings, False), (tb.RECONCILIATION,))
        timelines.append(timeline)
        return value, m

    runs = alternate(spark, {
        "audit_day(record=False)": ours_timed,
        "DataComPy SparkSQLCompare": lambda: measure(
            spark, lambda: _datacompy(spark, settings, report=False)),
    }, ROUNDS, "audit")
    (res, ours, ours_walls), (dc, theirs, theirs_walls) = runs.values()
    timeline = timelines[1:][ours_walls.index(ours["wall_seconds"])]  # [0]: untimed run
    log("audit: audit_day(record=True) (report DB + attribution)")
    res_rec, ours_rec = measure(spark, lambda: run_audit(spark, settings, True))
    log("audit: DataComPy SparkSQLCompare + report()")
    _, theirs_rep = measure(spark, lambda: _datacompy(spark, settings, report=True))
    spark.catalog.clearCache()
    speedup = theirs["wall_seconds"] / ours["wall_seconds"]
    breaks = res.rows - res.status_counts.get("MATCHED", 0)
    results = {
        "reckon_audit_record_false": {**ours, "rows_per_second":
                                      round(res.rows / ours["wall_seconds"]),
                                      "wall_seconds_runs": ours_walls,
                                      "status_counts": res.status_counts},
        "reckon_audit_record_true": {**ours_rec, "breaks_recorded": res_rec.breaks_recorded},
        "datacompy_spark_compare": {**theirs, "rows_per_second":
                                    round(res.rows / theirs["wall_seconds"]),
                                    "wall_seconds_runs": theirs_walls, **dc},
        "datacompy_spark_compare_report": theirs_rep,
    }
    return {
        "scale": {"events": n, "reconciliation_rows": res.rows, "breaks": breaks,
                  "break_share": round(breaks / max(1, res.rows), 4),
                  "injected": ds.expected_breaks()},
        "results": results,
        "ratios": {"datacompy_over_reckon_wall": round(speedup, 3),
                   "report_db_cost_seconds": round(ours_rec["wall_seconds"]
                                                   - ours["wall_seconds"], 3)},
        "targets": [target("audit speed-up over DataComPy", round(speedup, 3), ">= 3x",
                           speedup >= 3)],
        "profile": {"audit_timeline_seconds": timeline, "note": _AUDIT_NOTE},
        "settings": {"tolerance_abs": str(settings.tolerance_abs),
                     "rounds": ROUNDS, "reported": "median run of each contender"},
    }
