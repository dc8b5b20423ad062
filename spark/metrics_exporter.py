"""The running stream's figures in the Prometheus text format, on a loopback port.

``reckon stream`` with the setting ``metrics_port`` (RECKON_METRICS_PORT; 0, the default, is
off) serves ``http://127.0.0.1:<port>/metrics`` while it runs. Every figure is one the stream
already computed for the batch (spark.batch_metrics ``BatchMetrics``, the same values its
watermark_progress row records): the exporter only files them under Prometheus names, so a
dashboard and the progress table never disagree.

Names follow Prometheus' conventions: base units (seconds; times as Unix seconds), counters
end in ``_total``, inputs and reasons are labels. Counters count since the process started
(Prometheus' ``rate()`` handles restarts); gauges hold the last batch's value.

Example:
    >>> exporter = StreamExporter.serve(9108)            # doctest: +SKIP
    >>> run_stream(..., on_batch=exporter.observing(print_progress))  # doctest: +SKIP
    >>> exporter.close()                                 # doctest: +SKIP
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from spark.batch_metrics import BatchMetrics

__all__ = ["LOOPBACK", "METRIC_NAMES", "StreamExporter"]

LOOPBACK = "127.0.0.1"
_INPUT = ("partition", "source")
_MICROS = 1_000_000

#: Every series name the exporter writes (a counter's with its ``_total``), for alert rules.
METRIC_NAMES = frozenset({
    "reckon_stream_batches_total", "reckon_stream_last_batch_id",
    "reckon_stream_rows_total", "reckon_stream_quarantined_total",
    "reckon_stream_duplicates_total", "reckon_stream_on_time_total",
    "reckon_stream_revised_total", "reckon_stream_late_total",
    "reckon_stream_watermark_timestamp_seconds", "reckon_stream_watermark_lag_seconds",
    "reckon_stream_partition_max_event_timestamp_seconds",
    "reckon_stream_partition_lag_seconds", "reckon_stream_last_batch_timestamp_seconds",
    "reckon_stream_freshness_seconds", "reckon_stream_batch_duration_seconds_bucket",
    "reckon_stream_batch_duration_seconds_sum", "reckon_stream_batch_duration_seconds_count"})


@dataclass(frozen=True)
class _Families:
    """The exporter's metric families, in one registry of its own (two streams in one test
    process never share a series)."""

    batches: Counter
    last_batch: Gauge
    rows: Counter
    quarantined: Counter
    dispositions: dict[str, Counter]
    watermark: Gauge
    watermark_lag: Gauge
    partition_max_event: Gauge
    partition_lag: Gauge
    last_batch_time: Gauge
    freshness: Gauge
    duration: Histogram

    @classmethod
    def of(cls, registry: CollectorRegistry) -> _Families:
        def counter(name: str, doc: str, labels: tuple[str, ...] = _INPUT) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, labels, registry=registry)

        return cls(
            batches=counter("reckon_stream_batches", "Micro-batches committed.", ()),
            last_batch=gauge("reckon_stream_last_batch_id", "The last committed batch's id."),
            rows=counter("reckon_stream_rows", "Input rows read (lines or records)."),
            quarantined=counter("reckon_stream_quarantined", "Rows quarantined, by reason.",
                                (*_INPUT, "reason")),
            dispositions={
                "duplicates": counter("reckon_stream_duplicates",
                                      "Valid rows that were duplicates of an earlier copy."),
                "on_time": counter("reckon_stream_on_time",
                                   "(event, window) rows counted in an open window."),
                "revised": counter("reckon_stream_revised",
                                   "(event, window) rows counted as a revision (within the allowed lateness)."),
                "late": counter("reckon_stream_late",
                                "(event, window) rows too late to count (late_events)."),
            },
            watermark=gauge("reckon_stream_watermark_timestamp_seconds",
                            "The stream's watermark after the last batch (Unix time)."),
            watermark_lag=gauge("reckon_stream_watermark_lag_seconds",
                                "The last batch's processing time minus its watermark."),
            partition_max_event=gauge("reckon_stream_partition_max_event_timestamp_seconds",
                                      "Newest event time seen per partition (Unix time).",
                                      ("partition",)),
            partition_lag=gauge("reckon_stream_partition_lag_seconds",
                                "The last batch's processing time minus the partition's "
                                "newest event time.", ("partition",)),
            last_batch_time=gauge("reckon_stream_last_batch_timestamp_seconds",
                                  "The last batch's processing time (Unix time)."),
            freshness=gauge("reckon_stream_freshness_seconds",
                            "The last batch's processing time minus the newest arrival seen."),
            duration=Histogram("reckon_stream_batch_duration_seconds",
                               "How long each micro-batch took.", registry=registry,
                               buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600)),
        )


class StreamExporter:
    """Serves one stream's metrics over HTTP on loopback; ``observe`` files a batch."""

    def __init__(self, server: WSGIServer, thread: threading.Thread,
                 registry: CollectorRegistry) -> None:
        self._server, self._thread = server, thread
        self.registry = registry
        self._families = _Families.of(registry)

    @classmethod
    def serve(cls, port: int) -> StreamExporter:
        """Start serving ``/metrics`` on ``127.0.0.1:port`` (a thread of this process)."""
        registry = CollectorRegistry(auto_describe=True)
        server, thread = start_http_server(port, addr=LOOPBACK, registry=registry)
        return cls(server, thread, registry)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def observing(self, then: Callable[[BatchMetrics], None] | None,
                  ) -> Callable[[BatchMetrics], None]:
        """A per-batch callback that files the batch, then calls ``then`` (e.g. the CLI's
        progress line)."""
        def on_batch(m: BatchMetrics) -> None:
            self.observe(m)
            if then is not None:
                then(m)
        return on_batch

    def observe(self, m: BatchMetrics) -> None:
        """File one batch's figures: counters grow by the batch's counts, gauges take its
        values, the histogram its duration."""
        f = self._families
        f.batches.inc()
        f.last_batch.set(m.batch_id)
        f.duration.observe(m.duration_seconds)
        for i in m.inputs:
            labels = (_label(i.partition), _label(i.source))
            f.rows.labels(*labels).inc(i.rows_in)
            for reason, n in i.quarantined.items():
                f.quarantined.labels(*labels, reason).inc(n)
            for name, counter in f.dispositions.items():
                counter.labels(*labels).inc(getattr(i, name))
        f.watermark.set(_seconds(m.watermark))
        if m.processed_at is None:
            return
        now = m.processed_at
        f.last_batch_time.set(_seconds(now))
        f.watermark_lag.set(_seconds(None if m.watermark is None else now - m.watermark))
        for p, newest in m.partition_max_event_time.items():
            f.partition_max_event.labels(str(p)).set(_seconds(newest))
            f.partition_lag.labels(str(p)).set(_seconds(now - newest))
        arrivals = m.partition_last_arrival.values()
        f.freshness.set(_seconds(now - max(arrivals) if arrivals else None))

    def close(self) -> None:
        """Stop serving (the stream ended)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _seconds(micros: int | None) -> float:
    """Microseconds as seconds; NaN (Prometheus' "no value") for none."""
    return math.nan if micros is None else micros / _MICROS


def _label(value: object) -> str:
    return "" if value is None else str(value)
