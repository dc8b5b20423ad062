"""Spark tier: a day with no events is a day like any other. The first night of a warehouse
(the default lookback reaches the day before the stream started) and every quiet day go
through replay, audit, check and report from the CLI with exit 0 and a clear "no events",
never a traceback; the day's tables and records say the same."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from reckon.cli import main
from spark import tables as tb
from tests.scenarios import SCENARIOS
from tests.streamkit import stream_settings

QUIET = date(2025, 12, 31)  # the scenario's events are all on 2026-01-01


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory) -> Path:
    from tests.test_replay_audit import run_batches

    wh = tmp_path_factory.mktemp("quiet") / "wh"
    run_batches(spark, stream_settings(wh, window="10s", lateness="3s"), SCENARIOS[0].batches)
    return wh


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_nightly_step_says_no_events_and_succeeds(spark, warehouse, capsys, tmp_path):
    wh = str(warehouse)
    code, out, err = _run(capsys, "replay", "--warehouse", wh, "--date", QUIET.isoformat())
    assert (code, "Traceback" in err) == (0, False), err
    assert "2025-12-31: no events; the day's canonical totals are written empty" in out
    runs = tb.read_table(spark, warehouse, tb.REPLAY_RUNS).filter(f"window_date = '{QUIET}'")
    [run] = runs.collect()
    assert (run.rows_read, run.valid_events, run.windows, run.total_amounts) == (0, 0, 0, {})

    code, out, err = _run(capsys, "audit", "--warehouse", wh, "--date", QUIET.isoformat())
    assert (code, "Traceback" in err) == (0, False), err
    assert "no events: neither the stream nor the replay has a total for the day" in out
    assert "unexplained breaks: 0" in out

    code, out, err = _run(capsys, "check", "--warehouse", wh, "--date", QUIET.isoformat())
    assert (code, "Traceback" in err) == (0, False), err
    assert "passed (no events on the day)" in out

    code, out, err = _run(capsys, "report", "--warehouse", wh, "--date", QUIET.isoformat(),
                          "--out", str(tmp_path / "report"), "--json")
    assert (code, "Traceback" in err) == (0, False), err
    written = json.loads(out)
    assert (written["day"], written["html_path"]) == (
        QUIET.isoformat(), str(tmp_path / "report" / "report.html"))
    html = (tmp_path / "report" / "report.html").read_text()
    assert 'id="no-events"' in html and "No events</strong> on this day" in html
    assert "No unexplained breaks" in html
    assert "No per-batch curve: the stream archived no events of 2025-12-31." in html
    assert "is not valid" not in html and "up to the one that closed the day" not in html

    code, out, err = _run(capsys, "lateness", "--warehouse", wh, "--date", QUIET.isoformat())
    assert (code, out, err) == (0, "no events on 2025-12-31: nothing to analyse\n", "")


def test_the_first_night_with_the_default_lookback_replays_both_days(spark, warehouse,
                                                                      capsys):
    """lookback_days 1 (the default): the first night processes the day before the stream
    started too. Replaying both days in one command works; the quiet one is simply empty."""
    code, out, err = _run(capsys, "replay", "--warehouse", str(warehouse), "--from",
                          "2025-12-31", "--to", "2026-01-01")
    assert (code, "Traceback" in err) == (0, False), err
    lines = out.splitlines()
    assert lines[0].startswith("2025-12-31: no events")
    assert lines[1].startswith("2026-01-01: 3 windows, 9 events, totals USD 9.00")
