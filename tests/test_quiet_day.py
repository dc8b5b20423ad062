"""Spark tier: a day with no events is a day like any other. The first night of a warehouse
(the default lookback reaches the day before the stream started) and every quiet day go
through replay, audit, check and report from the CLI with exit 0 and a clear "no events",
never a traceback; the day's tables and records say the same."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from app.cli import main
from spark import tables as tb
from tests.scenarios import SCENARIOS
from tests.streamkit import stream_settings

QUIET = date(2025, 12, 31)  # the scenario's events are all on 2026-01-01


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory) -> Path:
    """The busy day 2026-01-01 after the stream, the quiet day before it untouched. The
    scenario's nine events go in as one micro-batch: the tests assert about the quiet day and
    the busy day's replayed windows, events and totals, which the stream's batch boundaries
    (lateness, revisions) do not change, and each extra micro-batch costs seconds of CPU."""
    from tests.test_replay_audit import run_batches

    wh = tmp_path_factory.mktemp("quiet") / "wh"
    one_batch = [[e for batch in SCENARIOS[0].batches for e in batch]]
    run_batches(spark, stream_settings(wh, window="10s", watermark_bound="3s"), one_batch)
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

    code, out, err = _run(capsys, "bound-whatif", "--warehouse", wh, "--date", QUIET.isoformat())
    assert (code, out, err) == (0, "no events on 2025-12-31: nothing to analyse\n", "")


def test_the_quiet_days_verdict_is_the_same_in_data_docs_the_report_and_the_gate(
        spark, warehouse, capsys, tmp_path):
    """Issue 56: the lookback's empty day showed its suites as Failed (red) in the Data Docs
    index, while its report and the quality gate said passed. A user runs the nightly steps
    of the quiet day, opens Data Docs, the report's CSV and HTML, and the gate runs: each
    says the same, suite by suite and for the day."""
    import csv

    from app.pipeline import quality_gate
    from app.settings import load_settings
    from reports.db.repository import ReportDB
    from tests.test_datadocs import validation_rows

    wh, day = str(warehouse), QUIET.isoformat()
    for step in ("replay", "audit", "check"):
        code, _, err = _run(capsys, step, "--warehouse", wh, "--date", day)
        assert (code, "Traceback" in err) == (0, False), err
    settings = load_settings(env={}, warehouse=wh)
    with ReportDB.from_settings(settings) as db:
        run = db.current_check_run(QUIET)
    assert run is not None

    # Data Docs: this run's row of every suite is green (it was red: "Failed")
    rows = [r for r in validation_rows(warehouse / "reports" / "data_docs" / "index.html")
            if r["run"] == run.run_id]
    assert len(rows) == 7 and {r["status"] for r in rows} == {"Success"}, rows
    # as the recorded verdicts say, suite by suite
    assert run.verdict == "passed (no events on the day)"
    suites = run.suite_verdicts
    assert suites == {r["suite"]: "passed (no events)" for r in rows}, suites

    # the report: quality.csv and the HTML's quality section say the same words
    out_dir = tmp_path / "report"
    code, _, err = _run(capsys, "report", "--warehouse", wh, "--date", day, "--out",
                        str(out_dir))
    assert code == 0, err
    with (out_dir / "quality.csv").open(encoding="utf-8") as f:
        figures = dict(csv.reader(f))
    assert figures["verdict"] == "passed (no events on the day)"
    assert {k.removeprefix("suite "): v for k, v in figures.items()
            if k.startswith("suite ")} == suites
    html = (out_dir / "report.html").read_text(encoding="utf-8")
    assert f"Check run {run.run_id}: passed (no events on the day)" in html
    assert html.count("passed (no events)</td>") == 7

    # the gate: passes the day, with the same words
    assert quality_gate(settings, [QUIET]).summary["verdicts"] == {
        day: "passed (no events on the day)"}


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
