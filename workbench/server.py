"""Serving the workbench with uvicorn: in the foreground (``reckon workbench``) or in a
background thread (tests, the screenshot script), always on an explicit host and port.

Example:
    >>> with serve_in_thread(app, "127.0.0.1", 0) as url:  # doctest: +SKIP
    ...     urllib.request.urlopen(url + "/login")
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

__all__ = ["serve", "serve_in_thread"]


def _config(app: FastAPI, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                          proxy_headers=False, server_header=False)


def serve(app: FastAPI, host: str, port: int) -> None:
    """Serve until interrupted."""
    uvicorn.Server(_config(app, host, port)).run()


@contextlib.contextmanager
def serve_in_thread(app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve in a daemon thread; yields the base URL (port 0: a free one), stops on exit."""
    server = uvicorn.Server(_config(app, host, port))
    thread = threading.Thread(target=server.run, name="workbench", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the workbench did not start on {host}:{port}")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
