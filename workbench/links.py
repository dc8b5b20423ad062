"""The workbench's addresses of a day, for what links into it from outside (a notice).

The routes of ``workbench.app`` are declared with these paths, so a link built here is one
the workbench serves: ``day_link("https://reckon.example.com", "2026-01-01")`` gives
``https://reckon.example.com/day/2026-01-01``, the day's run and its sign-off;
``report_link(base, "2026-01-01", "report.html")`` the day's rendered report. No FastAPI
is imported: the nightly DAG's notices build links without the web app.
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["DAY_PATH", "REPORT_PATH", "day_link", "report_link"]

#: the day's current run: its headline, its break list's link, its sign-off
DAY_PATH = "/day/{day}"
#: the day's rendered report and the files beside it (``kind`` is the run's kind)
REPORT_PATH = "/report/{day}/{kind}/{name}"


def day_link(base: str, day: str) -> str:
    """The day's page on the workbench at ``base`` (its base URL, reckon.config's
    ``workbench_url``)."""
    return base.rstrip("/") + DAY_PATH.format(day=quote(day))


def report_link(base: str, day: str, name: str, kind: str = "nightly") -> str:
    """The day's report file ``name`` (``report.html``) as the workbench serves it."""
    return base.rstrip("/") + REPORT_PATH.format(day=quote(day), kind=quote(kind),
                                                 name=quote(name))
