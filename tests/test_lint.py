"""The code's own checks run with the tests: ``make test`` (and so CI) fails when ruff or mypy
does, the pure core held to mypy's strict checks (pyproject.toml). The same commands as
``make lint``, without its setup step (``make lint-only``), in the venv running the tests.
Not in the fast tier: mypy over every package takes most of a minute of CPU when its cache is
cold, as on a clean checkout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.lint


def test_ruff_and_mypy_are_clean():
    venv = Path(sys.executable).parent.parent
    done = subprocess.run(["make", "-s", "--no-print-directory", "lint-only", f"VENV={venv}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"make lint-only failed:\n{done.stdout}\n{done.stderr}"


def test_a_type_error_in_the_core_fails_the_strict_check(tmp_path):
    """The strict override reaches the core: an untyped function there is an error, while
    the same function in an app module only passes (mypy's defaults)."""
    source = "def untyped(x):\n    return x\n"
    core, app = tmp_path / "reckon" / "money.py", tmp_path / "app" / "demo.py"
    for module in (core, app):
        module.parent.mkdir()
        (module.parent / "__init__.py").write_text("")
        module.write_text(source)
    config = ROOT / "pyproject.toml"
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config),
                           "--cache-dir", str(tmp_path / "cache"), "reckon", "app"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "reckon/money.py:1: error: Function is missing a type annotation" in done.stdout
    assert "app/demo.py" not in done.stdout, done.stdout


def test_the_code_and_docs_speak_one_vocabulary():
    """scripts/vocabulary_rename.py --check: no old name of the watermark bound, the allowed
    lateness or the bound what-if is left where the script would rename it (a new line that
    uses a first name fails here, not in a reader's head). Fast: it reads the files and
    rewrites nothing."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "vocabulary_rename.py"),
                           "--check"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"old names left (run the script, then review):\n{done.stdout}"
