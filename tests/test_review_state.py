"""One review state, computed in one place (issue 56): reckon.signoff.review_state against a
plain reference, then a day reviewed through the CLI (as two OS accounts) and the workbench
(as two logins), where after every step the workbench's day page and days list, the approval
record in the report folder, `reckon breaks list` / `signoff --json` / `verify-log` and the
sign-off export say the same words. Fast tier: no Spark (the report is rendered from a context
made by hand, through the same publishing step `reckon report` ends with)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from html import unescape
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main
from reckon.errors import UsageError
from reckon.signoff import (
    DECISIONS,
    OPEN,
    REJECTED,
    SIGNED_OFF,
    SIGNING_DECISIONS,
    ReviewState,
    review_state,
    review_words,
)
from reports.context import Headline, review_fields
from reports.db.repository import ReportDB
from reports.render import publish_report
from reports.review_state import review_states
from storage.sharing import os_principal
from tests.accounts import REVIEWER, reckon_as_reviewer
from tests.signers import append, enrol, enrol_reviewer, give_key, workbench_trust
from tests.test_report_render import _ctx
from workbench.app import create_app
from workbench.auth import add_user
from workbench.sample import sample_day

DAY = date(2026, 1, 1)
RUN = "nightly-2026-01-01"
PASSWORD = "correct horse battery staple"

# ----------------------------------------------------------------------------- the rule


def reference(entries: list[tuple[str, str]], reconciler: str, required: int) -> ReviewState:
    """The rule read literally, one reviewer at a time: find their last decision on the run
    (scanning back); 'reopened' means none. Names are plain lower-case ASCII here, so the same
    person is the same string."""
    people: list[str] = []
    for by, _ in entries:
        if by not in people and by != reconciler:
            people.append(by)
    last: dict[str, tuple[int, str]] = {}
    for person in people:
        for i in range(len(entries) - 1, -1, -1):
            by, decision = entries[i]
            if by == person and decision in DECISIONS:
                if decision != "reopened":
                    last[person] = (i, decision)
                break
    ordered = sorted((i, person, decision) for person, (i, decision) in last.items())
    approvers = tuple(p for _, p, d in ordered if d in SIGNING_DECISIONS)
    rejecters = tuple(p for _, p, d in ordered if d == "rejected")
    if rejecters:
        state = REJECTED
    elif len(approvers) >= required:
        state = SIGNED_OFF
    else:
        state = OPEN
    counted = sum(1 for by, d in entries if d in DECISIONS and by != reconciler)
    return ReviewState(state, approvers, rejecters, required, counted)


NAMES = st.sampled_from(["alice", "bob", "carol", "dave"])
ENTRY = st.tuples(NAMES, st.sampled_from([*DECISIONS, "break-comment", "break-accepted"]))


@settings(max_examples=400, deadline=None)
@given(entries=st.lists(ENTRY, max_size=14), required=st.integers(1, 4))
def test_the_review_state_is_the_references(entries, required) -> None:
    assert review_state(entries, reconciler="alice", required=required) == reference(
        entries, "alice", required)


@settings(max_examples=200, deadline=None)
@given(entries=st.lists(ENTRY, max_size=12), who=NAMES.filter(lambda n: n != "alice"))
def test_approving_again_changes_nothing_and_reopening_withdraws(entries, who) -> None:
    once = [*entries, (who, "approved")]
    state = review_state(once, reconciler="alice", required=2)
    again = review_state([*once, (who, "approved")], reconciler="alice", required=2)
    assert dataclasses.replace(again, decisions=state.decisions) == state
    reopened = review_state([*once, (who, "reopened")], reconciler="alice", required=2)
    assert who not in reopened.approvers + reopened.rejecters


def test_the_words_every_view_shows() -> None:
    def words(*entries: tuple[str, str], required: int = 2) -> str:
        return review_words(review_state(entries, reconciler="alice", required=required))

    assert words() == "Awaiting sign-off: 0 of 2 approvals"
    assert words(("bob", "approved"), ("BOB", "approved")) == (
        "Awaiting sign-off: 1 of 2 approvals (BOB)")  # one person, named as they last signed
    assert words(("bob", "approved"), ("carol", "accepted")) == (
        "Signed off: 2 of 2 approvals (bob, carol)")
    assert words(("bob", "approved"), ("carol", "approved"), ("bob", "approved"),
                 ("bob", "rejected")) == "Rejected by bob: 1 of 2 approvals (carol)"
    assert words(("bob", "rejected"), ("bob", "reopened")) == "Awaiting sign-off: 0 of 2 approvals"
    # the reconciler's own approval never counts (the log refuses it; the rule ignores it too)
    assert words(("ALICE", "approved"), required=1) == "Awaiting sign-off: 0 of 1 approvals"
    with pytest.raises(UsageError, match=r"^required_approvers=0 is not valid"):
        review_state([], reconciler="alice", required=0)


# ----------------------------------------------------------------------------- every view


@pytest.fixture()
def day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, ReportDB]]:
    """A warehouse whose reckon.toml asks two approvers, one audited day (reconciled by alice)
    with its report rendered into reports/<day>/ (no Spark), and two workbench reviewers."""
    for name in ("RECKON_CONFIG", "RECKON_REPORT_DB_URL", "RECKON_WAREHOUSE",
                 "RECKON_REQUIRED_APPROVERS"):
        monkeypatch.delenv(name, raising=False)
    wh = tmp_path / "wh"
    wh.mkdir()
    (wh / "reckon.toml").write_text(f'warehouse = "{wh}"\nrequired_approvers = 2\n')
    monkeypatch.chdir(wh)
    with ReportDB(f"sqlite:///{wh / 'reports' / 'reckon.db'}") as db:
        (wh / "reports").mkdir()
        sample_day(db, DAY, breaks=12, reconciler="alice")
        publish_report(db, _report(db, RUN), wh / "reports" / DAY.isoformat(), 2)
        for name in ("bob", "carol"):
            add_user(db, name, "reviewer", PASSWORD)
            enrol(db, name)
        give_key(tmp_path / "home", monkeypatch, db, os_principal())
        yield wh, db


def _report(db: ReportDB, run_id: str):
    """The context `reckon report` would build for ``run_id``: its figures made by hand, what
    it says of the review read from the report database as build_context reads it."""
    run = db.get_audit_run(run_id)
    assert run is not None
    return dataclasses.replace(_ctx(), day=DAY, audit_run_id=run_id, reconciler="alice",
                               **review_fields(db, run, 2))


def _login(app, name: str) -> TestClient:
    client = TestClient(app)
    token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
    client.post("/login", data={"name": name, "password": PASSWORD, "csrf": token})
    return client


def _sign_in_workbench(client: TestClient, run_id: str, decision: str) -> None:
    page = client.get(f"/day/{DAY}").text
    token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    done = client.post("/signoff", data={"csrf": token, "run": run_id, "decision": decision,
                                         "note": f"{decision} in the workbench"})
    assert done.status_code == 200 and 'id="error"' not in done.text, done.text


def _sign_in_cli(wh: Path, run_id: str, decision: str, capsys, *, as_reviewer: bool) -> str:
    """`reckon signoff --json` as this account or the reviewer account: the state it says."""
    argv = ["signoff", "--run", run_id, "--decision", decision, "--note", "checked", "--json"]
    if as_reviewer:
        with ReportDB(f"sqlite:///{wh / 'reports' / 'reckon.db'}") as db:
            env = enrol_reviewer(db, wh.parent)
        done = reckon_as_reviewer(wh, *argv, env=env)
        assert done.returncode == 0, done.stderr
        out = done.stdout
    else:
        assert main(argv) == 0
        out = capsys.readouterr().out
    return json.loads(out)["state_words"]


def _shown(wh: Path, client: TestClient, run_id: str, capsys) -> dict[str, str]:
    """The state of ``run_id`` as each view shows it."""
    text = client.get(f"/day/{DAY}").text
    state = re.search(r'<p class="[a-z]+" id="state">([^<]*)\.</p>', text)
    listed = re.search(r'<span class="[a-z]+ state">([^<]*)</span>', client.get("/").text)
    record = json.loads((wh / "reports" / DAY.isoformat() / "approval.json").read_text())
    page = (wh / "reports" / DAY.isoformat() / "approval.html").read_text()
    in_page = re.search(r'<p id="state" class="[a-z-]+"><b>([^<]*)\.</b></p>', page)
    assert main(["breaks", "list", "--date", DAY.isoformat()]) == 0
    table = capsys.readouterr().out.splitlines()[-1]
    assert main(["breaks", "list", "--date", DAY.isoformat(), "--json"]) == 0
    listed_json = {b["run_state"] for b in json.loads(capsys.readouterr().out)}
    assert main(["verify-log"]) == 0
    verified = [line for line in capsys.readouterr().out.splitlines()
                if line.startswith(f"  run {run_id}: ")]
    export = client.get("/log/export.json").json()
    assert state and listed and in_page and len(listed_json) == 1, text
    assert record["run_id"] == run_id
    return {"day page": unescape(state.group(1)), "days list": unescape(listed.group(1)),
            "approval.json": record["words"], "approval.html": unescape(in_page.group(1)),
            "breaks list": table.removeprefix(f"run {run_id}: "),
            "breaks list --json": listed_json.pop(),
            "verify-log": verified[0].removeprefix(f"  run {run_id}: ") if verified else "-",
            "export": export["runs"].get(run_id, {}).get("words", "-")}


def test_every_view_says_the_same_words_after_every_step(day, capsys) -> None:
    wh, db = day
    me = os_principal()
    app = create_app(db, trust=workbench_trust(db), secret=b"s" * 32, warehouse=wh, required_approvers=2)
    bob, carol = _login(app, "bob"), _login(app, "carol")
    report = wh / "reports" / DAY.isoformat() / "report.html"
    signed_bytes = report.read_bytes()

    def agree(expected: str, run_id: str = RUN) -> None:
        shown = _shown(wh, bob, run_id, capsys)
        if expected.startswith("Awaiting sign-off: 0 of"):  # no decision on the run: the
            # log has nothing on it but the JSON export's own record (filed under the run of
            # the log's last entry, issue 61), which the new run of a re-audit does not get
            assert {shown.pop("verify-log"), shown.pop("export")} <= {"-", expected}
        assert set(shown.values()) == {expected}, shown

    agree("Awaiting sign-off: 0 of 2 approvals")
    said = _sign_in_cli(wh, RUN, "approved", capsys, as_reviewer=False)
    assert said == f"Awaiting sign-off: 1 of 2 approvals ({me})"
    agree(said)
    said = _sign_in_cli(wh, RUN, "approved", capsys, as_reviewer=False)  # again: one approval
    assert said == f"Awaiting sign-off: 1 of 2 approvals ({me})"
    agree(said)
    _sign_in_workbench(bob, RUN, "approved")  # a second approver
    agree(f"Signed off: 2 of 2 approvals ({me}, bob)")
    _sign_in_workbench(carol, RUN, "rejected")
    agree(f"Rejected by carol: 2 of 2 approvals ({me}, bob)")
    _sign_in_workbench(carol, RUN, "reopened")
    agree(f"Signed off: 2 of 2 approvals ({me}, bob)")
    said = _sign_in_cli(wh, RUN, "rejected", capsys, as_reviewer=True)
    assert said == f"Rejected by {REVIEWER}: 2 of 2 approvals ({me}, bob)"
    agree(said)
    said = _sign_in_cli(wh, RUN, "reopened", capsys, as_reviewer=True)
    agree(f"Signed off: 2 of 2 approvals ({me}, bob)")
    assert report.read_bytes() == signed_bytes  # signing never touches the report's bytes
    record = json.loads(report.with_name("approval.json").read_text())
    assert record["report_sha256"] == hashlib.sha256(signed_bytes).hexdigest()
    assert [d["decision"] for d in record["decisions"]] == [
        "approved", "approved", "approved", "rejected", "reopened", "rejected", "reopened"]

    # a re-audit: the new run is current and unsigned, the old one keeps its state
    again = f"{RUN}-again"
    sample_day(db, DAY, breaks=12, reconciler="alice", run_id=again,
               now=datetime.now(UTC) + timedelta(hours=1))
    page = bob.get(f"/day/{DAY}").text
    assert (f"A later audit replaced run <code>{RUN}</code> (Signed off: 2 of 2 approvals "
            f"({me}, bob)): a sign-off does not carry over") in page
    assert review_words(review_states(db, [RUN], 2)[RUN]) == (
        f"Signed off: 2 of 2 approvals ({me}, bob)")
    publish_report(db, _report(db, again), wh / "reports" / DAY.isoformat(), 2)  # `reckon report`
    agree("Awaiting sign-off: 0 of 2 approvals", again)
    kept = wh / "reports" / DAY.isoformat() / "signed" / RUN
    assert (kept / "report.html").read_bytes() == signed_bytes
    assert json.loads((kept / "approval.json").read_text())["words"] == (
        f"Signed off: 2 of 2 approvals ({me}, bob)")
    new_html = report.read_text()
    assert "Awaiting sign-off: 0 of 2 approvals" in unescape(new_html)
    assert f"Run {RUN} of this day (Signed off: 2 of 2 approvals ({me}, bob)) was replaced" \
        in unescape(new_html)
    _sign_in_workbench(bob, again, "approved")
    agree("Awaiting sign-off: 1 of 2 approvals (bob)", again)
    assert review_words(review_states(db, [RUN], 2)[RUN]) == (
        f"Signed off: 2 of 2 approvals ({me}, bob)")  # the old run's state stays as it was


def test_the_export_writes_each_amount_in_its_currencys_minor_units(day) -> None:
    wh, db = day
    append(db, RUN, "bob", "approved", "ties out", required_approvers=2)
    app = create_app(db, trust=workbench_trust(db), secret=b"s" * 32, warehouse=wh, required_approvers=2)
    export = _login(app, "bob").get("/log/export.json").json()
    signed = export["entries"][0]["signed"]["currencies"]
    stored = json.loads(export["entries"][0]["signed_text"])["currencies"]
    assert set(signed) >= {"EUR", "JPY"}
    for code, places in (("EUR", 2), ("JPY", 0)):
        for name, text in signed[code].items():
            if name.endswith("_total"):
                assert len(text.partition(".")[2]) == places, (code, name, text)
                assert Decimal(text) == Decimal(stored[code][name])  # the same amount, exact
    assert export["runs"][RUN]["words"] == "Awaiting sign-off: 1 of 2 approvals (bob)"


_SIGN_WITHOUT_SPARK = """
import sys, time
from app.cli import main
started = time.perf_counter()
code = main(["signoff", "--run", sys.argv[1], "--note", "ties out"])
took = time.perf_counter() - started
spark = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j", "delta"))
print(code, spark, f"{took:.3f}")
"""


def test_a_sign_off_writes_the_approval_record_at_once_without_spark(day) -> None:
    """`reckon signoff` imports nothing of Spark (its check of the run's inputs reads the Delta
    commit files as files), and the record is there when it returns."""
    import subprocess
    import sys

    wh, _db = day
    record = wh / "reports" / DAY.isoformat() / "approval.json"
    done = subprocess.run([sys.executable, "-c", _SIGN_WITHOUT_SPARK, RUN], cwd=wh,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    code, rest = done.stdout.splitlines()[-1].split(" ", 1)
    spark, took = rest.rsplit(" ", 1)
    assert code == "0" and spark == "[]", done.stdout
    assert float(took) < 5.0, took  # the whole command, imports included (about 0.3 s idle)
    assert json.loads(record.read_text())["words"] == (
        f"Awaiting sign-off: 1 of 2 approvals ({os_principal()})")


def test_a_record_that_cannot_be_written_is_one_line_and_the_decision_stands(day, capsys):
    wh, db = day
    record = wh / "reports" / DAY.isoformat() / "approval.json"
    record.unlink()
    record.mkdir()  # something in the way: the record cannot be replaced
    assert main(["signoff", "--run", RUN, "--note", "ties out"]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith(
        f"reckon: the decision on run {RUN} is recorded, but its approval record in "), err
    assert "Traceback" not in err and "approval record: not written" in out
    assert review_states(db, [RUN], 2)[RUN].approvals == 1


def test_two_decisions_at_once_leave_the_record_with_both(day, monkeypatch) -> None:
    """bob's decision commits and his record is computed; carol's decision commits and writes
    its record before bob's is written. bob's record, written last, still has both: each
    record is read again from the log under the folder's lock."""
    import threading

    import reports.approval_record as records

    wh, db = day
    real, bob_read, carol_done = records.approval_record, threading.Event(), threading.Event()

    def slow(*args):
        found = real(*args)
        if threading.current_thread().name == "bob" and not bob_read.is_set():
            bob_read.set()
            assert carol_done.wait(30)
        return found

    monkeypatch.setattr(records, "approval_record", slow)
    bob = threading.Thread(name="bob", target=lambda: append(
        db, RUN, "bob", "approved", "bob checked", required_approvers=2))
    bob.start()
    assert bob_read.wait(30)
    append(db, RUN, "carol", "approved", "carol checked", required_approvers=2)
    carol_done.set()
    bob.join(30)
    record = json.loads((wh / "reports" / DAY.isoformat() / "approval.json").read_text())
    assert record["words"] == "Signed off: 2 of 2 approvals (bob, carol)", record


def test_what_the_audit_says_of_the_run_it_replaced(day) -> None:
    """`reckon audit` and the nightly DAG name a replaced run's state in the same words."""
    from app.pipeline import replaced_run_state
    from app.settings import load_settings

    wh, db = day
    append(db, RUN, "bob", "approved", "ties out", required_approvers=2)
    append(db, RUN, "carol", "rejected", "JPY is short", required_approvers=2)
    settings = load_settings(env={}, warehouse=str(wh), required_approvers=2)
    assert replaced_run_state(settings, RUN) == "Rejected by carol: 1 of 2 approvals (bob)"
    assert replaced_run_state(settings, "no-such-run") == "unknown run"


QUIET = date(2026, 1, 2)


def _quiet_words(wh: Path, client: TestClient, run_id: str, capsys) -> dict[str, str]:
    """The state of a quiet day's run as each view that lists it shows it."""
    day_page = client.get(f"/day/{QUIET}").text
    state = re.search(r'<p class="[a-z]+" id="state">([^<]*)\.</p>', day_page)
    row = client.get("/").text.split(f"<code>{run_id}</code>", 1)[1]
    listed = re.search(r'<span class="[a-z]+ state">([^<]*)</span>', row)
    folder = wh / "reports" / QUIET.isoformat()
    in_record = re.search(r'<p id="state" class="[a-z-]+"><b>([^<]*)\.</b></p>',
                          (folder / "approval.html").read_text())
    in_report = re.search(r"<t[dh][^>]*>State when rendered</t[dh]>\s*<td[^>]*>([^<]*)</td>",
                          (folder / "report.html").read_text())
    assert main(["breaks", "list", "--date", QUIET.isoformat()]) == 0
    listed_cli = capsys.readouterr().out.splitlines()
    assert state and listed and in_record and in_report, (day_page, listed_cli)
    assert listed_cli[0] == f"no breaks for {QUIET} in the current audit runs"
    return {"day page": unescape(state.group(1)), "days list": unescape(listed.group(1)),
            "approval.json": json.loads((folder / "approval.json").read_text())["words"],
            "approval.html": unescape(in_record.group(1)),
            "report's approval block": unescape(in_report.group(1)),
            "breaks list": listed_cli[-1].removeprefix(f"run {run_id}: ")}


def test_a_day_without_events_has_nothing_to_sign_in_every_view(day, capsys) -> None:
    """A quiet day (its run reconciled no rows) was listed "Awaiting sign-off: 0 of 2" like a
    day of breaks, asking reviewers to sign nothing."""
    wh, db = day
    quiet = sample_day(db, QUIET, breaks=0, reconciler="alice")
    ctx = dataclasses.replace(_report(db, quiet), day=QUIET,
                              headline=Headline(0, 0, None, ()))
    publish_report(db, ctx, wh / "reports" / QUIET.isoformat(), 2)
    bob = _login(create_app(db, trust=workbench_trust(db), secret=b"s" * 32, warehouse=wh, required_approvers=2), "bob")
    nothing = "No events: nothing to sign"
    assert set(_quiet_words(wh, bob, quiet, capsys).values()) == {nothing}
    assert 'id="nothing-to-sign"' in bob.get(f"/day/{QUIET}").text
    assert main(["breaks", "list", "--date", QUIET.isoformat(), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # no break, so no run_state to carry
    # a reviewer may still decide; withdrawing it leaves nothing to sign again
    said = _sign_in_cli(wh, quiet, "approved", capsys, as_reviewer=False)
    assert said == f"Awaiting sign-off: 1 of 2 approvals ({os_principal()})"
    assert _sign_in_cli(wh, quiet, "reopened", capsys, as_reviewer=False) == nothing
    shown = _quiet_words(wh, bob, quiet, capsys)
    shown.pop("report's approval block")  # as rendered, before the decisions: still the same
    assert set(shown.values()) == {nothing}, shown
    # the day with breaks beside it still waits for its sign-off
    assert review_words(review_states(db, [RUN], 2)[RUN]) == "Awaiting sign-off: 0 of 2 approvals"
