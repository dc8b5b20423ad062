"""``reckon compact | replay | audit | check | report | vacuum``: the nightly steps, by hand.

Each calls the ``app.pipeline`` step the nightly (or weekly VACUUM) DAG calls, so a step
run from a terminal, a backfill or the scheduler does the same; here the result is printed
for a person (or as JSON with ``--json``). Example: ``reckon compact --from 2026-01-01 --to
2026-01-03`` calls ``pipeline.run_compact`` for each of the three days, oldest first.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from app import pipeline
from reckon.config import Settings
from reckon.money import format_money
from reckon.timeutil import days_from_flags, format_micros, parse_date

__all__ = ["cmd_audit", "cmd_check", "cmd_compact", "cmd_replay", "cmd_report", "cmd_vacuum"]


def cmd_compact(args: argparse.Namespace, settings: Settings) -> int:
    """`reckon compact`: compact a day's (or a range's) partitions of the stream tables."""
    results = []
    for day in days_from_flags(args.date, args.date_from, args.date_to):
        r = pipeline.run_compact(settings, day).detail
        results.append(r)
        if not args.json:
            print(r.describe())
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    print(f"[compact] {len(results)} day(s) done", file=sys.stderr)
    return 0


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    """`reckon replay`: canonical totals of a day (or a range), from event_log or Kafka."""
    from_kafka = bool(getattr(args, "kafka_bootstrap", None))
    results = []
    for day in days_from_flags(args.date, args.date_from, args.date_to):
        print(f"[replay] {day}: reading {'kafka' if from_kafka else 'event_log'}",
              file=sys.stderr, flush=True)
        r = pipeline.run_replay(settings, day, from_kafka=from_kafka).detail
        results.append(r)
        if not args.json:
            print(pipeline.replay_sentence(r))
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    return 0


def cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    """`reckon audit --date D`: reconcile the day, then print its figures per currency."""
    day = parse_date(args.date, "--date")
    print(f"[audit] {day}: reconciling provisional against canonical totals", file=sys.stderr,
          flush=True)

    def open_day(seen: int, required: int) -> None:
        print(f"[audit] {day}: the stream's watermark {format_micros(seen)} has not passed the "
              f"end of the day's last window + allowed lateness ({format_micros(required)}): its "
              "provisional totals can still change, so some breaks may be transient; audit "
              "again once it has (`reckon`'s nightly DAG waits for it)", file=sys.stderr,
              flush=True)

    step = pipeline.run_audit(settings, day, kind=args.kind, on_open_day=open_day)
    result = step.detail
    if result.replaced_signed_off_run:
        print(f"[audit] {day}: this run replaced run {result.replaced_signed_off_run} "
              f"({step.summary['replaced_run_state']}): the day needs a new sign-off "
              "(`reckon report` shows what changed)", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        return 0
    print(f"audit {result.run_id} for {result.day}: {result.rows} (window, key, currency) rows")
    for status, n in result.status_counts.items():
        print(f"  {status:<22} {n:>10}")
    if not result.currencies:
        print("  no events: neither the stream nor the replay has a total for the day")
    for c in result.currencies:  # one line per currency: amounts are never added across them
        print(_currency_line(c))
    print(f"  {pipeline.audit_closing(result)}")
    return 0


def _currency_line(c: dict[str, Any]) -> str:
    """One currency's audit figures, in that currency's own digits (amounts of two
    currencies are never added, so each has its own line). Example::

      JPY: provisional JPY 100, canonical JPY 120, gap JPY 20 = late JPY 20 - duplicates
      JPY 0 + residual JPY 0; 0 unexplained of 2 rows
    """
    code = c["currency"]

    def money(name: str) -> str:
        return format_money(Decimal(c[name]), code)

    return (f"  {code}: provisional {money('provisional_total')}, canonical "
            f"{money('canonical_total')}, gap {money('gap_total')} = late "
            f"{money('late_total')} - duplicates {money('duplicate_total')} + residual "
            f"{money('residual_total')}; {c['unexplained']} unexplained of {c['rows']} rows")


def cmd_check(args: argparse.Namespace, settings: Settings) -> int:
    """``reckon check --warehouse WH --date D [--json]``: exit 0, or 1 on a blocking failure
    (the run, its results and Data Docs are recorded and printed first)."""
    day = parse_date(args.date, "--date")
    result = pipeline.run_check(settings, day, fail_on_blocking=False).detail
    if getattr(args, "json", False):
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    else:
        print(result.summary())
    result.raise_for_failures()
    return 0


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    """`reckon report --warehouse WH --date D --out DIR`."""
    day = parse_date(args.date, "--date")
    result = pipeline.run_report(settings, day, args.out).detail
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        return 0
    print(pipeline.report_sentence(result))
    return 0


def cmd_vacuum(args: argparse.Namespace, settings: Settings) -> int:
    """`reckon vacuum`: delete the files no version within the retention uses; today's date
    only labels the run, as the weekly DAG's does."""
    result = pipeline.run_vacuum(settings, datetime.now(UTC).date(), retain=args.retain,
                                 dry_run=args.dry_run, progress=not args.json).detail
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.describe())
    return 0
