"""The workbench's period view over days the real pipeline produced (issue 61, Spark tier):
the stream's own micro-batch processor (BatchProcessor, as foreachBatch calls it), the
nightly replay and audit of each day, then /period read as a reviewer reads it.

Four days: 2026-01-01 (USD, a late event: one EXPLAINED break, signed off by a reviewer,
then the break reopened with a reason: a signed day can still hold an unsettled break),
2026-01-02 (no events: replayed and audited empty, so it says so and needs no sign-off),
2026-01-03 (EUR, the same late event: awaiting sign-off, its break rejected with a reason)
and 2026-01-04 (never audited: still to sign). One event of 2026-01-05 moves the watermark
past 2026-01-03, as the next day's traffic would. The cheapest real path: one session
SparkSession, the processor called per batch without a streaming query's trigger loop.

The same warehouse, served by uvicorn on loopback (workbench.server), is then looked at in
headless Chromium (tests/cdp.py) as a reviewer looks: log in, choose the range in the period
form, read each day's state, the days to sign and the unsettled breaks by age, and follow a
day's unsettled count to those breaks (the rejected EUR one among them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from reckon.reference import Event
from reports.db.repository import ReportDB, audit_recorder
from reports.review import BreakTarget
from tests.browser import need, period_rows
from tests.cdp import Browser
from tests.scenarios import SCENARIOS, S, ev
from tests.signers import append, workbench_trust
from tests.streamkit import stream_settings
from workbench import queries
from workbench.app import create_app
from workbench.auth import add_user
from workbench.server import serve_in_thread

GRACE_CASE = next(c for c in SCENARIOS if c.name.startswith("worked example, allowed lateness 5s"))
DAYS = [date(2026, 1, d) for d in (1, 2, 3, 4)]
DAY_S = 86_400 * S
PASSWORD = "correct horse battery staple"


def _shifted(batches: list[list[Event]], days: int, currency: str,
             offset: int) -> list[list[Event]]:
    """The worked example ``days`` later in ``currency``: the same times of day, the same
    late event, new ids and offsets after the earlier days' (one partition, in order).

    Example: ``_shifted(GRACE_CASE.batches, 2, "EUR", 9)`` is 2026-01-03's EUR traffic."""
    return [[replace(e, event_id=f"{e.event_id}-d{days}", currency=currency,
                     event_time=e.event_time + days * DAY_S,
                     arrival_time=e.arrival_time + days * DAY_S, offset=e.offset + offset)
             for e in batch] for batch in batches]


def _stream_replay_audit(spark, tmp_path: Path):
    """The pipeline over the four days: stream every batch, then replay and audit 01, 02
    (quiet) and 03; 04 is left unaudited. Returns the settings and each day's run id."""
    from audits.audit import audit_day
    from spark.replay import replay_day
    from spark.stream import BatchProcessor
    from tests.test_replay_audit import _raw

    settings = stream_settings(tmp_path / "wh", **GRACE_CASE.rules)
    first = _shifted(GRACE_CASE.batches, 0, "USD", 0)
    third = _shifted(GRACE_CASE.batches, 2, "EUR", len(first))
    closer = [[replace(ev(30, 31), event_id="closer", event_time=ev(30, 31).event_time
                       + 4 * DAY_S, arrival_time=ev(30, 31).arrival_time + 4 * DAY_S,
                       offset=2 * len(first))]]
    processor = BatchProcessor.of(spark, settings, query_id="period-days")
    for i, batch in enumerate(first + third + closer):
        processor(_raw(spark, batch), i)
    runs = {}
    for day in DAYS[:3]:
        replay_day(spark, settings.replay_config(), day)
        runs[day] = audit_day(spark, settings.audit_config(), day,
                              recorder=audit_recorder(settings)).run_id
    return settings, runs


def _target(row: dict) -> BreakTarget:
    return BreakTarget(row["window_start"], row["key"], row["currency"])


def _login(app, name: str) -> TestClient:
    client = TestClient(app)
    token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
    client.post("/login", data={"name": name, "password": PASSWORD, "csrf": token})
    return client


def _rows(html: str, table_id: str) -> list[list[str]]:
    """A table's body rows as their cells' text (tags dropped, whitespace folded)."""
    body = re.search(rf'<table class="grid" id="{table_id}">.*?<tbody>(.*?)</tbody>', html,
                     re.S)
    assert body, html
    return [[" ".join(re.sub(r"<[^>]+>", " ", cell).split())
             for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)]


@pytest.fixture(scope="module")
def reviewed(spark, tmp_path_factory) -> Iterator[tuple[Any, dict[date, str]]]:
    """The four streamed days as a reviewer left them (01 signed off by bob, then its break
    reopened; 03's break rejected), the workbench app over them and each day's run id: built
    once for this module's tests (the stream, the replays and audits are the cost)."""
    settings, runs = _stream_replay_audit(spark, tmp_path_factory.mktemp("period"))
    with ReportDB.from_settings(settings) as db:
        for name, role in (("bob", "reviewer"), ("carl", "auditor")):
            add_user(db, name, role, PASSWORD)
        append(db, runs[DAYS[0]], "bob", "approved", "the late USD event explains it")
        app = create_app(db, trust=workbench_trust(db), secret=b"s" * 32,
                         warehouse=settings.warehouse_path)
        [usd] = queries.all_matches(db, runs[DAYS[0]], DAYS[0], queries.BreakFilter(), cap=10)
        [eur] = queries.all_matches(db, runs[DAYS[2]], DAYS[2], queries.BreakFilter(), cap=10)
        assert (usd["review_status"], eur["review_status"]) == ("explained", "explained")
        append(db, runs[DAYS[0]], "bob", "break-reopened", "the late event's amount is "
               "disputed by the merchant", target=_target(usd))
        append(db, runs[DAYS[2]], "bob", "break-rejected", "the EUR feed is not in yet",
               target=_target(eur))
        yield app, runs


def test_the_period_view_over_streamed_days(reviewed) -> None:
    """Each day's state in the words every view shows, unsettled breaks by age bucket and
    currency, the days still to sign; the quiet day says so and is not to sign."""
    app, runs = reviewed
    page = _login(app, "carl").get("/period", params={"start": "2026-01-01",
                                                      "end": "2026-01-04"})
    assert page.status_code == 200, page.text
    html = page.text
    days = {row[0]: row[1:] for row in _rows(html, "period-days")}
    assert days == {
        "2026-01-01": [runs[DAYS[0]], "Signed off: 1 of 1 approvals (bob)", "1", "1"],
        "2026-01-02": [runs[DAYS[1]], "No events: nothing to sign", "0", "0"],
        "2026-01-03": [runs[DAYS[2]], "Awaiting sign-off: 0 of 1 approvals", "1", "1"],
        "2026-01-04": ["Not audited", "-", "-"]}, days
    to_sign = re.search(r'<p id="to-sign"[^>]*>(.*?)</p>', html, re.S).group(1)
    assert re.sub(r"<[^>]+>", "", to_sign) == "2 days still to sign: 2026-01-03, 2026-01-04"
    header = re.search(r'<table class="grid" id="ages"><thead>(.*?)</thead>', html, re.S)
    assert re.findall(r"<th[^>]*>([^<]*)</th>", header.group(1)) == ["Age", "EUR", "USD"]
    ages = {row[0]: row[1:] for row in _rows(html, "ages")}
    assert ages["new today"] == ["1", "1"]  # one reopened USD, one rejected EUR: unsettled
    assert all(counts == ["0", "0"] for label, counts in ages.items() if label != "new today")


@pytest.mark.browser
def test_the_period_view_over_streamed_days_in_chromium(reviewed) -> None:
    """The same period page in headless Chromium, as a reviewer meets it: log in, choose the
    range in the period form, read each day's state, the days to sign and the unsettled
    breaks by age and currency; 2026-01-03's unsettled count leads to its rejected EUR
    break, and its link under 'still to sign' to its day page, awaiting sign-off."""
    app, runs = reviewed
    with serve_in_thread(app) as url, Browser(need("chromium"), width=1280,
                                              height=800) as page:
        page.goto(f"{url}/login")
        page.fill("input[name=name]", "bob")
        page.fill("input[name=password]", PASSWORD)
        page.click("#login button[type=submit]")
        assert page.text("#whoami").startswith("bob"), page.text()
        shown = period_rows(page, url, "2026-01-01", "2026-01-04")
        assert shown == [
            ["2026-01-01", runs[DAYS[0]], "Signed off: 1 of 1 approvals (bob)", "1", "1"],
            ["2026-01-02", runs[DAYS[1]], "No events: nothing to sign", "0", "0"],
            ["2026-01-03", runs[DAYS[2]], "Awaiting sign-off: 0 of 1 approvals", "1", "1"],
            ["2026-01-04", "Not audited", "-", "-"]], shown
        assert page.text("#to-sign") == "2 days still to sign: 2026-01-03, 2026-01-04"
        ages = page.eval("[...document.querySelectorAll('#ages tr')]"
                         ".map(r => [...r.cells].map(c => c.innerText))")
        assert ages == [["Age", "EUR", "USD"], ["new today", "1", "1"],
                        ["1-2 days", "0", "0"], ["3-7 days", "0", "0"],
                        ["over a week", "0", "0"]], ages
        assert page.eval("document.documentElement.scrollWidth") <= 1280
        period = page.url
        page.click("#period-days tbody tr:nth-child(3) td:nth-child(5) a")  # 2026-01-03's 1
        assert page.url.endswith("/day/2026-01-03/breaks?kind=nightly&status=unsettled")
        assert page.text("#count").startswith("1 breaks match"), page.text("main")
        assert page.eval("[...document.querySelectorAll('#breaks tbody tr')].map(r => "
                         "[r.cells[2].innerText, r.cells[9].innerText])") == [
            ["EUR", "rejected"]]
        page.goto(period)
        page.click("#to-sign a")  # the first day to sign: its day page, awaiting sign-off
        assert page.url.endswith("/day/2026-01-03?kind=nightly")
        assert page.text("#state") == "Awaiting sign-off: 0 of 1 approvals."
