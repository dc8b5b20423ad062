#!/usr/bin/env python3
"""The workbench's pictures for the README (docs/images/workbench-*.png), taken by real
headless Chromium with the network off but loopback, driven like a reviewer: a sample day in
a fresh report database (workbench.sample, no Spark), the workbench served on loopback,
log in, the days, the breaks filtered by cause, currency and a partition that contributed,
one break's actions (above the fold) and evidence with its recorded ``reckon explain`` story,
a bulk rejection's confirmation, the month view, and the sign-off log after a row was edited
by hand in the database. Each picture it takes is one the README shows.

Usage: .venv/bin/python scripts/workbench_screenshot.py [out-dir]   (default docs/images)
"""

from __future__ import annotations

import secrets
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from reports.db.repository import ReportDB  # noqa: E402
from reports.review import LogTrust  # noqa: E402
from tests.cdp import Browser  # noqa: E402  (the browser tests' own driver)
from tests.signers import append, workbench_trust  # noqa: E402  (throwaway keys, as the tests')
from workbench.app import create_app  # noqa: E402
from workbench.auth import add_user  # noqa: E402
from workbench.sample import sample_day  # noqa: E402
from workbench.server import serve_in_thread  # noqa: E402

DAY = date(2026, 1, 1)
PASSWORD = secrets.token_urlsafe(16)  # throwaway: the database is too


def _bulk_confirmation(page: Browser, url: str, out: Path) -> None:
    """The confirmation a bulk rejection asks for (how many breaks, their total gap per
    currency), left unconfirmed so the log pictured next is as it was."""
    page.goto(f"{url}/day/{DAY}/breaks?cause=UNEXPLAINED&currency=JPY")
    page.fill("#bulk select[name=action]", "reject")
    page.fill("#bulk input[name=note]", "the JPY partner batch is not in yet")
    page.click("#bulk button[type=submit]")
    page.screenshot(out / "workbench-bulk.png")
    print(f"{out / 'workbench-bulk.png'} <- a bulk rejection's confirmation")


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images"
    chromium = shutil.which("chromium")
    if chromium is None:
        print("workbench-screenshot: chromium is not installed (scripts/setup.sh "
              "--test-services installs it)", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)  # a fresh folder to compare against is fine
    with tempfile.TemporaryDirectory() as tmp, ReportDB(f"sqlite:///{tmp}/r.db") as db:
        run_id = sample_day(db, DAY, breaks=600, reconciler="alice")
        sample_day(db, date(2026, 1, 2), breaks=240, reconciler="alice")
        add_user(db, "bob", "reviewer", PASSWORD)
        append(db, run_id, "bob", "approved", "gaps explained by late events; "
               "UNEXPLAINED rows checked with the merchants")
        trust: LogTrust = workbench_trust(db)
        with serve_in_thread(create_app(db, secret=secrets.token_bytes(32), trust=trust)) as url, \
                Browser(chromium, width=1280, height=800) as page:
            page.goto(f"{url}/login")
            page.fill("input[name=name]", "bob")
            page.fill("input[name=password]", PASSWORD)
            page.click("#login button[type=submit]")
            shots = {"workbench-days.png": "/",
                     "workbench-breaks.png": f"/day/{DAY}/breaks?cause=EXPLAINED&currency=EUR"
                                             "&partition=1"}
            for name, path in shots.items():
                page.goto(url + path)
                page.screenshot(out / name)
                print(f"{out / name} <- {path}")
            page.goto(f"{url}/day/{DAY}/breaks?cause=EXPLAINED&currency=EUR")
            page.click("#breaks a.break")
            page.screenshot(out / "workbench-break.png")
            print(f"{out / 'workbench-break.png'} <- a break's actions, evidence and story")
            _bulk_confirmation(page, url, out)
            page.goto(f"{url}/period?month={DAY:%Y-%m}")
            page.screenshot(out / "workbench-period.png")
            print(f"{out / 'workbench-period.png'} <- the month view")
            with db.engine.begin() as conn:  # what an edit by hand in the database looks like
                conn.execute(sa.text("UPDATE signoff_log SET decision = 'approved', "
                                     "note = 'all fine' WHERE seq = 1"))
            page.goto(f"{url}/log")
            page.screenshot(out / "workbench-log-broken.png")
            print(f"{out / 'workbench-log-broken.png'} <- the log after a hand edit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
