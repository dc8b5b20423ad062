"""What the stream reports of each micro-batch: its counts per disposition, its watermark, how
long it took and where (per step), and how its duplicates were judged. ``BatchProcessor`` hands
one to ``on_batch`` after every batch; ``print_progress`` is the line ``reckon stream`` prints.

Why a module of its own: the CLI, the demo, the pipeline, the benchmarks and the Prometheus
exporter (spark/metrics_exporter.py) read these figures without needing the processor that
makes them.

Example:
    >>> m = BatchMetrics(batch_id=3, rows_in=10, valid=9, quarantined=1, duplicates=1,
    ...                  on_time=7, revised=0, late=1, watermark=None, duration_seconds=1.5)
    >>> m.dedup_by, m.step_seconds
    ('archive', {})
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BatchMetrics", "InputMetrics", "input_metrics", "print_progress"]


@dataclass(frozen=True)
class InputMetrics:
    """One input's share of a batch: a partition, or a (partition, source) when the watermark
    is kept per source (``source`` None otherwise; ``partition`` None for a line too broken to
    name one). ``quarantined`` by reason; the dispositions count (event, window) rows, as
    BatchMetrics' do.

    >>> InputMetrics(partition=0, source=None, rows_in=3, quarantined={"bad_json": 1},
    ...              duplicates=0, on_time=2, revised=0, late=0).partition
    0
    """

    partition: int | None
    source: str | None
    rows_in: int
    quarantined: Mapping[str, int]
    duplicates: int
    on_time: int
    revised: int
    late: int


@dataclass(frozen=True)
class BatchMetrics:
    """One micro-batch's figures: rows in, valid and quarantined; of the valid, duplicates and
    the (event, window) rows counted on time, as revisions or late; the watermark after it."""

    batch_id: int
    rows_in: int
    valid: int
    quarantined: int
    duplicates: int
    on_time: int
    revised: int
    late: int
    watermark: int | None
    duration_seconds: float
    step_seconds: dict[str, float] = field(default_factory=dict)
    # 'state': duplicates judged by the stream's dedup state; 'archive': against event_log
    dedup_by: str = "archive"
    # the batch's processing time (its progress row's processed_at), epoch microseconds
    processed_at: int | None = None
    # per input: the batch's counts; per partition, the newest event time and arrival seen
    # so far (the progress row's partition_max_event_time and partition_last_arrival)
    inputs: tuple[InputMetrics, ...] = ()
    partition_max_event_time: Mapping[int, int] = field(default_factory=dict)
    partition_last_arrival: Mapping[int, int] = field(default_factory=dict)


def input_metrics(summary: Iterable[Any], dispositions: Iterable[Any],
                  by_source: bool) -> tuple[InputMetrics, ...]:
    """Each input's figures from the two small jobs the stream already runs per batch: its
    summary (rows with ``partition``, ``source`` when ``by_source``, ``reason`` (None: valid)
    and ``n``) and its disposition count (``partition``, ``source``, ``disposition``, ``n``).

    >>> from types import SimpleNamespace as R
    >>> input_metrics([R(partition=1, reason=None, n=4), R(partition=1, reason="bad_json", n=1)],
    ...               [R(partition=1, disposition="late", n=2)], by_source=False)[0].late
    2
    """
    counts: dict[tuple[int | None, str | None], dict[str, Any]] = {}

    def of(row: Any) -> dict[str, Any]:
        key = (row.partition, row.source if by_source else None)
        return counts.setdefault(key, {"rows_in": 0, "quarantined": {}, "duplicate": 0,
                                       "on_time": 0, "revision": 0, "late": 0})

    for row in summary:
        figures = of(row)
        figures["rows_in"] += row.n
        if row.reason is not None:
            figures["quarantined"][row.reason] = figures["quarantined"].get(row.reason, 0) + row.n
    for row in dispositions:
        of(row)[row.disposition] += row.n
    return tuple(InputMetrics(partition=p, source=s, rows_in=c["rows_in"],
                              quarantined=c["quarantined"], duplicates=c["duplicate"],
                              on_time=c["on_time"], revised=c["revision"], late=c["late"])
                 for (p, s), c in sorted(counts.items(), key=lambda kv: str(kv[0])))


def print_progress(m: BatchMetrics) -> None:
    """The batch's line on stderr (with RECKON_PROFILE set, a second line of step times)."""
    from reckon.timeutil import format_micros

    print(f"[stream] batch {m.batch_id}: {m.rows_in} rows, {m.on_time} on time, "
          f"{m.revised} revised, {m.late} late, {m.duplicates} duplicates, "
          f"{m.quarantined} quarantined; watermark {format_micros(m.watermark)} "
          f"({m.duration_seconds:.1f}s)", file=sys.stderr, flush=True)
    if os.environ.get("RECKON_PROFILE"):
        steps = ", ".join(f"{k} {v:.2f}s" for k, v in m.step_seconds.items())
        print(f"[stream]   steps: {steps}; duplicates judged by the {m.dedup_by}",
              file=sys.stderr, flush=True)
