"""The reviewer's workbench without a browser (fast tier): passwords and sessions, login,
CSRF, roles, the four-eyes rule on the server, keyset paging, break actions in the sign-off
log, and the ``reckon users`` / ``reckon workbench`` commands. The browser tests are in
tests/test_workbench_browser.py."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.cli import main
from reckon.errors import UsageError
from reports.db.repository import ReportDB
from reports.review import (
    BreakTarget,
    SignoffRefused,
    read_log,
)
from reports.review_state import review_states
from tests.signers import append, verify, workbench_trust
from workbench import queries
from workbench.app import create_app
from workbench.auth import SessionKeys, add_user, check_password, find_user, hash_password
from workbench.sample import sample_day

DAY = date(2026, 1, 1)
RUN = "nightly-2026-01-01"
PASSWORD = "correct horse battery staple"


@pytest.fixture()
def db(tmp_path: Path) -> Iterator[ReportDB]:
    with ReportDB(f"sqlite:///{tmp_path / 'reckon.db'}") as database:
        sample_day(database, DAY, breaks=130, reconciler="alice")
        for name, role in (("bob", "reviewer"), ("alice", "reviewer"), ("carl", "auditor"),
                           ("rita", "reconciler")):
            add_user(database, name, role, PASSWORD)
        yield database


@pytest.fixture()
def app(db: ReportDB, tmp_path: Path):
    return create_app(db, trust=workbench_trust(db), secret=b"s" * 32, warehouse=tmp_path)


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def _client(app, name: str | None = None) -> TestClient:
    client = TestClient(app)
    if name is not None:
        token = _csrf(client.get("/login").text)
        response = client.post("/login", data={"name": name, "password": PASSWORD,
                                               "csrf": token}, follow_redirects=False)
        assert response.status_code == 303, response.text
    return client


# ----------------------------------------------------------------------------- identity


def test_passwords_are_scrypt_hashes_checked_in_constant_time() -> None:
    stored = hash_password("s3cret passphrase")
    assert stored.startswith("scrypt$16384$8$1$") and "s3cret" not in stored
    assert check_password("s3cret passphrase", stored)
    assert not check_password("s3cret passphrasE", stored)
    assert not check_password("x", "md5$abc")
    assert hash_password("a") != hash_password("a")  # salted


def test_a_session_cookie_cannot_be_forged_or_kept_forever() -> None:
    keys = SessionKeys(b"k" * 32)
    cookie = keys.issue("bob", now=1000.0)
    assert keys.read(cookie, now=1001.0).name == "bob"
    mac = cookie.rsplit(".", 1)[1]
    forged = keys.issue("alice", now=1000.0).rsplit(".", 1)[0] + "." + mac
    assert keys.read(forged, now=1001.0) is None
    assert SessionKeys(b"x" * 32).read(cookie, now=1001.0) is None
    assert keys.read(cookie, now=1000.0 + 9 * 3600) is None


def test_users_are_stored_with_a_role_and_can_be_disabled(db: ReportDB) -> None:
    assert find_user(db, "bob", PASSWORD).role == "reviewer"
    assert find_user(db, "bob", "wrong password") is None
    assert find_user(db, "nobody", PASSWORD) is None
    with pytest.raises(UsageError, match="too short"):
        add_user(db, "eve", "reviewer", "short")
    with pytest.raises(UsageError, match="role"):
        add_user(db, "eve", "admin", PASSWORD)


def test_pages_need_a_login_and_a_wrong_password_is_refused(app) -> None:
    client = _client(app)
    response = client.get("/", follow_redirects=False)
    assert (response.status_code, response.headers["location"]) == (303, "/login")
    token = _csrf(client.get("/login").text)
    response = client.post("/login", data={"name": "bob", "password": "nope", "csrf": token})
    assert response.status_code == 401 and "unknown user or wrong password" in response.text
    response = client.post("/login", data={"name": "bob", "password": PASSWORD, "csrf": "x"})
    assert response.status_code == 403 and "CSRF" in response.text


def test_pages_load_nothing_from_elsewhere(app) -> None:
    client = _client(app, "bob")
    for path in ("/", f"/day/{DAY}", f"/day/{DAY}/breaks", "/log"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert not re.search(r'(src|href)="(https?:)?//', response.text), path
        assert "default-src 'self'" in response.headers["content-security-policy"]


# ----------------------------------------------------------------------------- actions


def test_the_four_eyes_rule_holds_on_the_server(app, db: ReportDB) -> None:
    alice = _client(app, "alice")
    token = _csrf(alice.get(f"/day/{DAY}").text)
    response = alice.post("/signoff", data={"csrf": token, "run": RUN, "decision": "approved",
                                            "note": "mine"})
    assert response.status_code == 403 and "four-eyes" in response.text
    assert read_log(db) == []


def test_roles_decide_who_acts(app, db: ReportDB) -> None:
    target = {"run": RUN, "ws": "2026-01-01T00:00:00+00:00", "key": "merchant-00",
              "cur": "EUR", "action": "comment", "note": "checked"}
    carl = _client(app, "carl")
    response = carl.post("/break/action", data={**target, "csrf": _csrf(carl.get("/").text)})
    assert response.status_code == 403 and "read-only" in response.text
    rita = _client(app, "rita")  # a reconciler (not this run's) comments, but signs nothing
    token = _csrf(rita.get("/").text)
    assert rita.post("/break/action", data={**target, "csrf": token},
                     follow_redirects=False).status_code == 303
    response = rita.post("/signoff", data={"csrf": token, "run": RUN, "decision": "approved",
                                           "note": "x"})
    assert response.status_code == 403 and "only a reviewer" in response.text
    assert [(e.by, e.decision) for e in read_log(db)] == [("rita", "break-comment")]


def test_a_workbench_without_a_signing_key_records_no_decision(db: ReportDB,
                                                              tmp_path: Path) -> None:
    """An unsigned entry would fail verify-log: the workbench refuses, saying how to fix it,
    and the log stays empty; a workbench key registered for it signs for bob."""
    keyless = _client(create_app(db, secret=b"s" * 32, warehouse=tmp_path), "bob")
    token = _csrf(keyless.get(f"/day/{DAY}").text)
    form = {"csrf": token, "run": RUN, "decision": "approved", "note": "ties out"}
    response = keyless.post("/signoff", data=form)
    assert response.status_code == 403 and "has no signing key" in response.text
    assert "--scope workbench" in response.text and read_log(db) == []
    keyed = _client(create_app(db, trust=workbench_trust(db), secret=b"s" * 32,
                               warehouse=tmp_path), "bob")
    form["csrf"] = _csrf(keyed.get(f"/day/{DAY}").text)
    assert keyed.post("/signoff", data=form, follow_redirects=False).status_code == 303
    assert [e.by for e in read_log(db)] == ["bob"] and verify(db).ok


def test_a_post_without_a_csrf_token_changes_nothing(app, db: ReportDB) -> None:
    bob = _client(app, "bob")
    response = bob.post("/signoff", data={"run": RUN, "decision": "approved", "note": "x"})
    assert response.status_code == 403 and "CSRF" in response.text
    assert read_log(db) == []


def test_break_actions_land_in_the_chained_log(db: ReportDB, tmp_path: Path) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    target = BreakTarget(start, "merchant-00", "EUR")
    comment = append(db, RUN, "bob", "break-comment", "looked", target=target)
    assert comment.note == "break 2026-01-01T00:00:00.000000Z merchant-00 EUR: looked"
    append(db, RUN, "bob", "break-resolved", "fixed upstream", target=target)
    item = queries.break_detail(db, RUN, target)
    assert item is not None and item["review_status"] == "resolved"
    assert [e["decision"] for e in item["entries"]] == ["break-comment", "break-resolved"]
    assert review_states(db, [RUN])[RUN].state == "open"  # a break action signs nothing
    assert verify(db).ok
    with pytest.raises(SignoffRefused, match="not a break of run"):
        append(db, RUN, "bob", "break-comment", "x",
                       target=replace(target, key="merchant-99"))
    with pytest.raises(UsageError, match="target"):
        append(db, RUN, "bob", "break-comment", "x")
    with pytest.raises(SignoffRefused, match="four-eyes"):
        append(db, RUN, "alice", "break-accepted", "x", target=target)


# ----------------------------------------------------------------------------- paging


def test_keyset_pages_cover_every_match_once_in_order(db: ReportDB) -> None:
    for filters in (queries.BreakFilter(), queries.BreakFilter(cause="EXPLAINED"),
                    queries.BreakFilter(currency="JPY", merchant="merchant-03")):
        seen, after = [], None
        while True:
            page = queries.break_page(db, RUN, DAY, filters, after, limit=7)
            seen += [(r["window_start"], r["key"], r["currency"]) for r in page.rows]
            if page.next_cursor is None:
                break
            after = queries.Cursor.decode(page.next_cursor)
        assert seen == sorted(seen) and len(set(seen)) == len(seen) == page.total > 0


def test_the_age_filter_counts_days_since_first_seen(db: ReportDB) -> None:
    now = datetime.now(UTC)
    assert queries.break_page(db, RUN, DAY, queries.BreakFilter(min_age_days=1), now=now).total == 0
    later = now + timedelta(days=3)
    page = queries.break_page(db, RUN, DAY, queries.BreakFilter(min_age_days=2), now=later)
    assert page.total == 130 and page.rows[0]["age_days"] == 3


def test_a_bad_cursor_is_one_clear_line() -> None:
    with pytest.raises(UsageError, match="not a page cursor"):
        queries.Cursor.decode("garbage")


# ----------------------------------------------------------------------------- commands


def test_reckon_users_add_list_disable(tmp_path: Path, monkeypatch, capsys) -> None:
    wh = str(tmp_path / "wh")
    monkeypatch.setenv("WB_PASSWORD", PASSWORD)
    assert main(["users", "add", "dora", "--role", "auditor", "--password-env", "WB_PASSWORD",
                 "--warehouse", wh]) == 0
    assert main(["users", "list", "--warehouse", wh]) == 0
    assert "dora\tauditor" in capsys.readouterr().out
    assert main(["users", "disable", "dora", "--warehouse", wh]) == 0
    assert main(["users", "disable", "nobody", "--warehouse", wh]) == 2
    assert main(["users", "add", "eve", "--password-env", "UNSET_VAR", "--warehouse", wh]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "UNSET_VAR" in err


def test_users_add_of_an_existing_user_says_it_updated_them(tmp_path: Path, monkeypatch,
                                                           capsys) -> None:
    """A second `reckon users add bob` replaced bob's password silently, with the words of a
    new user."""
    wh = str(tmp_path / "wh")
    monkeypatch.setenv("WB_PASSWORD", PASSWORD)
    add = ["--password-env", "WB_PASSWORD", "--warehouse", wh]
    assert main(["users", "add", "bob", "--role", "auditor", *add]) == 0
    assert capsys.readouterr().out == "user bob (auditor) may log in to the workbench\n"
    assert main(["users", "disable", "bob", "--warehouse", wh]) == 0
    capsys.readouterr()
    assert main(["users", "add", "bob", "--role", "reviewer", *add]) == 0
    assert capsys.readouterr().out == ("user bob updated: new password, role reviewer (was "
                                       "auditor), enabled again; their open sessions ended\n")
    assert main(["users", "add", "bob", "--role", "reviewer", *add]) == 0
    assert capsys.readouterr().out == ("user bob updated: new password, role reviewer "
                                       "(unchanged); their open sessions ended\n")


def test_workbench_start_up_line_prints_the_database_url_with_its_password_masked(
        tmp_path: Path, monkeypatch, capsys) -> None:
    """It printed `report database ReportDB('sqlite:///...')`, a Python repr."""
    import workbench.cli
    import workbench.server

    class _DB:
        def migrate(self) -> None:
            pass

    monkeypatch.setattr(workbench.cli.ReportDB, "from_settings", lambda settings: _DB())
    monkeypatch.setattr("workbench.app.create_app", lambda db, **kw: None)
    monkeypatch.setattr(workbench.server, "serve", lambda app, host, port, ready: ready())
    monkeypatch.setenv("RECKON_REPORT_DB_URL", "postgresql://rk:s3cret@db:5432/reckon")
    assert main(["workbench", "--port", "8088", "--warehouse", str(tmp_path / "wh")]) == 0
    line = capsys.readouterr().out
    assert line == ("reckon workbench on http://127.0.0.1:8088 (report database "
                    "postgresql://rk:***@db:5432/reckon); Ctrl-C stops it\n")


def test_reckon_workbench_refuses_a_bad_port(tmp_path: Path, capsys) -> None:
    assert main(["workbench", "--warehouse", str(tmp_path), "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


def test_a_malformed_request_is_one_clear_line(app) -> None:
    bob = _client(app, "bob")
    response = bob.get(f"/day/{DAY}/breaks?age=old")
    assert response.status_code == 400 and "age is not valid" in response.text
    response = bob.get("/day/yesterday-ish")
    assert response.status_code == 400 and "day" in response.text
    response = bob.get(f"/day/{DAY}/breaks?after=garbage")
    assert response.status_code == 400 and "not a page cursor" in response.text


@pytest.mark.parametrize("depth", [1_000, 5_000])  # the parser's limit; the length cap
def test_a_deeply_nested_cursor_is_400_not_500(app, depth: int) -> None:
    """Issue 60 probe: a forged after= of nested JSON arrays answered 500."""
    forged = base64.urlsafe_b64encode(b"[" * depth + b"]" * depth).decode().rstrip("=")
    response = _client(app, "bob").get(f"/day/{DAY}/breaks?after={forged}")
    assert response.status_code == 400 and "not a page cursor" in response.text


def test_an_age_beyond_a_century_is_400_not_500(app) -> None:
    """Issue 60 probe: age=1000000 answered 500 (the date arithmetic overflowed)."""
    response = _client(app, "bob").get(f"/day/{DAY}/breaks?age=1000000")
    assert response.status_code == 400
    assert "age=1000000 is not valid: a number of days, 0 to 36500" in response.text
    assert _client(app, "bob").get(f"/day/{DAY}/breaks?age=36500").status_code == 200


def test_what_the_data_says_is_escaped_not_run(app, db: ReportDB) -> None:
    from workbench.sample import _break

    hostile = replace(_break(RUN, DAY, 0), key="<script>alert(1)</script>",
                      window_start=datetime(2026, 1, 1, 23, tzinfo=UTC))
    db.write_breaks(RUN, [hostile])
    bob = _client(app, "bob")
    page = bob.get(f"/day/{DAY}/breaks?merchant=<script>alert(1)</script>").text
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_report_lists_decisions_on_the_run_not_break_actions(db: ReportDB) -> None:
    from reports.context import _signoffs

    target = BreakTarget(datetime(2026, 1, 1, tzinfo=UTC), "merchant-00", "EUR")
    append(db, RUN, "bob", "break-comment", "looked", target=target)
    append(db, RUN, "bob", "approved", "ties out")
    run = db.get_audit_run(RUN)
    assert run is not None
    own, prior = _signoffs(db, run)
    assert [(e.decision, e.by) for e in own] == [("approved", "bob")] and prior is None


def test_the_count_stops_at_the_cap(db: ReportDB, monkeypatch) -> None:
    monkeypatch.setattr(queries, "COUNT_CAP", 20)
    page = queries.break_page(db, RUN, DAY, queries.BreakFilter())
    assert page.total == 21 and page.total_text == "more than 20" and len(page.rows) == 50
    page = queries.break_page(db, RUN, DAY, queries.BreakFilter(currency="JPY",
                                                                merchant="merchant-03"))
    assert page.total_text == str(page.total) and page.total <= 20


def test_the_days_report_and_its_files_are_served_and_nothing_else(app, db: ReportDB,
                                                                    tmp_path: Path) -> None:
    from reports.records import ReportRecord

    folder = tmp_path / "reports" / DAY.isoformat()
    folder.mkdir(parents=True)
    (folder / "report.html").write_text('<p>the report</p><a href="breaks.csv">csv</a>')
    (folder / "breaks.csv").write_text("day,key\n")
    (tmp_path / "reports" / "secret.txt").write_text("not the report's")
    db.record_report(ReportRecord(day=DAY, audit_run_id=RUN, created_at=datetime.now(UTC),
                                  html_path=str(folder / "report.html"),
                                  pdf_path=str(folder / "report.pdf"), sha256="0" * 64))
    bob = _client(app, "bob")
    link = re.search(r'id="report-link" href="([^"]+)"', bob.get(f"/day/{DAY}").text)
    assert link and link.group(1) == f"/report/{DAY}/nightly/report.html"
    response = bob.get(link.group(1))
    assert "the report" in response.text and response.headers["content-security-policy"] == "sandbox"
    assert bob.get(f"/report/{DAY}/nightly/breaks.csv").text == "day,key\n"
    for name in ("..%2Fsecret.txt", ".hidden", "nope.csv"):
        assert bob.get(f"/report/{DAY}/nightly/{name}").status_code in (400, 404), name
    # the report's CSV is an export of the day's figures: recorded; its HTML is not
    assert [(e.by, e.decision, e.note) for e in read_log(db)] == [
        ("bob", "exported", "exported breaks.csv of the day's report")]


def test_logging_out_needs_the_token_too(app) -> None:
    bob = _client(app, "bob")
    assert bob.post("/logout").status_code == 403
    token = _csrf(bob.get("/").text)
    assert bob.post("/logout", data={"csrf": token}, follow_redirects=False).status_code == 303
    assert bob.get("/", follow_redirects=False).headers["location"] == "/login"


# ----------------------------------------------------------------------------- inputs, stories


def _expected_inputs(breaks: int = 130) -> dict[tuple[datetime, str, str], set[str]]:
    """What the sample's stories say contributed to each break, told by the story builder
    (audits.chapters.chapter_of, audits.break_story.inputs_of) independently of the database."""
    from workbench.sample import _break, _story

    out = {}
    for i in range(breaks):
        row = _break(RUN, DAY, i)
        out[row.window_start, row.key, row.currency] = {
            f"{x.dimension} {x.value}" for x in _story(row, i).inputs}
    return out


def test_breaks_filter_by_a_contributing_partition_or_source(db: ReportDB) -> None:
    """Every page of a partition (or source) filter lists exactly the breaks that input
    contributed to, in keyset order, each once; both filters together need both."""
    expected = _expected_inputs()
    for filters in (queries.BreakFilter(partition="4"), queries.BreakFilter(source="mobile"),
                    queries.BreakFilter(partition="2", source="partner", currency="EUR"),
                    queries.BreakFilter(partition="3", cause="UNEXPLAINED")):
        seen, after = [], None
        while True:
            page = queries.break_page(db, RUN, DAY, filters, after, limit=6)
            seen += [(r["window_start"], r["key"], r["currency"]) for r in page.rows]
            for r in page.rows:
                assert set(r["inputs"]) == expected[r["window_start"], r["key"], r["currency"]]
            if page.next_cursor is None:
                break
            after = queries.Cursor.decode(page.next_cursor)
        wanted = {f"{d} {v}" for d, v in filters.inputs()}
        matching = sorted(cell for cell, inputs in expected.items() if wanted <= inputs
                          and (not filters.currency or cell[2] == filters.currency)
                          and (not filters.cause or queries.break_detail(
                              db, RUN, BreakTarget(*cell))["status"] == filters.cause))
        assert seen == matching and page.total == len(matching) > 0, filters
    assert queries.break_page(db, RUN, DAY, queries.BreakFilter(partition="77")).total == 0


def test_the_break_list_filters_by_partition_and_source_over_http(app) -> None:
    bob = _client(app, "bob")
    page = bob.get(f"/day/{DAY}/breaks?partition=4&source=pos").text
    cells = re.findall(r'<td class="inputs">([^<]*)</td>', page)
    assert cells and all("partition 4" in c and "source pos" in c for c in cells)
    assert 'name="partition" inputmode="numeric" value="4"' in page
    response = bob.get(f"/day/{DAY}/breaks?partition=north")
    assert response.status_code == 400 and "partition=&#39;north&#39; is not valid" in response.text


def test_a_break_page_shows_the_recorded_story_and_the_explaining_events(app) -> None:
    """Merchant-00's EUR window at midnight: one late event from partition 1 (source pos);
    the page shows the story's lines as recorded, the event with its partition and a query
    for its row, and the partition as a link to the breaks it contributed to."""
    from html import unescape

    from workbench.sample import _break, _story

    bob = _client(app, "bob")
    page = bob.get("/break", params={"run": RUN, "ws": "2026-01-01T00:00:00+00:00",
                                     "key": "merchant-00", "cur": "EUR"}).text
    story = re.search(r'<pre class="story" id="story">(.*?)</pre>', page, re.S)
    assert story, page
    assert unescape(story.group(1)).rstrip("\n").split("\n") == list(
        _story(_break(RUN, DAY, 0), 0).lines)
    assert "1 late by 4.0 s" in unescape(story.group(1))
    table = re.search(r'<table class="grid" id="explaining">(.*?)</table>', page, re.S)
    assert table and "<td>late</td>" in table.group(1) and "<td>1</td>" in table.group(1)
    assert ("SELECT * FROM late_events WHERE window_date = DATE '2026-01-01' AND "
            "event_id = 'e0-l0'") in unescape(table.group(1))
    assert f'href="/day/{DAY}/breaks?partition=1"' in page


def test_a_break_audited_before_stories_were_kept_says_how_to_get_it(app, db: ReportDB
                                                                     ) -> None:
    from workbench.sample import _break

    old = replace(_break(RUN, DAY, 0), window_start=datetime(2026, 1, 1, 22, tzinfo=UTC))
    db.write_breaks(RUN, [old])  # a break without a recorded story
    page = _client(app, "bob").get("/break", params={
        "run": RUN, "ws": "2026-01-01T22:00:00+00:00", "key": old.key, "cur": "EUR"}).text
    assert 'id="no-story"' in page and "reckon explain --key merchant-00" in page


# ----------------------------------------------------------------------------- sessions


def test_logging_out_ends_the_session_on_the_server(app) -> None:
    bob = _client(app, "bob")
    copied = TestClient(app, cookies=dict(bob.cookies))  # someone copied the cookie
    assert copied.get("/", follow_redirects=False).status_code == 200
    bob.post("/logout", data={"csrf": _csrf(bob.get("/").text)})
    assert copied.get("/", follow_redirects=False).headers["location"] == "/login"


def test_disabling_or_revoking_a_user_ends_their_sessions(app, db: ReportDB, tmp_path: Path,
                                                         monkeypatch, capsys) -> None:
    monkeypatch.setenv("RECKON_REPORT_DB_URL", db.url)
    bob, bob_too, rita = _client(app, "bob"), _client(app, "bob"), _client(app, "rita")
    assert main(["users", "revoke", "bob", "--warehouse", str(tmp_path)]) == 0
    assert "2 open sessions of bob ended" in capsys.readouterr().out
    for client in (bob, bob_too):
        assert client.get("/", follow_redirects=False).status_code == 303
    assert rita.get("/", follow_redirects=False).status_code == 200
    bob = _client(app, "bob")  # bob may log in again after a revoke
    assert main(["users", "disable", "rita", "--warehouse", str(tmp_path)]) == 0
    assert "user rita is disabled; 1 open session ended" in capsys.readouterr().out
    assert rita.get("/", follow_redirects=False).status_code == 303
    add_user(db, "rita", "reconciler", PASSWORD)  # re-enabled: the old cookie stays dead
    assert rita.get("/", follow_redirects=False).status_code == 303
    add_user(db, "bob", "reviewer", PASSWORD + "!")  # a new password ends bob's sessions
    assert bob.get("/", follow_redirects=False).status_code == 303
    assert main(["users", "revoke", "nobody", "--warehouse", str(tmp_path)]) == 2


def test_repeated_failed_logins_are_throttled_with_a_clear_message(db: ReportDB,
                                                                   tmp_path: Path) -> None:
    from workbench.auth import LoginThrottle

    app = create_app(db, trust=workbench_trust(db), secret=b"s" * 32, warehouse=tmp_path,
                     throttle=LoginThrottle(per_name=3, per_address=5))
    def post(name: str, password: str):
        client = TestClient(app)  # each from the same address ("testclient")
        token = _csrf(client.get("/login").text)
        return client.post("/login", data={"name": name, "password": password, "csrf": token},
                           follow_redirects=False)

    def attempt(name: str, password: str) -> int:
        return post(name, password).status_code

    assert [attempt("bob", "guess") for _ in range(3)] == [401, 401, 401]
    response = post("bob", PASSWORD)
    assert response.status_code == 429  # the right password too, while throttled
    assert ("too many failed logins for bob from testclient: logins are refused for 15 "
            "minutes (the right password too)") in response.text
    assert attempt("rita", PASSWORD) == 303  # another name from the address is let through
    assert [attempt("carl", "guess") for _ in range(2)] == [401, 401]
    assert attempt("rita", PASSWORD) == 429  # 5 failures from the address in all
    assert "too many failed logins from testclient" in post("dora", "x").text


def test_the_throttle_forgets_old_failures_and_a_success_resets_it(db: ReportDB) -> None:
    from workbench.auth import LoginThrottle

    throttle = LoginThrottle(per_name=2, per_address=10, window_seconds=600)
    now = 1_800_000_000.0
    for at in (now, now + 60):
        throttle.failed(db, "bob", "10.0.0.1", now=at)
    refusal = throttle.refusal(db, "bob", "10.0.0.1", now=now + 120)
    assert refusal is not None and "refused for 8 minutes" in refusal
    assert throttle.refusal(db, "bob", "10.0.0.2", now=now + 120) is None  # another address
    assert throttle.refusal(db, "bob", "10.0.0.1", now=now + 601) is None  # the first aged out
    throttle.failed(db, "bob", "10.0.0.1", now=now + 602)
    assert throttle.refusal(db, "bob", "10.0.0.1", now=now + 603) is not None
    throttle.succeeded(db, "bob", "10.0.0.1")
    assert throttle.refusal(db, "bob", "10.0.0.1", now=now + 604) is None


# ----------------------------------------------------------------------------- review 2026-11-27


def test_a_cause_the_audit_never_gives_or_a_negative_age_is_refused(app) -> None:
    """`cause=EXPLAIND` showed "0 breaks match" and `age=-1` every break, as if filters."""
    bob = _client(app, "bob")
    response = bob.get(f"/day/{DAY}/breaks?cause=EXPLAIND")
    assert response.status_code == 400
    assert "cause=&#39;EXPLAIND&#39; is not valid: one of EXPLAINED, UNEXPLAINED" in response.text
    response = bob.get(f"/day/{DAY}/breaks?age=-1")
    assert response.status_code == 400 and "age=-1 is not valid: a number of days" in response.text
    assert '<b>130</b> breaks match' in bob.get(f"/day/{DAY}/breaks?cause=&age=0").text
    assert '<b>26</b> breaks match' in bob.get(f"/day/{DAY}/breaks?cause=MISSING_IN_STREAM").text


def test_the_reconciler_acting_on_a_break_is_told_so_not_about_signing(app, db) -> None:
    """The run's reconciler commenting on a break was told they "may not sign off" the run."""
    alice = _client(app, "alice")
    response = alice.post("/break/action", data={
        "run": RUN, "ws": "2026-01-01T00:00:00+00:00", "key": "merchant-00", "cur": "EUR",
        "action": "comment", "note": "mine", "csrf": _csrf(alice.get("/").text)})
    assert response.status_code == 403
    assert ("may not act on the breaks of run &#39;nightly-2026-01-01&#39;: &#39;alice&#39; "
            "reconciled it") in response.text and "four-eyes" in response.text
    assert "sign off" not in response.text and read_log(db) == []


def test_a_signer_is_named_once_and_a_broken_log_counts_its_problems(app, db: ReportDB) -> None:
    bob = _client(app, "bob")
    for note in ("figures checked", "checked again"):
        append(db, RUN, "bob", "approved", note)
    assert "Signed off: 1 of 1 approvals (bob)." in bob.get(f"/day/{DAY}").text
    assert "Signed off: 1 of 1 approvals (bob)<" in bob.get("/").text
    with db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE signoff_log SET note = 'all fine' WHERE seq = 1")
    page = bob.get("/log").text
    # the edit breaks the entry's hash and bob's signature of it
    assert "BROKEN" in page and "(2 problems)" in page


def test_users_disable_or_revoke_without_a_name_says_so(tmp_path: Path, capsys) -> None:
    """It said `NAME=None is not valid: an existing workbench user`."""
    for action in ("disable", "revoke"):
        assert main(["users", action, "--warehouse", str(tmp_path / "wh")]) == 2
        assert capsys.readouterr().err.strip().endswith(f"users {action} needs the user's NAME")
    assert not (tmp_path / "wh").exists()  # nothing was created for a mistake


def test_reckon_workbench_on_a_busy_port_is_one_clear_line(db: ReportDB, tmp_path: Path,
                                                          monkeypatch, capsys) -> None:
    """It printed "reckon workbench on http://..." and then uvicorn's own error, exit 3."""
    import socket

    monkeypatch.setenv("RECKON_REPORT_DB_URL", db.url)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["workbench", "--warehouse", str(tmp_path), "--port", str(port)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert f"--port {port} is not free on 127.0.0.1" in err and "Traceback" not in err


def test_reckon_workbench_on_a_warehouse_without_a_report_database_is_refused(
        tmp_path: Path, monkeypatch, capsys) -> None:
    """A mistyped --warehouse served a new, empty database nobody could log in to."""
    monkeypatch.delenv("RECKON_REPORT_DB_URL", raising=False)
    typo = tmp_path / "warehous"
    assert main(["workbench", "--warehouse", str(typo), "--port", "8088"]) == 2
    err = capsys.readouterr().err
    assert f"no report database at {typo}/reports/reckon.db" in err
    assert "reckon users add" in err and not typo.exists()


def test_the_paging_measurement_runs_as_the_readme_says(tmp_path: Path) -> None:
    """scripts/workbench_paging.py, the README's measurement (100,000 breaks), on a small day:
    every case is a real page over HTTP, under its budget."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "scripts" / "workbench_paging.py"
    done = subprocess.run([sys.executable, str(script), "--breaks", "400", "--budget", "5"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "filled 400 breaks in " + lines[0].split(" in ")[1]
    assert sum("50 rows shown" in line for line in lines) >= 5, done.stdout
    assert lines[-1].startswith("worst page: ")


_WITHOUT_SPARK = """
import sys
for name in ("pyspark", "py4j", "delta"):  # importing any of them now raises ImportError
    sys.modules[name] = None
import re
from datetime import date
from fastapi.testclient import TestClient
from reports.db.repository import ReportDB
from workbench.app import create_app
from workbench.auth import add_user
from workbench.sample import sample_day
from tests.signers import workbench_trust
with ReportDB("sqlite:///" + sys.argv[1]) as db:
    sample_day(db, date(2026, 1, 1), breaks=60, reconciler="alice")
    add_user(db, "bob", "reviewer", "correct horse battery staple")
    client = TestClient(create_app(db, secret=b"s" * 32, trust=workbench_trust(db)))
    token = re.search('name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
    client.post("/login", data={"name": "bob", "password": "correct horse battery staple",
                                "csrf": token})
    day = "/day/2026-01-01"
    listed = client.get(day + "/breaks?partition=1&source=pos").text
    one = re.search('href="(/break[^"]+)"', listed).group(1).replace("&amp;", "&")
    for path in ("/", day, day + "/breaks", one, "/log", "/log/export.json"):
        assert client.get(path).status_code == 200, path
    token = re.search('name="csrf" value="([^"]+)"', client.get(day).text).group(1)
    signed = client.post("/signoff", data={"csrf": token, "run": "nightly-2026-01-01",
                                           "decision": "approved", "note": "checked"})
    assert "Signed off: 1 of 1 approvals (bob)" in signed.text
print("served without Spark")
"""


def test_every_page_and_a_sign_off_are_served_without_spark(tmp_path: Path) -> None:
    """Issue 42: the workbench needs no Spark to serve a page (nor any import of it)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", _WITHOUT_SPARK, str(tmp_path / "r.db")],
                          cwd=root, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and done.stdout == "served without Spark\n", done.stderr


def test_a_day_whose_signed_run_was_replaced_says_it_needs_a_new_sign_off(app,
                                                                         db: ReportDB) -> None:
    """After the lookback re-audited a signed day, the day page showed an unsigned run and
    nothing about the sign-off the re-audit undid (the day's report says it)."""
    bob = _client(app, "bob")
    append(db, RUN, "bob", "approved", "figures checked")
    assert 'id="replaced"' not in bob.get(f"/day/{DAY}").text
    sample_day(db, DAY, breaks=130, reconciler="alice", run_id="nightly-2026-01-01-again",
               now=datetime.now(UTC) + timedelta(hours=1))
    page = bob.get(f"/day/{DAY}").text
    assert "nightly-2026-01-01-again" in page
    assert '<p class="warn" id="state">Awaiting sign-off: 0 of 1 approvals.</p>' in page
    assert (f"A later audit replaced run <code>{RUN}</code> (Signed off: 1 of 1 approvals "
            "(bob)): a sign-off does not carry over" in page and "this run needs its own" in page)
    append(db, "nightly-2026-01-01-again", "bob", "approved", "checked again")
    page = bob.get(f"/day/{DAY}").text
    assert 'id="replaced"' not in page and "Signed off: 1 of 1 approvals (bob)." in page


def test_the_break_list_pages_forward_keeping_its_filters_and_back_to_the_first(app) -> None:
    """A page deep in the list had only 'Next page': back to the first meant the browser's
    history or losing the filters ('clear')."""
    import html

    bob = _client(app, "bob")
    url, seen, pages = f"/day/{DAY}/breaks?kind=nightly&cause=UNEXPLAINED", [], 0
    while url:
        text = bob.get(url).text
        pages += 1
        seen += re.findall(r'<a class="break" href="([^"]+)"', text)
        first = re.search(r'<a id="first" href="\?([^"]+)"', text)
        assert (first is None) == (pages == 1), text
        if first:
            assert "cause=UNEXPLAINED" in first.group(1) and "after=" not in first.group(1)
        found = re.search(r'<a id="next" href="([^"]+)"', text)
        url = f"/day/{DAY}/breaks" + html.unescape(found.group(1)) if found else ""
        assert not found or "cause=UNEXPLAINED" in url
    assert pages == 2 and len(seen) == len(set(seen)) == 52


def test_reckon_workbench_serves_until_interrupted_as_the_readme_starts_it(db: ReportDB,
                                                                          tmp_path: Path) -> None:
    """The README's `reckon workbench` on embedded defaults (a SQLite report database in the
    warehouse), in its own process: the start-up line once the port is bound, a login over
    HTTP, and Ctrl-C stops it (one line, no traceback)."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import urllib.parse
    import urllib.request
    from http.cookiejar import CookieJar

    warehouse = tmp_path / "warehouse"
    (warehouse / "reports").mkdir(parents=True)
    db.engine.dispose()
    Path(db.url.removeprefix("sqlite:///")).rename(warehouse / "reports" / "reckon.db")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    env["PYTHONPATH"] = str(root)
    server = subprocess.Popen(
        [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())",
         "workbench", "--warehouse", str(warehouse), "--port", str(port)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # as a shell starts a command in the foreground: Ctrl-C's signal not ignored, even
        # when the test run itself was started in the background (which ignores it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = server.stdout.readline() if server.stdout else ""
        assert line.startswith(f"reckon workbench on http://127.0.0.1:{port} (report database "
                               f"sqlite:///{warehouse}/reports/reckon.db)"), line
        url = f"http://127.0.0.1:{port}"
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        token = _csrf(browser.open(f"{url}/login", timeout=30).read().decode())
        form = urllib.parse.urlencode({"name": "bob", "password": PASSWORD, "csrf": token})
        home = browser.open(f"{url}/login", data=form.encode(), timeout=30).read().decode()
        assert "bob (reviewer)" in home and RUN in home
    finally:
        server.send_signal(signal.SIGINT)
        code = server.wait(timeout=30)
    err = server.stderr.read() if server.stderr else ""
    assert (code, err) == (130, "reckon workbench: interrupted\n")  # the shell's Ctrl-C code


def test_a_day_signed_off_in_a_broken_log_says_the_log_fails_verification(app,
                                                                         db: ReportDB) -> None:
    """The day page said "Signed off" over a log entry edited (or figures changed) by
    hand; only the log page said BROKEN."""
    bob = _client(app, "bob")
    append(db, RUN, "bob", "approved", "figures checked")
    assert 'id="log-broken"' not in bob.get("/").text + bob.get(f"/day/{DAY}").text
    with db.engine.begin() as conn:  # the run's signed figures changed after the sign-off
        conn.exec_driver_sql("UPDATE audit_run_currencies SET gap_total = 0 "
                             "WHERE currency = 'EUR'")
    day = bob.get(f"/day/{DAY}").text
    assert "The sign-off log fails verification</b> (1 problem)" in day
    assert 'id="log-broken"' not in bob.get("/").text  # the list checks the chain only
    with db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE signoff_log SET by = 'carl' WHERE seq = 1")
    for path in ("/", f"/day/{DAY}"):
        assert 'id="log-broken"' in bob.get(path).text, path


def test_an_auditor_exports_the_filtered_breaks_as_csv_but_may_not_act(app, db: ReportDB
                                                                       ) -> None:
    """Breaks could not be exported. The CSV holds what the list's filters match, every page
    of it, each amount exact in its currency's own digits; reading is every role's, acting is
    not (checked on the server)."""
    import csv
    import io

    carl = _client(app, "carl")  # an auditor
    listed = carl.get(f"/day/{DAY}/breaks?currency=JPY&cause=UNEXPLAINED").text
    link = re.search(r'id="export-csv" href="([^"]+)"', listed)
    assert link and "currency=JPY" in link.group(1)
    response = carl.get(link.group(1).replace("&amp;", "&"))
    assert response.status_code == 200 and response.headers["content-type"].startswith(
        "text/csv")
    assert 'filename="reckon-breaks-2026-01-01-nightly.csv"' in response.headers[
        "content-disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    count = re.search(r"<b>([\d,]+)</b> breaks match", listed)
    assert count and len(rows) == int(count.group(1)) > 0
    assert {(r["currency"], r["status"]) for r in rows} == {("JPY", "UNEXPLAINED")}
    assert all(re.fullmatch(r"-?\d+", r["gap_amount"]) for r in rows)  # yen: no decimals
    assert {r["run_state"] for r in rows} == {"Awaiting sign-off: 0 of 1 approvals"}
    assert {r["review_status"] for r in rows} == {"open"} and {r["material"] for r in rows} == {""}
    every = list(csv.DictReader(io.StringIO(carl.get(f"/day/{DAY}/breaks.csv").text)))
    assert len(every) == 130  # every page of the list, not the first
    places = {r["currency"]: len(r["gap_amount"].partition(".")[2]) for r in every}
    assert places == {"EUR": 2, "JPY": 0, "KWD": 3}
    target = {"run": RUN, "ws": rows[0]["window_start"], "key": rows[0]["key"], "cur": "JPY",
              "action": "accept", "note": "fine"}
    refused = carl.post("/break/action", data={**target, "csrf": _csrf(listed)})
    assert refused.status_code == 403 and "read-only" in refused.text
    assert [(e.by, e.decision) for e in read_log(db)] == [("carl", "exported")] * 2
    assert _client(app).get(f"/day/{DAY}/breaks.csv", follow_redirects=False).headers[
        "location"] == "/login"  # not logged in: nothing exported
    wrong = carl.get(f"/day/{DAY}/breaks.csv?cause=NOPE")  # a mistake: one line, no file
    assert len(read_log(db)) == 2  # nothing exported, nothing recorded
    assert wrong.status_code == 400 and "cause=&#39;NOPE&#39; is not valid" in wrong.text


# ----------------------------------------------------------------------------- materiality


def _listed(client: TestClient, query: str) -> tuple[str, list[tuple[str, Decimal]]]:
    """A break list page and its rows' (currency, gap) in the order shown."""
    text = client.get(f"/day/{DAY}/breaks?{query}").text
    rows = re.findall(r'</a></td>\s*<td>[^<]*</td><td>([A-Z]{3})</td><td>[A-Z_]+</td>'
                      r'<td class="num">([^<]+)</td>', text)
    return text, [(code, Decimal(gap.replace(",", ""))) for code, gap in rows]


def test_a_reviewer_narrows_breaks_to_a_minimum_gap_per_currency_and_sorts_by_size(
        db: ReportDB, tmp_path: Path) -> None:
    """Issue 61: a minimum absolute gap per currency (exact, in that currency's own units; a
    currency not named is not narrowed) and a sort by absolute gap, largest first within each
    currency (a yen is not a euro), paged by keyset and exported as shown."""
    import csv
    import html
    import io

    app = create_app(db, trust=workbench_trust(db), secret=b"s" * 32, warehouse=tmp_path,
                     material_gap={"EUR": Decimal("1.40"), "JPY": Decimal("140")})
    bob = _client(app, "bob")
    text, rows = _listed(bob, "min_gap=EUR%3D1.40%2CJPY%3D140")
    count = int(re.search(r"<b>([\d,]+)</b> breaks match", text).group(1))  # type: ignore[union-attr]
    every = queries.break_page(db, RUN, DAY, queries.BreakFilter(), limit=1000).rows
    floor = {"EUR": Decimal("1.40"), "JPY": Decimal("140")}
    expected = [b for b in every if abs(b["gap_amount"]) >= floor.get(b["currency"], 0)]
    assert count == len(expected) < 130 and {c for c, _ in rows} == {"EUR", "JPY", "KWD"}
    assert all(abs(gap) >= floor.get(code, 0) for code, gap in rows)
    assert "|gap| at least 1.40 EUR, 140 JPY; other currencies unnarrowed" in text
    material = re.search(r'id="material-only" href="([^"]+)"', text)
    assert material and "min_gap=EUR%3D1.40%2CJPY%3D140" in material.group(1)
    # sorted by |gap|: every page, following 'next', holds the whole order once
    url, seen = f"/day/{DAY}/breaks?sort=gap&min_gap=EUR%3D1.40%2CJPY%3D140", []
    while url:
        page_text, page_rows = _listed(bob, url.split("?", 1)[1])
        seen += page_rows
        found = re.search(r'<a id="next" href="([^"]+)"', page_text)
        url = f"/day/{DAY}/breaks" + html.unescape(found.group(1)) if found else ""
        assert not found or ("sort=gap" in url and "min_gap=" in url)
    assert len(seen) == count
    assert seen == sorted(seen, key=lambda r: (r[0], -abs(r[1])))
    # the export holds the same breaks in the same order, each amount exact
    link = re.search(r'id="export-csv" href="([^"]+)"',
                     bob.get(f"/day/{DAY}/breaks?sort=gap&min_gap=EUR%3D1.40%2CJPY%3D140").text)
    assert link and "sort=gap" in link.group(1)
    exported = list(csv.DictReader(io.StringIO(bob.get(html.unescape(link.group(1))).text)))
    assert [(r["currency"], Decimal(r["gap_amount"])) for r in exported] == seen
    # a bare amount needs its currency; with one it is that currency's floor
    _, yen = _listed(bob, "currency=JPY&min_gap=140&sort=gap")
    assert yen and {c for c, _ in yen} == {"JPY"} and min(abs(g) for _, g in yen) >= 140
    assert abs(yen[0][1]) == max(abs(g) for _, g in yen)


def test_a_bad_minimum_gap_or_sort_is_one_clear_line(app) -> None:
    carl = _client(app, "carl")  # an auditor reads, filters and sorts like anyone
    for query, said in (
            ("min_gap=140", "min_gap=&#39;140&#39; is not valid: an amount is in one currency"),
            ("min_gap=JPY%3D0.5", "min_gap: JPY=0.5 is not valid: JPY has 0 decimal places"),
            ("min_gap=EUR%3D-1", "is not valid: a non-negative amount in EUR"),
            ("min_gap=XAU%3D1", "XAU has no minor unit"),
            ("min_gap=EUR%3D1e40", "is not valid: a non-negative amount in EUR"),
            ("sort=size", "sort=&#39;size&#39; is not valid: one of window, gap")):
        for path in ("breaks", "breaks.csv"):
            response = carl.get(f"/day/{DAY}/{path}?{query}")
            assert response.status_code == 400 and said in response.text, response.text
            assert "Traceback" not in response.text


def test_a_cursor_of_one_order_is_refused_by_the_other(db: ReportDB) -> None:
    by_window = queries.break_page(db, RUN, DAY, queries.BreakFilter(), limit=5)
    by_gap = queries.break_page(db, RUN, DAY, queries.BreakFilter(sort="gap"), limit=5)
    assert by_window.next_cursor and by_gap.next_cursor
    for cursor, sort in ((by_window.next_cursor, "gap"), (by_gap.next_cursor, "window")):
        with pytest.raises(UsageError, match="not a page cursor of this order"):
            queries.break_page(db, RUN, DAY, queries.BreakFilter(sort=sort),
                               queries.Cursor.decode(cursor))


# ----------------------------------------------------------------------------- reject / reopen


def test_a_reviewer_rejects_and_reopens_a_break_with_a_reason_shown_everywhere(
        tmp_path: Path, monkeypatch, capsys) -> None:
    """Issue 61: a break is rejected (its explanation disputed) and reopened, each with a
    required reason, one signed log entry each; the workbench's page, list and CSV, and
    `reckon breaks list` show the same status; a run's acceptance leaves a rejected break
    rejected; an auditor and the run's reconciler are refused on the server."""
    import csv
    import io

    from app.settings import load_settings

    monkeypatch.chdir(tmp_path)
    for name in ("RECKON_CONFIG", "RECKON_REPORT_DB_URL", "RECKON_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    wh = tmp_path / "wh"
    with ReportDB.from_settings(load_settings(env={}, warehouse=str(wh))) as db:
        sample_day(db, DAY, breaks=12, reconciler="alice", told=0)
        for name, role in (("bob", "reviewer"), ("alice", "reviewer"), ("carl", "auditor")):
            add_user(db, name, role, PASSWORD)
        app = create_app(db, trust=workbench_trust(db), secret=b"s" * 32)
        target = {"run": RUN, "ws": "2026-01-01T00:00:00+00:00", "key": "merchant-01",
                  "cur": "JPY"}  # nothing explains it: open
        bob = _client(app, "bob")
        page = bob.get("/break", params=target).text
        assert 'value="reject">Reject</button>' in page and 'value="reopen"' not in page
        token = _csrf(page)
        missing = bob.post("/break/action", data={**target, "csrf": token, "action": "reject",
                                                  "note": "  "})
        assert missing.status_code == 400 and \
            "note is missing: rejecting a break needs a reason" in missing.text
        for who, said in (("carl", "read-only"), ("alice", "four-eyes")):
            client = _client(app, who)
            refused = client.post("/break/action", data={
                **target, "csrf": _csrf(client.get("/").text), "action": "reject",
                "note": "not mine to judge"})
            assert refused.status_code == 403 and said in refused.text, who
        done = bob.post("/break/action", data={**target, "csrf": token, "action": "reject",
                                               "note": "the late event is from another day"})
        assert done.status_code == 200 and "reject recorded" in done.text
        assert '<b id="review-status">rejected</b>' in done.text
        assert 'value="reopen">Reopen</button>' in done.text
        assert ("break-rejected: break 2026-01-01T00:00:00.000000Z merchant-01 JPY: the late "
                "event is from another day") in done.text
        listed = bob.get(f"/day/{DAY}/breaks?status=rejected").text
        assert "<b>1</b> breaks match" in listed
        rows = list(csv.DictReader(io.StringIO(bob.get(
            f"/day/{DAY}/breaks.csv?status=rejected").text)))
        assert [(r["key"], r["review_status"]) for r in rows] == [("merchant-01", "rejected")]
        append(db, RUN, "bob", "accepted", "the rest is fine")  # closes open breaks
        assert queries.break_detail(db, RUN, _target_of(target))["review_status"] == "rejected"
        capsys.readouterr()
        assert main(["breaks", "list", "--warehouse", str(wh), "--status", "rejected"]) == 0
        out = capsys.readouterr().out
        assert "merchant-01" in out and "1 break: 1 rejected" in out, out
        reopened = bob.post("/break/action", data={**target, "csrf": token,
                                                   "action": "reopen",
                                                   "note": "the other day's replay moved it"})
        assert '<b id="review-status">open</b>' in reopened.text
        again = bob.post("/break/action", data={**target, "csrf": token, "action": "reopen",
                                                "note": "twice"})
        assert again.status_code == 403 and "is open already: nothing to reopen" in again.text
        assert [e.decision for e in read_log(db)] == ["break-rejected", "exported",
                                                      "accepted", "break-reopened"]
        assert verify(db).ok


def _target_of(form: dict[str, str]) -> BreakTarget:
    return BreakTarget(datetime.fromisoformat(form["ws"]), form["key"], form["cur"])


def test_rejecting_or_reopening_a_run_needs_a_reason_and_a_reviewer(app, db: ReportDB) -> None:
    """Issue 61: a run's rejection and reopening each need a reason (the note), are one log
    entry each and show in the run's state words; an auditor and a reconciler are refused."""
    bob = _client(app, "bob")
    token = _csrf(bob.get(f"/day/{DAY}").text)
    for decision, said in (("rejected", "rejecting a run"), ("reopened", "reopening a run")):
        response = bob.post("/signoff", data={"csrf": token, "run": RUN, "decision": decision,
                                              "note": ""})
        assert response.status_code == 400 and f"note is missing: {said} needs a reason" \
            in response.text
    rejected = bob.post("/signoff", data={"csrf": token, "run": RUN, "decision": "rejected",
                                          "note": "JPY gap unexplained"})
    assert "Rejected by bob: 0 of 1 approvals." in rejected.text
    assert "<b>bob</b> rejected: JPY gap unexplained" in rejected.text
    for who, said in (("carl", "read-only"), ("rita", "only a reviewer")):
        client = _client(app, who)
        refused = client.post("/signoff", data={"csrf": _csrf(client.get("/").text),
                                                "run": RUN, "decision": "reopened",
                                                "note": "let me"})
        assert refused.status_code == 403 and said in refused.text, who
    reopened = bob.post("/signoff", data={"csrf": token, "run": RUN, "decision": "reopened",
                                          "note": "the JPY feed was re-sent"})
    assert "Awaiting sign-off: 0 of 1 approvals." in reopened.text
    assert [e.decision for e in read_log(db)] == ["rejected", "reopened"]


# ----------------------------------------------------------------------------- bulk actions


def _bulk_form(text: str, form_id: str) -> dict[str, str]:
    """The hidden and filled fields of a form on the page (as a browser would post them)."""
    import html

    found = re.search(rf'<form method="post" action="[^"]+" id="{form_id}"[^>]*>(.*?)</form>',
                      text, re.S)
    assert found, text
    return {html.unescape(k): html.unescape(v) for k, v in re.findall(
        r'<input type="hidden" name="([^"]+)" value="([^"]*)">', found.group(1))}


def test_a_reviewer_bulk_accepts_the_filtered_breaks_after_a_confirmation(
        app, db: ReportDB) -> None:
    """Issue 61: one action on every break the filters match: a confirmation names how many
    and their total gap per currency (exact, each in its own digits, never added across),
    then one log entry per break; a set that changed since the confirmation is refused."""
    bob = _client(app, "bob")
    listed = bob.get(f"/day/{DAY}/breaks?cause=UNEXPLAINED&currency=JPY").text
    form = _bulk_form(listed, "bulk")
    assert form["cause"] == "UNEXPLAINED" and form["currency"] == "JPY"
    expected = queries.all_matches(db, RUN, DAY, queries.BreakFilter(cause="UNEXPLAINED",
                                                                     currency="JPY"), cap=999)
    total = sum(b["gap_amount"] for b in expected)
    confirm = bob.post(f"/day/{DAY}/bulk", data={**form, "action": "accept",
                                                 "note": "JPY feed re-sent, gaps agreed"})
    assert confirm.status_code == 200 and read_log(db) == []  # nothing yet
    assert (f"You are about to <b>accept</b> <b>{len(expected)}</b> breaks of run "
            f"<code>{RUN}</code>") in confirm.text
    assert (f'<tr><td>JPY</td><td class="num">{len(expected)}</td><td class="num">'
            f"{total:,.0f}</td></tr>") in confirm.text
    final = _bulk_form(confirm.text, "bulk-confirm")
    assert final["expect"] and final["note"] == "JPY feed re-sent, gaps agreed"
    done = bob.post(f"/day/{DAY}/bulk", data=final)
    assert done.status_code == 200 and f"accept recorded on {len(expected)} breaks" in done.text
    log = read_log(db)
    assert [e.decision for e in log] == ["break-accepted"] * len(expected)
    assert all(e.by == "bob" and e.note.endswith(" JPY: JPY feed re-sent, gaps agreed")
               for e in log)
    assert {e.note.split(": ")[0] for e in log} == {
        BreakTarget(b["window_start"], b["key"], b["currency"]).label() for b in expected}
    assert verify(db).ok
    accepted = queries.break_page(db, RUN, DAY, queries.BreakFilter(
        cause="UNEXPLAINED", currency="JPY", review_status="accepted"), limit=999)
    assert accepted.total == len(expected)
    # the same confirmation again: the set is the same, but accepting twice is its own act;
    # a confirmation of another set (one break commented since) is refused, nothing recorded
    again = bob.post(f"/day/{DAY}/bulk", data={**form, "cause": "", "action": "comment",
                                               "note": "all of JPY"})
    stale = _bulk_form(again.text, "bulk-confirm")
    sample_day(db, DAY, breaks=131, reconciler="alice", run_id=RUN)  # one break more
    refused = bob.post(f"/day/{DAY}/bulk", data=stale)
    assert refused.status_code == 400 and "changed since you confirmed" in refused.text
    assert len(read_log(db)) == len(expected)


def _the_reconciler_is_refused_a_bulk(app, form: dict[str, str]) -> None:
    """alice reconciled the day's run: her bulk action is refused on the server, before the
    confirmation and at it (four eyes)."""
    alice = _client(app, "alice")
    token = _csrf(alice.get(f"/day/{DAY}/breaks").text)
    for extra in ({}, {"expect": "0" * 64}):
        refused = alice.post(f"/day/{DAY}/bulk", data={**form, **extra, "csrf": token})
        assert refused.status_code == 403 and "four-eyes" in refused.text


def test_bulk_actions_refuse_the_runs_reconciler_an_auditor_and_no_note(app,
                                                                       db: ReportDB) -> None:
    """A reviewer who reconciled the run may not bulk-accept its breaks (four eyes, on the
    server, before the confirmation and at it); an auditor may not act at all."""
    form = {"kind": "nightly", "currency": "EUR", "action": "accept", "note": "mine"}
    _the_reconciler_is_refused_a_bulk(app, form)
    carl = _client(app, "carl")
    listed = carl.get(f"/day/{DAY}/breaks").text
    assert 'id="bulk"' not in listed  # no form for an auditor, and the server refuses too
    refused = carl.post(f"/day/{DAY}/bulk", data={**form, "csrf": _csrf(listed)})
    assert refused.status_code == 403 and "read-only" in refused.text
    bob = _client(app, "bob")
    token = _csrf(bob.get(f"/day/{DAY}/breaks").text)
    empty = bob.post(f"/day/{DAY}/bulk", data={**form, "note": " ", "csrf": token})
    assert empty.status_code == 400 and "note is missing" in empty.text
    none = bob.post(f"/day/{DAY}/bulk", data={**form, "merchant": "nobody", "csrf": token})
    assert none.status_code == 400 and "no break matches these filters" in none.text
    assert read_log(db) == []


# ----------------------------------------------------------------------------- assignment


def test_a_reviewer_assigns_breaks_with_a_due_date_and_finds_mine_and_overdue(
        app, db: ReportDB) -> None:
    """Issue 61: a break (or the filtered list, in bulk) is assigned to a user with a due
    date, one log entry each naming both; "my breaks" and "overdue" are views of the list;
    the list and the CSV show age, assignee and due date; a re-audit keeps the assignment;
    the run's reconciler, an auditor or an unknown user cannot be assigned, an auditor
    cannot assign."""
    import csv
    import io

    today = datetime.now(UTC).date()
    yesterday, tomorrow = today - timedelta(days=1), today + timedelta(days=1)
    one = {"run": RUN, "ws": "2026-01-01T00:00:00+00:00", "key": "merchant-01", "cur": "JPY"}
    bob = _client(app, "bob")
    page = bob.get("/break", params=one).text
    assert 'id="assigned">not assigned' in page and '<option value="rita">' in page
    assert '<option value="alice">' not in page  # the run's reconciler is no choice
    token = _csrf(page)
    for name, said in (("alice", "four-eyes"), ("carl", "not an enabled workbench user who "
                                                       "may act"), ("nobody", "not an enabled")):
        refused = bob.post("/break/action", data={**one, "csrf": token, "action": "assign",
                                                  "assign_to": name})
        assert refused.status_code == 403 and said in refused.text, name
    bad = bob.post("/break/action", data={**one, "csrf": token, "action": "assign",
                                          "assign_to": "rita", "due": "soon"})
    assert bad.status_code == 400 and "due" in bad.text
    carl = _client(app, "carl")
    refused = carl.post("/break/action", data={**one, "csrf": _csrf(carl.get("/").text),
                                               "action": "assign", "assign_to": "rita"})
    assert refused.status_code == 403 and "read-only" in refused.text
    done = bob.post("/break/action", data={**one, "csrf": token, "action": "assign",
                                           "assign_to": "rita", "due": yesterday.isoformat(),
                                           "note": "you know the JPY feed"})
    assert f"assigned to <b>rita</b>, due {yesterday}" in done.text
    assert read_log(db)[-1].note == (f"break 2026-01-01T00:00:00.000000Z merchant-01 JPY: "
                                     f"assigned to rita, due {yesterday}: you know the JPY feed")
    # in bulk: the filtered list, after a confirmation that says to whom and by when
    listed = bob.get(f"/day/{DAY}/breaks?cause=MISSING_IN_STREAM&currency=EUR").text
    form = _bulk_form(listed, "bulk")
    confirm = bob.post(f"/day/{DAY}/bulk", data={**form, "action": "assign",
                                                 "assign_to": "rita",
                                                 "due": tomorrow.isoformat()})
    assert f'<b id="bulk-assignment">assigned to rita, due {tomorrow}</b>' in confirm.text
    bob.post(f"/day/{DAY}/bulk", data=_bulk_form(confirm.text, "bulk-confirm"))
    bulk = queries.all_matches(db, RUN, DAY, queries.BreakFilter(cause="MISSING_IN_STREAM",
                                                                 currency="EUR"), cap=999)
    assert bulk and {(b["assignee"], b["due_on"]) for b in bulk} == {("rita", tomorrow)}
    assert len(read_log(db)) == 1 + len(bulk)
    # rita's views
    rita = _client(app, "rita")
    mine = rita.get(f"/day/{DAY}/breaks").text
    assert re.search(r'<a id="my-breaks" href="\?kind=nightly&amp;assignee=rita">', mine)
    mine = rita.get(f"/day/{DAY}/breaks?assignee=rita").text
    assert f"<b>{1 + len(bulk)}</b> breaks match" in mine
    overdue = rita.get(f"/day/{DAY}/breaks?overdue=1").text
    assert "<b>1</b> breaks match" in overdue
    assert f'<td class="assignee">rita</td><td class="bad due">{yesterday} overdue</td>' \
        in overdue
    rows = list(csv.DictReader(io.StringIO(rita.get(
        f"/day/{DAY}/breaks.csv?assignee=rita").text)))
    assert len(rows) == 1 + len(bulk)
    assert {(r["assignee"], r["due_on"], r["overdue"]) for r in rows} == {
        ("rita", yesterday.isoformat(), "overdue"), ("rita", tomorrow.isoformat(), "")}
    assert all(r["age_days"] == "0" for r in rows)
    # settled: no longer overdue; a re-audit of the day keeps who and when
    append(db, RUN, "rita", "break-accepted", "fine", target=_target_of(one))
    assert "<b>0</b> breaks match" in rita.get(f"/day/{DAY}/breaks?overdue=1").text
    sample_day(db, DAY, breaks=130, reconciler="alice", run_id=RUN)
    assert queries.break_detail(db, RUN, _target_of(one))["assignee"] == "rita"


# ----------------------------------------------------------------------------- exports logged


def _pdf_text(content: bytes) -> str:
    """A PDF's text as poppler's ``pdftotext -layout`` reads it (a reader's view of its lines).
    Missing poppler fails the test with the fix, never skips it."""
    pdftotext = shutil.which("pdftotext")
    if pdftotext is None:
        pytest.fail("poppler's pdftotext is not installed: run scripts/setup.sh", pytrace=False)
    return subprocess.run([pdftotext, "-layout", "-", "-"], input=content,
                          capture_output=True, check=True).stdout.decode()


def test_every_export_is_recorded_in_the_log_with_who_and_when(app, db: ReportDB) -> None:
    """Issue 61: each CSV or PDF export of the filtered break list is one 'exported' entry of
    the chained log (who, when, which file, how many breaks, which filters), made by whoever
    exported: an auditor and the run's reconciler too (an export decides nothing, so the
    review state stays as it was). The PDF, read back with poppler's pdftotext, holds the
    breaks, their total per currency and who exported it when."""
    carl, alice, bob = (_client(app, n) for n in ("carl", "alice", "bob"))
    before = datetime.now(UTC)
    assert carl.get(f"/day/{DAY}/breaks.csv?currency=JPY&cause=UNEXPLAINED").status_code == 200
    assert alice.get(f"/day/{DAY}/breaks.csv").status_code == 200
    pdf = bob.get(f"/day/{DAY}/breaks.pdf?currency=KWD&sort=gap")
    assert pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf"
    assert 'filename="reckon-breaks-2026-01-01-nightly.pdf"' in pdf.headers[
        "content-disposition"]
    kwd = queries.all_matches(db, RUN, DAY, queries.BreakFilter(currency="KWD", sort="gap"),
                              cap=999)
    jpy = queries.break_page(db, RUN, DAY, queries.BreakFilter(currency="JPY",
                                                               cause="UNEXPLAINED")).total
    log = read_log(db)
    assert [(e.by, e.decision, e.note) for e in log] == [
        ("carl", "exported", f"exported reckon-breaks-2026-01-01-nightly.csv ({jpy} breaks; "
                             "filters: cause=UNEXPLAINED, currency=JPY)"),
        ("alice", "exported", "exported reckon-breaks-2026-01-01-nightly.csv (130 breaks; "
                              "filters: none)"),
        ("bob", "exported", f"exported reckon-breaks-2026-01-01-nightly.pdf ({len(kwd)} "
                            "breaks; filters: currency=KWD, sort=gap)")]
    assert all(before <= e.at <= datetime.now(UTC) for e in log) and verify(db).ok
    assert review_states(db, [RUN])[RUN].state == "open"  # an export decides nothing
    day = bob.get(f"/day/{DAY}").text
    assert "<b>carl</b> exported: exported reckon-breaks-2026-01-01-nightly.csv" in day
    text = _pdf_text(pdf.content)
    assert "Breaks of 2026-01-01 (nightly), audit run nightly-2026-01-01" in text
    assert f"Exported by bob at {log[2].at.strftime('%Y-%m-%d %H:%M:%S')} UTC" in text
    assert "Filters: currency=KWD, sort=gap." in text
    total = sum(b["gap_amount"] for b in kwd)
    assert f"{len(kwd)} breaks; total gap per currency: KWD {total:,.3f} ({len(kwd)})." in text
    largest = f"{kwd[0]['gap_amount']:,.3f}"  # sorted by |gap|: the first row
    assert re.search(rf"{kwd[0]['key']}\s+KWD\s+{kwd[0]['status']}\s+{re.escape(largest)}",
                     text), text[:2000]
    assert text.count(" KWD ") >= len(kwd)  # every break's row


# ----------------------------------------------------------------------------- recorded materiality


def test_the_material_mark_is_the_runs_own_after_the_setting_changed(
        tmp_path: Path, monkeypatch, capsys) -> None:
    """Issue 61: a run keeps the material_gap it was audited under; the workbench's list, its
    CSV and `reckon breaks list` mark its breaks by it after the setting changed (EUR 1.40
    then, EUR 100 now); a run recorded before runs kept it falls back to the setting."""
    import csv
    import io

    from app.settings import load_settings

    monkeypatch.chdir(tmp_path)
    for name in ("RECKON_CONFIG", "RECKON_REPORT_DB_URL", "RECKON_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RECKON_MATERIAL_GAP", "EUR=100,JPY=10000,KWD=100")  # changed since
    wh = tmp_path / "wh"
    then = {"EUR": "1.40", "JPY": "140", "KWD": "0.140"}
    later = date(2026, 1, 2)
    with ReportDB.from_settings(load_settings(env={}, warehouse=str(wh))) as db:
        sample_day(db, DAY, breaks=30, reconciler="alice", told=0, material_gap=then)
        sample_day(db, later, breaks=30, reconciler="alice", told=0)  # before runs kept it
        add_user(db, "bob", "reviewer", PASSWORD)
        now = {"EUR": Decimal(100), "JPY": Decimal(10000), "KWD": Decimal(100)}
        app = create_app(db, trust=workbench_trust(db), secret=b"s" * 32, material_gap=now)
        every = queries.break_page(db, RUN, DAY, queries.BreakFilter(), limit=100).rows
        expected = {(b["key"], b["currency"], b["window_start"]):
                    "material" if abs(b["gap_amount"]) >= Decimal(then[b["currency"]]) else "-"
                    for b in every}
        assert set(expected.values()) == {"material", "-"}
        bob = _client(app, "bob")
        listed = bob.get(f"/day/{DAY}/breaks").text
        marks = re.findall(r'<td class="(?:bad material|material)">([^<]*)</td>', listed)
        assert sorted(marks) == sorted(expected.values())
        assert "min_gap=EUR%3D1.40%2CJPY%3D140%2CKWD%3D0.140" in listed  # 'material only'
        rows = list(csv.DictReader(io.StringIO(bob.get(f"/day/{DAY}/breaks.csv").text)))
        assert {(r["key"], r["currency"], r["window_start"]): r["material"] for r in rows} == {
            (k, c, w.isoformat()): m for (k, c, w), m in expected.items()}
        fallback = list(csv.DictReader(io.StringIO(bob.get(f"/day/{later}/breaks.csv").text)))
        assert {r["material"] for r in fallback} == {"-"}  # nothing reaches EUR 100 etc.
        # the PDF export marks the same breaks (read back with poppler, one line a break)
        text = _pdf_text(bob.get(f"/day/{DAY}/breaks.pdf").content)
        cells = [line.split() for line in text.splitlines()
                 if re.match(r"\s*2026-01-01 \d\d:\d\d:\d\d ", line)]
        assert "Material" in text and {(f"{c[0]} {c[1]}", c[2], c[3]): c[7] for c in cells} \
            == {(f"{w.astimezone(UTC):%Y-%m-%d %H:%M:%S}", k, c): m
                for (k, c, w), m in expected.items()}
    capsys.readouterr()
    assert main(["breaks", "list", "--warehouse", str(wh), "--date", DAY.isoformat(),
                 "--json"]) == 0
    import json

    shown = [b["material"] for b in json.loads(capsys.readouterr().out)]
    assert len(shown) == 30 and sum(shown) == list(expected.values()).count("material") > 0


# ----------------------------------------------------------------------------- period view


def test_days_not_over_yet_are_open_not_still_to_sign(app, db: ReportDB) -> None:
    """The current month, looked at mid-month: the days from today on have no run because
    they have not ended, not because nobody audited them; they say so and are not counted as
    still to sign (the default month view used to list every future day)."""
    now = datetime(2026, 1, 20, 9, 30, tzinfo=UTC)
    view = queries.period(db, date(2026, 1, 1), date(2026, 1, 31), now=now)
    opened = [d["day"] for d in view["days"] if d["open"]]
    assert opened == [date(2026, 1, day) for day in range(20, 32)]  # today to the 31st
    assert view["to_sign"] == [date(2026, 1, day) for day in range(1, 20)]  # never audited
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    month = f"{yesterday:%Y-%m}"
    text = _client(app, "carl").get(f"/period?month={month}").text
    today_row = re.search(rf'/day/{yesterday + timedelta(days=1)}[^"]*">[^<]*</a></td>\s*'
                          r'<td colspan="2" class="([^"]*)">([^<]*)</td>', text)
    if yesterday.month == (yesterday + timedelta(days=1)).month:  # today is in that month
        assert today_row and today_row.groups() == ("state", "Day not over yet")
    assert re.search(rf'/day/{yesterday}[^"]*">[^<]*</a></td>\s*<td colspan="2" '
                     r'class="warn state">Not audited</td>', text)


def test_the_month_view_shows_each_days_state_unsettled_breaks_by_age_and_days_to_sign(
        app, db: ReportDB) -> None:
    """Issue 61: a month at a glance: each day's state in the words every view shows, its
    unsettled (open or rejected) breaks, those by age bucket and currency (counts, never an
    amount across currencies), and the days still to sign: awaiting sign-off, rejected, or
    never audited. Any role reads it."""
    now = datetime.now(UTC)
    for n, age in ((2, 5), (3, 10)):  # days audited 5 and 10 days ago
        sample_day(db, date(2026, 1, n), breaks=9, reconciler="alice", told=0,
                   now=now - timedelta(days=age))
    append(db, RUN, "bob", "approved", "fine")           # Jan 1: signed off
    append(db, "nightly-2026-01-02", "bob", "rejected", "KWD feed incomplete")
    carl = _client(app, "carl")
    text = carl.get("/period?month=2026-01").text
    assert "<h1>2026-01-01 to 2026-01-31 <small>nightly</small></h1>" in text
    to_sign = re.search(r'<p id="to-sign"[^>]*>(.*?)</p>', text, re.S).group(1)  # type: ignore[union-attr]
    assert "<b>30 days still to sign</b>" in to_sign
    assert ">2026-01-02</a>, <a" in to_sign and ">2026-01-03</a>" in to_sign
    assert ">2026-01-01</a>" not in to_sign and ">2026-01-31</a>" in to_sign  # never audited
    days = re.findall(r'<tr>\s*<td><a href="/day/(2026-01-0[1-4])[^"]*">[^<]*</a></td>\s*'
                      r'(?:<td><code>[^<]*</code></td><td class="[^"]*">([^<]*)</td>|'
                      r'<td colspan="2" class="warn state">(Not audited)</td>)', text)
    assert [(d, state or missing) for d, state, missing in days] == [
        ("2026-01-01", "Signed off: 1 of 1 approvals (bob)"),
        ("2026-01-02", "Rejected by bob: 0 of 1 approvals"),
        ("2026-01-03", "Awaiting sign-off: 0 of 1 approvals"),
        ("2026-01-04", "Not audited")]
    view = queries.period(db, date(2026, 1, 1), date(2026, 1, 31), now=now)
    unsettled = {d["day"]: d["unsettled"] for d in view["days"] if d["run"]}
    open_of = {day: queries.break_page(db, run_id, day, queries.BreakFilter(
        review_status="open")).total for day, run_id in (
        (DAY, RUN), (date(2026, 1, 2), "nightly-2026-01-02"),
        (date(2026, 1, 3), "nightly-2026-01-03"))}
    assert unsettled == open_of and all(unsettled.values())
    ages = dict(view["buckets"])
    assert view["currencies"] == ["EUR", "JPY", "KWD"]
    assert sum(ages["new today"]) == open_of[DAY]
    assert sum(ages["3-7 days"]) == open_of[date(2026, 1, 2)]
    assert sum(ages["over a week"]) == open_of[date(2026, 1, 3)]
    assert sum(ages["1-2 days"]) == 0
    assert '<table class="grid" id="ages">' in text and "<th class=\"num\">KWD</th>" in text
    for query, said in (("month=2026-13", "month=&#39;2026-13&#39; is not valid"),
                        ("start=2026-02-01&end=2026-01-01", "on or after start"),
                        ("start=2024-01-01&end=2026-01-01", "at most 366 days")):
        bad = carl.get(f"/period?{query}")
        assert bad.status_code == 400 and said in bad.text, query


def test_reckon_breaks_list_shows_who_has_a_break_and_by_when(tmp_path: Path, monkeypatch,
                                                              capsys) -> None:
    """Issue 61: `reckon breaks list` shows ASSIGNEE and DUE once a listed break is assigned
    (`--json`: assignee, due_on), as the workbench's list and CSV do."""
    import json

    from app.settings import load_settings
    from reports.review import Assignment

    monkeypatch.chdir(tmp_path)
    for name in ("RECKON_CONFIG", "RECKON_REPORT_DB_URL", "RECKON_WAREHOUSE",
                 "RECKON_MATERIAL_GAP"):
        monkeypatch.delenv(name, raising=False)
    wh = tmp_path / "wh"
    with ReportDB.from_settings(load_settings(env={}, warehouse=str(wh))) as db:
        sample_day(db, DAY, breaks=6, reconciler="alice", told=0)
        add_user(db, "rita", "reconciler", PASSWORD)
        target = BreakTarget(datetime(2026, 1, 1, tzinfo=UTC), "merchant-01", "JPY")
        append(db, RUN, "bob", "break-assigned", "", target=target,
                       assignment=Assignment("rita", date(2026, 1, 9)))
    capsys.readouterr()
    assert main(["breaks", "list", "--warehouse", str(wh), "--date", DAY.isoformat()]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[11:14] == ["ASSIGNEE", "DUE", "RUN"]
    row = next(line.split() for line in out if "merchant-01" in line)
    assert row[9:11] == ["rita", "2026-01-09"]
    assert main(["breaks", "list", "--warehouse", str(wh), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {(b["key"], b["assignee"], b["due_on"]) for b in listed if b["assignee"]} == {
        ("merchant-01", "rita", "2026-01-09")}


# ----------------------------------------------------------------------------- bulk resolve, reject


def test_a_reviewer_bulk_rejects_with_a_reason_and_bulk_resolves_the_filtered_breaks(
        app, db: ReportDB) -> None:
    """Issue 61: resolve and reject on every break the filters match, as accept does: a
    confirmation naming how many and their total per currency, then one signed log entry
    per break in one transaction; a rejection without its reason is refused in one line."""
    bob = _client(app, "bob")
    listed = bob.get(f"/day/{DAY}/breaks?cause=UNEXPLAINED&currency=EUR").text
    assert '<option value="reject">' in listed and '<option value="resolve">' in listed
    form = _bulk_form(listed, "bulk")
    bare = bob.post(f"/day/{DAY}/bulk", data={**form, "action": "reject", "note": " "})
    assert bare.status_code == 400 and "rejecting the breaks of 2026-01-01 in bulk needs a " \
        "reason" in bare.text
    eur = queries.all_matches(db, RUN, DAY, queries.BreakFilter(cause="UNEXPLAINED",
                                                                currency="EUR"), cap=999)
    confirm = bob.post(f"/day/{DAY}/bulk", data={**form, "action": "reject",
                                                 "note": "the EUR feed is not in yet"})
    assert f"You are about to <b>reject</b> <b>{len(eur)}</b> breaks" in confirm.text
    total = sum(b["gap_amount"] for b in eur)
    assert (f'<tr><td>EUR</td><td class="num">{len(eur)}</td><td class="num">{total:,.2f}'
            "</td></tr>") in confirm.text and read_log(db) == []
    done = bob.post(f"/day/{DAY}/bulk", data=_bulk_form(confirm.text, "bulk-confirm"))
    assert f"reject recorded on {len(eur)} breaks" in done.text
    log = read_log(db)
    assert [(e.by, e.decision) for e in log] == [("bob", "break-rejected")] * len(eur)
    assert all(e.note.endswith(" EUR: the EUR feed is not in yet") and e.signature
               for e in log)
    rejected = queries.BreakFilter(cause="UNEXPLAINED", currency="EUR",
                                   review_status="rejected")
    assert queries.break_page(db, RUN, DAY, rejected, limit=999).total == len(eur)
    # the rejected ones, resolved in bulk once the feed came
    listed = bob.get(f"/day/{DAY}/breaks?status=rejected").text
    confirm = bob.post(f"/day/{DAY}/bulk", data={**_bulk_form(listed, "bulk"),
                                                 "action": "resolve", "note": "feed in"})
    bob.post(f"/day/{DAY}/bulk", data=_bulk_form(confirm.text, "bulk-confirm"))
    assert [e.decision for e in read_log(db)[len(eur):]] == ["break-resolved"] * len(eur)
    resolved = queries.BreakFilter(cause="UNEXPLAINED", currency="EUR",
                                   review_status="resolved")
    assert queries.break_page(db, RUN, DAY, resolved, limit=999).total == len(eur)
    assert verify(db).ok


@pytest.mark.parametrize("action", ["resolve", "reject"])
def test_bulk_resolve_and_reject_refuse_the_runs_reconciler_and_an_auditor(
        app, db: ReportDB, action: str) -> None:
    """Four eyes and roles on the server, as for a bulk accept: the run's reconciler (a
    reviewer too) and an auditor are refused before and at the confirmation."""
    form = {"kind": "nightly", "currency": "EUR", "action": action, "note": "mine"}
    _the_reconciler_is_refused_a_bulk(app, form)
    carl = _client(app, "carl")
    refused = carl.post(f"/day/{DAY}/bulk",
                        data={**form, "csrf": _csrf(carl.get(f"/day/{DAY}/breaks").text)})
    assert refused.status_code == 403 and "read-only" in refused.text
    assert read_log(db) == []


def test_the_logs_json_export_is_recorded_in_the_log_with_who_and_when(
        app, db: ReportDB) -> None:
    """Issue 61: exporting the sign-off log as JSON is one 'exported' entry, as the CSV and
    PDF exports are, made by whoever exported (an auditor too); the file carries its own
    entry, and the head it names covers it."""
    append(db, RUN, "bob", "approved", "ties out")
    carl = _client(app, "carl")
    before = datetime.now(UTC)
    response = carl.get("/log/export.json")
    assert response.status_code == 200
    assert 'filename="reckon-signoff-log.json"' in response.headers["content-disposition"]
    export = response.json()
    log = read_log(db)
    assert [(e.by, e.decision) for e in log] == [("bob", "approved"), ("carl", "exported")]
    assert log[1].run_id == RUN and log[1].note.startswith(
        "exported reckon-signoff-log.json (the whole sign-off log: 1 entry before this one, "
        f"head {log[0].entry_hash[:16]}...)")
    assert before <= log[1].at <= datetime.now(UTC)
    assert export["exported_by"] == "carl" and export["export_seq"] == 2
    assert export["exported_at"] == log[1].at.isoformat()
    assert export["entries"][-1]["decision"] == "exported" and export["verified"]
    assert export["head_hash"] == log[1].entry_hash
    assert export["runs"][RUN]["words"] == "Signed off: 1 of 1 approvals (bob)"
    page = carl.get("/log").text
    assert "<td>carl</td><td>exported</td><td>exported reckon-signoff-log.json" in page
    assert verify(db).ok


def test_the_unsettled_filter_lists_the_open_and_the_rejected_breaks(app, db: ReportDB) -> None:
    """Issue 61: the period view counts a day's unsettled breaks (open or rejected) and links
    the count to status=unsettled: the list then shows exactly that many, a rejected break
    among them (status=open alone would leave it out); a status no filter knows is refused
    naming the valid ones."""
    from reports.review import BreakTarget

    run_id = "nightly-2026-01-01"
    bob = _client(app, "bob")
    opened = int(re.search(r"<b>([\d,]+)</b> breaks match",
                           bob.get(f"/day/{DAY}/breaks?status=open").text).group(1))
    first = queries.all_matches(db, run_id, DAY, queries.BreakFilter("open", currency="EUR"),
                                cap=10)[0]
    append(db, run_id, "bob", "break-rejected", "the EUR feed is not in yet",
           target=BreakTarget(first["window_start"], first["key"], first["currency"]))
    period = bob.get("/period?start=2026-01-01&end=2026-01-01").text
    assert f'status=unsettled">{opened}</a>' in period, period
    listed = bob.get(f"/day/{DAY}/breaks?status=unsettled").text
    assert f"<b>{opened}</b> breaks match" in listed
    assert f"<b>{opened - 1}</b> breaks match" in bob.get(f"/day/{DAY}/breaks?status=open").text
    assert "<b>1</b> breaks match" in bob.get(f"/day/{DAY}/breaks?status=rejected").text
    response = bob.get(f"/day/{DAY}/breaks?status=unsettle")
    assert response.status_code == 400
    assert ("status=&#39;unsettle&#39; is not valid: one of open, explained, accepted, "
            "resolved, rejected, unsettled") in response.text
