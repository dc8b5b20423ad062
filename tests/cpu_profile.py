"""CPU seconds per test, the JVMs and subprocesses it started included (``--cpu-profile DIR``).

Why: on a shared two-core machine a test's wall time says more about its neighbours than about
the test; the CPU its processes burn does not. Each worker (or the lone process) moves itself
into a cgroup of its own where it can (cgroup v1 cpuacct, or v2), so every process a test starts
is counted, the JVMs that outlive their launcher included; elsewhere it reads its live process
tree from /proc (which misses processes reparented away from it). It writes one JSON line per
test to ``DIR/cpu-<worker>.jsonl``; the controller prints the 30 hungriest tests and the total.

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


class _Cgroup:
    """A cgroup holding this process and everything it starts; None where none can be made."""

    def __init__(self, usage: Path, parent_procs: Path) -> None:
        self.usage, self.parent_procs = usage, parent_procs

    @classmethod
    def join(cls) -> _Cgroup | None:
        for root, usage_name in ((Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage"),
                                 (Path("/sys/fs/cgroup"), "cpu.stat")):
            folder = root / f"pytest-cpu-{os.getpid()}"
            try:
                if not (root / "cgroup.procs").is_file():
                    continue
                for stale in root.glob("pytest-cpu-*"):  # earlier sessions' empty folders
                    if not (stale / "cgroup.procs").read_text().strip():
                        stale.rmdir()
                folder.mkdir(exist_ok=True)
                (folder / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                continue
            return cls(folder / usage_name, root / "cgroup.procs")
        return None

    def seconds(self) -> float:
        text = self.usage.read_text()
        if self.usage.name == "cpu.stat":  # v2: usage_usec on the first line
            return int(text.split()[1]) / 1e6
        return int(text) / 1e9

    def leave(self) -> None:
        try:
            self.parent_procs.write_text(str(os.getpid()))
            self.usage.parent.rmdir()
        except OSError:
            pass  # a process it started outlives the session: the folder stays


_METER: dict[str, _Cgroup | None] = {}
#: the speed probe's CPU seconds at the controller's start (``pytest_configure``)
_PROBE: dict[str, float] = {}


def speed_probe() -> float:
    """CPU seconds this process spends on a fixed piece of work (integer arithmetic, JSON and
    hashing, about half a second on a quiet 2-core machine). Why: on a shared virtual machine
    the same tests take up to twice the CPU seconds from one day to the next, with nothing in
    the code changed (other guests share the host's cores and caches). The suite prints the
    probe at its start and end beside its total, so two runs' totals can be compared per unit
    of the machine's speed.

    >>> speed_probe() > 0
    True
    """
    import hashlib

    start = time.process_time()
    total = 0
    for i in range(2_000_000):
        total = (total * 31 + i) % 1_000_003
    doc = {"rows": [{"id": i, "amount": f"{i}.25", "tags": ["a", "b"]} for i in range(2_000)]}
    for _ in range(60):
        doc = json.loads(json.dumps(doc))
    digest = hashlib.sha256()
    block = bytes(range(256)) * 4096
    for _ in range(256):
        digest.update(block)
    return time.process_time() - start


def _cpu_now() -> float:
    cgroup = _METER.get("cgroup")
    return cgroup.seconds() if cgroup is not None else tree_cpu_seconds()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-profile", metavar="DIR", default=None,
                     help="write each test's CPU seconds (its JVMs and subprocesses included) "
                          "to DIR and print the 30 hungriest")


def _out_dir(config: pytest.Config) -> Path | None:
    value = config.getoption("--cpu-profile", default=None)
    return Path(value) if value else None


def pytest_configure(config: pytest.Config) -> None:
    if _out_dir(config) is not None and "cgroup" not in _METER:
        _METER["cgroup"] = _Cgroup.join()
    if _out_dir(config) is not None and not os.environ.get("PYTEST_XDIST_WORKER"):
        _PROBE["start"] = speed_probe()


def pytest_unconfigure(config: pytest.Config) -> None:
    cgroup = _METER.pop("cgroup", None)
    if cgroup is not None:
        cgroup.leave()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    out = _out_dir(item.config)
    if out is None:
        yield
        return
    cpu0, wall0 = _cpu_now(), time.monotonic()
    yield
    cpu1, wall1 = _cpu_now(), time.monotonic()
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
    if "start" in _PROBE:  # the same fixed work: a slower machine takes longer on both
        write(f"   machine speed probe (tests/cpu_profile.py speed_probe): "
              f"{_PROBE['start']:.2f} CPU s at the start, {speed_probe():.2f} at the end")
    for row in rows[:30]:
        write(f"{row['cpu_s']:8.1f} cpu {row['wall_s']:8.1f} wall  {row['test']}")
