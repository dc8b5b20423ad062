"""How fast the workbench pages the breaks of a day with 100,000 breaks (issue 42: "well under a
second"). Fills a fresh SQLite report database through the project's writers
(workbench.sample), serves the workbench on loopback with uvicorn, logs in over HTTP and
times whole page requests: the first page, a page deep in the day (keyset cursor), filtered
pages (by cause, currency, merchant, review status and age, by a contributing partition
or source, by a minimum absolute gap per currency, and a user's assigned and overdue
breaks: 2,000 of the day's are assigned), and pages sorted by absolute gap (first and deep). Prints one line per case (median of 5) and exits 1 if any exceeds the budget.

Not in bench/: that harness compares Spark engines side by side; this is one web request.

Usage: .venv/bin/python scripts/workbench_paging.py [--breaks 100000] [--budget 0.5]
"""

from __future__ import annotations

import argparse
import http.cookiejar
import re
import secrets
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reports.db.repository import ReportDB
from reports.review import BULK_CAP, Assignment, BreakTarget, append_break_actions
from workbench import queries
from workbench.app import create_app
from workbench.auth import add_user
from workbench.sample import sample_day
from workbench.server import serve_in_thread

DAY = date(2026, 1, 1)
PASSWORD = secrets.token_urlsafe(16)  # throwaway: the database is too


def _login(url: str) -> urllib.request.OpenerDirector:
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    page = opener.open(f"{url}/login").read().decode()
    token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    form = urllib.parse.urlencode({"name": "bob", "password": PASSWORD, "csrf": token})
    opener.open(f"{url}/login", data=form.encode()).read()
    return opener


def _time(opener: urllib.request.OpenerDirector, url: str) -> tuple[float, str]:
    runs, body = [], ""
    for _ in range(5):
        started = time.perf_counter()
        body = opener.open(url).read().decode()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs), body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--breaks", type=int, default=100_000)
    parser.add_argument("--budget", type=float, default=0.5, help="seconds per page request")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ReportDB(f"sqlite:///{tmp}/r.db") as db:
        started = time.perf_counter()
        run_id = sample_day(db, DAY, breaks=args.breaks, reconciler="alice")
        add_user(db, "bob", "reviewer", PASSWORD)
        # 2,000 open breaks assigned to bob, due long ago (one log entry each, as in bulk)
        assigned = queries.break_page(db, run_id, DAY, queries.BreakFilter(),
                                      limit=args.breaks).rows[1::50][:BULK_CAP]
        append_break_actions(db, run_id, "bob", "break-assigned", "", [
            BreakTarget(r["window_start"], r["key"], r["currency"]) for r in assigned],
            assignment=Assignment("bob", date(2026, 1, 5)))
        print(f"filled {args.breaks} breaks in {time.perf_counter() - started:.1f} s")
        last = queries.break_page(db, run_id, DAY, queries.BreakFilter(), limit=args.breaks)
        deep = queries.Cursor(**{k: last.rows[-60][k] for k in ("window_start", "key",
                                                               "currency")}).encode()
        by_gap = queries.break_page(db, run_id, DAY, queries.BreakFilter(sort="gap"),
                                    limit=args.breaks * 2 // 3)  # deep: into the 3rd currency
        tail = by_gap.rows[-1]
        deep_gap = queries.Cursor(tail["window_start"], tail["key"], tail["currency"],
                                  tail["gap_magnitude"]).encode()
        cases = {"first page": "", "last page (keyset)": f"after={deep}",
                 "cause + currency": "cause=UNEXPLAINED&currency=JPY",
                 "merchant": "merchant=merchant-03",
                 "review status + age": "status=open&age=0",
                 "partition (rare)": "partition=4",
                 "partition + source": "partition=2&source=partner",
                 "source, last page": f"source=mobile&after={deep}",
                 "min |gap| per currency": "min_gap=EUR%3D1.45%2CJPY%3D145%2CKWD%3D0.145",
                 "min |gap| (rare)": "min_gap=EUR%3D3.75%2CJPY%3D375%2CKWD%3D0.375",
                 "sorted by |gap|": "sort=gap",
                 "sorted by |gap|, deep": f"sort=gap&after={deep_gap}",
                 "min |gap| JPY, sorted": "currency=JPY&min_gap=140&sort=gap",
                 "min |gap| + partition": "min_gap=EUR%3D1.4&partition=4&sort=gap",
                 "my breaks": "assignee=bob",
                 "my breaks, overdue": "assignee=bob&overdue=1",
                 "nobody's breaks (none)": "assignee=carol",
                 "overdue": "overdue=1"}
        worst = 0.0
        with serve_in_thread(create_app(db, secret=secrets.token_bytes(32))) as url:
            opener = _login(url)
            for name, query in cases.items():
                seconds, body = _time(opener, f"{url}/day/{DAY}/breaks?{query}")
                count = re.search(r'id="count"><b>([^<]+)</b>', body)
                rows = body.count('class="break"')
                print(f"{name:22s} {seconds * 1000:7.1f} ms  ({rows} rows shown of "
                      f"{count.group(1) if count else '?'} matching)")
                worst = max(worst, seconds)
    print(f"worst page: {worst * 1000:.1f} ms (budget {args.budget * 1000:.0f} ms)")
    return 0 if worst <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
