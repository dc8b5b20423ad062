"""The reviewer's workbench in real headless Chromium (issue 42's "must show"), against the app
served by uvicorn on loopback by the project's own code (workbench.server), over a report
database filled by the project's own writers (workbench.sample: no Spark).

A reviewer logs in, filters the day's breaks, opens one and sees its late events and the
``reckon explain`` story the audit recorded, follows the partition that was late to the breaks
it caused, accepts the break and signs the run off; the reconciler who produced the run is
refused (four-eyes, on the server); an auditor reads but cannot act; a POST without the CSRF
token is refused; a log row edited by hand in the database shows as broken; a session cookie
copied before logging out no longer opens a page; repeated wrong passwords are throttled.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from reports.db.repository import ReportDB
from reports.review_state import review_states
from tests.browser import need, period_rows
from tests.cdp import Browser
from tests.signers import workbench_trust
from workbench.app import create_app
from workbench.auth import add_user
from workbench.sample import sample_day
from workbench.server import serve_in_thread

pytestmark = pytest.mark.browser

DAY = date(2026, 1, 1)
PASSWORD = "correct horse battery staple"


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[str, ReportDB]]:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    with ReportDB(f"sqlite:///{tmp_path / 'reckon.db'}") as db:
        sample_day(db, DAY, breaks=300, reconciler="alice")
        for name, role in (("bob", "reviewer"), ("alice", "reviewer"), ("carl", "auditor")):
            add_user(db, name, role, PASSWORD)
        app = create_app(db, trust=workbench_trust(db), secret=b"s" * 32, warehouse=warehouse)
        with serve_in_thread(app) as url:
            yield url, db


@pytest.fixture()
def browser() -> Iterator[Browser]:
    with Browser(need("chromium")) as page:
        yield page


def _signed_off(db: ReportDB, run_id: str) -> bool:
    return review_states(db, [run_id])[run_id].signed_off


def _login(page: Browser, url: str, name: str) -> None:
    page.goto(f"{url}/login")
    page.fill("input[name=name]", name)
    page.fill("input[name=password]", PASSWORD)
    page.click("#login button[type=submit]")
    assert page.text("#whoami").startswith(name), page.text()


def test_reviewer_filters_opens_a_late_break_and_signs_the_run(served, browser) -> None:
    url, db = served
    _login(browser, url, "bob")
    assert "nightly-2026-01-01" in browser.text("main")
    browser.goto(f"{url}/day/{DAY}/breaks")
    assert "300 breaks match" in browser.text("#count")
    browser.fill("select[name=cause]", "EXPLAINED")
    browser.fill("select[name=currency]", "EUR")
    browser.click("#filters button[type=submit]")
    assert "40 breaks match" in browser.text("#count")
    rows = browser.eval("[...document.querySelectorAll('#breaks tbody tr')]"
                        ".map(r => [r.cells[2].innerText, r.cells[3].innerText])")
    assert rows and all(r == ["EUR", "EXPLAINED"] for r in rows)
    browser.click("#breaks a.break")  # the first: merchant-00's window, one late event
    late = browser.text("#late-events")
    assert "Late events" in late and late.split()[-1] == "1" and "1.25" in late, late
    assert "key = 'merchant-00'" in browser.text("#late-rows-sql")
    story = browser.text("#story")  # the story reckon explain tells, as the audit recorded it
    assert story.startswith("window [2026-01-01T00:00:00Z, 2026-01-01T00:00:10Z) key "
                            "merchant-00, currency EUR: 2 events: 1 counted on time, 1 late "
                            "by 4.0 s"), story
    assert "e0-l0: EUR 1.25 at 2026-01-01T00:00:04Z" in story and "in late_events, not in " \
        "the total" in story
    explaining = browser.eval("[...document.querySelectorAll('#explaining tbody tr')]"
                              ".map(r => [r.cells[0].innerText, r.cells[1].innerText, "
                              "r.cells[5].innerText, r.cells[7].innerText])")
    assert explaining == [["e0-l0", "late", "1", "pos"]]
    break_page = browser.url
    browser.click("#inputs a")  # partition 1: the breaks it contributed to
    assert "partition=1" in browser.url
    shown = browser.eval("[...document.querySelectorAll('#breaks tbody td.inputs')]"
                         ".map(c => c.innerText)")
    assert shown and all("partition 1" in c for c in shown), shown
    assert browser.eval("document.querySelector('input[name=partition]').value") == "1"
    browser.goto(break_page)
    browser.fill("input[name=note]", "late event from partition 3, in the next window")
    browser.click("#action button[value=accept]")
    assert browser.text("#review-status") == "accepted", browser.text("main")
    assert "break-accepted" in browser.text("#entries")
    browser.goto(f"{url}/day/{DAY}")
    browser.fill("#signoff input[name=note]", "totals tie out; breaks reviewed")
    browser.click("#signoff button[type=submit]")
    assert browser.text("#state") == "Signed off: 1 of 1 approvals (bob)."
    browser.goto(f"{url}/log")
    assert browser.text("#verify").startswith("Verified: 2 entries")
    assert _signed_off(db, "nightly-2026-01-01")


def test_the_reconciler_who_produced_the_run_is_refused(served, browser) -> None:
    url, db = served
    _login(browser, url, "alice")  # a reviewer too, but she reconciled this run
    browser.goto(f"{url}/day/{DAY}")
    browser.fill("#signoff input[name=note]", "my own run looks fine")
    browser.click("#signoff button[type=submit]")
    assert "four-eyes rule" in browser.text("#error")
    assert not _signed_off(db, "nightly-2026-01-01")


def test_an_auditor_reads_but_cannot_act(served, browser) -> None:
    url, db = served
    _login(browser, url, "carl")
    browser.goto(f"{url}/day/{DAY}/breaks")
    browser.click("#breaks a.break")
    assert "Late events" in browser.text("#evidence")
    assert browser.eval("document.querySelector('#action') === null")
    assert "Read-only" in browser.text("main")
    # a hand-made form with the session's own CSRF token is still refused by the server
    browser.goto(f"{url}/day/{DAY}")
    assert browser.eval("document.querySelector('#signoff') === null")
    browser.eval("""(() => { const f = document.createElement('form');
      f.method = 'post'; f.action = '/signoff'; f.id = 'forged';
      for (const [k, v] of [['csrf', document.querySelector('input[name=csrf]').value],
          ['run', 'nightly-2026-01-01'], ['decision', 'approved'], ['note', 'x']]) {
        const i = document.createElement('input'); i.name = k; i.value = v; f.append(i); }
      const b = document.createElement('button'); f.append(b); document.body.append(f); })()""")
    browser.click("#forged button")
    assert "read-only for this role" in browser.text("#error")
    assert not _signed_off(db, "nightly-2026-01-01")


def test_a_post_without_the_csrf_token_is_refused(served, browser) -> None:
    url, db = served
    _login(browser, url, "bob")
    browser.goto(f"{url}/day/{DAY}")
    browser.eval("document.querySelector('#signoff input[name=csrf]').remove()")
    browser.fill("#signoff input[name=note]", "looks fine")
    browser.click("#signoff button[type=submit]")
    assert "CSRF token is missing or wrong" in browser.text("#error")
    assert not _signed_off(db, "nightly-2026-01-01")


def test_a_log_row_edited_by_hand_shows_as_broken(served, browser) -> None:
    url, db = served
    _login(browser, url, "bob")
    browser.goto(f"{url}/day/{DAY}")
    browser.fill("#signoff input[name=note]", "totals tie out")
    browser.click("#signoff button[type=submit]")
    browser.goto(f"{url}/log")
    assert browser.text("#verify").startswith("Verified")
    with db.engine.begin() as conn:  # someone edits the note in the database
        conn.execute(sa.text("UPDATE signoff_log SET note = 'nothing to see' WHERE seq = 1"))
    browser.goto(f"{url}/log")
    verdict = browser.text("#verify")
    assert "BROKEN" in verdict and "seq 1: entry_hash does not match" in verdict, verdict


def test_a_cookie_copied_before_logging_out_opens_nothing(served, browser) -> None:
    import urllib.request

    url, _db = served
    _login(browser, url, "bob")
    [cookie] = [c for c in browser.call("Network.getCookies")["cookies"]
                if c["name"] == "reckon_session"]

    def with_copy() -> str:  # another client replaying the copied cookie
        request = urllib.request.Request(f"{url}/", headers={
            "Cookie": f"reckon_session={cookie['value']}"})
        with urllib.request.urlopen(request) as response:
            return str(response.url)

    assert with_copy() == f"{url}/"
    browser.click("header form.who button")  # Log out
    assert browser.url == f"{url}/login"
    assert with_copy() == f"{url}/login"


def test_repeated_wrong_passwords_are_throttled(served, browser) -> None:
    url, _db = served
    for _ in range(5):
        browser.goto(f"{url}/login")
        browser.fill("input[name=name]", "bob")
        browser.fill("input[name=password]", "not the password")
        browser.click("#login button[type=submit]")
        assert browser.text("#error") == "unknown user or wrong password"
    browser.goto(f"{url}/login")
    browser.fill("input[name=name]", "bob")
    browser.fill("input[name=password]", PASSWORD)
    browser.click("#login button[type=submit]")
    assert browser.text("#error").startswith(
        "too many failed logins for bob from 127.0.0.1: logins are refused for 15 minutes"), \
        browser.text("main")


def test_the_day_page_and_the_approval_record_show_the_state_offline(tmp_path: Path,
                                                                    browser) -> None:
    """Issue 56: signing in the workbench rewrites the approval record beside the day's report
    (no re-render); the day page, the record through the day page's link, and the record opened
    from the report folder as a file (Chromium's network off) all show the same state."""
    import dataclasses
    import json

    from reports.context import review_fields
    from reports.render import publish_report
    from tests.test_report_render import _ctx

    run_id, folder = "nightly-2026-01-01", tmp_path / "warehouse" / "reports" / str(DAY)
    with ReportDB(f"sqlite:///{tmp_path / 'reckon.db'}") as db:
        sample_day(db, DAY, breaks=20, reconciler="alice")
        add_user(db, "bob", "reviewer", PASSWORD)
        run = db.get_audit_run(run_id)
        assert run is not None
        publish_report(db, dataclasses.replace(_ctx(), day=DAY, audit_run_id=run_id,
                                               reconciler="alice",
                                               **review_fields(db, run, 1)), folder)
        signed_bytes = (folder / "report.html").read_bytes()
        app = create_app(db, trust=workbench_trust(db), secret=b"s" * 32, warehouse=tmp_path / "warehouse")
        with serve_in_thread(app) as url:
            _login(browser, url, "bob")
            browser.goto(f"{url}/day/{DAY}")
            assert browser.text("#state") == "Awaiting sign-off: 0 of 1 approvals."
            browser.fill("#signoff input[name=note]", "totals tie out")
            browser.click("#signoff button[type=submit]")
            assert browser.text("#state") == "Signed off: 1 of 1 approvals (bob)."
            browser.click("#approval-link")
            assert browser.text("#state") == "Signed off: 1 of 1 approvals (bob)."
            assert browser.text("#run-id") == run_id
    browser.goto((folder / "approval.html").as_uri())  # the folder alone, no server
    assert browser.text("#state") == "Signed off: 1 of 1 approvals (bob)."
    assert browser.text("#report-sha256") == json.loads(
        (folder / "approval.json").read_text())["report_sha256"]
    assert (folder / "report.html").read_bytes() == signed_bytes


def test_a_breaks_actions_are_above_the_fold_and_its_tables_scroll_in_their_box(served) -> None:
    """On a break's page the comment and accept buttons sat ~3,000 px down, below the evidence
    and the story, and the evidence table ran off the right edge: at 1280x800 the actions
    are in the first screen and the document is no wider than the window."""
    url, _db = served
    with Browser(need("chromium"), width=1280, height=800) as page:
        _login(page, url, "bob")
        page.goto(f"{url}/day/{DAY}/breaks")
        page.click("#breaks a.break")  # merchant-00's window: late events, a long story
        assert page.eval("document.querySelectorAll('#explaining tbody tr').length") >= 1
        view = page.eval("[window.innerWidth, window.innerHeight, window.scrollY,"
                         " document.documentElement.scrollWidth]")
        assert view[:3] == [1280, 800, 0] and view[3] <= view[0], view
        boxes = page.eval("[...document.querySelectorAll('#action button, #action input"
                          "[name=note]')].map(b => {const r = b.getBoundingClientRect();"
                          " return [b.innerText || b.name, r.left, r.top, r.right, r.bottom]})")
        assert [b[0] for b in boxes] == ["note", "Comment", "Accept", "Resolve", "Reject",
                                        "Reopen"]  # explained: it may be reopened
        for name, left, top, right, bottom in boxes:
            assert 0 <= left < right <= 1280 and 0 <= top < bottom <= 800, (name, boxes)
        wide = page.eval("(() => {const d = document.getElementById('explaining-box');"
                         " return [d.scrollWidth, d.clientWidth]})()")
        assert wide[0] > wide[1], wide  # the evidence is wider than the window: it scrolls


def test_a_reviewer_sees_the_material_breaks_largest_first(tmp_path: Path) -> None:
    """Issue 61: a reviewer types a minimum gap per currency, sorts by absolute gap and sees
    the largest breaks of each currency first, each at least its currency's floor, the floor
    said above the list; 'material only' fills in the material_gap setting. The form fits a
    1280 px window."""
    from decimal import Decimal

    with ReportDB(f"sqlite:///{tmp_path / 'reckon.db'}") as db:
        sample_day(db, DAY, breaks=300, reconciler="alice", told=0)
        add_user(db, "bob", "reviewer", PASSWORD)
        app = create_app(db, secret=b"s" * 32, material_gap={"EUR": Decimal("1.40"),
                                                             "JPY": Decimal("140")})
        with serve_in_thread(app) as url, Browser(need("chromium"), width=1280,
                                                  height=800) as page:
            _login(page, url, "bob")
            page.goto(f"{url}/day/{DAY}/breaks")
            page.fill("#min-gap", "EUR=1.40, JPY=140")
            page.fill("#sort", "gap")
            page.click("#filters button[type=submit]")
            assert page.text("#gap-floor") == ("|gap| at least 1.40 EUR, 140 JPY; other "
                                               "currencies unnarrowed"), page.text("main")
            shown = page.eval("[...document.querySelectorAll('#breaks tbody tr')].map(r => "
                              "[r.cells[2].innerText, r.cells[4].innerText, "
                              "r.querySelector('td.material').innerText])")
            gaps = [(code, abs(Decimal(gap.replace(",", "")))) for code, gap, _ in shown]
            assert len(shown) == 50 and gaps[0][0] == "EUR"
            assert gaps == sorted(gaps, key=lambda g: (g[0], -g[1])), gaps
            assert all(g >= {"EUR": Decimal("1.40"), "JPY": Decimal(140)}.get(c, 0)
                       for c, g in gaps)
            assert {m for _, _, m in shown} == {"material"}  # the floor is the setting's
            assert page.eval("document.documentElement.scrollWidth") <= 1280
            listed = page.text("#count")
            page.goto(f"{url}/day/{DAY}/breaks")
            page.click("#material-only")
            assert page.eval("document.querySelector('#min-gap').value") == "EUR=1.40,JPY=140"
            assert page.text("#count").split(" (")[0] == listed.split(" (")[0]


def test_a_reviewer_rejects_a_break_and_sees_it_rejected_then_reopens_it(served,
                                                                        browser) -> None:
    """Issue 61: Reject with a reason on a break's page: its status reads rejected, the
    reason is the log entry's note, and Reopen (offered once it is not open) opens it again."""
    url, _db = served
    _login(browser, url, "bob")
    browser.goto(f"{url}/day/{DAY}/breaks?status=open&currency=JPY")
    browser.click("#breaks a.break")
    assert browser.text("#review-status") == "open"
    assert browser.eval("document.querySelector('#action button[value=reopen]')") is None
    browser.fill("#action input[name=note]", "the JPY feed was cut off at 23:59")
    browser.click("#action button[value=reject]")
    assert browser.text("#review-status") == "rejected", browser.text("main")
    assert "bob break-rejected: break" in browser.text("#entries")
    assert browser.text("#entries").endswith("JPY: the JPY feed was cut off at 23:59")
    browser.fill("#action input[name=note]", "feed re-sent, gap is real")
    browser.click("#action button[value=reopen]")
    assert browser.text("#review-status") == "open"
    assert "break-reopened" in browser.text("#entries")


def test_a_reviewer_confirms_a_bulk_accept_seeing_its_count_and_totals(served,
                                                                      browser) -> None:
    """Issue 61: 'On all N: accept' on a filtered list asks first, naming how many breaks and
    their total gap per currency, and records one entry per break once confirmed."""
    from reports.review import read_log

    url, db = served
    _login(browser, url, "bob")
    browser.goto(f"{url}/day/{DAY}/breaks?cause=UNEXPLAINED&currency=KWD")
    count = browser.text("#count").split(" breaks match")[0]
    browser.fill("#bulk select[name=action]", "accept")
    browser.fill("#bulk input[name=note]", "KWD residuals agreed with the bank")
    browser.click("#bulk button[type=submit]")
    summary = browser.text("#bulk-summary")
    assert summary.startswith(f"You are about to accept {count} breaks of run "
                              "nightly-2026-01-01"), summary
    totals = browser.eval("[...document.querySelectorAll('#bulk-totals tbody tr')]"
                          ".map(r => [...r.cells].map(c => c.innerText))")
    assert len(totals) == 1 and totals[0][:2] == ["KWD", count]
    assert len(totals[0][2].split(".")[1]) == 3  # dinars: three places
    assert read_log(db) == []
    browser.click("#bulk-confirm button[type=submit]")
    assert browser.text("#msg") == f"accept recorded on {count} breaks"
    assert len(read_log(db)) == int(count)


def test_a_reviewer_assigns_a_break_and_finds_it_in_my_breaks_and_overdue(served,
                                                                         browser) -> None:
    """Issue 61: Assign on a break's page (to oneself, due yesterday); "my breaks" then lists
    it with its assignee and due date, and "overdue" marks it so."""
    from datetime import UTC, datetime, timedelta

    url, _db = served
    yesterday = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    _login(browser, url, "bob")
    browser.goto(f"{url}/day/{DAY}/breaks?status=open&currency=EUR")
    browser.click("#breaks a.break")
    assert browser.text("#assigned") == "not assigned"
    browser.fill("#assign input[name=assign_to]", "bob")
    browser.fill("#assign input[name=due]", yesterday)
    browser.click("#assign button[type=submit]")
    assert browser.text("#assigned") == f"assigned to bob, due {yesterday}"
    browser.goto(f"{url}/day/{DAY}/breaks")
    browser.click("#my-breaks")
    assert browser.text("#count").startswith("1 breaks match")
    row = browser.eval("[...document.querySelectorAll('#breaks tbody tr')].map(r => "
                       "[r.querySelector('.assignee').innerText, "
                       "r.querySelector('.due').innerText])")
    assert row == [["bob", f"{yesterday} overdue"]]
    browser.click("#overdue")
    assert browser.text("#count").startswith("1 breaks match")
    assert browser.eval("getComputedStyle(document.querySelector('#breaks td.due')).color") \
        != browser.eval("getComputedStyle(document.querySelector('#breaks td.assignee')).color")


def test_the_month_view_shows_what_is_left_to_sign(served, browser) -> None:
    """Issue 61: the Month link shows a month's days with their state, the unsettled breaks by
    age and currency, and the days still to sign, each a link to its day."""
    url, _db = served
    _login(browser, url, "carl")  # an auditor reads it too
    browser.goto(f"{url}/period?month=2026-01")
    assert browser.text("h1") == "2026-01-01 to 2026-01-31 nightly"
    assert browser.text("#to-sign").startswith("31 days still to sign: 2026-01-01, 2026-01-02")
    first = browser.eval("[...document.querySelectorAll('#period-days tbody tr')][0].innerText")
    assert "2026-01-01" in first and "Awaiting sign-off: 0 of 1 approvals" in first
    ages = browser.eval("[...document.querySelectorAll('#ages tr')].map(r => r.innerText)")
    assert ages[0].split() == ["Age", "EUR", "JPY", "KWD"] and ages[1].startswith("new today")
    browser.click("#to-sign a")
    assert browser.url.endswith("/day/2026-01-01?kind=nightly")


def test_a_reviewer_bulk_rejects_with_a_reason_after_seeing_count_and_totals(served,
                                                                            browser) -> None:
    """Issue 61: 'On all N: reject' without a reason is refused in one line; with one, the
    confirmation names how many breaks and their total per currency, then each break is
    rejected by its own signed entry, and the list filtered by 'rejected' shows them."""
    from reports.review import read_log

    url, db = served
    _login(browser, url, "bob")
    browser.goto(f"{url}/day/{DAY}/breaks?cause=UNEXPLAINED&currency=EUR")
    count = browser.text("#count").split(" breaks match")[0]
    browser.fill("#bulk select[name=action]", "reject")
    browser.click("#bulk button[type=submit]")
    assert "rejecting the breaks of 2026-01-01 in bulk needs a reason" in browser.text()
    browser.goto(f"{url}/day/{DAY}/breaks?cause=UNEXPLAINED&currency=EUR")
    browser.fill("#bulk select[name=action]", "reject")
    browser.fill("#bulk input[name=note]", "the EUR partner batch is not in yet")
    browser.click("#bulk button[type=submit]")
    assert browser.text("#bulk-summary").startswith(f"You are about to reject {count} breaks")
    totals = browser.eval("[...document.querySelectorAll('#bulk-totals tbody tr')]"
                          ".map(r => [...r.cells].map(c => c.innerText))")
    assert len(totals) == 1 and totals[0][:2] == ["EUR", count]
    browser.click("#bulk-confirm button[type=submit]")
    assert browser.text("#msg") == f"reject recorded on {count} breaks"
    assert [e.decision for e in read_log(db)] == ["break-rejected"] * int(count)
    browser.goto(f"{url}/day/{DAY}/breaks?status=rejected")
    assert browser.text("#count").startswith(f"{count} breaks match")


# ----------------------------------------------------------------------------- issue 61, as met


_PLACES = {"EUR": 2, "JPY": 0, "KWD": 3}  # each currency's minor unit


def _places(amount: str) -> int:
    return len(amount.split(".")[1]) if "." in amount else 0


def _listed(page: Browser) -> list[list[str]]:
    """The break list on screen: window start, merchant, currency, cause, gap of each row."""
    return page.eval("[...document.querySelectorAll('#breaks tbody tr')]"
                     ".map(r => [...r.cells].slice(0, 5).map(c => c.innerText))")


def _log_rows(page: Browser, url: str) -> list[list[str]]:
    """The log page's rows: seq, at, run, by, decision, note."""
    page.goto(f"{url}/log")
    return page.eval("[...document.querySelectorAll('table.grid tbody tr')]"
                     ".map(r => [...r.cells].slice(0, 6).map(c => c.innerText))")


def test_a_reviewer_exports_the_filtered_list_as_csv_and_pdf_and_the_log_says_so(
        served, browser, tmp_path: Path) -> None:
    """Issue 61: a reviewer filters the list, clicks 'Export these as CSV' then 'as PDF' and
    gets the very rows on screen, in its order, each amount in its currency's own minor unit
    (the PDF read back with poppler); each export is a log line naming who and when, which
    the log page shows, and the PDF's 'exported at' is that line's time."""
    import csv
    import io
    from decimal import Decimal

    from tests.test_workbench import _pdf_text

    url, _db = served
    _login(browser, url, "bob")
    browser.goto(f"{url}/day/{DAY}/breaks")
    browser.fill("select[name=cause]", "UNEXPLAINED")
    browser.fill("input[name=merchant]", "merchant-03")
    browser.fill("#sort", "gap")
    browser.click("#filters button[type=submit]")
    count = int(browser.text("#count").split(" breaks match")[0])
    screen = _listed(browser)
    assert 0 < count == len(screen) < 50 and {r[2] for r in screen} == set(_PLACES), screen
    assert all(_places(gap) == _PLACES[code] for _, _, code, _, gap in screen)
    before = datetime.now(UTC).replace(microsecond=0)

    saved = browser.download("#export-csv", tmp_path / "csv")
    assert saved.name == "reckon-breaks-2026-01-01-nightly.csv"
    rows = list(csv.DictReader(io.StringIO(saved.read_text())))
    assert [[datetime.fromisoformat(r["window_start"]).strftime("%Y-%m-%d %H:%M:%S UTC"),
             r["key"], r["currency"], r["status"], r["gap_amount"]] for r in rows] == \
        [[*s[:4], s[4].replace(",", "")] for s in screen]
    assert all(_places(r[k]) == _PLACES[r["currency"]] for r in rows
               for k in ("gap_amount", "residual_amount"))

    saved = browser.download("#export-pdf", tmp_path / "pdf")
    assert saved.name == "reckon-breaks-2026-01-01-nightly.pdf"
    text = _pdf_text(saved.read_bytes())
    cells = [line.split() for line in text.splitlines()
             if re.match(r"\s*2026-01-01 \d\d:\d\d:\d\d ", line)]
    assert [[f"{c[0]} {c[1]} UTC", *c[2:6]] for c in cells] == screen, text
    totals: dict[str, list[Decimal]] = {}
    for _, _, code, _, gap in screen:
        totals.setdefault(code, []).append(Decimal(gap.replace(",", "")))
    assert (f"{count} breaks; total gap per currency: " + "; ".join(
        f"{code} {sum(gaps):,.{_PLACES[code]}f} ({len(gaps)})"
        for code, gaps in sorted(totals.items())) + ".") in text, text
    words = "filters: cause=UNEXPLAINED, merchant=merchant-03, sort=gap"
    assert f"F{words[1:]}." in text

    log = _log_rows(browser, url)
    assert browser.text("#verify").startswith("Verified: 2 entries")
    assert [row[3:] for row in log] == [
        ["bob", "exported", f"exported reckon-breaks-2026-01-01-nightly.{ext} ({count} "
                            f"breaks; {words})"] for ext in ("csv", "pdf")]
    after = datetime.now(UTC)
    for row in log:
        at = datetime.strptime(row[1], "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC)
        assert before <= at <= after, (row, before, after)
    assert f"Exported by bob at {log[1][1]}; recorded in the sign-off log." in text


def test_a_reviewer_rejects_the_run_with_a_reason_then_reopens_it(served, browser) -> None:
    """Issue 61: on the day page the run is rejected, then reopened, each only with a reason:
    the page will not send an empty note, a blank one is refused by the server in one line
    naming what is missing (nothing recorded), and with a reason the state and the log say
    who rejected it and why, then that it is open again."""
    from reports.review import read_log

    url, db = served
    _login(browser, url, "bob")
    for decision, reason, state in (
            ("rejected", "EUR canonical total is short of the bank's by 1,204 events",
             "Rejected by bob: 0 of 1 approvals."),
            ("reopened", "the bank re-sent its file; the run is to be reviewed again",
             "Awaiting sign-off: 0 of 1 approvals.")):
        browser.goto(f"{url}/day/{DAY}")
        assert browser.eval("document.querySelector('#signoff').checkValidity()") is False
        browser.fill("#signoff select[name=decision]", decision)
        browser.fill("#signoff input[name=note]", "   ")
        browser.click("#signoff button[type=submit]")
        what = "rejecting" if decision == "rejected" else "reopening"
        assert browser.text("#error") == (f"note is missing: {what} a run needs a reason, "
                                          "written in the note"), browser.text()
        browser.goto(f"{url}/day/{DAY}")
        browser.fill("#signoff select[name=decision]", decision)
        browser.fill("#signoff input[name=note]", reason)
        browser.click("#signoff button[type=submit]")
        assert browser.text("#state") == state, browser.text("main")
        assert browser.text("ul.entries").splitlines()[-1].endswith(
            f"bob {decision}: {reason}")
    assert [(e.by, e.decision) for e in read_log(db)] == [("bob", "rejected"),
                                                         ("bob", "reopened")]
    assert not _signed_off(db, "nightly-2026-01-01")


def test_a_reviewer_assigns_then_comments_on_the_filtered_set_one_signed_line_each(
        served, browser, tmp_path: Path) -> None:
    """Issue 61: 'On all N: assign' to a user with a due date, then 'On all N: comment', on a
    filtered list: each confirmed, each one log line per break naming that break, signed by
    the workbench's key (the log page verifies them; its JSON export lists them with the
    figures signed); "my breaks" lists the set with its assignee and due date."""
    import json
    from datetime import timedelta

    from reports.review import read_log

    url, db = served
    due = (datetime.now(UTC) + timedelta(days=7)).date().isoformat()
    _login(browser, url, "bob")
    listed = f"{url}/day/{DAY}/breaks?cause=MISSING_IN_STREAM&currency=KWD"
    browser.goto(listed)
    count = int(browser.text("#count").split(" breaks match")[0])
    screen = _listed(browser)
    assert count == len(screen) == 20
    browser.fill("#bulk select[name=action]", "assign")
    browser.fill("#bulk input[name=assign_to]", "bob")
    browser.fill("#bulk input[name=due]", due)
    browser.click("#bulk button[type=submit]")
    assert browser.text("#bulk-assignment") == f"assigned to bob, due {due}"
    assert browser.text("#bulk-summary").startswith(f"You are about to assign {count} breaks")
    browser.click("#bulk-confirm button[type=submit]")
    assert browser.text("#msg") == f"assign recorded on {count} breaks"
    browser.goto(listed)
    browser.fill("#bulk select[name=action]", "comment")
    browser.fill("#bulk input[name=note]", "asked the bank for its KWD statement")
    browser.click("#bulk button[type=submit]")
    browser.click("#bulk-confirm button[type=submit]")
    assert browser.text("#msg") == f"comment recorded on {count} breaks"
    browser.click("#my-breaks")
    assert browser.text("#count").startswith(f"{count} breaks match")
    assert browser.eval("[...document.querySelectorAll('#breaks tbody tr')].map(r => "
                        "r.querySelector('.assignee').innerText + ' ' + "
                        "r.querySelector('.due').innerText)") == [f"bob {due}"] * count

    log = _log_rows(browser, url)
    assert browser.text("#verify").startswith(f"Verified: {2 * count} entries")
    labels = [f"break {datetime.strptime(ws, '%Y-%m-%d %H:%M:%S UTC'):%Y-%m-%dT%H:%M:%S}"
              f".000000Z {key} {code}" for ws, key, code, _, _ in screen]
    assert [row[3:] for row in log] == [
        ["bob", "break-assigned", f"{label}: assigned to bob, due {due}"] for label in labels
    ] + [["bob", "break-comment", f"{label}: asked the bank for its KWD statement"]
         for label in labels]
    assert all(e.key_id and e.signature for e in read_log(db))  # each line signed
    exported = json.loads(browser.download("#export", tmp_path / "log").read_text())
    assert exported["verified"] and exported["exported_by"] == "bob"
    assert exported["export_seq"] == 2 * count + 1
    entries = exported["entries"]
    assert [(e["decision"], e["note"]) for e in entries[:-1]] == [
        (row[4], row[5]) for row in log]
    assert all(e["signed"]["run_id"] == "nightly-2026-01-01" for e in entries[:-1])
    assert entries[-1]["decision"] == "exported" and entries[-1]["by"] == "bob"


def test_a_reviewer_filters_by_materiality_and_bulk_accepts_exactly_50(served,
                                                                       browser) -> None:
    """Issue 61's walk: the KWD breaks whose |gap| is at least 0.142 KWD are 50; 'On all 50:
    accept' asks first with their count and their total in fils (three places), then accepts
    exactly those 50, each by its own entry; the list filtered by 'accepted' shows them."""
    from decimal import Decimal

    from reports.review import read_log

    url, db = served
    _login(browser, url, "bob")
    browser.goto(f"{url}/day/{DAY}/breaks")
    browser.fill("select[name=currency]", "KWD")
    browser.fill("#min-gap", "0.142")
    browser.click("#filters button[type=submit]")
    assert browser.text("#count").startswith("50 breaks match")
    assert browser.text("#gap-floor") == "|gap| at least 0.142 KWD"
    screen = _listed(browser)
    assert len(screen) == 50 and all(abs(Decimal(r[4])) >= Decimal("0.142") for r in screen)
    browser.fill("#bulk select[name=action]", "accept")
    browser.fill("#bulk input[name=note]", "within the bank's KWD rounding agreement")
    browser.click("#bulk button[type=submit]")
    assert browser.text("#bulk-summary").startswith(
        "You are about to accept 50 breaks of run nightly-2026-01-01")
    total = sum(Decimal(r[4]) for r in screen)
    assert browser.eval("[...document.querySelectorAll('#bulk-totals tbody tr')]"
                        ".map(r => [...r.cells].map(c => c.innerText))") == [
        ["KWD", "50", f"{total:,.3f}"]]
    assert read_log(db) == []
    browser.click("#bulk-confirm button[type=submit]")
    assert browser.text("#msg") == "accept recorded on 50 breaks"
    assert [e.decision for e in read_log(db)] == ["break-accepted"] * 50
    browser.goto(f"{url}/day/{DAY}/breaks?status=accepted")
    assert browser.text("#count").startswith("50 breaks match")
    assert sorted(_listed(browser)) == sorted(screen)


_POST = """(async ([path, fields]) => {
  const body = new URLSearchParams({csrf: document.querySelector('input[name=csrf]').value,
                                    ...fields});
  const r = await fetch(path, {method: 'POST', body, redirect: 'manual'});
  const doc = new DOMParser().parseFromString(await r.text(), 'text/html');
  const error = doc.querySelector('#error');
  return [r.status, error ? error.innerText : ''];
})"""


def _post(page: Browser, path: str, fields: dict[str, str]) -> list[Any]:
    """A POST made by hand from the page (the session's cookie and its own CSRF token), as a
    user who knows the form's fields would: the status and the error page's line."""
    import json

    return list(page.eval(f"{_POST}({json.dumps([path, fields])})"))


def test_an_auditor_gets_no_new_action_in_the_page_nor_by_a_direct_post(served, browser,
                                                                         tmp_path: Path
                                                                         ) -> None:
    """Issue 61: an auditor sees no bulk form, no break action or assignment, no sign-off
    form; each of those POSTed by hand with the session's own CSRF token (bulk accept,
    comment, assign, reject, resolve; a break's accept, comment, reject, reopen, assign; the
    run's approve, reject, reopen) is refused by the server with one line (403) and nothing
    is recorded. Exporting only reads, so the auditor may: the CSV and the PDF (read back with
    poppler) are each the log's one line, in the auditor's name."""
    from urllib.parse import parse_qs, urlsplit

    from reports.review import read_log
    from tests.test_workbench import _pdf_text

    url, db = served
    _login(browser, url, "carl")
    browser.goto(f"{url}/day/{DAY}/breaks?status=open")
    still_open = browser.text("#count").split(" (")[0]
    browser.goto(f"{url}/day/{DAY}/breaks?status=open&currency=EUR")
    assert browser.eval("document.querySelector('#bulk') === null")
    link = browser.eval("document.querySelector('#breaks a.break').href")
    target = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    browser.goto(link)
    assert browser.eval("[document.querySelector('#action'), document.querySelector('#assign'),"
                        " document.querySelector('#review button')]") == [None, None, None]
    assert "Read-only for your role (auditor)" in browser.text("#review")
    browser.goto(f"{url}/day/{DAY}")
    assert browser.eval("document.querySelector('#signoff') === null")
    refused = "carl is an auditor: the workbench is read-only for this role"
    listed = {"kind": "nightly", "status": "open", "currency": "EUR"}
    for action in ("accept", "comment", "assign", "reject", "resolve"):
        fields = {**listed, "action": action, "note": "x", "assign_to": "bob"}
        assert _post(browser, f"/day/{DAY}/bulk", fields) == [403, refused], action
        assert _post(browser, f"/day/{DAY}/bulk", {**fields, "expect": "0" * 64}) == [
            403, refused]
    break_fields = {"run": target["run"], "ws": target["ws"], "key": target["key"],
                    "cur": target["cur"], "note": "x", "assign_to": "bob"}
    for action in ("accept", "comment", "reject", "reopen", "assign"):
        assert _post(browser, "/break/action", {**break_fields, "action": action}) == [
            403, refused], action
    for decision in ("approved", "rejected", "reopened"):
        assert _post(browser, "/signoff", {"run": "nightly-2026-01-01", "decision": decision,
                                           "note": "x"}) == [403, refused], decision
    assert read_log(db) == []
    browser.goto(f"{url}/day/{DAY}/breaks?status=open")
    assert browser.text("#count").split(" (")[0] == still_open  # none acted on
    browser.goto(f"{url}/day/{DAY}/breaks")
    saved = browser.download("#export-csv", tmp_path / "csv")
    assert saved.read_text().count("\n") == 301
    assert [(e.by, e.decision) for e in read_log(db)] == [("carl", "exported")]
    saved = browser.download("#export-pdf", tmp_path / "pdf")
    assert saved.name == "reckon-breaks-2026-01-01-nightly.pdf"
    text = _pdf_text(saved.read_bytes())
    assert len([line for line in text.splitlines()
                if re.match(r"\s*2026-01-01 \d\d:\d\d:\d\d ", line)]) == 300, text
    assert "300 breaks; total gap per currency: " in text
    exports = read_log(db)
    assert [(e.by, e.decision) for e in exports] == [("carl", "exported")] * 2
    assert exports[1].note.startswith("exported reckon-breaks-2026-01-01-nightly.pdf (300 "
                                      "breaks")
    assert f"Exported by carl at {exports[1].at:%Y-%m-%d %H:%M:%S} UTC" in text, text
    assert not _signed_off(db, "nightly-2026-01-01")


def test_the_reconciler_cannot_bulk_accept_the_breaks_of_her_run(served, browser) -> None:
    """Issue 61: alice, a reviewer who reconciled the run, is not offered the bulk form on its
    breaks, nor a break's actions on its page: each page says why (four-eyes). The same
    accepts POSTed by hand with her session's CSRF token are refused on the server (the bulk
    one before any confirmation); nothing is recorded. Bob, who did not reconcile it, has
    the form."""
    from urllib.parse import parse_qs, urlsplit

    from reports.review import read_log

    url, db = served
    _login(browser, url, "alice")
    listed = {"kind": "nightly", "cause": "UNEXPLAINED", "currency": "KWD"}
    browser.goto(f"{url}/day/{DAY}/breaks?cause=UNEXPLAINED&currency=KWD")
    assert browser.eval("document.querySelector('#bulk') === null")
    assert browser.text("#bulk-refused") == (
        "You reconciled this run (alice): its breaks need another person's review "
        "(four-eyes rule), so no bulk action is offered.")
    link = browser.eval("document.querySelector('#breaks a.break').href")
    browser.click("#breaks a.break")  # nor one break's actions, on its page
    assert browser.eval("[document.querySelector('#action'), document.querySelector("
                        "'#assign')]") == [None, None]
    assert browser.text("#action-refused").endswith("so no action is offered.")
    target = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    status, error = _post(browser, "/break/action", {**target, "action": "accept",
                                                     "note": "mine"})
    assert status == 403 and "four-eyes rule" in error, error
    browser.goto(f"{url}/day/{DAY}/breaks?cause=UNEXPLAINED&currency=KWD")
    status, error = _post(browser, f"/day/{DAY}/bulk", {
        **listed, "action": "accept", "note": "my own residuals look fine"})
    assert status == 403 and error.startswith(
        "by='alice' may not act on the breaks of run 'nightly-2026-01-01': 'alice' "
        "reconciled it"), error
    assert "four-eyes rule" in error
    assert read_log(db) == []
    browser.click("header form.who button")  # Log out; bob is offered the form
    _login(browser, url, "bob")
    browser.goto(f"{url}/day/{DAY}/breaks?cause=UNEXPLAINED&currency=KWD")
    assert browser.eval("document.querySelector('#bulk') !== null")
    assert browser.eval("document.querySelector('#bulk-refused') === null")


def test_a_bulk_action_over_5000_breaks_is_refused_until_the_filters_narrow_it(
        tmp_path: Path, browser) -> None:
    """Issue 61: a bulk action takes at most 5,000 breaks: on a day of 5,001, 'On all 5,001:
    accept' is refused in one line saying to narrow the filters (nothing recorded), and so is
    the PDF of them (the CSV holds every one); narrowed to one currency, the bulk action is
    offered for confirmation."""
    from reports.review import read_log

    with ReportDB(f"sqlite:///{tmp_path / 'reckon.db'}") as db:
        sample_day(db, DAY, breaks=5_001, reconciler="alice", told=0)
        add_user(db, "bob", "reviewer", PASSWORD)
        app = create_app(db, trust=workbench_trust(db), secret=b"s" * 32)
        with serve_in_thread(app) as url:
            _login(browser, url, "bob")
            browser.goto(f"{url}/day/{DAY}/breaks")
            assert browser.text("#count").startswith("5,001 breaks match")
            browser.fill("#bulk select[name=action]", "accept")
            browser.fill("#bulk input[name=note]", "all agreed with the bank")
            browser.click("#bulk button[type=submit]")
            assert browser.text("#error") == ("more than 5,000 breaks match: narrow the "
                                              "filters (a bulk action takes at most 5,000)")
            browser.goto(f"{url}/day/{DAY}/breaks")
            browser.click("#export-pdf")
            assert browser.text("#error") == ("more than 5,000 breaks match: narrow the "
                                              "filters (a PDF holds at most 5,000; the CSV "
                                              "holds every one)")
            assert read_log(db) == []
            browser.goto(f"{url}/day/{DAY}/breaks")
            saved = browser.download("#export-csv", tmp_path / "csv")
            assert saved.read_text().count("\n") == 5_002
            assert [e.decision for e in read_log(db)] == ["exported"]
            browser.goto(f"{url}/day/{DAY}/breaks?currency=EUR")
            assert browser.text("#count").startswith("1,667 breaks match")
            browser.fill("#bulk select[name=action]", "accept")
            browser.fill("#bulk input[name=note]", "all agreed with the bank")
            browser.click("#bulk button[type=submit]")
            assert browser.text("#bulk-summary").startswith(
                "You are about to accept 1,667 breaks"), browser.text()
            assert browser.eval("document.querySelector('#bulk-confirm') !== null")


def test_the_period_view_over_several_days_shows_each_days_state_and_the_open_breaks_age(
        tmp_path: Path, browser) -> None:
    """Issue 61: four days, chosen with the period form's range: one signed off (by the
    reviewer, in the browser), one awaiting sign-off, one with no events (nothing to sign),
    one never audited. Each day says so; the days still to sign are the open one and the
    unaudited one; the unsettled breaks count by age (first seen 10 and 4 days ago) and
    currency; a day's unsettled count links to those breaks."""
    from datetime import timedelta

    now = datetime.now(UTC)
    days = [date(2026, 1, d) for d in (1, 2, 3, 4)]
    with ReportDB(f"sqlite:///{tmp_path / 'reckon.db'}") as db:
        sample_day(db, days[0], breaks=20, reconciler="alice", told=0,
                   now=now - timedelta(days=10))
        sample_day(db, days[1], breaks=20, reconciler="alice", told=0,
                   now=now - timedelta(days=4))
        sample_day(db, days[2], breaks=0, reconciler="alice", told=0)
        add_user(db, "bob", "reviewer", PASSWORD)
        app = create_app(db, trust=workbench_trust(db), secret=b"s" * 32)
        with serve_in_thread(app) as url:
            _login(browser, url, "bob")
            browser.goto(f"{url}/day/{days[0]}")
            browser.fill("#signoff input[name=note]", "totals tie out")
            browser.click("#signoff button[type=submit]")
            shown = period_rows(browser, url, "2026-01-01", "2026-01-04")
            assert shown == [
                ["2026-01-01", "nightly-2026-01-01", "Signed off: 1 of 1 approvals (bob)",
                 "20", "12"],
                ["2026-01-02", "nightly-2026-01-02", "Awaiting sign-off: 0 of 1 approvals",
                 "20", "12"],
                ["2026-01-03", "nightly-2026-01-03", "No events: nothing to sign", "0", "0"],
                ["2026-01-04", "Not audited", "-", "-"]], shown
            assert browser.text("#to-sign") == "2 days still to sign: 2026-01-02, 2026-01-04"
            ages = browser.eval("[...document.querySelectorAll('#ages tr')]"
                                ".map(r => [...r.cells].map(c => c.innerText))")
            assert ages == [["Age", "EUR", "JPY", "KWD"], ["new today", "0", "0", "0"],
                            ["1-2 days", "0", "0", "0"], ["3-7 days", "4", "5", "3"],
                            ["over a week", "4", "5", "3"]], ages
            browser.click("#period-days tbody tr:nth-child(2) td:nth-child(5) a")
            assert browser.url.endswith("/day/2026-01-02/breaks?kind=nightly&status=unsettled")
            assert browser.text("#count").startswith("12 breaks match")
