"""Serving the workbench with uvicorn: in the foreground (``reckon workbench``) or in a
background thread (tests, the screenshot script), always on an explicit host and port.

Example:
    >>> with serve_in_thread(app, "127.0.0.1", 0) as url:  # doctest: +SKIP
    ...     urllib.request.urlopen(url + "/login")
"""

from __future__ import annotations

import contextlib
import errno
import socket
import threading
import time
from collections.abc import Callable, Iterator

import uvicorn
from fastapi import FastAPI

from reckon.errors import UsageError

__all__ = ["bind", "serve", "serve_in_thread"]


def _config(app: FastAPI, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                          proxy_headers=False, server_header=False)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port``, or one clear line saying why not (uvicorn
    logged its own error after ``reckon workbench`` had announced the address as served).

    Example: a second ``reckon workbench`` on the same port raises ``UsageError("--port 8088
    is not free on 127.0.0.1 (address already in use): ...")``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as err:
        sock.close()
        reason = err.strerror or str(err)
        if err.errno == errno.EADDRINUSE:
            raise UsageError(f"--port {port} is not free on {host} ({reason.lower()}): "
                             "another workbench may be running; give another --port") from None
        raise UsageError(f"cannot listen on {host}:{port} ({reason.lower()}): give a --host "
                         "this machine has (127.0.0.1, or 0.0.0.0 for every address)") from None
    sock.set_inheritable(True)
    return sock


def serve(app: FastAPI, host: str, port: int,
          ready: Callable[[], None] = lambda: None) -> None:
    """Serve until interrupted; ``ready`` runs once the address is bound (the start-up line)."""
    sock = bind(host, port)
    ready()
    uvicorn.Server(_config(app, host, port)).run(sockets=[sock])


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
