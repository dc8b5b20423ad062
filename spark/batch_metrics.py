"""What the stream reports of each micro-batch: its counts per disposition, its watermark, how
long it took and where (per step), and how its duplicates were judged. ``BatchProcessor`` hands
one to ``on_batch`` after every batch; ``print_progress`` is the line ``reckon stream`` prints.

Why a module of its own: the CLI, the demo, the pipeline and the benchmarks read these figures
without needing the processor that makes them.

Example:
    >>> m = BatchMetrics(batch_id=3, rows_in=10, valid=9, quarantined=1, duplicates=1,
    ...                  on_time=7, revised=0, late=1, watermark=None, duration_seconds=1.5)
    >>> m.dedup_by, m.step_seconds
    ('archive', {})
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

__all__ = ["BatchMetrics", "print_progress"]


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
