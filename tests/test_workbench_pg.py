"""On a real PostgreSQL (``postgres`` tier): the workbench logs in as its own role, a member of
reckon_workbench (migration 0007), and signs for the person it authenticated. The database
still holds the line: the signer must be an enabled workbench user who may act, never the
run's reconciler, and the workbench role cannot add users or edit the log."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from reports.db.repository import ReportDB
from reports.review import (
    SignoffRefused,
    append_break_actions,
    append_signoff,
    read_log,
)
from tests.signers import verify, workbench_trust
from tests.test_pg_roles import _as, _refused
from tests.test_report_db import make_run
from workbench.auth import add_user

pytestmark = pytest.mark.postgres

WORKBENCH = "wendy_workbench"  # the workbench service's login role
PASSWORD = "correct horse battery staple"


@pytest.fixture()
def owner_url(postgres_url: str) -> Iterator[str]:
    from tests.pg_server import fresh_database

    with fresh_database(postgres_url) as url:
        with ReportDB(url) as owner:
            owner.migrate()
            with owner.engine.begin() as conn:
                if not conn.execute(sa.text("SELECT 1 FROM pg_roles WHERE rolname = :r"),
                                    {"r": WORKBENCH}).first():
                    conn.exec_driver_sql(f"CREATE ROLE {WORKBENCH} LOGIN IN ROLE "
                                         "reckon_workbench")
            owner.record_audit_run(make_run("run-1", reconciler="alice"), [])
            for name, role in (("bob", "reviewer"), ("alice", "reviewer"),
                               ("carl", "auditor")):
                add_user(owner, name, role, PASSWORD)
        yield url


def test_the_workbench_signs_for_its_users_within_the_rules(owner_url: str) -> None:
    with ReportDB(_as(owner_url, WORKBENCH)) as workbench:
        assert append_signoff(workbench, "run-1", "bob", "approved", "ties out").by == "bob"
        for who in ("mallory", "carl"):  # not a user; a user who may not act
            with pytest.raises(SignoffRefused, match="not a workbench user who may act"):
                append_signoff(workbench, "run-1", who, "approved", "x")
    raw = ("INSERT INTO signoff_log (seq, at, run_id, \"by\", decision, note, prev_hash, "
           "entry_hash) VALUES (9, now(), 'run-1', 'alice', 'approved', 'raw', 'x', 'y')")
    assert "four-eyes" in _refused(owner_url, WORKBENCH, raw)
    assert "permission denied" in _refused(
        owner_url, WORKBENCH, "UPDATE workbench_users SET role = 'reviewer'")
    assert "permission denied" in _refused(owner_url, WORKBENCH, "DELETE FROM signoff_log")
    with ReportDB(owner_url) as owner:
        assert [e.by for e in read_log(owner)] == ["bob"]


def test_the_workbench_keeps_sessions_and_failed_logins_and_reads_stories(owner_url: str
                                                                          ) -> None:
    """Migrations 0008 and 0009 grant the workbench role what it needs and no more: it opens,
    checks and ends sessions, counts failed logins, reads break stories and inputs; it may
    not write a story (the audit does)."""
    from datetime import date

    from workbench.auth import (
        LoginThrottle,
        SessionKeys,
        end_session,
        end_sessions,
        session_is_open,
        start_session,
    )
    from workbench.sample import sample_day

    with ReportDB(owner_url) as owner:
        sample_day(owner, date(2026, 1, 1), breaks=12, reconciler="alice", run_id="run-s")
    keys = SessionKeys(b"k" * 32)
    with ReportDB(_as(owner_url, WORKBENCH)) as workbench:
        session = keys.read(start_session(workbench, keys, "bob"))
        assert session is not None and session_is_open(workbench, session)
        end_session(workbench, session.nonce)
        assert not session_is_open(workbench, session)
        throttle = LoginThrottle(per_name=2)
        for _ in range(2):
            throttle.failed(workbench, "bob", "10.1.1.1")
        assert "too many failed logins for bob" in str(throttle.refusal(workbench, "bob",
                                                                         "10.1.1.1"))
        throttle.succeeded(workbench, "bob", "10.1.1.1")
        assert throttle.refusal(workbench, "bob", "10.1.1.1") is None
        with workbench.engine.connect() as conn:
            stories = conn.execute(sa.text("SELECT count(*) FROM break_stories")).scalar_one()
            inputs = conn.execute(sa.text("SELECT count(*) FROM break_inputs")).scalar_one()
        assert stories == 12 and inputs > 0
    with ReportDB(owner_url) as owner:  # an administrator revokes (reckon users revoke)
        again = keys.read(start_session(owner, keys, "bob"))
        assert again is not None and end_sessions(owner, "bob") == 1
    assert "permission denied" in _refused(
        owner_url, WORKBENCH, "DELETE FROM break_stories")


def test_the_workbench_role_pages_breaks_by_size_and_minimum_gap(owner_url: str) -> None:
    """Issue 61 on PostgreSQL: the reconciler's role writes each break's exact absolute gap
    (NUMERIC, migration 0013) and the workbench's role pages them largest first per
    currency, narrowed to a minimum gap per currency, by keyset, every match once."""
    from datetime import date
    from decimal import Decimal
    from itertools import pairwise

    from workbench import queries
    from workbench.sample import sample_day

    day = date(2026, 1, 7)  # run-1 (the fixture's) is 2026-01-01's current run
    with ReportDB(owner_url) as owner:
        sample_day(owner, day, breaks=90, reconciler="alice", run_id="run-g")
    floor = (("EUR", Decimal("1.20")), ("JPY", Decimal("120")))
    with ReportDB(_as(owner_url, WORKBENCH)) as workbench:
        every = queries.break_page(workbench, "run-g", day, queries.BreakFilter(),
                                   limit=1000).rows
        for sort in queries.SORTS:
            filters = queries.BreakFilter(min_gap=floor, sort=sort)
            seen, after = [], None
            while True:
                page = queries.break_page(workbench, "run-g", day, filters, after, limit=8)
                seen += [(r["currency"], r["gap_magnitude"], r["window_start"], r["key"])
                         for r in page.rows]
                if page.next_cursor is None:
                    break
                after = queries.Cursor.decode(page.next_cursor)
            wanted = [b for b in every
                      if abs(b["gap_amount"]) >= dict(floor).get(b["currency"], 0)]
            assert len(seen) == len(set(seen)) == len(wanted) == page.total < 90
            assert all(m == abs(b["gap_amount"]) for b in every for c, m, w, k in seen
                       if (c, w, k) == (b["currency"], b["window_start"], b["key"]))
            if sort == "gap":  # per currency, largest first (ties: latest window, key)
                assert all(a[0] < b[0] or (a[0] == b[0] and a[1:] > b[1:])
                           for a, b in pairwise(seen))
        # the month view's counts on PostgreSQL (its age buckets are SQL CASEs on times)
        month = queries.period(workbench, date(2026, 1, 1), date(2026, 1, 31))
        opened = queries.break_page(workbench, "run-g", day,
                                    queries.BreakFilter(review_status="open")).total
        assert dict(month["buckets"])["new today"] and month["unsettled"] == opened
        assert [d["run"]["run_id"] for d in month["days"] if d["run"]] == ["run-1", "run-g"]


def test_the_workbench_role_rejects_and_reopens_a_break(owner_url: str) -> None:
    """Issue 61 on PostgreSQL: migration 0014's checks take a break's rejection and reopen
    (log entries by the workbench's role, in the user's name) and the 'rejected' status; the
    database still refuses an auditor (its signer trigger) whatever the decision."""
    from datetime import UTC, date, datetime

    from reports.review import Assignment, BreakTarget
    from workbench import queries
    from workbench.sample import sample_day

    with ReportDB(owner_url) as owner:
        sample_day(owner, date(2026, 1, 5), breaks=6, reconciler="alice", run_id="run-r")
        key = workbench_trust(owner).signer  # the workbench signs for its users
    target = BreakTarget(datetime(2026, 1, 5, tzinfo=UTC), "merchant-01", "JPY")
    with ReportDB(_as(owner_url, WORKBENCH)) as workbench:
        append_signoff(workbench, "run-r", "bob", "break-rejected", "wrong day", target=target, signer=key)
        assert queries.break_detail(workbench, "run-r", target)["review_status"] == "rejected"
        append_signoff(workbench, "run-r", "bob", "break-reopened", "re-sent", target=target, signer=key)
        assert queries.break_detail(workbench, "run-r", target)["review_status"] == "open"
        with pytest.raises(SignoffRefused, match="not a workbench user who may act"):
            append_signoff(workbench, "run-r", "carl", "break-rejected", "x", target=target, signer=key)
        # an assignment (migration 0015 grants the workbench's role its two columns)
        append_signoff(workbench, "run-r", "bob", "break-assigned", "", target=target,
                       assignment=Assignment("bob", date(2026, 1, 9)), signer=key)
        item = queries.break_detail(workbench, "run-r", target)
        assert (item["assignee"], item["due_on"]) == ("bob", date(2026, 1, 9))
        # a bulk action: one entry per break, in one transaction, under the same triggers
        both = [target, BreakTarget(datetime(2026, 1, 5, tzinfo=UTC), "merchant-02", "KWD")]
        assert len(append_break_actions(workbench, "run-r", "bob", "break-accepted",
                                        "agreed", both, signer=key)) == 2
        with pytest.raises(SignoffRefused, match="not a workbench user who may act"):
            append_break_actions(workbench, "run-r", "carl", "break-accepted", "x", both,
                                 signer=key)
    with ReportDB(owner_url) as owner:
        assert [e.decision for e in read_log(owner)] == [
            "break-rejected", "break-reopened", "break-assigned", "break-accepted",
            "break-accepted"]
        assert verify(owner).ok


def test_the_workbench_role_records_any_users_export_but_not_a_strangers(owner_url: str
                                                                        ) -> None:
    """Issue 61 on PostgreSQL: migration 0016's signer trigger takes an 'exported' entry by
    any enabled workbench user (an auditor, the run's reconciler: an export decides nothing)
    and still refuses a name that is no user, and every other decision by an auditor."""
    from reports.review import record_export

    with ReportDB(owner_url) as owner:
        key = workbench_trust(owner).signer  # the workbench signs for its users
    with ReportDB(_as(owner_url, WORKBENCH)) as workbench:
        for who in ("carl", "alice"):
            assert record_export(workbench, "run-1", who, "breaks.csv (3 breaks)",
                                 signer=key).by == who
        with pytest.raises(SignoffRefused, match="not an enabled workbench user"):
            record_export(workbench, "run-1", "mallory", "breaks.csv", signer=key)
        with pytest.raises(SignoffRefused, match="not a workbench user who may act"):
            append_signoff(workbench, "run-1", "carl", "approved", "x", signer=key)
    raw = ("INSERT INTO signoff_log (seq, at, run_id, \"by\", decision, note, prev_hash, "
           "entry_hash) VALUES (9, now(), 'run-1', 'alice', 'approved', 'raw', 'x', 'y')")
    assert "four-eyes" in _refused(owner_url, WORKBENCH, raw)
    with ReportDB(owner_url) as owner:
        assert [(e.by, e.decision) for e in read_log(owner)] == [("carl", "exported"),
                                                                 ("alice", "exported")]
        assert verify(owner).ok


def test_the_workbench_role_bulk_rejects_and_resolves_and_records_the_logs_export(
        owner_url: str) -> None:
    """Issue 61 on PostgreSQL, over HTTP as the workbench's login role: a bulk rejection (its
    reason in each entry) and a bulk resolve pass the log's triggers, one entry a break in
    one transaction; the run's reconciler is refused; an auditor's JSON export of the log is
    recorded (who, when) and the file carries its own entry."""
    import re
    from datetime import date

    from fastapi.testclient import TestClient

    from workbench.app import create_app
    from workbench.sample import sample_day

    with ReportDB(owner_url) as owner:
        sample_day(owner, date(2026, 1, 5), breaks=6, reconciler="alice", run_id="run-b")
        trust = workbench_trust(owner)
    with ReportDB(_as(owner_url, WORKBENCH)) as workbench:
        app = create_app(workbench, trust=trust, secret=b"s" * 32)

        def login(name: str) -> tuple[TestClient, str]:
            client = TestClient(app)
            token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
            client.post("/login", data={"name": name, "password": PASSWORD,
                                        "csrf": token.group(1)}, follow_redirects=False)
            page = client.get("/day/2026-01-05/breaks").text
            return client, re.search(r'name="csrf" value="([^"]+)"', page).group(1)

        def bulk(client: TestClient, token: str, action: str, note: str) -> str:
            form = {"csrf": token, "kind": "nightly", "currency": "JPY", "action": action,
                    "note": note}
            confirm = client.post("/day/2026-01-05/bulk", data=form)
            if confirm.status_code != 200:
                return confirm.text
            expect = re.search(r'name="expect" value="([^"]+)"', confirm.text).group(1)
            return client.post("/day/2026-01-05/bulk", data={**form, "expect": expect}).text

        alice, token = login("alice")
        assert "four-eyes" in bulk(alice, token, "reject", "mine")
        bob, token = login("bob")
        assert "reject recorded on 2 breaks" in bulk(bob, token, "reject", "not in yet")
        assert "resolve recorded on 2 breaks" in bulk(bob, token, "resolve", "in now")
        carl = login("carl")[0]
        export = carl.get("/log/export.json").json()
    with ReportDB(owner_url) as owner:
        log = read_log(owner)
        assert [(e.by, e.decision) for e in log] == [
            ("bob", "break-rejected"), ("bob", "break-rejected"), ("bob", "break-resolved"),
            ("bob", "break-resolved"), ("carl", "exported")]
        assert all(e.note.endswith(": not in yet") for e in log[:2])
        assert export["export_seq"] == 5 and export["entries"][-1]["by"] == "carl"
        assert verify(owner).ok
