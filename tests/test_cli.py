"""Fast tier: the console script's contract."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reckon.cli import build_parser, main

CONTRACT = ["generate", "stream", "replay", "audit", "check", "report", "sql", "explain",
            "lateness-curve", "demo"]


def test_help_lists_every_contract_command():
    out = subprocess.run([sys.executable, "-m", "reckon.cli", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for command in CONTRACT:
        assert command in out


@pytest.mark.parametrize("command", CONTRACT)
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([command, "--help"])
    assert exc.value.code == 0
    assert "usage: reckon " + command in capsys.readouterr().out


def test_generate_then_bad_argument_is_a_clear_error(tmp_path, capsys):
    assert main(["generate", "--out", str(tmp_path / "l"), "--events", "50"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["generate", "--out", str(tmp_path / "m"), "--partitions", "0"]) == 2
    assert "partitions=0 is not valid" in capsys.readouterr().err
