"""Drive real headless Chromium through the DevTools protocol over a pipe (no driver binary,
no websocket library, no Playwright): fill a form, click, read the page, take a screenshot.

Chromium reads protocol messages from its fd 3 and writes to its fd 4, each a JSON object
ended by a NUL byte (``--remote-debugging-pipe``). The network is off except loopback: every
other request goes to a proxy that does not exist (loopback bypasses proxies by default), so
the page can reach the workbench on 127.0.0.1 and nothing else, and a CDN link would fail.

Example:
    >>> with Browser(need("chromium")) as page:  # doctest: +SKIP
    ...     page.goto("http://127.0.0.1:8088/login")
    ...     page.fill("input[name=name]", "bob")
    ...     page.click("button[type=submit]")
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["Browser"]


def _above_9(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Browser:
    """One headless Chromium with one page; methods wait for the page to load."""

    def __init__(self, binary: str, width: int = 1280, height: int = 900) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="reckon-cdp-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # the child's ends above fd 9 (bash takes such numbers; dash does not), so that moving
        # them to 3 and 4 overwrites neither
        to_chrome_r, from_chrome_w = (_above_9(fd) for fd in (to_chrome_r, from_chrome_w))
        argv = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
                "--proxy-server=http://127.0.0.1:9", "--no-first-run",
                "--disable-background-networking", f"--window-size={width},{height}",
                "about:blank"]
        redirect = f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}'
        self._proc = subprocess.Popen(["bash", "-c", redirect, *argv],
                                      pass_fds=(to_chrome_r, from_chrome_w),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        target = self._send("Target.createTarget", url="about:blank")["targetId"]
        self._size = (width, height)
        self._session = self._send("Target.attachToTarget", targetId=target,
                                   flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    # ------------------------------------------------------------------ protocol
    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._from_chrome, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                buffer += chunk
                while b"\0" in buffer:
                    raw, buffer = buffer.split(b"\0", 1)
                    message = json.loads(raw)
                    if "id" in message and message["id"] in self._replies:
                        self._replies[message["id"]].put(message)
                    else:
                        self._events.put(message)

    def _send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            self._replies[ident] = queue.Queue()
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        try:
            reply = self._replies[ident].get(timeout=60)
        except queue.Empty:
            raise TimeoutError(f"Chromium did not answer {method}") from None
        finally:
            del self._replies[ident]
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return dict(reply.get("result", {}))

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """A protocol command on the page."""
        return self._send(method, self._session, **params)

    def _wait_load(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = self._events.get(timeout=0.2)
            except queue.Empty:
                continue
            if event.get("method") == "Page.loadEventFired":
                return
        raise TimeoutError("the page did not finish loading")

    def _drain(self) -> None:
        while not self._events.empty():
            self._events.get_nowait()

    # ------------------------------------------------------------------ page
    def goto(self, url: str) -> None:
        self._drain()
        result = self.call("Page.navigate", url=url)
        if result.get("errorText"):
            raise RuntimeError(f"{url}: {result['errorText']}")
        self._wait_load()

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression on the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def fill(self, selector: str, value: str) -> None:
        """Set a form field (an input's text, a select's option)."""
        self.eval(f"(e => {{ e.value = {json.dumps(value)}; "
                  f"e.dispatchEvent(new Event('change')); }})"
                  f"(document.querySelector({json.dumps(selector)}))")

    def click(self, selector: str) -> None:
        """Click what ``selector`` finds and wait for the page it leads to."""
        self._drain()
        self.eval(f"document.querySelector({json.dumps(selector)}).click()")
        self._wait_load()

    def download(self, selector: str, into: Path, timeout: float = 30) -> Path:
        """Click what ``selector`` finds, a link answered by an attachment, as a user would,
        and wait for the file Chromium saves in ``into`` (made here, empty): its path."""
        into.mkdir(parents=True)
        self._send("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(into))
        self.eval(f"document.querySelector({json.dumps(selector)}).click()")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            saved = [p for p in into.iterdir() if not p.name.endswith(".crdownload")]
            if saved:
                return saved[0]
            time.sleep(0.05)
        raise TimeoutError(f"clicking {selector} saved no file in {timeout} s")

    def text(self, selector: str = "body") -> str:
        return str(self.eval(f"(e => e ? e.innerText : '')"
                             f"(document.querySelector({json.dumps(selector)}))"))

    @property
    def url(self) -> str:
        return str(self.eval("location.href"))

    def screenshot(self, path: Path) -> None:
        """A PNG of the whole page (at least the window's size)."""
        self.call("Emulation.setDeviceMetricsOverride", width=self._size[0],
                  height=self._size[1], deviceScaleFactor=1, mobile=False)
        height = int(self.eval("document.documentElement.scrollHeight"))
        width = int(self.eval("document.documentElement.scrollWidth"))
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        with contextlib.suppress(OSError):  # no reply to wait for: the browser is gone
            os.write(self._to_chrome, json.dumps({"id": 0, "method": "Browser.close"})
                     .encode() + b"\0")
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_chrome)
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
