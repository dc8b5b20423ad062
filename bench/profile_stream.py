"""Where the stream's CPU goes: reckon's contender of the stream workload, run under a Java
Flight Recording, summarised by what the JVM spent it on.

Why: the stream benchmark says how fast; this says why. It answers the questions a change to
the stream's design starts from: how much of a batch is parsing, the dedup state, writing
Parquet, building the batch's cache; how many child processes the JVM started (each a fork on
a batch's critical path); which threads burned the CPU (tasks, the writes' driver side, the
JIT). It is a tool, not a benchmark: its shares move with the machine's load, its counts do
not.

Run it on a quiet machine (the JVM is started with the recording, so it needs its own
process)::

    .venv/bin/python -m bench.profile_stream --scale 1.0

It prints one table per question and keeps the recording (``--out``) for ``jfr print``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.harness import Scale, base_settings, log
from reckon.config import PROJECT_ROOT

__all__ = ["executor_share", "main", "started_commands"]

#: Executor samples by what they were doing, the first rule whose text is in a frame (from the
#: sampled leaf down to the thread's root) wins: the stage a sample belongs to.
_STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("write Parquet files (Delta)", ("FileFormatWriter", "parquet")),
    ("dedup state (transformWithState)", ("transformwithstate", "DedupState")),
    ("build the batch's cache", ("CachedRDDBuilder", "DefaultCachedBatchSerializer")),
    ("parse (reckon.jvm.ParseLine)", ("ParseLine",)),
    ("read, project, shuffle (map side)", ("ShuffleMapTask",)),
    ("jobs over the cache", ("InMemoryTableScan",)),
)


def _frames(event: dict[str, Any]) -> list[str]:
    return [f"{f['method']['type']['name']}.{f['method']['name']}"
            for f in event["values"]["stackTrace"]["frames"]]


def executor_share(samples: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Share of the executor threads' samples per stage (``_STAGES``; 'other' for the rest).

    Example:
        >>> s = {"values": {"sampledThread": {"javaName": "Executor task launch worker-0"},
        ...      "stackTrace": {"frames": [{"method": {"type": {"name": "x/ParseLine"},
        ...                                            "name": "call"}}]}}}
        >>> executor_share([s])
        {'parse (reckon.jvm.ParseLine)': 100.0}
    """
    counts: Counter[str] = Counter()
    for event in samples:
        if not (event["values"]["sampledThread"].get("javaName") or "").startswith(
                "Executor task"):
            continue
        text = "\n".join(_frames(event))
        counts[next((name for name, needles in _STAGES
                     if any(n in text for n in needles)), "other")] += 1
    total = sum(counts.values()) or 1
    return {name: round(100.0 * n / total, 1) for name, n in counts.most_common()}


def started_commands(processes: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many child processes the JVM started, by program.

    Example:
        >>> started_commands([{"values": {"command": "chmod 644 /x"}},
        ...                   {"values": {"command": "chmod 644 /y"}}])
        {'chmod': 2}
    """
    counts = Counter(str(e["values"]["command"]).split(" ", 1)[0] for e in processes)
    return dict(counts.most_common())


def _events(jfr_tool: Path, recording: Path, name: str) -> list[dict[str, Any]]:
    printed = subprocess.run([str(jfr_tool), "print", "--json", "--stack-depth", "64",
                              "--events", name, str(recording)],
                             check=True, capture_output=True, text=True)
    events: list[dict[str, Any]] = json.loads(printed.stdout)["recording"]["events"]
    return events


def _run_recorded(scale: float, recording: Path) -> None:
    """The stream contender in a child process whose JVM records from its start."""
    env = {**os.environ, "JDK_JAVA_OPTIONS":
           f"-XX:StartFlightRecording=filename={recording},settings=profile"}
    subprocess.run([sys.executable, "-m", "bench.profile_stream", "--run-only",
                    "--scale", str(scale)], check=True, env=env, cwd=PROJECT_ROOT)


def _run_stream(factor: float) -> None:
    from bench import stream_bench
    from spark.session import get_spark

    scale = Scale(factor=factor, data_dir=PROJECT_ROOT / "bench" / "data" / f"scale-{factor:g}")
    scale.data_dir.mkdir(parents=True, exist_ok=True)
    spark = get_spark(base_settings(scale.data_dir / "_session"), app_name="reckon-profile")
    batches, ours = stream_bench.run_ours_alone(spark, scale)
    log(f"profile: {batches} batches, {ours['wall_seconds']} s, "
        f"JVM CPU {ours.get('cpu_seconds_jvm')} s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile_stream",
                                description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0, help="size factor of the stream workload")
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "bench" / "data" / "stream.jfr")
    p.add_argument("--run-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.run_only:
        _run_stream(args.scale)
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    _run_recorded(args.scale, args.out.resolve())
    java = shutil.which("java")
    if java is None:
        raise SystemExit("java is not on PATH: install a JDK 17 (make setup says how)")
    jfr_tool = Path(os.path.realpath(java)).parent / "jfr"
    print("child processes started by the JVM:",
          started_commands(_events(jfr_tool, args.out, "jdk.ProcessStart")))
    print("executor samples by stage (%):")
    for stage, share in executor_share(_events(jfr_tool, args.out,
                                               "jdk.ExecutionSample")).items():
        print(f"  {share:5.1f}  {stage}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
