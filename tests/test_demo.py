"""``reckon demo``: the timeline it generates, and the whole flow at a small scale with every
figure of its summary checked against the tables. It is also the default tier's real run of
the nightly DAG: its canonical totals are checked against the pure reference."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from reckon.demo import DEMO_DAY, demo_generator_config
from reckon.errors import UsageError
from reckon.generate import generate_landing
from reckon.timeutil import MICROS_PER_SECOND, day_bounds, parse_duration, parse_timestamp


def test_the_demo_day_ends_inside_the_events_so_the_watermark_can_close_it(tmp_path):
    manifest = generate_landing(tmp_path / "landing", demo_generator_config(5_000))
    d0, d1 = day_bounds(DEMO_DAY)
    first = parse_timestamp(manifest.event_time_min)
    last = parse_timestamp(manifest.event_time_max)
    assert d0 <= first < d1
    # the tail on the next day is far longer than lateness + grace + the slow skew
    assert last - d1 > 50 * MICROS_PER_SECOND
    assert (last - first) >= 590 * MICROS_PER_SECOND
    assert 6 <= len(manifest.files) <= 8
    assert manifest.quarantined > 0 and manifest.duplicates > 0
    assert manifest.slow_partition is not None and manifest.idle_partition is not None


def test_default_scale_stays_within_the_batch_budget():
    from reckon.cli import build_parser

    events = build_parser().parse_args(["demo"]).events
    cfg = demo_generator_config(events)
    span_s = cfg.events / cfg.rate
    assert span_s == pytest.approx(600)  # the floor: ten minutes of event time
    assert math.ceil(cfg.events * 1.02 / cfg.lines_per_file) == 8
    start = parse_timestamp(cfg.start)
    assert day_bounds(DEMO_DAY)[1] - start == 540 * MICROS_PER_SECOND  # 60 s on the next day


def test_too_few_events_is_rejected_with_the_argument_named():
    with pytest.raises(UsageError, match="--events=10 is not valid: at least 1000 events"):
        demo_generator_config(10)


@pytest.mark.airflow
@pytest.mark.slow
def test_demo_end_to_end_summary_matches_the_tables(spark, tmp_path, capsys):
    from pyspark.sql import functions as F

    from audits.lateness import analyze_day
    from reckon.cli import main
    from reckon.config import load_settings
    from spark import tables as tb
    from tests.streamkit import canonical_rows, landing_reference_canonical
    from tests.test_dag import EXPECTED_UPSTREAM

    wh = tmp_path / "wh"
    assert main(["demo", "--warehouse", str(wh), "--events", "5000"]) == 0
    printed = capsys.readouterr().out
    for stage in ("generating", "stream batch 1/", "task wait_for_watermark started",
                  "task compact started", "task report started", "reading the summary back", "unexplained breaks"):
        assert stage in printed
    summary = json.loads((wh / "reports" / f"demo-summary-{DEMO_DAY}.json").read_text())

    in_day = F.col("window_date") == F.lit(DEMO_DAY)

    def sums(name: str, amount: str = "total_amount", count: str = "event_count"):
        row = (tb.read_table(spark, wh, name).filter(in_day)
               .agg(F.sum(amount).alias("a"), F.sum(count).alias("n")).collect()[0])
        return Decimal(row["a"] or 0), int(row["n"] or 0)

    assert sums(tb.PROVISIONAL_TOTALS) == (Decimal(summary["provisional_amount"]),
                                          summary["provisional_count"])
    assert sums(tb.CANONICAL_TOTALS) == (Decimal(summary["canonical_amount"]),
                                        summary["canonical_count"])
    gap = Decimal(summary["canonical_amount"]) - Decimal(summary["provisional_amount"])
    assert Decimal(summary["gap_amount"]) == gap
    assert summary["gap_count"] == summary["canonical_count"] - summary["provisional_count"]
    # the late side output, read straight from late_events, is what explains the gap
    late = (tb.read_table(spark, wh, tb.LATE_EVENTS).filter(in_day)
            .agg(F.sum("amount").alias("a"), F.count(F.lit(1)).alias("n")).collect()[0])
    assert (Decimal(summary["late_amount"]), summary["late_count"]) \
        == (Decimal(late["a"] or 0), late["n"])
    assert summary["late_events_table"] == late["n"]
    assert Decimal(summary["residual_amount"]) == 0 and summary["residual_count"] == 0
    assert gap == Decimal(summary["late_amount"]) - Decimal(summary["duplicate_amount"])
    assert summary["unexplained"] == 0
    recon = tb.read_table(spark, wh, tb.RECONCILIATION).filter(in_day).filter(
        F.col("audit_run_id") == summary["audit_run_id"])
    assert {r["status"]: r["n"] for r in recon.groupBy("status").agg(
        F.count(F.lit(1)).alias("n")).collect()} == summary["status_counts"]
    stream_quarantine = tb.read_table(spark, wh, tb.QUARANTINE).filter(
        F.col("origin") == "stream").count()
    assert summary["quarantined"] == stream_quarantine == summary["quarantined_expected"]
    # the recommendation the report recorded is the lateness analysis of the day's event log
    manifest = json.loads((wh / "_demo" / "manifest.json").read_text())
    settings = load_settings(env={}, warehouse=str(wh),
                             expected_partitions=tuple(manifest["expected_partitions"]))
    analysis = analyze_day(spark, settings, DEMO_DAY)
    assert analysis.recommended is not None
    assert parse_duration(summary["recommended_lateness"]) == analysis.recommended.bound
    for path in (summary["report_html"], summary["report_pdf"], summary["data_docs"]):
        assert path and Path(path).is_file(), path
    assert summary["dag_state"] == "success"
    assert set(summary["task_states"].values()) == {"success"}
    assert set(summary["task_states"]) == set(EXPECTED_UPSTREAM)
    # the nightly run compacted the day the stream wrote in one or more files per batch
    day_log = tb.read_table(spark, wh, tb.EVENT_LOG).filter(F.col("event_date") == DEMO_DAY)
    assert len(day_log.inputFiles()) == 1
    # the nightly replay's canonical totals are the pure reference's over every landing line
    # the stream did not quarantine
    expected = landing_reference_canonical(spark, wh / "_demo" / "landing", settings, DEMO_DAY)
    assert len(expected) > 100  # the day has many windows
    assert canonical_rows(spark, settings, DEMO_DAY) == expected
    assert summary["stream_batches"] >= 6
    assert set(summary["stage_seconds"]) == {"generate", "stream", "airflow", "summary"}
    assert sum(summary["stage_seconds"].values()) < timedelta(minutes=30).total_seconds()
