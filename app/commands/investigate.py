"""``reckon sql | explain | bound-whatif-curve | bound-whatif``: look into a warehouse, change nothing.

Each handler checks its flags first (a mistake is refused before a JVM starts), then starts
Spark only when it needs it and calls one engine: ``reports.duck.run_duck_query`` (or
``spark.sql_query.run_query`` on ``--engine spark``), ``reports.explain_duck.explain_window_duck``
(or ``audits.explain_spark.explain_window`` on ``--engine spark``), ``audits.bound_whatif_duck`` (the
curves and their analysis; ``audits.bound_whatif`` on ``--engine spark``). What it
prints is made here or by the engine's ``render_*``. Example::

    reckon explain --warehouse wh --key merchant-7 --window 2026-01-01T10:00:00Z
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from reckon.config import Settings
from reckon.engine_config import WhatIfConfig
from reckon.errors import NoEventsError, UsageError, invalid
from reckon.money import currency_problem
from reckon.spec import unseen_bounds, unseen_inputs
from reckon.timeutil import parse_date, parse_duration, parse_timestamp
from reckon.whatif import normalize_bounds

__all__ = ["cmd_bound_whatif", "cmd_bound_whatif_curve", "cmd_explain", "cmd_sql"]


def _require_warehouse_dir(settings: Settings) -> None:
    if not settings.warehouse_path.is_dir():
        raise UsageError(f"--warehouse={str(settings.warehouse_path)!r} is not valid: no such "
                         "directory")


def cmd_sql(args: argparse.Namespace, settings: Settings) -> int:
    """`reckon sql --warehouse WH [--engine duckdb|spark] [--json] [--limit N] "SELECT ..."`.
    DuckDB (reports.duck) by default: no JVM; Spark (spark.sql_query) on ``--engine spark``."""
    from reckon.sql_guard import QueryResult, check_read_only
    from reports.terminal import print_json, print_table

    check_read_only(args.query)  # refuse before starting anything
    _require_warehouse_dir(settings)
    result: QueryResult
    if getattr(args, "engine", "duckdb") == "duckdb":
        from reports.duck import run_duck_query

        result = run_duck_query(settings.warehouse_path, args.query, args.limit,
                                timeout_s=parse_duration(settings.sql_timeout,
                                                         "sql_timeout") / 1e6,
                                max_rows=settings.sql_max_rows)
    else:
        from spark.session import get_spark
        from spark.sql_query import run_query

        spark = get_spark(settings, app_name="reckon-sql")
        result = run_query(spark, settings.warehouse_path, args.query, args.limit)
    if args.json:
        print_json(result.to_dicts())
    else:
        print_table(result.rows, result.columns)
        more = f" (more rows exist: raise --limit above {result.limit})" if result.truncated \
            else ""
        print(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''}{more})")
    return 0


def _currency_arg(text: str | None) -> str | None:
    """``--currency`` as an ISO 4217 code reckon books, upper-cased; None when not given.

    >>> _currency_arg(" eur ")
    'EUR'
    """
    if text is None:
        return None
    currency = text.strip().upper()
    problem = currency_problem(currency)
    if problem is not None:
        raise invalid("--currency", text, f"a currency reckon books ({problem})")
    return currency


def cmd_explain(args: argparse.Namespace, settings: Settings) -> int:
    """`reckon explain --warehouse WH [--engine duckdb|spark] --key K --window T [--currency C]
    [--json]`. DuckDB (reports.explain_duck) by default: the window's rows without a JVM;
    Spark (audits.explain_spark) on ``--engine spark``. Both tell it with audits.chapters."""
    from audits.window_story import WindowStory
    from reports.terminal import print_json

    instant = parse_timestamp(args.window_at, "--window")
    if not args.key:
        raise UsageError("--key='' is not valid: give the account or merchant key")
    currency = _currency_arg(getattr(args, "currency", None))
    wh = settings.warehouse_path
    if not (wh / "event_log").is_dir():
        raise UsageError(f"--warehouse={str(wh)!r} is not valid: it has no event_log table "
                         "(run `reckon stream` first)")
    story: WindowStory
    if getattr(args, "engine", "duckdb") == "duckdb":
        from reports.explain_duck import explain_window_duck

        story = explain_window_duck(wh, settings.event_time_rules(), args.key, instant,
                                    currency)
    else:
        from audits.explain_spark import explain_window
        from spark.session import get_spark

        spark = get_spark(settings, app_name="reckon-explain")
        story = explain_window(spark, wh, settings.event_time_rules(), args.key, instant,
                               currency)
    if args.json:
        print_json(story.to_dict())
    else:
        print("\n".join(story.lines))
    return 0


def _bounds_arg(text: str | None, name: str = "--bounds") -> list[int]:
    """``--bounds`` as candidate bounds in microseconds, sorted, each once.

    >>> _bounds_arg("2s, 0s,2s")
    [0, 2000000]
    """
    items = [b.strip() for b in (text or "").split(",") if b.strip()]
    if not items:
        raise invalid(name, text, "comma-separated durations, e.g. 0s,2s,5s")
    return normalize_bounds(parse_duration(b, name) for b in items)


def cmd_bound_whatif_curve(args: argparse.Namespace, settings: Settings) -> int:
    """``reckon bound-whatif-curve --events FILE --window W --bounds B1,B2 [--json]``.

    The window width comes from --window; slide, allowed lateness, idle timeout and expected
    partitions from the configuration (file / RECKON_* environment), like every other
    command."""
    from audits.bound_whatif import curve_of_events, render_curve
    from audits.bound_whatif_file import read_events_file

    rules = settings.event_time_rules()  # --window arrives through settings
    bounds = _bounds_arg(args.bounds)
    event_us, arrival_us, partition = read_events_file(args.events)
    points = curve_of_events(rules, event_us, arrival_us, partition, bounds)
    if args.json:
        print(json.dumps([pt.to_json_dict() for pt in points], indent=2))
        return 0
    print(render_curve(args.events, len(event_us), rules, points,
                       settings.target_completeness))
    return 0


def _quiet_day(day: date, as_json: bool) -> int:
    """A day without events is a quiet day, not a mistake: say so and exit 0 (the README's
    quiet day goes through every step with "no events").

    Example: ``no events on 2026-11-25: nothing to analyse``; with ``--json``
    ``{"day": "2026-11-25", "events": 0, "note": "..."}``."""
    note = f"no events on {day.isoformat()}: nothing to analyse"
    print(json.dumps({"day": day.isoformat(), "events": 0, "note": note}, indent=2,
                     sort_keys=True) if as_json else note)
    return 0


def _warn_unseen(engine: _LatenessEngine, whatif: WhatIfConfig, day: date) -> None:
    """One warning line on stderr for a configured bound of an input that sent nothing on
    ``day`` (reckon.spec ``unseen_bounds``); no read without bounds per input."""
    policy = whatif.rules.watermark
    if policy.partition_bounds or policy.source_bounds:
        warning = unseen_bounds(policy, *engine.inputs_of_day(whatif, day),
                                f"on {day.isoformat()}")
        if warning:
            print(f"reckon bound-whatif: {warning}", file=sys.stderr)


@dataclass(frozen=True)
class _LatenessEngine:
    """The reads of ``reckon bound-whatif`` on one engine; everything else (the walks, the
    recommendation, the rendering) is shared. ``batches`` is what ``audits.bound_whatif_batches``
    reads through: a Spark session or ``audits.bound_whatif_duck.DuckReads``.

    Example: ``_lateness_engine("duckdb", settings).analyze_day(whatif, day, None, target)``.
    """

    batches: Any
    analyze_day: Callable[..., Any]
    analyze_inputs: Callable[..., Any]
    inputs_of_day: Callable[[WhatIfConfig, date], tuple[set[int], set[str]]]
    batch_curve: Callable[..., tuple[Any, str | None]]
    attribution: Callable[[Settings, date], list[Any]]


def _lateness_engine(name: str, settings: Settings) -> _LatenessEngine:
    """DuckDB (``audits.bound_whatif_duck``, no JVM) or Spark (``audits.bound_whatif``)."""
    if name == "duckdb":
        from audits import bound_whatif_duck as duck

        reads = duck.open_reads(settings.warehouse_path)
        return _LatenessEngine(
            batches=reads,
            analyze_day=lambda *a, **k: duck.analyze_day_duck(reads, *a, **k),
            analyze_inputs=lambda *a, **k: duck.analyze_inputs_duck(reads, *a, **k),
            inputs_of_day=lambda _whatif, day: duck.inputs_of_day_duck(reads, day),
            batch_curve=lambda *a: duck.batch_curve_of_day_duck(reads, *a),
            attribution=lambda s, day: duck.late_attribution_duck(
                reads, s.event_time_rules(), day))
    from audits import bound_whatif as spark_whatif
    from audits.attribution import late_attribution
    from spark import tables
    from spark.session import get_spark

    spark = get_spark(settings, app_name="reckon-lateness")

    def attribution(s: Settings, day: date) -> list[Any]:
        wh = s.warehouse_path
        return (late_attribution(spark, wh, s.event_time_rules(), day)
                if tables.table_exists(wh, tables.LATE_EVENTS) else [])

    return _LatenessEngine(
        batches=spark,
        analyze_day=lambda *a, **k: spark_whatif.analyze_day(spark, *a, **k),
        analyze_inputs=lambda *a, **k: spark_whatif.analyze_inputs(spark, *a, **k),
        inputs_of_day=lambda whatif, day: spark_whatif.inputs_of_day(spark, whatif, day),
        batch_curve=lambda *a: spark_whatif.batch_curve_of_day(spark, *a),
        attribution=attribution)


def cmd_bound_whatif(args: argparse.Namespace, settings: Settings) -> int:
    """``reckon bound-whatif --warehouse WH [--engine duckdb|spark] --date D [--bounds B1,B2]
    [--target T] [--json]``: both what-if curves of the day, per micro-batch (what the stream
    did) and per event, labelled as the report labels them, then the recommendation and who is
    late. With ``--per-source``: a bound per source against the best single bound. DuckDB
    (audits.bound_whatif_duck) by default, no JVM; Spark on ``--engine spark``; the same output."""
    from audits.bound_whatif import (
        analysis_json,
        completeness_target,
        render_analysis,
        render_per_input,
    )

    day = parse_date(args.date, "--date")
    bounds = None if args.bounds is None else _bounds_arg(args.bounds)
    target = completeness_target(args.target, settings.target_completeness)
    whatif = settings.whatif_config()
    _require_warehouse_dir(settings)
    if not (settings.warehouse_path / "event_log" / "_delta_log").is_dir():
        raise invalid("--warehouse", str(settings.warehouse_path),
                      "a warehouse with an event_log table (run `reckon stream` first)")
    engine = _lateness_engine(getattr(args, "engine", "duckdb"), settings)
    try:
        if getattr(args, "per_source", False):
            from audits.bound_whatif_batches import per_source_batches, whatif_of_day

            rec = engine.analyze_inputs(whatif, day, bounds=bounds, target=target)
            _warn_unseen(engine, whatif, day)
            ran = whatif_of_day(engine.batches, whatif, day)  # not a spec changed since
            replayed, unavailable = per_source_batches(engine.batches, ran, day, rec)
            policy = ran.rules.watermark
            unheard = unseen_inputs(policy, (), [b.unit for b in rec.bounds])[0]
            print(json.dumps({"day": day.isoformat(), **rec.to_json_dict(),
                              "per_batch": {k: p.to_json_dict() for k, p in replayed.items()},
                              "per_batch_unavailable": unavailable,
                              "configured": policy.describe(),
                              "configured_sources_without_events": unheard},
                             indent=2, sort_keys=True) if args.json
                  else render_per_input(rec, day, replayed, unavailable, policy.describe(),
                                        unheard))
            return 0
        analysis = engine.analyze_day(whatif, day, bounds=bounds, target=target)
    except NoEventsError:
        return _quiet_day(day, args.json)
    _warn_unseen(engine, whatif, day)
    batches, why_not = engine.batch_curve(whatif, day, bounds)
    attribution = engine.attribution(settings, day)
    if args.json:
        print(json.dumps(analysis_json(analysis, attribution, batches, why_not), indent=2,
                         sort_keys=True))
        return 0
    print(render_analysis(analysis, attribution, batches, why_not))
    return 0
