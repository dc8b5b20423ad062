"""Chaos run of the streaming aggregator: SIGKILL a real `reckon stream` process at random points
N times (random batch, random delay into it, so kills land mid-batch and often inside a Delta
commit), restart it from its checkpoint each time, let it finish, then compare every stream
table row for row with an uninterrupted run of the same landing directory.

    python scripts/chaos_stream.py --kills 10 --seed 1 --events 3000

Prints one line per kill (the batch it landed in, which tables had already committed that
batch, which had written files they had not committed) and a final verdict. Exit status:
0 equal, 1 a table differs (the diff is printed), 3 fewer kills landed than asked for (the
stream finished first: give it more events). Tables are compared without their wall-clock
columns (tests/stream_chaos.py VOLATILE).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
if str(PROJECT_ROOT) not in sys.path:  # run as a script: make `tests.stream_chaos` importable
    sys.path.insert(0, str(PROJECT_ROOT))

from app.generate import GeneratorConfig, generate_landing  # noqa: E402
from spark import tables as tb  # noqa: E402
from storage import commits  # noqa: E402
from tests.stream_chaos import (  # noqa: E402
    VOLATILE,
    committed_batches,
    kill_during,
    run_to_end,
    stream_command,
    table_snapshot,
)

__all__ = ["ChaosResult", "KillRecord", "compare_tables", "kill_point", "main", "run_chaos"]

# Tables one micro-batch writes, in the order it writes them (spark/stream.py BatchProcessor).
BATCH_TABLES = (tb.QUARANTINE, tb.EVENT_LOG, tb.LATE_EVENTS, tb.PROVISIONAL_DELTAS,
                tb.WATERMARK_PROGRESS)
DIFF_SAMPLE = 20


@dataclass(frozen=True)
class KillRecord:
    """One kill: when it was aimed, where it landed."""

    number: int
    after_batches: int        # batches committed before the delay started
    extra_delay: float        # seconds into the next batch
    landed_batch: int         # the batch in flight when the process died
    committed: tuple[str, ...]   # tables that had already committed that batch
    uncommitted: dict[str, int]  # table -> data files written by this run but not committed
    offsets_logged: int       # the checkpoint's planned batches
    commits_logged: int       # the checkpoint's finished batches

    def describe(self) -> str:
        done = ", ".join(self.committed) or "none"
        torn = ", ".join(f"{t} ({n} file{'s' if n != 1 else ''})"
                         for t, n in self.uncommitted.items()) or "none"
        inside = "inside a Delta write" if self.uncommitted else "between writes"
        return (f"after {self.after_batches} batches + {self.extra_delay:.2f}s -> landed in "
                f"batch {self.landed_batch} ({inside}); committed for it: {done}; written but "
                f"uncommitted: {torn}; checkpoint offsets {self.offsets_logged}, commits "
                f"{self.commits_logged}")


@dataclass(frozen=True)
class ChaosResult:
    kills: tuple[KillRecord, ...]
    kills_asked: int
    files: int
    seconds: dict[str, float]
    diffs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def equal(self) -> bool:
        return not self.diffs


# ----------------------------------------------------------------------------- Delta logs


def _log_actions(table_dir: Path) -> list[dict[str, Any]]:
    """Every action of every JSON commit of a (small) Delta table, oldest first."""
    actions: list[dict[str, Any]] = []
    for commit in sorted((table_dir / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            if line.strip():
                actions.append(json.loads(line))
    return actions


def committed_batch(table_dir: Path) -> int | None:
    """The newest stream batch committed to the table (the batch mark in a commit's
    userMetadata, spark/tables.py), None if none."""
    return max((mark[2] for _version, mark in commits.marked_commits(table_dir.parent,
                                                                 table_dir.name)), default=None)


def data_files(table_dir: Path) -> set[str]:
    """Parquet data files on disk, relative to the table folder."""
    if not table_dir.is_dir():
        return set()
    return {str(p.relative_to(table_dir)) for p in table_dir.rglob("*.parquet")
            if "_delta_log" not in p.parts}


def referenced_files(table_dir: Path) -> set[str]:
    """Every data or change-data file any commit ever added (removed ones included)."""
    from urllib.parse import unquote

    return {unquote(a[kind]["path"]) for a in _log_actions(table_dir)
            for kind in ("add", "cdc") if kind in a}


def _holds_rows(path: Path) -> bool:
    """True for a parquet file with rows, or one cut short (no readable footer): evidence of
    a write. Spark also writes complete empty files for empty partitions, which Delta never
    adds to a commit; those are no torn write."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_rows > 0
    except Exception:  # any unreadable file is a write cut short
        return True


def kill_point(warehouse: Path, before: dict[str, set[str]], number: int, after_batches: int,
               extra_delay: float) -> KillRecord:
    """Where a kill landed, from the Delta logs and the checkpoint (no Spark needed)."""
    batch = committed_batches(warehouse)  # the in-flight batch id (batch ids start at 0)
    committed, uncommitted = [], {}
    for name in BATCH_TABLES:
        folder = warehouse / name
        done = committed_batch(folder)
        if done is not None and done >= batch:
            committed.append(name)
        torn = {f for f in (data_files(folder) - before.get(name, set()))
                - referenced_files(folder) if _holds_rows(folder / f)}
        if torn:
            uncommitted[name] = len(torn)
    cp = warehouse / "_checkpoints" / "stream-landing"
    offsets = len([p for p in (cp / "offsets").glob("[0-9]*") if p.name.isdigit()]) \
        if (cp / "offsets").is_dir() else 0
    commits = len([p for p in (cp / "commits").glob("[0-9]*") if p.name.isdigit()]) \
        if (cp / "commits").is_dir() else 0
    return KillRecord(number, after_batches, extra_delay, batch, tuple(committed), uncommitted,
                      offsets, commits)


def batch_seconds(warehouse: Path, default: float = 5.0) -> float:
    """Typical seconds per batch so far: median gap between watermark_progress commits."""
    log = warehouse / tb.WATERMARK_PROGRESS / "_delta_log"
    times = sorted(p.stat().st_mtime for p in log.glob("*.json"))[1:] if log.is_dir() else []
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    return statistics.median(gaps) if gaps else default


# ----------------------------------------------------------------------------- the run


def run_chaos(workdir: Path, *, kills: int, seed: int, events: int,
              say: Callable[[str], None] = print) -> tuple[ChaosResult, Path, Path, Path]:
    """Generate, kill ``kills`` times, finish, run a clean copy. Returns the result (without
    diffs) and the landing, killed and clean warehouse paths."""
    if kills < 1:
        raise ValueError(f"--kills={kills} is not valid: give at least 1")
    if events < 100:
        raise ValueError(f"--events={events} is not valid: give at least 100")
    rng = random.Random(seed)
    landing, killed, clean = workdir / "landing", workdir / "killed", workdir / "clean"
    files_wanted = 2 * kills + 4  # each kill costs at most ~2 batches; keep a margin
    lines_per_file = max(20, math.ceil(events * 1.03 / files_wanted))
    manifest = generate_landing(landing, GeneratorConfig(
        events=events, partitions=3, keys=20, rate=50.0, lines_per_file=lines_per_file,
        seed=seed, duplicate_rate=0.03, malformed_rate=0.01, future_rate=0.0))
    files = len(manifest.files)
    say(f"landing: {manifest.lines} lines in {files} files ({lines_per_file} per file); "
        f"one file per micro-batch")
    seconds: dict[str, float] = {}
    records: list[KillRecord] = []
    cmd = stream_command(landing, killed)
    t0 = time.monotonic()
    for number in range(1, kills + 1):
        done = committed_batches(killed)
        after = done + rng.choice((1, 1, 2))
        delay = round(rng.uniform(0.0, 1.2 * batch_seconds(killed)), 2)
        before = {name: data_files(killed / name) for name in BATCH_TABLES}
        if not kill_during(cmd, killed, after_batches=after, extra_delay=delay):
            say(f"kill {number}/{kills}: the stream finished first (after {after} batches + "
                f"{delay:.2f}s); no more kills")
            break
        record = kill_point(killed, before, number, after, delay)
        records.append(record)
        say(f"kill {number}/{kills}: {record.describe()}")
    seconds["killed_run"] = round(time.monotonic() - t0, 1)
    t1 = time.monotonic()
    run_to_end(cmd)
    seconds["finish_after_kills"] = round(time.monotonic() - t1, 1)
    t2 = time.monotonic()
    run_to_end(stream_command(landing, clean))
    seconds["clean_run"] = round(time.monotonic() - t2, 1)
    return ChaosResult(tuple(records), kills, files, seconds), landing, killed, clean


def compare_tables(spark: Any, killed: Path, clean: Path, landing: Path
                   ) -> dict[str, dict[str, Any]]:
    """Table -> diff (row counts and capped samples of rows only on one side), for every
    stream table that differs; also checks that every landed line was accounted for."""
    diffs: dict[str, dict[str, Any]] = {}
    for name in VOLATILE:
        got, want = table_snapshot(spark, killed, name), table_snapshot(spark, clean, name)
        if got != want:
            only_killed = sorted(set(got) - set(want))
            only_clean = sorted(set(want) - set(got))
            diffs[name] = {"killed_rows": len(got), "clean_rows": len(want),
                           "only_in_killed": only_killed[:DIFF_SAMPLE],
                           "only_in_clean": only_clean[:DIFF_SAMPLE],
                           "repeated_rows": len(got) - len(set(got)) - (len(want) - len(set(want)))}
    lines = sum(len(p.read_text().splitlines()) for p in landing.glob("events-*.ndjson"))
    progress = spark.read.format("delta").load(str(killed / tb.WATERMARK_PROGRESS))
    sums = progress.groupBy().sum("rows_in", "valid", "quarantined").first()
    if not (sums[0] == sums[1] + sums[2] == lines):
        diffs["accounting"] = {"landed_lines": lines, "rows_in": sums[0], "valid": sums[1],
                               "quarantined": sums[2]}
    return diffs


def _spark(workdir: Path) -> Any:
    from app.settings import load_settings
    from spark.session import get_spark

    settings = load_settings(env={}, warehouse=str(workdir / "_compare"), shuffle_partitions=2,
                             spark_driver_memory="1g")
    return get_spark(settings, app_name="reckon-chaos-compare")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10, help="SIGKILLs to land (default 10)")
    parser.add_argument("--seed", type=int, default=1, help="data and kill-point seed")
    parser.add_argument("--events", type=int, default=3000, help="unique events (default 3000)")
    parser.add_argument("--workdir", help="keep everything here (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        result, landing, killed, clean = run_chaos(workdir, kills=args.kills, seed=args.seed,
                                                   events=args.events)
        t1 = time.monotonic()
        diffs = compare_tables(_spark(workdir), killed, clean, landing)
        result.seconds["compare"] = round(time.monotonic() - t1, 1)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    result.seconds["total"] = round(time.monotonic() - t0, 1)
    inside = sum(1 for k in result.kills if k.uncommitted)
    print(f"timings: {json.dumps(result.seconds)}")
    if diffs:
        print(f"VERDICT: MISMATCH after {len(result.kills)} kills in {', '.join(diffs)}")
        for name, diff in diffs.items():
            print(f"--- {name}: {json.dumps(diff, indent=1, default=str)}")
        return 1
    if len(result.kills) < args.kills:
        print(f"VERDICT: INCOMPLETE: only {len(result.kills)} of {args.kills} kills landed "
              f"before the stream finished ({result.files} files); tables equal so far")
        return 3
    print(f"VERDICT: EQUAL: {len(result.kills)} kills ({inside} inside a Delta write), every "
          f"stream table equals the uninterrupted run row for row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
