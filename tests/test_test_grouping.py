"""`make test`'s two workers share each module fixture: the tests of a module that uses one run
on one worker (``--dist loadgroup`` and tests/conftest.py's groups), so an expensive streamed
warehouse is built once, not once a worker. pytest 9.2 with pytest-xdist 3.8 silently stopped
grouping (xdist issue 1386) and every such fixture was built twice; this runs a real
two-worker session on a probe module and fails if that happens again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from reckon.config import PROJECT_ROOT

PROBE = '''
import os
import pytest

@pytest.fixture(scope="module")
def shared():
    return os.getpid()

@pytest.mark.parametrize("i", range(4))
def test_uses_the_module_fixture(shared, i):
    with open(os.environ["PROBE_OUT"], "a") as out:
        out.write(f"{os.environ['PYTEST_XDIST_WORKER']} {shared}\\n")

@pytest.mark.parametrize("i", range(4))
def test_alone(i):
    pass
'''


def test_the_tests_of_a_module_fixture_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    out = tmp_path / "seen.txt"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "-n", "2", "--dist", "loadgroup", "-o", "addopts=", "--rootdir", str(tmp_path),
         # its own temporary root: a session on pytest's default one makes
         # /tmp/pytest-of-<user> 0700 again, which a test of the outer session that runs a
         # second OS account through it (tests/test_signoff_trust.py) depends on
         "--basetemp", str(tmp_path / "inner"),
         str(tmp_path / "test_probe.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT_ROOT),
             "PROBE_OUT": str(out)})
    assert run.returncode == 0, run.stdout + run.stderr
    seen = out.read_text().split("\n")[:-1]
    assert len(seen) == 4 and len(set(seen)) == 1, seen  # one worker, one fixture value
