"""One writer at a time: the stream of a warehouse, the replay of a day, the audit of a day.

Two writers of the same tables do not fail cleanly under Delta's optimistic concurrency: the
two streams' appends never conflict at all, so a second stream leaves rows of a batch its
winner also wrote, and counts them twice. So every writer first takes an exclusive
lock in the warehouse (``<warehouse>/_locks/<scope>.lock``) and holds it until it ends; a
second writer of the same scope is refused before it writes anything, with one line naming
the holder.

The lock is the file system's own (``flock``): the kernel releases it when its holder dies,
however it dies, so a crashed writer's successor takes over at once and no lease can expire
under a live writer. On a warehouse shared over NFS, Linux maps it onto NFS byte-range
locks, which hold across machines. A writer also checks, before each batch it commits, that
the lock file is still the one it locked (``WriterLock.check``): a lock file deleted by hand
lets a second writer in, and the first then stops before writing rather than after.

Example:
    >>> with WriterLock.take(Path("wh"), "stream", "reckon stream"):   # doctest: +SKIP
    ...     run_the_stream()
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from reckon.errors import ConcurrentWriterError, UsageError

__all__ = ["Holder", "WriterLock", "replay_lock", "stream_refusal", "writer_scope"]


def writer_scope(step: str, day: object | None = None) -> str:
    """The lock's name: ``stream`` for the stream, ``replay-2026-01-01`` for a day's step."""
    return step if day is None else f"{step}-{day}"


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as it wrote in the lock file (None: not written, or unreadable)."""

    what: str | None = None
    pid: object = None
    host: object = None
    user: object = None
    since: object = None

    def who(self) -> str:
        """``pid 17799 on host vm, user root, since 2026-11-27T09:00:00Z``."""
        since = str(self.since).replace("+00:00", "Z")
        return f"pid {self.pid} on host {self.host}, user {self.user}, since {since}"

    def describe(self) -> str:
        """``reckon stream of ... (pid ... on host ..., ...)``; "another process" unknown."""
        if self.what is None:
            return "another process"
        return f"{self.what} ({self.who()})"


def stream_refusal(source: str, warehouse: Path, holder: Holder) -> str:
    """The one line a second stream of a warehouse is refused with: what it would read, the
    warehouse, who already streams into it and what to do.

    Example: ``reckon stream of landing folder /in refused: the warehouse /wh is already
    written by reckon stream of landing folder /in (pid 17799 on host vm, user root, since
    2026-11-27T09:00:00Z). One stream per warehouse: stop that stream, or give this one
    another warehouse (--warehouse)``."""
    return (f"reckon stream of {source} refused: the warehouse {warehouse} is already written "
            f"by {holder.describe()}. One stream per warehouse: stop that stream, or give this "
            "one another warehouse (--warehouse)")


@dataclass
class WriterLock:
    """A held lock: its file, the open descriptor holding it, and that file's identity."""

    path: Path
    fd: int
    inode: tuple[int, int]

    @classmethod
    @contextmanager
    def take(cls, warehouse: Path, scope: str, what: str,
             refused: Callable[[Holder], str] | None = None) -> Iterator[WriterLock]:
        """Hold the ``scope`` lock of ``warehouse`` for the ``with`` block; a held one is a
        ConcurrentWriterError naming its holder (``what`` names the refused writer;
        ``refused``, given the holder, words the refusal instead: ``stream_refusal``)."""
        if not warehouse.is_dir():
            raise UsageError(f"no warehouse at {warehouse}: check --warehouse (or "
                             "RECKON_WAREHOUSE); the stream creates one")
        folder = warehouse / "_locks"
        folder.mkdir(exist_ok=True)
        path = folder / f"{scope}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise ConcurrentWriterError(refused(holder) if refused else (
                f"{what} refused: {holder.describe()} is already writing {scope} of "
                f"{warehouse}. One writer at a time: wait for it to end (or stop it), then run "
                "this again")) from None
        stat = os.fstat(fd)
        lock = cls(path=path, fd=fd, inode=(stat.st_dev, stat.st_ino))
        try:
            lock._describe_holder(what)
            yield lock
        finally:
            os.close(fd)  # releases the lock; the file stays (deleting it would race a taker)

    def _describe_holder(self, what: str) -> None:
        text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                           "user": getpass.getuser(), "what": what,
                           "since": datetime.now(UTC).isoformat(timespec="seconds")})
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, text.encode() + b"\n", 0)

    def check(self) -> None:
        """Raise unless this lock's file is still the warehouse's lock file (someone deleted
        or replaced it, so another writer may hold a lock of its own now)."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            stat = None
        if stat is None or (stat.st_dev, stat.st_ino) != self.inode:
            raise ConcurrentWriterError(
                f"{self.path} was deleted or replaced while this process held it, so another "
                "writer may be running: stopped before writing anything more. Make sure one "
                "writer runs, then start it again")


def _holder(fd: int) -> Holder:
    """Who holds the lock, from what it wrote in the file."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or not info:
        return Holder()
    return Holder(what=str(info.get("what", "another process")), pid=info.get("pid"),
                  host=info.get("host"), user=info.get("user"), since=info.get("since"))


def replay_lock(warehouse: Path, day: object, *,
                from_kafka: bool = False) -> AbstractContextManager[WriterLock]:
    """The one-replay-of-a-day-at-a-time lock of ``warehouse``, to hold for the whole
    replay; refused in one line while another replay of ``day`` holds it. Taken before Spark
    starts (app.pipeline), a refused replay costs no JVM.
    A replay from the topic may be the warehouse's first writer: it makes the folder first.

    Example: ``with replay_lock(wh, day) as lock: replay_day(spark, cfg, day, held=lock)``."""
    if from_kafka:
        warehouse.mkdir(parents=True, exist_ok=True)
    return WriterLock.take(warehouse, writer_scope("replay", day), f"replay of {day}")
