"""Fast tier: the console script's contract."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from app.cli import build_parser, main

CONTRACT = ["generate", "stream", "compact", "replay", "audit", "check", "report", "sql", "explain",
            "bound-whatif-curve", "demo"]


def test_help_lists_every_contract_command():
    out = subprocess.run([sys.executable, "-m", "app.cli", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for command in CONTRACT:
        assert command in out


@pytest.mark.parametrize("command", CONTRACT)
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([command, "--help"])
    assert exc.value.code == 0
    assert "usage: reckon " + command in capsys.readouterr().out


# every command that reports something can say it as JSON (stream and demo report progress)
REPORTING = [c for c in (*CONTRACT, "breaks", "signoff", "verify-log", "bound-whatif", "vacuum")
             if c not in ("stream", "demo")]


@pytest.mark.parametrize("command", REPORTING)
def test_every_reporting_command_takes_json(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    assert "--json" in capsys.readouterr().out


def test_generate_json_is_the_manifest(tmp_path, capsys):
    import json

    assert main(["generate", "--out", str(tmp_path / "l"), "--events", "50", "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest == json.loads((tmp_path / "l" / "_manifest.json").read_text())
    assert manifest["valid_events"] == 50


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
    monkeypatch.setattr("app.cli._settings", lambda args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(["verify-log"])


def test_version_names_the_package(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("reckon 0.")


@pytest.mark.parametrize("argv", [
    ["breaks", "list"], ["verify-log"], ["signoff", "--run", "r", "--by", "b", "--note", "n"],
    ["check", "--date", "2026-01-01"], ["audit", "--date", "2026-01-01"],
    ["replay", "--date", "2026-01-01"], ["compact", "--date", "2026-01-01"],
    ["report", "--date", "2026-01-01", "--out", "r"], ["vacuum", "--dry-run"],
    ["sql", "SELECT 1"], ["explain", "--key", "k", "--window", "2026-01-01T00:00:00Z"],
    ["bound-whatif", "--date", "2026-01-01"]])
def test_a_mistyped_warehouse_is_an_error_and_is_never_created(argv, tmp_path, capsys):
    """Reading a warehouse that is not there says so, exit 2, and creates nothing (before, a
    mistyped path gave "no breaks", "OK: 0 entries", "passed" and a new empty directory)."""
    typo = tmp_path / "warehuose"
    code = main([*argv, "--warehouse", str(typo)])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(typo) in err and ("does not exist" in err or "no report database" in err)
    assert not typo.exists()


def test_a_directory_without_tables_is_no_warehouse(tmp_path, capsys):
    (tmp_path / "wh").mkdir()
    assert main(["sql", "--warehouse", str(tmp_path / "wh"), "SELECT 1"]) == 2
    assert "holds no reckon table" in capsys.readouterr().err


def test_a_reader_that_goes_away_ends_the_output_quietly(tmp_path):
    """`reckon breaks list --json | head -n 3`: head exits after three lines; reckon stops
    without a BrokenPipeError traceback (exit 141, as `yes | head` does)."""
    from reports.db.repository import ReportDB
    from tests.test_report_db import make_break, make_run

    wh = tmp_path / "wh"
    with ReportDB(f"sqlite:///{wh / 'reports' / 'reckon.db'}") as db:
        (wh / "reports").mkdir(parents=True, exist_ok=True)
        db.record_audit_run(make_run(), [])
        db.write_breaks("run-1", [make_break(key=f"k{i}", minute=i % 60) for i in range(3000)])
    reckon = str(__import__("pathlib").Path(sys.executable).with_name("reckon"))
    done = subprocess.run(["bash", "-o", "pipefail", "-c",
                           f"'{reckon}' breaks list --json --warehouse '{wh}' | head -n 3"],
                          capture_output=True, text=True, timeout=120)
    assert len(done.stdout.splitlines()) == 3
    assert done.stderr == "" and done.returncode == 141


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_flag_of_every_command_says_what_it_is(command):
    """`reckon X --help` explains each flag, and its usage line shows no internal field name:
    `--watermark-bound LATENESS` named the deprecated flag on the clear one."""
    parser = _subcommands()[command]
    silent = [a.option_strings or [a.dest] for a in parser._actions if a.help is None]
    assert silent == []
    usage = parser.format_help()
    for internal in ("LATENESS", "GRACE", "DEPRECATED_", "WINDOW_AT", "DATE_FROM", "DATE_TO",
                     "KAFKA_BOOTSTRAP", "EXPECTED_PARTITIONS", "WATERMARK_BOUND_BY"):
        assert internal not in usage, f"reckon {command} --help shows {internal}"


@pytest.mark.parametrize("text, why", [
    ("2026-11-31", "a day of the calendar (2026-11 has 30 days)"),
    ("2027-02-29", "a day of the calendar (2027-02 has 28 days)"),
    ("2026-13-01", "a day of the calendar (no month 13)"),
])
def test_a_date_written_right_that_is_no_day_says_why(text, why):
    """`--date 2026-11-31` is written YYYY-MM-DD: saying only "a date written YYYY-MM-DD"
    left the user looking at the format."""
    from reckon.errors import UsageError
    from reckon.timeutil import parse_date

    with pytest.raises(UsageError) as refused:
        parse_date(text, "--date")
    assert str(refused.value) == f"--date={text!r} is not valid: a date written YYYY-MM-DD, {why}"


def test_a_report_of_a_day_never_audited_is_refused_before_spark_starts(tmp_path, monkeypatch):
    """`reckon report --date D` of a day without an audit run said so only after Spark had
    started (72 s on a busy machine)."""
    from datetime import date

    from app import pipeline
    from app.settings import load_settings
    from reckon.errors import UsageError
    from reports.db.repository import ReportDB

    monkeypatch.setattr(pipeline, "_with_spec", lambda settings, step: settings)
    monkeypatch.setattr(pipeline, "_spark", lambda *a: pytest.fail("started Spark"))
    settings = load_settings(env={}, warehouse=str(tmp_path / "wh"))
    with ReportDB.from_settings(settings) as db:
        db.migrate()
    with pytest.raises(UsageError) as refused:
        pipeline.run_report(settings, date(2026, 1, 5))
    assert str(refused.value) == ("--date='2026-01-05' is not valid: no audit run of that day "
                                  "in the report database (run `reckon audit --date "
                                  "2026-01-05` first)")


@pytest.mark.parametrize("flags", [[], ["--per-source"]])
def test_bound_whatif_of_a_quiet_day_says_nothing_to_analyse_and_exits_0(flags, tmp_path,
                                                                    monkeypatch, capsys):
    """A day the stream archived no events of went through "date='2026-11-25' is not valid:
    a day with events in ..." (exit 2): the flag is --date, and a quiet day is no mistake."""
    import json
    from datetime import date

    import audits.bound_whatif
    import spark.session
    from app.commands.investigate import cmd_bound_whatif
    from app.settings import load_settings
    from reckon.errors import NoEventsError

    def no_events(spark, settings, day, **kwargs):
        raise NoEventsError(day, f"no events of {day.isoformat()} in the event log")

    monkeypatch.setattr(spark.session, "get_spark", lambda *a, **k: object())
    monkeypatch.setattr(audits.bound_whatif, "analyze_day", no_events)
    monkeypatch.setattr(audits.bound_whatif, "analyze_inputs", no_events)
    (tmp_path / "wh" / "event_log" / "_delta_log").mkdir(parents=True)
    settings = load_settings(env={}, warehouse=str(tmp_path / "wh"))
    flags = [*flags, "--engine", "spark"]  # DuckDB's quiet day: tests/test_bound_whatif_duck.py
    args = build_parser().parse_args(["bound-whatif", "--date", "2026-11-25", *flags])
    assert cmd_bound_whatif(args, settings) == 0
    assert capsys.readouterr().out == "no events on 2026-11-25: nothing to analyse\n"
    args = build_parser().parse_args(["bound-whatif", "--date", "2026-11-25", "--json", *flags])
    assert cmd_bound_whatif(args, settings) == 0
    assert json.loads(capsys.readouterr().out) == {
        "day": "2026-11-25", "events": 0, "note": "no events on 2026-11-25: nothing to analyse"}
    assert NoEventsError(date(2026, 11, 25), "x").day == date(2026, 11, 25)


def test_bound_whatif_of_a_malformed_date_is_still_a_mistake(tmp_path, monkeypatch):
    from app.commands.investigate import cmd_bound_whatif
    from app.settings import load_settings
    from reckon.errors import UsageError

    monkeypatch.setattr("spark.session.get_spark", lambda *a, **k: pytest.fail("started Spark"))
    settings = load_settings(env={}, warehouse=str(tmp_path / "wh"))
    args = build_parser().parse_args(["bound-whatif", "--date", "2026-11-31"])
    with pytest.raises(UsageError, match=r"--date='2026-11-31' is not valid"):
        cmd_bound_whatif(args, settings)


def test_every_handler_lives_in_reckon_commands_and_is_imported_when_run():
    """Each command's handler (``cmd_*``) is a thin wrapper in app/commands/ (the
    workbench's two are its own, workbench/cli.py), wired by name so `reckon --help` imports
    none of them: `reckon generate` and `reckon demo` were the last in app/cli.py and
    app/demo.py."""
    import ast
    import importlib
    from pathlib import Path

    from app.cli_parser import COMMANDS

    root = Path(__file__).resolve().parent.parent
    defined = {str(path.relative_to(root)): node.name
               for package in ("reckon", "storage", "spark", "audits", "reports", "workbench",
                               "app", "dags", "bench")
               for path in sorted((root / package).rglob("*.py"))
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.FunctionDef) and node.name.startswith("cmd_")}
    assert defined and all(path.startswith("app/commands/") or path == "workbench/cli.py"
                           for path in defined), defined
    build_parser()
    for name, handler in COMMANDS.items():
        [target] = [c.cell_contents for c in handler.__closure__ or ()
                    if isinstance(c.cell_contents, str)]
        module, _, function = target.partition(":")
        assert module.startswith("app.commands.") or module == "workbench.cli", name
        assert callable(getattr(importlib.import_module(module), function)), name


@pytest.mark.parametrize("old, new", [("lateness", "bound-whatif"),  # vocabulary: keep
                                      ("lateness-curve", "bound-whatif-curve")])  # vocabulary: keep
def test_the_what_ifs_first_names_still_run_and_warn_once(old, new, tmp_path, capsys,
                                                          monkeypatch):
    """The bound what-if's first names (reckon.vocabulary.DEPRECATED_COMMANDS) parse to the
    same command and handler as its names now, are left out of `reckon --help`, and say once
    that they are deprecated."""
    import app.settings

    monkeypatch.setattr(app.settings, "_WARNED", set())
    flags = (["--date", "2026-01-01", "--warehouse", str(tmp_path / "none")]
             if new == "bound-whatif" else
             ["--events", str(tmp_path / "none.csv"), "--window", "10s", "--bounds", "0s"])
    parser = build_parser()
    args = parser.parse_args([old, *flags])
    assert (args.command, args.deprecated_command) == (new, old)
    assert args.handler is parser.parse_args([new, *flags]).handler
    help_text = parser.format_help()
    assert new in help_text and f" {old} " not in help_text
    monkeypatch.delenv("RECKON_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert main([old, *flags]) == 2  # refused as `reckon {new}` refuses it
    err = capsys.readouterr().err.splitlines()
    warning = f"reckon: warning: reckon {old} is deprecated, use reckon {new}"
    assert err.count(warning) == 1, err
