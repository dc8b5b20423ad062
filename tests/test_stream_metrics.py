"""``reckon stream``'s metrics endpoint (setting metrics_port, spark/metrics_exporter.py), as
Prometheus meets it: scraped over HTTP from a real stream after each of its batches, the
figures are the ones its watermark_progress rows record; the sample alert rules
(deploy/prometheus/reckon-alerts.yml) name only series the endpoint serves."""

from __future__ import annotations

import math
import re
import socket
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from reckon.config import PROJECT_ROOT
from reckon.timeutil import to_micros
from spark.batch_metrics import BatchMetrics, InputMetrics
from spark.metrics_exporter import METRIC_NAMES, StreamExporter

ALERTS = PROJECT_ROOT / "deploy" / "prometheus" / "reckon-alerts.yml"
Samples = dict[str, list[tuple[dict[str, str], float]]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> Samples:
    """GET /metrics as Prometheus does, parsed by prometheus_client's own text parser."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _total(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for ls, v in samples.get(name, []) if labels.items() <= ls.items())


def _one(samples: Samples, name: str, **labels: str) -> float:
    (value,) = [v for ls, v in samples[name] if labels.items() <= ls.items()]
    return value


def test_the_alert_rules_name_only_series_the_exporter_serves():
    """Every metric an alert expression names is one the endpoint serves (scraped over HTTP
    after one batch, with a quarantine reason, so every labelled series exists)."""
    exporter = StreamExporter.serve(_free_port())
    try:
        exporter.observe(BatchMetrics(
            batch_id=0, rows_in=3, valid=2, quarantined=1, duplicates=0, on_time=2, revised=0,
            late=0, watermark=5_000_000, duration_seconds=1.5, processed_at=9_000_000,
            inputs=(InputMetrics(partition=0, source=None, rows_in=3,
                                 quarantined={"bad_json": 1}, duplicates=0, on_time=2,
                                 revised=0, late=0),),
            partition_max_event_time={0: 8_000_000}, partition_last_arrival={0: 8_500_000}))
        served = set(_scrape(exporter.port))
    finally:
        exporter.close()
    assert served >= METRIC_NAMES
    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules} >= {"ReckonWatermarkLagging", "ReckonLateShareHigh",
                                           "ReckonQuarantineShareHigh"}
    for rule in rules:
        named = set(re.findall(r"\breckon_[a-z_]+", rule["expr"]))
        assert named and named <= served, (rule["alert"], named - served)


@pytest.mark.spark
def test_a_running_stream_serves_what_its_progress_rows_record(spark, tmp_path: Path):
    """A real stream with metrics_port on, scraped over HTTP after each batch: batch id,
    counts (summed over the partition and source labels), quarantined by reason, watermark,
    its lag, the partitions' newest event times, freshness and the batch durations agree with
    the stream's watermark_progress rows and quarantine table; the endpoint stops with it."""
    from spark import tables as tb
    from spark.sources import StreamSource
    from spark.stream import run_stream
    from tests.streamkit import stream_settings, write_landing
    from tests.test_replay_audit import RULES, random_batches

    landing = tmp_path / "landing"
    # two batches with re-deliveries and broken lines, then one of stragglers (late)
    write_landing(landing, random_batches(9, n=30, batches=2, stragglers=2),
                  extra_lines={0: ["not json at all", '{"event_id": "half"'],
                               1: ['{"event_id": ""}']})
    port = _free_port()
    settings = stream_settings(tmp_path / "wh", **{**RULES, "dedup_horizon": "1h"},
                               metrics_port=port)
    scrapes: list[Samples] = []
    run_stream(spark, settings, StreamSource(landing=str(landing)),
               on_batch=lambda m: scrapes.append(_scrape(port)))
    with pytest.raises(urllib.error.URLError):
        _scrape(port)

    progress = (tb.read_table(spark, settings.warehouse_path, tb.WATERMARK_PROGRESS)
                .orderBy("batch_id").collect())
    assert len(scrapes) == len(progress) >= 3
    sums: Counter[str] = Counter()
    for k, (got, row) in enumerate(zip(scrapes, progress, strict=True)):
        sums.update({name: getattr(row, name) for name in (
            "rows_in", "quarantined", "duplicates", "on_time", "revised", "late")})
        assert _one(got, "reckon_stream_last_batch_id") == row.batch_id
        assert _one(got, "reckon_stream_batches_total") == k + 1
        for name, column in (("rows", "rows_in"), ("quarantined", "quarantined"),
                             ("duplicates", "duplicates"), ("on_time", "on_time"),
                             ("revised", "revised"), ("late", "late")):
            assert _total(got, f"reckon_stream_{name}_total") == sums[column], (k, name)
        now = to_micros(row.processed_at)
        watermark = to_micros(row.watermark)
        assert _one(got, "reckon_stream_last_batch_timestamp_seconds") == \
            pytest.approx(now / 1e6, abs=1e-6)
        assert _one(got, "reckon_stream_watermark_timestamp_seconds") == \
            pytest.approx(watermark / 1e6, abs=1e-6)
        assert _one(got, "reckon_stream_watermark_lag_seconds") == \
            pytest.approx((now - watermark) / 1e6, abs=1e-6)
        for p, newest in row.partition_max_event_time.items():
            assert _one(got, "reckon_stream_partition_max_event_timestamp_seconds",
                        partition=str(p)) == pytest.approx(to_micros(newest) / 1e6, abs=1e-6)
            assert _one(got, "reckon_stream_partition_lag_seconds", partition=str(p)) == \
                pytest.approx((now - to_micros(newest)) / 1e6, abs=1e-6)
        newest_arrival = max(to_micros(t) for t in row.partition_last_arrival.values())
        assert _one(got, "reckon_stream_freshness_seconds") == \
            pytest.approx((now - newest_arrival) / 1e6, abs=1e-6)
        assert _one(got, "reckon_stream_batch_duration_seconds_count") == k + 1
        assert _one(got, "reckon_stream_batch_duration_seconds_sum") == pytest.approx(
            sum(r.duration_seconds for r in progress[:k + 1]), abs=1e-3)
    assert sums["late"] and sums["duplicates"] and sums["quarantined"] == 3
    last = scrapes[-1]
    quarantine = tb.read_table(spark, settings.warehouse_path, tb.QUARANTINE)
    by_reason = {r.reason: r["count"] for r in quarantine.groupBy("reason").count().collect()}
    assert {reason: _total(last, "reckon_stream_quarantined_total", reason=reason)
            for reason in by_reason} == by_reason
    partitions = {ls["partition"] for ls, _ in last["reckon_stream_rows_total"]}
    assert {"0", "1", "2"} <= partitions
    assert not any(math.isnan(v) for _, v in last["reckon_stream_watermark_lag_seconds"])


def test_a_metrics_port_out_of_range_is_refused_in_one_line():
    from app.settings import load_settings
    from reckon.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^metrics_port=70000 is not valid: a TCP port "
                                          r"1-65535 for the stream's metrics, or 0 for none$"):
        load_settings(env={"RECKON_METRICS_PORT": "70000"})


@pytest.mark.spark
def test_a_taken_metrics_port_is_refused_before_the_stream_starts(spark, tmp_path: Path):
    """Another process on the port: one line naming it, before any batch runs."""
    from reckon.errors import ConfigError
    from spark.sources import StreamSource
    from spark.stream import run_stream
    from tests.streamkit import stream_settings

    (tmp_path / "landing").mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = stream_settings(tmp_path / "wh", metrics_port=port)
        with pytest.raises(ConfigError, match=rf"^metrics_port={port} is not valid: cannot "
                           rf"serve metrics on 127.0.0.1:{port} \(Address already in use\)"):
            run_stream(spark, settings, StreamSource(landing=str(tmp_path / "landing")),
                       on_batch=None)
    assert not (tmp_path / "wh" / "watermark_progress").exists()
