"""A sign-off is made on the figures an audit run saw: once a new replay of the day has
rewritten canonical totals the run read, signing that run is refused with what changed, and
the new audit's run can be signed (the real CLI, a streamed warehouse)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from reckon.timeutil import from_micros
from reports.db.repository import ReportDB
from tests.accounts import REVIEWER, reckon_as_reviewer
from tests.scenarios import BASE, ev
from tests.signers import enrol_reviewer
from tests.streamkit import write_landing

DAY = from_micros(BASE).date().isoformat()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _audit(capsys, wh: Path) -> str:
    code, out, err = _run(capsys, "audit", "--warehouse", str(wh), "--date", DAY, "--json")
    assert code == 0, err
    return str(json.loads(out)["run_id"])


def _signoff(wh: Path, run_id: str) -> tuple[int, str, str]:
    """Signed from a second OS account: the audit ran as this one (four-eyes)."""
    with ReportDB(f"sqlite:///{wh / 'reports' / 'reckon.db'}") as db:
        env = enrol_reviewer(db, wh.parent)
    done = reckon_as_reviewer(wh, "signoff", "--warehouse", str(wh), "--run", run_id,
                              "--note", "figures checked", env=env)
    return done.returncode, done.stdout, done.stderr


def test_a_run_whose_canonical_totals_were_replaced_cannot_be_signed(spark, capsys, tmp_path,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("RECKON_CONFIG", "RECKON_WAREHOUSE", "RECKON_REPORT_DB_URL"):
        monkeypatch.delenv(name, raising=False)
    landing, wh = tmp_path / "landing", tmp_path / "wh"
    write_landing(landing, [[ev(5, 5), ev(20, 20)], [ev(50, 50), ev(10, 60)]])
    code, _, err = _run(capsys, "stream", "--landing", str(landing), "--warehouse", str(wh),
                        "--available-now")
    assert code == 0, err
    assert _run(capsys, "replay", "--warehouse", str(wh), "--date", DAY)[0] == 0
    first = _audit(capsys, wh)

    write_landing(landing, [[ev(7, 90)]], start=2)  # a straggler of the day lands
    assert _run(capsys, "stream", "--landing", str(landing), "--warehouse", str(wh),
                "--available-now")[0] == 0
    assert _run(capsys, "replay", "--warehouse", str(wh), "--date", DAY)[0] == 0
    code, _, err = _signoff(wh, first)
    assert code == 2
    assert err.startswith(f"reckon signoff: error: run={first!r} is not valid: its inputs "
                          "changed since it was audited (canonical_totals was rewritten for "
                          f"{DAY} at version "), err
    assert err.count("\n") == 1 and f"audit {DAY} again" in err

    second = _audit(capsys, wh)
    code, out, err = _signoff(wh, second)
    assert code == 0, err
    assert f"signed: run {second} approved by {REVIEWER}" in out
