"""A streamed day where one source is slow: bounds per source against the best single bound
(issue 41). ``python -m bench.per_source_day [--out DIR] [--events N]``.

Three sources share two partitions: ``radar`` arrives at once and in order; ``sat`` is a
buffered link that sends what it holds every 10 s (5 s into each window), in order, and takes
10 s to arrive; ``http`` arrives with up to 3 s of jitter. The day is written as landing files, one
per 30 s of arrival, and streamed with reckon's default rule (inputs by partition, one bound);
``reckon lateness --per-source`` then recommends a bound per source on the streamed log, with
completeness and average emit latency per event under those bounds and under the best single
bound. With ``--compare-streams`` the same landing is streamed again with those bounds, and
with the best single bound, and each stream's own completeness (counted pairs over counted
and late, from watermark_progress) is printed too (minutes a stream on a busy machine).

Measured (2026-11-27, ``--files-per-batch 60``, 6,000 events over 25 minutes, target 0.999,
candidates ``CANDIDATES``): one bound with inputs by partition, the default rule, needs 15 s:
100.00% complete at 16.48 s average emit latency (3 s: 71.80% at 4.41 s; 10 s: 83.55% at
11.48 s). Inputs by source with the recommended bounds (0 s each: the min rule already waits
for the buffer) reach 100.00% at 14.87 s; one bound with inputs by source gives the same on
this day, so the gain here is the inputs by source, not different bounds.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import date
from pathlib import Path

import numpy as np

from reckon.config import Settings, load_settings
from reckon.timeutil import format_duration, format_micros

S = 1_000_000
DAY_START = 1_767_225_600 * S  # 2026-01-01T00:00:00Z
SOURCES = ("radar", "sat", "http")
#: the candidate bounds: the standard ladder with 15 s and 20 s, so that the single bound
#: is not held back by a coarse step
CANDIDATES = ("0s", "1s", "2s", "3s", "5s", "10s", "15s", "20s", "30s", "1m")


def write_day(landing: Path, events: int, seed: int = 41) -> int:
    """The landing files of the day (module docstring); returns the number of files."""
    rng = np.random.default_rng(seed)
    start = DAY_START + 3600 * S
    t = start + np.sort(rng.integers(0, events * S // 4, events))  # 4 events a second
    src = rng.choice(np.array(SOURCES, dtype=object), events)
    sat_due = ((t - start - 5 * S) // (10 * S) + 1) * 10 * S + 5 * S + start + 10 * S
    a = np.where(src == "sat", sat_due, t) + np.where(
        src == "http", rng.integers(0, 3 * S, events), 0)
    part = rng.integers(0, 2, events)
    order = np.argsort(a, kind="stable")
    landing.mkdir(parents=True, exist_ok=True)
    files: dict[int, list[str]] = {}
    for i in order.tolist():
        line = json.dumps({"event_id": f"e{i}", "key": f"m{i % 7}", "amount": "1.00",
                           "currency": "EUR", "event_time": format_micros(int(t[i])),
                           "source": src[i], "partition": int(part[i]),
                           "arrival_time": format_micros(int(a[i]))}, separators=(",", ":"))
        files.setdefault(int((a[i] - start) // (30 * S)), []).append(line)
    for k, lines in sorted(files.items()):
        path = landing / f"events-{k:05d}.ndjson"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_800_000_000 + k, 1_800_000_000 + k))
    return len(files)


def stream(landing: Path, warehouse: Path, files_per_batch: int, **rules: str
           ) -> dict[str, float]:
    """Stream the landing into ``warehouse`` under ``rules``; the stream's own figures."""
    from pyspark.sql import functions as F

    from spark import tables as tb
    from spark.session import get_spark
    from spark.stream import StreamSource, run_stream

    settings = _settings(warehouse, **rules).with_values(
        {}, max_files_per_trigger=files_per_batch)
    spark = get_spark(settings, app_name="bench-per-source")
    run_stream(spark, settings, StreamSource(landing=str(landing)), on_batch=None)
    row = (tb.read_table(spark, warehouse, tb.WATERMARK_PROGRESS).groupBy()
           .agg(F.sum("on_time").alias("on_time"), F.sum("revised").alias("revised"),
                F.sum("late").alias("late"), F.count(F.lit(1)).alias("batches")).first())
    assert row is not None  # an aggregate without grouping has one row
    counted = int(row.on_time) + int(row.revised)
    return {"batches": int(row.batches), "late": int(row.late),
            "completeness": counted / (counted + int(row.late))}


def _settings(warehouse: Path, **rules: str) -> Settings:
    return load_settings(env={}, warehouse=str(warehouse), window="10s", idle_timeout="60s",
                         max_files_per_trigger=10, shuffle_partitions=2, **rules)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="/tmp/reckon-per-source")
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--target", default="0.999")
    parser.add_argument("--files-per-batch", type=int, default=10)
    parser.add_argument("--compare-streams", action="store_true")
    args = parser.parse_args(argv)
    from audits.lateness import analyze_inputs, render_per_input
    from spark.session import get_spark

    out = Path(args.out)
    files = write_day(out / "landing", args.events)
    batch = args.files_per_batch
    streamed = {"default_3s": stream(out / "landing", out / "wh-default", batch, lateness="3s")}
    settings = _settings(out / "wh-default", lateness="3s")
    rec = analyze_inputs(get_spark(settings), settings, "2026-01-01", bounds=CANDIDATES,
                         target=args.target)
    print(render_per_input(rec, date(2026, 1, 1)), flush=True)
    if args.compare_streams:
        streamed["per_source"] = stream(
            out / "landing", out / "wh-per-source", batch, lateness="3s",
            watermark_inputs="source", watermark_bound_by_source=",".join(
                f"{b.unit}={format_duration(b.bound)}" for b in rec.bounds))
        single = rec.by_partition or rec.single_fallback
        streamed[f"one_bound_{format_duration(single.bound)}"] = stream(
            out / "landing", out / "wh-one-bound", batch, lateness=format_duration(single.bound))
    print(json.dumps({"events": args.events, "files": files, "target": args.target,
                      "what_if": rec.to_json_dict(), "streamed": streamed}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
