"""Benchmark inputs, built once per scale under ``bench/data/`` and reused by later runs.

- landing directories: ``app.generate.generate_landing`` (the product's own generator, with
  its faults: heavy-tailed delays, a slow and an idle partition, duplicates, malformed lines);
- one day of ``event_log``: built directly with Spark from generated columns (a 20M-event
  stream run would take far longer than the replay it feeds), with the table's own schema,
  partitioning and writer (spark.tables). 1% of events are re-delivered copies the stream
  caught (``is_duplicate``), 0.1% copies it missed (it counted them twice). Currencies follow
  the generator's mix (``app.generate.currency_mix``: most merchants settle in one
  currency, some in two or three; USD, EUR, GBP, JPY, KWD), amounts are whole minor units of
  their currency at its magnitude (JPY ~150x a dollar amount, KWD ~0.3x);
- the audit's inputs for that day: ``provisional_totals`` and ``late_events`` derived from the
  replay's ``canonical_totals`` with ~1% injected breaks of every kind (late, duplicate,
  unexplained, missing on either side), so the audit has real work and a known answer;
- arrays for the lateness curve (event time, arrival time, partition in arrival order).

``payload`` is left null in the built event_log: the replay only reads it for conflicting
copies (there are none here), so it would only cost disk.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Sequence
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from app.generate import (
    DEFAULT_CURRENCIES,
    MIX_SCALE,
    UNITS_PER_USD,
    GeneratorConfig,
    currency_mix,
    generate_landing,
)
from bench.harness import base_settings, log
from reckon.config import Settings
from reckon.errors import ConfigError
from reckon.eventtime import WindowSpec
from reckon.money import minor_unit, minor_unit_step
from reckon.timeutil import MICROS_PER_SECOND, day_bounds, from_micros
from spark import tables as tb
from spark.rules import window_starts_col
from storage.landing import MANIFEST_NAME

__all__ = ["BENCH_DAY", "DAY_CELLS", "DAY_KEYS", "build_archived_hour", "build_audit_inputs",
           "build_evening", "build_event_log", "clone_warehouse", "day_frame", "day_warehouse",
           "ensure_landing", "expected_breaks", "fresh_folder", "lateness_arrays"]

BENCH_DAY = date(2026, 1, 1)
DAY_KEYS = 200           # merchants of a built day: <= 2.2M (10 s window, key, currency) rows
_DATA_VERSION = 3        # bump when a builder changes, so cached data is rebuilt
_SOURCES = ("pos", "web", "mobile", "partner-api")
_CURRENCIES = DEFAULT_CURRENCIES
_MIX_SEED = 7
_USD_CENTS = 500_000     # an event's amount: up to 5,000.00 dollars' worth in its currency


@cache
def _mix() -> np.ndarray:
    """The built days' merchants by currency (shares out of MIX_SCALE), as the generator's."""
    return currency_mix(DAY_KEYS, _CURRENCIES, _MIX_SEED)


def _cells() -> list[tuple[int, int]]:
    """Every (merchant, currency) the built days hold: (key index, index in _CURRENCIES)."""
    return [(int(k), int(j)) for k, j in zip(*np.nonzero(_mix()), strict=True)]


#: (key, currency) pairs of the built days: a window of a busy day has about this many rows.
DAY_CELLS = len(_cells())


def _marker(folder: Path) -> Path:
    return folder / "_bench_built.json"


def _is_built(folder: Path, spec: dict[str, Any]) -> bool:
    """The folder was built from ``spec`` (the marker may add facts, e.g. row counts)."""
    m = _marker(folder)
    if not m.is_file():
        return False
    built = json.loads(m.read_text())
    return all(built.get(k) == v for k, v in spec.items())


def _mark(folder: Path, spec: dict[str, Any]) -> None:
    _marker(folder).write_text(json.dumps(spec, sort_keys=True))


# --------------------------------------------------------------------------- landing dirs


def ensure_landing(folder: Path, cfg: GeneratorConfig) -> dict[str, Any]:
    """A generated landing directory for ``cfg`` (reused when already built); its manifest."""
    spec = {"v": _DATA_VERSION, "generator": repr(cfg)}
    if not _is_built(folder, spec):
        if folder.exists():
            shutil.rmtree(folder)
        log(f"generating landing dir {folder.name}: {cfg.events:,} events, "
            f"{cfg.lines_per_file:,} lines per file")
        generate_landing(folder, cfg)
        _mark(folder, spec)
    legacy = folder / "manifest.json"  # built before the stream read .json files
    if legacy.is_file():
        legacy.replace(folder / MANIFEST_NAME)
    return json.loads((folder / MANIFEST_NAME).read_text())


# --------------------------------------------------------------------------- the event log


def _h(col: Column, salt: int) -> Column:
    """A deterministic non-negative pseudo-random long per row."""
    return F.abs(F.xxhash64(col, F.lit(salt)))


def _pick(values: tuple[str, ...], col: Column, salt: int) -> Column:
    return _at(values, F.pmod(_h(col, salt), F.lit(len(values))))


def _at(values: Sequence[object], index: Column) -> Column:
    """``values[index]`` for a 0-based index column (a literal array: a lookup per row)."""
    return F.element_at(F.array(*[F.lit(v) for v in values]), (index + 1).cast("int"))


def _currency_of(key_idx: Column, row: Column) -> Column:
    """The currency (index into _CURRENCIES) of ``row``, an event of merchant ``key_idx``:
    drawn by a hash of the row with the merchant's shares (see app.generate)."""
    roll = F.pmod(_h(row, 7), F.lit(MIX_SCALE))
    bounds = np.cumsum(_mix(), axis=1)
    index: Column = F.lit(0)
    for j in range(len(_CURRENCIES) - 1):
        index = index + (roll >= _at(bounds[:, j].tolist(), key_idx)).cast("int")
    return index


def _money(currency: Column, usd_cents: Column, clip: bool = True) -> Column:
    """``usd_cents`` worth of ``currency`` (an index), in whole minor units of it, as an
    exact decimal: at least one minor unit and, if ``clip``, at most 1,000,000 (an event's
    default amount_max)."""
    places = [minor_unit(c) for c in _CURRENCIES]
    per_cent = [UNITS_PER_USD.get(c, 1.0) * 10**e / 100 for c, e in zip(_CURRENCIES, places,
                                                                        strict=True)]
    minor = F.greatest(F.round(usd_cents * _at(per_cent, currency)).cast("long"), F.lit(1))
    if clip:
        minor = F.least(minor, _at([1_000_000 * 10**e for e in places], currency).cast("long"))
    step = _at([str(minor_unit_step(e)) for e in places], currency).cast("decimal(4,3)")
    return minor.cast("decimal(20,0)") * step


def _code(currency: Column) -> Column:
    return _at(_CURRENCIES, currency)


def build_event_log(spark: SparkSession, settings: Settings, events: int,
                    day: date = BENCH_DAY) -> dict[str, Any]:
    """Write ``events`` unique events of ``day`` (plus re-delivered copies) into the warehouse's
    event_log, with the event_log schema; reused when already built for these inputs."""
    wh = settings.warehouse_path
    spec = {"v": _DATA_VERSION, "events": events, "day": day.isoformat(), "keys": DAY_KEYS}
    if _is_built(wh, spec):
        return json.loads(_marker(wh).read_text())
    fresh_folder(wh)
    log(f"building event_log: {events:,} events of {day} (Spark, direct)")
    d0, _ = day_bounds(day)
    step = (86_400 * MICROS_PER_SECOND) // events
    idc = F.col("id")
    key_idx = F.pmod(_h(idc, 1), F.lit(DAY_KEYS))
    event_us = F.lit(d0) + idc * F.lit(step) + F.pmod(_h(idc, 2), F.lit(max(step, 1)))
    # delays: 0.3-1 s body, 3% tail up to 30 s
    delay = (F.lit(300_000) + F.pmod(_h(idc, 3), F.lit(700_000))
             + F.when(F.pmod(_h(idc, 4), F.lit(100)) < 3,
                      F.pmod(_h(idc, 5), F.lit(30 * MICROS_PER_SECOND))).otherwise(F.lit(0)))
    cents = F.pmod(_h(idc, 6), F.lit(_USD_CENTS)) + 1
    base = (spark.range(0, events, numPartitions=max(2, events // 2_000_000))
            .select(idc.alias("id"), key_idx.alias("key_idx"), event_us.alias("event_us"),
                    (event_us + delay).alias("arrival_us"), cents.alias("cents")))
    caught = (base.filter(idc % 100 == 0)
              .select("id", "key_idx", "event_us", "cents",
                      (F.col("arrival_us") + F.lit(2 * MICROS_PER_SECOND)).alias("arrival_us"),
                      F.lit(True).alias("is_duplicate"), F.lit(1).alias("copy")))
    missed = (base.filter(idc % 1000 == 7)
              .select("id", "key_idx", "event_us", "cents",
                      (F.col("arrival_us") + F.lit(MICROS_PER_SECOND)).alias("arrival_us"),
                      F.lit(False).alias("is_duplicate"), F.lit(2).alias("copy")))
    rows = (base.select("id", "key_idx", "event_us", "cents", "arrival_us",
                        F.lit(False).alias("is_duplicate"), F.lit(0).alias("copy"))
            .unionByName(caught).unionByName(missed))
    currency = _currency_of(F.col("key_idx"), idc)  # a copy has its original's (same id)
    log_df = rows.select(
        F.format_string("evt-%012d", idc).alias("event_id"),
        F.format_string("merchant-%04d", F.col("key_idx")).alias("key"),
        _money(currency, F.col("cents")).cast(tb.AMOUNT).alias("amount"),
        _code(currency).alias("currency"),
        F.timestamp_micros("event_us").alias("event_time"),
        _pick(_SOURCES, idc, 8).alias("source"),
        (F.col("key_idx") % 4).cast("int").alias("partition"),
        (idc % 10_000 + F.col("copy") * 10_000_000).alias("offset"),
        F.timestamp_micros("arrival_us").alias("arrival_time"),
        F.format_string("events-%06d.ndjson", (idc / 10_000).cast("long")).alias("input_file"),
        F.lit(None).cast("string").alias("payload"),
        ((idc / 50_000).cast("long") + F.col("copy")).alias("batch_id"),
        F.col("is_duplicate"),
        F.to_date(F.timestamp_micros("event_us")).alias("event_date"))
    tb.ensure_table(spark, wh, tb.EVENT_LOG)
    (tb.conform(log_df, tb.EVENT_LOG).write.format("delta").mode("overwrite")
     .save(tb.table_path(wh, tb.EVENT_LOG)))
    rows_n = events + len(range(0, events, 100)) + len(range(7, events, 1000))
    spec["rows"] = rows_n
    _mark(wh, spec)
    return spec


def day_warehouse(spark: SparkSession, data_dir: Path, events: int) -> Settings:
    """The settings of ``data_dir/day-<events>``, a warehouse holding the bench day's event_log
    of ``events`` events (built once, then reused): the replay, audit, scale-curve and
    compaction workloads all start from it, and bench/driver_memory.py reads it by that name.

    Example: ``settings = day_warehouse(spark, scale.data_dir, 20_000_000)``."""
    settings = base_settings(data_dir / f"day-{events}")
    build_event_log(spark, settings, events)
    return settings


def build_archived_hour(spark: SparkSession, folder: Path, rows: int,
                        end_us: int) -> dict[str, Any]:
    """A warehouse whose event_log holds ``rows`` events arriving evenly over the hour before
    ``end_us`` (each 0.3-1 s after its event time, 4 partitions, files of contiguous arrivals
    as the stream's compaction leaves them): the de-duplication horizon a stream running at
    ``rows / 3600`` events/s re-reads in every batch. Reused when built for these inputs."""
    spec = {"v": _DATA_VERSION, "archived_hour_rows": rows, "end_us": end_us}
    if _is_built(folder, spec):
        return spec
    fresh_folder(folder)
    _write_archived_hour(spark, folder, rows, end_us)
    _mark(folder, spec)
    return spec


#: Rows per file of build_evening's archived hour: ~30 MB files (at full scale), which the
#: stream's compaction of event_log leaves alone as it would an hour it compacted already, so
#: a timed compaction is the day's own.
EVENING_ARCHIVED_ROWS_PER_FILE = 1_200_000


def build_evening(spark: SparkSession, folder: Path, settings: Settings, archived_rows: int,
                  provisional_rows: int, end_us: int, *, with_day: bool = True
                  ) -> dict[str, Any]:
    """A stream's warehouse late in a day, as its batch just before ``end_us`` left it: the
    archived hour before ``end_us`` (see build_archived_hour) and, ``with_day``, about
    ``provisional_rows`` deltas of that day in provisional_deltas (every window holds each
    merchant's currencies: DAY_CELLS rows, one batch each), in one file, as the nightly
    compaction of a day leaves them. Without the day: the same hour, as a morning's stream
    (nothing counted yet today) would read. Reused when built for these inputs."""
    windows_spec = _tumbling(settings)
    size = windows_spec.size
    day_start, _ = day_bounds(from_micros(end_us - 1).date())
    last_start = windows_spec.window_starts(end_us)[0] - size  # the last window ended by end_us
    windows = min(-(-provisional_rows // DAY_CELLS), (last_start - day_start) // size + 1)
    spec = {"v": _DATA_VERSION, "builder": "evening-3", "archived_hour_rows": archived_rows,
            "end_us": end_us, "provisional_windows": windows if with_day else 0,
            "keys": DAY_KEYS, "cells": DAY_CELLS, "window_us": size,
            "archived_rows_per_file": EVENING_ARCHIVED_ROWS_PER_FILE}
    if _is_built(folder, spec):
        return spec
    fresh_folder(folder)
    _write_archived_hour(spark, folder, archived_rows, end_us,
                         rows_per_file=EVENING_ARCHIVED_ROWS_PER_FILE)
    tb.ensure_table(spark, folder, tb.PROVISIONAL_DELTAS)
    if with_day:
        _write_day_of_deltas(spark, folder, windows, last_start, size, day_start)
    _mark(folder, spec)
    return spec


def _tumbling(settings: Settings) -> WindowSpec:
    """The configured windows, which must be tumbling: the evening warehouse lays its windows
    out one width apart (a hopping spec is refused in one line, not built wrong).

    Example: ``_tumbling(load_settings(window="10s")).size`` is 10_000_000.
    """
    windows = settings.event_time_rules().windows
    if windows.slide is not None:
        raise ConfigError(f"the bench's evening warehouse needs tumbling windows, not "
                          f"{windows.describe()}: unset slide")
    return windows


def _write_day_of_deltas(spark: SparkSession, folder: Path, windows: int, last_start: int,
                         size: int, day_start: int) -> None:
    log(f"building a day of provisional_deltas: {windows:,} windows x {DAY_CELLS} "
        "(key, currency) rows")
    idc = F.col("id")
    start = F.lit(last_start) - (F.lit(windows - 1) - (idc / DAY_CELLS).cast("long")) * size
    cell = F.pmod(idc, F.lit(DAY_CELLS))
    currency = _at([j for _, j in _cells()], cell)
    batch = ((start - F.lit(day_start)) / F.lit(5 * MICROS_PER_SECOND)).cast("long")  # 5 s
    rows = spark.range(0, windows * DAY_CELLS).select(
        F.timestamp_micros(start).alias("window_start"),
        F.timestamp_micros(start + F.lit(size)).alias("window_end"),
        F.format_string("merchant-%04d", _at([k for k, _ in _cells()], cell)).alias("key"),
        _code(currency).alias("currency"),
        _money(currency, F.pmod(_h(idc, 9), F.lit(10_000_000)) + 1, clip=False)
        .cast(tb.TOTAL).alias("total_amount"),
        (F.pmod(_h(idc, 10), F.lit(20)) + 1).alias("event_count"),
        F.lit(0).alias("revised"), batch.alias("batch_id"), F.lit("bench-day").alias("query_id"),
        F.timestamp_micros(start + F.lit(size)).alias("processed_at"),
        F.to_date(F.timestamp_micros(start)).alias("window_date"))
    (tb.conform(rows, tb.PROVISIONAL_DELTAS).coalesce(1).write.format("delta").mode("append")
     .save(tb.table_path(folder, tb.PROVISIONAL_DELTAS)))


def fresh_folder(folder: Path, *, attempts: int = 5, pause_seconds: float = 0.5) -> Path:
    """``folder``, emptied (created if missing). A stream stopped just before may still have
    its state store's maintenance thread writing files there, and the removal then fails with
    "directory not empty": it is tried again after a pause, ``attempts`` times in all.

    >>> import tempfile; f = Path(tempfile.mkdtemp()) / "run"; (f / "x").mkdir(parents=True)
    >>> list(fresh_folder(f).iterdir())
    []
    """
    for attempt in range(1, attempts + 1):
        try:
            if folder.exists():
                shutil.rmtree(folder)
            break
        except OSError:
            if attempt == attempts:
                raise
            time.sleep(pause_seconds * attempt)
    folder.mkdir(parents=True)
    return folder


def _write_archived_hour(spark: SparkSession, folder: Path, rows: int, end_us: int,
                         rows_per_file: int = 500_000) -> None:
    log(f"building an archived hour of event_log: {rows:,} events before {end_us}")
    hour = 3_600 * MICROS_PER_SECOND
    idc = F.col("id")
    arrival_us = F.lit(end_us - hour) + (idc * F.lit(hour)) / F.lit(rows)
    event_us = arrival_us.cast("long") - F.lit(300_000) - F.pmod(_h(idc, 3), F.lit(700_000))
    key_idx = F.pmod(_h(idc, 1), F.lit(DAY_KEYS))
    currency = _currency_of(key_idx, idc)
    log_df = spark.range(0, rows, numPartitions=max(1, rows // rows_per_file)).select(
        F.format_string("archived-%012d", idc).alias("event_id"),
        F.format_string("merchant-%04d", key_idx).alias("key"),
        _money(currency, F.pmod(_h(idc, 6), F.lit(_USD_CENTS)) + 1).cast(tb.AMOUNT)
        .alias("amount"),
        _code(currency).alias("currency"),
        F.timestamp_micros(event_us).alias("event_time"),
        _pick(_SOURCES, idc, 8).alias("source"),
        (idc % 4).cast("int").alias("partition"),
        (idc / 4).cast("long").alias("offset"),
        F.timestamp_micros(arrival_us.cast("long")).alias("arrival_time"),
        F.format_string("archived-%06d.ndjson", (idc / 5_000).cast("long")).alias("input_file"),
        F.lit(None).cast("string").alias("payload"),
        (idc / 5_000).cast("long").alias("batch_id"),
        F.lit(False).alias("is_duplicate"),
        F.to_date(F.timestamp_micros(event_us)).alias("event_date"))
    tb.ensure_table(spark, folder, tb.EVENT_LOG)
    (tb.conform(log_df, tb.EVENT_LOG).write.format("delta").mode("append")
     .save(tb.table_path(folder, tb.EVENT_LOG)))


def clone_warehouse(built: Path, to: Path) -> None:
    """A copy of a built warehouse that a run may write to, in seconds whatever its size: data
    files are hard-linked (Delta never rewrites one), the logs copied (Delta rewrites
    ``_last_checkpoint`` in place)."""
    def link_or_copy(src: str, dst: str) -> None:
        if "_delta_log" in Path(src).parts:
            shutil.copy2(src, dst)
        else:
            os.link(src, dst)

    if to.exists():
        shutil.rmtree(to)
    shutil.copytree(built, to, copy_function=link_or_copy,
                    ignore=shutil.ignore_patterns(_marker(built).name))


# --------------------------------------------------------------------------- audit inputs

# Breaks by a hash of (window_start, key, currency), per mille of canonical rows.
_LATE_PM, _UNEXPLAINED_PM, _MISSING_STREAM_PM, _MISSING_CANON_PM = 5, 2, 1, 1
_LATE_AMOUNT = "1.00"    # a whole number of minor units in every currency
_GRAIN = ["window_start", "key", "currency"]


def _cell_hash() -> Column:
    return F.pmod(F.abs(F.xxhash64(*_GRAIN, F.lit(11))), F.lit(1000))


def _minor_step(currency: Column) -> Column:
    """The smallest amount of ``currency`` (a code): 1 JPY, 0.01 EUR, 0.001 KWD."""
    steps = F.create_map(*[F.lit(x) for c in _CURRENCIES
                           for x in (c, str(minor_unit_step(minor_unit(c))))])
    return F.coalesce(F.element_at(steps, currency), F.lit("0.01")).cast("decimal(4,3)")


def build_audit_inputs(spark: SparkSession, settings: Settings,
                       day: date = BENCH_DAY) -> dict[str, Any]:
    """``provisional_deltas`` and ``late_events`` for ``day`` from its ``canonical_totals``
    (run the replay first), with known breaks. Idempotent per day (replaceWhere)."""
    wh = settings.warehouse_path
    windows_spec = settings.event_time_rules().windows
    canon = tb.read_table(spark, wh, tb.CANONICAL_TOTALS).filter(
        F.col("window_date") == F.lit(day))
    h = _cell_hash()
    # what the stream counted twice: unflagged later copies, per (window, key, currency)
    log_df = tb.read_table(spark, wh, tb.EVENT_LOG).filter(F.col("event_date") == F.lit(day))
    copies = (log_df.filter(~F.col("is_duplicate"))
              .groupBy("event_id").agg(F.count(F.lit(1)).alias("n"),
                                       F.min("event_time").alias("event_time"),
                                       F.first("key").alias("key"),
                                       F.first("currency").alias("currency"),
                                       F.first("amount").alias("amount"))
              .filter(F.col("n") > 1))
    # every window the copy counts in (reckon.eventtime's WindowSpec: one when tumbling)
    starts = window_starts_col(F.unix_micros("event_time"), windows_spec)
    dup = (copies.select("*", F.explode(starts).alias("ws_us"))
           .groupBy(F.timestamp_micros("ws_us").alias("window_start"), "key", "currency")
           .agg(F.sum(F.col("amount") * (F.col("n") - 1)).alias("dup_amount"),
                F.sum(F.col("n") - 1).alias("dup_count")))
    late_amt = F.lit(_LATE_AMOUNT).cast("decimal(38,2)")
    is_late = h < _LATE_PM
    is_unexpl = (h >= _LATE_PM) & (h < _LATE_PM + _UNEXPLAINED_PM)
    drop = (h >= _LATE_PM + _UNEXPLAINED_PM) & (h < _LATE_PM + _UNEXPLAINED_PM
                                                 + _MISSING_STREAM_PM)
    ghost = h >= 1000 - _MISSING_CANON_PM
    prov = (canon.join(dup, _GRAIN, "left")
            .filter(~drop)
            .withColumns({
                "total_amount": (F.col("total_amount")
                                 - F.when(is_late, late_amt).otherwise(F.lit(0))
                                 + F.when(is_unexpl, _minor_step(F.col("currency")))
                                 .otherwise(F.lit(0))
                                 + F.coalesce("dup_amount", F.lit(0))).cast(tb.TOTAL),
                "event_count": (F.col("event_count") - F.when(is_late, 1).otherwise(0)
                                + F.coalesce("dup_count", F.lit(0))).cast("long")}))
    ghosts = (prov.filter(ghost).withColumn("key", F.concat("key", F.lit("-ghost"))))
    prov = prov.unionByName(ghosts)
    provisional = prov.select(  # one delta per row: what the stream's batches added up to
        "window_start", "window_end", "key", "currency", "total_amount", "event_count",
        F.lit(0).alias("revised"), F.lit(1).cast("long").alias("batch_id"),
        F.lit("bench-audit").alias("query_id"),
        (F.col("window_end") + F.expr("INTERVAL 5 SECONDS")).alias("processed_at"),
        "window_date")
    late = canon.filter(is_late).select(
        F.concat(F.lit("late-"), F.col("key"), F.lit("-"),
                 F.unix_micros("window_start").cast("string")).alias("event_id"),
        "key", late_amt.cast(tb.AMOUNT).alias("amount"), "currency",
        (F.col("window_start") + F.expr("INTERVAL 1 SECOND")).alias("event_time"),
        F.lit("partner-api").alias("source"), F.lit(3).alias("partition"),
        F.lit(0).cast("long").alias("offset"),
        (F.col("window_end") + F.expr("INTERVAL 60 SECONDS")).alias("arrival_time"),
        F.lit("events-late.ndjson").alias("input_file"), "window_start", "window_end",
        (F.col("window_end") + F.expr("INTERVAL 57 SECONDS")).alias("watermark"),
        F.lit("57").cast(tb.SECONDS).alias("lateness_seconds"),
        F.lit(2).cast("long").alias("batch_id"), "window_date")
    for name, df in ((tb.PROVISIONAL_DELTAS, provisional), (tb.LATE_EVENTS, late)):
        tb.ensure_table(spark, wh, name)
        tb.replace_rows(tb.conform(df, name), wh, name, tb.window_day(day))
    return expected_breaks()


def expected_breaks() -> dict[str, Any]:
    """The injected break shares (of canonical rows), for the report."""
    return {"late_explained": _LATE_PM / 1000, "unexplained": _UNEXPLAINED_PM / 1000,
            "missing_in_stream": _MISSING_STREAM_PM / 1000,
            "missing_in_canonical": _MISSING_CANON_PM / 1000,
            "duplicate_explained": "windows holding one of the 0.1% missed copies"}


def day_frame(spark: SparkSession, settings: Settings, name: str,
              day: date = BENCH_DAY) -> DataFrame:
    """One table's rows of ``day`` (partition pruned; provisional_totals derived from its
    deltas, as every reader sees it)."""
    from spark.provisional import read_day

    col = "event_date" if name == tb.EVENT_LOG else "window_date"
    return read_day(spark, settings.warehouse_path, name, settings.event_time_rules(),
                    day).filter(F.col(col) == F.lit(day))


# --------------------------------------------------------------------------- lateness arrays


def lateness_arrays(events: int, partitions: int = 4, seed: int = 7
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(event_us, arrival_us, partition) in arrival order: 200 events/s of event time, log-normal
    delays (median 300 ms) with a 3% Pareto tail, and one partition 2 s slow."""
    rng = np.random.default_rng(seed)
    start = 1_767_225_600 * MICROS_PER_SECOND  # 2026-01-01T00:00:00Z
    span = int(events / 200 * MICROS_PER_SECOND)
    t = start + np.sort(rng.integers(0, max(span, 1), size=events))
    p = rng.integers(0, partitions, size=events)
    delay = rng.lognormal(np.log(300_000), 0.6, size=events)
    tail = rng.random(events) < 0.03
    delay[tail] = 2 * MICROS_PER_SECOND * (1 + rng.pareto(1.2, int(tail.sum())))
    delay = np.minimum(delay, 1800 * MICROS_PER_SECOND).astype(np.int64)
    delay[p == partitions - 1] += 2 * MICROS_PER_SECOND
    a = t + delay
    order = np.argsort(a, kind="stable")
    return t[order], a[order], p[order]
