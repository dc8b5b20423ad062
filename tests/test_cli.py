"""Fast tier: the console script's contract."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reckon.cli import build_parser, main

CONTRACT = ["generate", "stream", "compact", "replay", "audit", "check", "report", "sql", "explain",
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


@pytest.mark.parametrize("text, interval", [("5s", "5000 milliseconds"),
                                            ("500ms", "500 milliseconds"),
                                            ("1m", "60000 milliseconds")])
def test_stream_trigger_takes_reckon_durations(text, interval):
    """`reckon stream --trigger 5s`: Spark's processingTime rejects '5s'; the stream passes it
    the interval in milliseconds."""
    from spark.stream import processing_time

    assert processing_time(text) == interval


@pytest.mark.parametrize("text", ["5", "five seconds", "0s", "-1s"])
def test_stream_trigger_rejects_what_is_not_a_positive_duration(text):
    from reckon.errors import UsageError
    from spark.stream import processing_time

    with pytest.raises(UsageError, match="--trigger"):
        processing_time(text)


def test_nightly_commands_take_one_day_or_an_increasing_range():
    from datetime import date

    from reckon.errors import UsageError
    from reckon.timeutil import days_from_flags

    assert days_from_flags("2026-01-02", None, None) == [date(2026, 1, 2)]
    assert days_from_flags(None, "2025-12-31", "2026-01-02") == [
        date(2025, 12, 31), date(2026, 1, 1), date(2026, 1, 2)]
    for flags, message in (((None, None, None), "give --date"),
                           (("2026-01-02", "2026-01-01", None), "not both"),
                           ((None, "2026-01-02", "2026-01-01"), "before --from"),
                           (("2026-13-01", None, None), "--date")):
        with pytest.raises(UsageError, match=message):
            days_from_flags(*flags)


def test_a_report_db_url_that_is_not_a_url_is_a_config_error(monkeypatch, capsys):
    monkeypatch.setenv("RECKON_REPORT_DB_URL", "reckon.db")
    assert main(["verify-log"]) == 2
    err = capsys.readouterr().err
    assert "report_db_url='reckon.db' is not a database URL" in err
    assert "Traceback" not in err


def test_an_unreachable_report_db_is_one_line_that_says_what_to_check(monkeypatch, capsys):
    # port 1 on loopback: nothing listens there, so the connection is refused at once
    monkeypatch.setenv("RECKON_REPORT_DB_URL", "postgresql+psycopg://u:secret@127.0.0.1:1/x")
    for argv in (["verify-log"], ["breaks", "list", "--date", "2026-01-01"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert f"reckon {argv[0]}: error: cannot use the report database" in err
        assert "127.0.0.1:1" in err and "RECKON_REPORT_DB_URL" in err
        assert "secret" not in err and "Traceback" not in err


def test_other_exceptions_keep_their_traceback(monkeypatch):
    # only the report database's connection failures become one line; a bug is not hidden
    monkeypatch.setattr("reckon.cli._settings", lambda args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(["verify-log"])
