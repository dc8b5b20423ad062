"""CPU seconds per test, the JVMs and subprocesses it started included (``--cpu-profile DIR``).

Why: on a shared two-core machine a test's wall time says more about its neighbours than about
the test; the CPU its process tree burns does not. Each worker (or the lone process) reads its
own process tree from /proc before and after every test and writes one JSON line per test phase
to ``DIR/cpu-<worker>.jsonl``; the controller prints the 30 hungriest tests and the total.

Example::

    python -m pytest -n 2 --cpu-profile /tmp/cpu tests/test_quality.py
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_TICKS = os.sysconf("SC_CLK_TCK")


def _children_of() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def _cpu_of(pid: int) -> float:
    """utime + stime of ``pid`` and of its reaped children, in seconds (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / _TICKS


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds of ``root`` (this process by default) and every live descendant."""
    tree = _children_of()
    todo, total = [root or os.getpid()], 0.0
    while todo:
        pid = todo.pop()
        total += _cpu_of(pid)
        todo.extend(tree.get(pid, ()))
    return total


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-profile", metavar="DIR", default=None,
                     help="write each test's CPU seconds (its JVMs and subprocesses included) "
                          "to DIR and print the 30 hungriest")


def _out_dir(config: pytest.Config) -> Path | None:
    value = config.getoption("--cpu-profile", default=None)
    return Path(value) if value else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    out = _out_dir(item.config)
    if out is None:
        yield
        return
    cpu0, wall0 = tree_cpu_seconds(), time.monotonic()
    yield
    cpu1, wall1 = tree_cpu_seconds(), time.monotonic()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"cpu-{worker}.jsonl", "a", encoding="utf-8") as sink:
        sink.write(json.dumps({"test": item.nodeid, "worker": worker,
                               "cpu_s": round(cpu1 - cpu0, 2),
                               "wall_s": round(wall1 - wall0, 2)}) + "\n")


def pytest_terminal_summary(terminalreporter: object, config: pytest.Config) -> None:
    out = _out_dir(config)
    if out is None or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rows = [json.loads(line) for path in sorted(out.glob("cpu-*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line]
    if not rows:
        return
    rows.sort(key=lambda row: -row["cpu_s"])
    write = terminalreporter.write_line  # type: ignore[attr-defined]
    write(f"== CPU seconds, 30 hungriest of {len(rows)} tests "
          f"(total {sum(r['cpu_s'] for r in rows):.0f} CPU s) ==")
    for row in rows[:30]:
        write(f"{row['cpu_s']:8.1f} cpu {row['wall_s']:8.1f} wall  {row['test']}")
