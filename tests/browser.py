"""Headless Chromium with the network off, for tests that look at a page as a reviewer would
(the day's report, the GX Data Docs). One helper so that every such test means the same
thing by "offline"."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["chromium", "need", "offline", "png_stats"]


def need(tool: str) -> str:
    """The tool's path; skips the test with the install hint when it is missing."""
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (scripts/setup.sh --test-services installs it)")
    return path


def png_stats(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct colours in a coarse sample) of a PNG."""
    from matplotlib import image

    img = image.imread(str(path))
    h, w = img.shape[:2]
    sample = img[:: max(1, h // 200), :: max(1, w // 200), :3].reshape(-1, 3)
    return w, h, len({tuple((px * 15).round().astype(int)) for px in sample})


def offline(argv: list[str]) -> list[str]:
    """``argv`` with no network at all: in a new network namespace (only a down loopback)
    when we may make one, else through a proxy that does not exist."""
    if os.geteuid() == 0 and shutil.which("unshare"):
        return ["unshare", "--net", *argv]
    return [*argv, "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]


def chromium(binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium offline (``--screenshot=``, ``--dump-dom`` ... in ``args``)."""
    return subprocess.run(offline([binary, "--headless", "--no-sandbox", "--disable-gpu",
                                   "--hide-scrollbars", *args]),
                          capture_output=True, text=True, timeout=180)


def period_rows(page, url: str, start: str, end: str) -> list[list[str]]:
    """The workbench's period view of ``start``..``end`` as a reviewer opens it (the month
    page, then the range form): each day's row, cell texts as shown. ``page``: a logged-in
    tests.cdp.Browser."""
    page.goto(f"{url}/period?month={start[:7]}")
    page.fill("#range input[name=start]", start)
    page.fill("#range input[name=end]", end)
    page.click("#range button[type=submit]")
    assert page.text("h1") == f"{start} to {end} nightly"
    return page.eval("[...document.querySelectorAll('#period-days tbody tr')]"
                     ".map(r => [...r.cells].map(c => c.innerText))")
