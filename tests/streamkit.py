"""Helpers for Spark-tier tests: write scenario batches as landing files, read tables back
into plain Python values for comparison with the reference (tables in tests are tiny)."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.settings import load_settings
from reckon.config import Settings
from reckon.reference import Event, StreamOutcome
from reckon.timeutil import format_micros, to_micros

FILE_TIME_BASE = 1_800_000_000  # seconds; mtimes only order the files


def event_line(e: Event, **extra: object) -> str:
    return json.dumps({
        "event_id": e.event_id, "key": e.key, "amount": str(e.amount), "currency": e.currency,
        "event_time": format_micros(e.event_time), "source": e.source,
        "partition": e.partition, "arrival_time": format_micros(e.arrival_time), **extra,
    }, separators=(",", ":"))


def write_landing(folder: Path, batches: list[list[Event]], start: int = 0,
                  extra_lines: dict[int, list[str]] | None = None) -> list[Path]:
    """One file per batch, named and timestamped in arrival order (Spark takes files by
    modification time, so with maxFilesPerTrigger=1 each file is one micro-batch)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, batch in enumerate(batches, start=start):
        lines = [event_line(e) for e in batch] + (extra_lines or {}).get(i, [])
        path = folder / f"events-{i:06d}.ndjson"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (FILE_TIME_BASE + i, FILE_TIME_BASE + i))
        paths.append(path)
    return paths


def stream_settings(warehouse: Path, **rules: object) -> Settings:
    return load_settings(env={}, warehouse=str(warehouse), shuffle_partitions=2,
                         max_files_per_trigger=1, **rules)


def provisional_rows(spark, warehouse: Path) -> dict[tuple[int, str, str], tuple]:
    """provisional_totals (derived from the deltas, spark.provisional) as
    {(window start us, key, currency): figures}."""
    from spark.provisional import read_provisional
    from storage.spec_log import rules_in_force

    df = read_provisional(spark, warehouse, rules_in_force(warehouse))
    return {(to_micros(r.window_start), r.key, r.currency): (
        r.total_amount, r.event_count, r.status, r.revision, r.closed_batch_id,
        None if r.watermark_at_close is None else to_micros(r.watermark_at_close),
        r.finalized_batch_id, r.first_batch_id, r.last_batch_id) for r in df.collect()}


def reference_rows(out: StreamOutcome) -> dict[tuple[int, str, str], tuple]:
    return {(w.start, k, cur): (Decimal(r.total).quantize(Decimal("0.001")), r.count,
                                r.status.value, r.revision, r.closed_batch,
                                r.watermark_at_close, r.final_batch, r.first_batch,
                                r.last_batch)
            for (w, k, cur), r in out.totals.items()}


def late_rows(spark, warehouse: Path) -> list[tuple]:
    path = warehouse / "late_events"
    df = spark.read.format("delta").load(str(path))
    return sorted((r.event_id, to_micros(r.window_start), to_micros(r.watermark), r.batch_id,
                   r.lateness_seconds) for r in df.collect())


def reference_late(out: StreamOutcome) -> list[tuple]:
    return sorted((r.event.event_id, r.window.start, r.watermark, r.batch_id,
                   (Decimal(r.lateness) / Decimal(1_000_000)).quantize(Decimal("0.000001")))
                  for r in out.late)


def watermarks(spark, warehouse: Path) -> list[int | None]:
    df = spark.read.format("delta").load(str(warehouse / "watermark_progress"))
    return [None if r.watermark is None else to_micros(r.watermark)
            for r in df.orderBy("batch_id").collect()]


def copy_warehouse(streamed: Path, tmp_path: Path) -> Path:
    """A private copy of a warehouse a module fixture streamed once (Delta tables are plain
    folders with relative file paths, so a copy is a valid warehouse)."""
    import shutil

    target = tmp_path / "wh"
    shutil.copytree(streamed, target)
    return target


def landing_reference_canonical(spark, landing: Path, settings: Settings,
                                day) -> dict[tuple[int, str, str], tuple[Decimal, int]]:
    """reckon.reference.canonical_totals over a landing folder's lines, the day's windows only.
    Lines the stream quarantined (by file and line offset, from the quarantine table) are left
    out; every other line must parse here, so the parser's choices are checked too."""
    from reckon.reference import canonical_totals
    from reckon.timeutil import day_bounds, parse_timestamp

    quarantine = settings.warehouse_path / "quarantine"
    skip = set()
    if (quarantine / "_delta_log").is_dir():
        skip = {(Path(r.input_file).name, r.offset) for r in spark.read.format("delta")
                .load(str(quarantine)).select("input_file", "offset").collect()}
    events = []
    for file in sorted(landing.glob("events-*.ndjson")):
        for offset, line in enumerate(file.read_text().splitlines()):
            if (file.name, offset) in skip:
                continue
            d = json.loads(line)
            events.append(Event(d["event_id"], d["key"], Decimal(d["amount"]),
                                parse_timestamp(d["event_time"]),
                                parse_timestamp(d["arrival_time"]), int(d["partition"]),
                                offset, d["source"], d["currency"]))
    rows, conflicts = canonical_totals(events, settings.event_time_rules())
    assert conflicts == []
    d0, d1 = day_bounds(day)
    return {(w.start, k, cur): (r.total, r.count) for (w, k, cur), r in rows.items()
            if d0 <= w.start < d1}


def canonical_rows(spark, settings: Settings,
                   day) -> dict[tuple[int, str, str], tuple[Decimal, int]]:
    """The day's canonical_totals rows as {(window start us, key, currency): (total, count)}."""
    df = spark.read.format("delta").load(str(settings.warehouse_path / "canonical_totals"))
    return {(to_micros(r.window_start), r.key, r.currency): (r.total_amount, r.event_count)
            for r in df.filter(df.window_date == day).collect()}


def edit_a_provisional_delta(spark, warehouse: Path, where: str,
                             by: Decimal = Decimal("0.07")) -> Any:
    """Add ``by`` to the first provisional delta matching the SQL filter ``where`` (in window,
    key, currency and batch order), as a hand edit of the table would: the stream's total no
    longer agrees with the replay's, and no late event or duplicate explains the difference,
    so the next audit finds an unexplained break (0.07 is whole cents in USD and EUR).
    Returns the edited row as it was."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    table = DeltaTable.forPath(spark, str(warehouse / "provisional_deltas"))
    victim = (table.toDF().filter(where)
              .orderBy("window_start", "key", "currency", "batch_id").first())
    table.update(condition=(F.col("window_start") == F.lit(victim.window_start))
                 & (F.col("key") == F.lit(victim.key))
                 & (F.col("currency") == F.lit(victim.currency))
                 & (F.col("batch_id") == F.lit(victim.batch_id)),
                 set={"total_amount": F.col("total_amount") + F.lit(by)})
    return victim
