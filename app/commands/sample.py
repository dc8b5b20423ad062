"""``reckon generate`` and ``reckon demo``: sample data, and the whole flow run on it.

``cmd_generate`` turns the flags into a ``app.generate.GeneratorConfig`` and writes a landing
directory (``app.generate.generate_landing``); ``cmd_demo`` runs ``app.demo.run_demo``
(generate, stream, the nightly DAG on a local Airflow, the summary read back) and prints the
summary. Neither imports Spark until it runs; ``generate`` never does. Example::

    reckon generate --out landing --events 1000 --seed 7
    reckon demo --warehouse /tmp/wh --events 20000
"""

from __future__ import annotations

import argparse
import sys
from decimal import Decimal
from pathlib import Path

from app.generate import DEFAULT_CURRENCIES, GeneratorConfig, generate_landing
from reckon.config import Settings
from reckon.money import format_money

__all__ = ["cmd_demo", "cmd_generate"]


def _generator_config(args: argparse.Namespace) -> GeneratorConfig:
    """The generator's knobs from ``reckon generate``'s flags (a partition flag switched off
    is None; ``--currencies EUR,JPY`` a tuple)."""
    return GeneratorConfig(
        events=args.events, partitions=args.partitions, keys=args.keys, seed=args.seed,
        rate=args.rate, start=args.start, duplicate_rate=args.duplicate_rate,
        malformed_rate=args.malformed_rate, future_rate=args.future_rate,
        lines_per_file=args.lines_per_file, slow_skew=args.slow_skew,
        tail_share=args.tail_share, median_delay=args.median_delay,
        idle_partition=None if args.no_idle_partition else 0,
        slow_partition=None if args.no_slow_partition else -1,
        currencies=(tuple(c.strip() for c in args.currencies.split(",") if c.strip())
                    if args.currencies else DEFAULT_CURRENCIES),
    )


def cmd_generate(args: argparse.Namespace, settings: Settings) -> int:
    """``reckon generate --out DIR [...]``: write the landing directory, then say what it holds
    (``--json``: the manifest, every injected fault counted)."""
    manifest = generate_landing(args.out, _generator_config(args))
    if args.json:
        print(manifest.to_json())
        return 0
    print(f"wrote {manifest.lines} lines in {len(manifest.files)} files to {args.out}: "
          f"{manifest.valid_events} events, {manifest.duplicates} duplicates, "
          f"{manifest.future_dated} future-dated, {sum(manifest.malformed.values())} malformed "
          f"(_manifest.json has the details)")
    for code, amount in manifest.total_amounts.items():  # one line per currency, never a sum
        print(f"  {format_money(Decimal(amount), code)} over "
              f"{manifest.valid_events_by_currency.get(code, 0)} events")
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    """``reckon demo [--warehouse WH] [--events N] [--out DIR]``: the whole flow, its summary
    printed and kept as JSON beside the report; exit 1 when a break is left unexplained."""
    from app.demo import run_demo, save_summary

    summary = run_demo(settings, events=args.events, out=args.out)
    print(summary.render())
    path = save_summary(summary, Path(args.out) if args.out else
                        settings.warehouse_path / "reports")
    print(f"  summary JSON          {path}")
    sys.stdout.flush()
    return 0 if summary.unexplained == 0 else 1
