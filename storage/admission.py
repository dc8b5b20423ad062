"""Landing admission: the stream reads a landing dir in file-name order, whatever the
modification times.

Spark's file source takes new files in modification-time order, ``--max-files-per-trigger``
at a time, and breaks ties in the file system's listing order. Producers that drop many files
at once (a tar extraction, a bulk copy) leave them with one modification time, so which of
them a micro-batch takes, and so which events are late, would depend on the listing order.

So the stream does not read the landing dir itself. Each time reckon looks at it (at the
start of a run, then every ``ADMISSION_POLL_SECONDS`` while a triggered stream runs), the
event files it has not admitted yet are admitted in name order: placed in the query's own
folder (``<checkpoint>/admitted/files``, a hard link when the file's own modification time
already fits, else a copy) with modification times strictly increasing in that order, and
Spark's file source reads that folder. Spark deletes each admitted file once the batch that
read it has committed (``cleanSource``); the landing dir is never changed. The admission log
(``<checkpoint>/admitted/log.jsonl``) lists what was admitted, with its size, so a file that
grows after it was admitted (a producer writing in place) is reported, never read twice.

The rule (pure, ``admission_plan``): the files admitted in one look go in name order, each
one millisecond or more after the one before; a file that lands later is admitted later,
whatever its name.

Example:
    >>> plan = admission_plan([LandedFile("b.ndjson", 5_000, 10), LandedFile("a.ndjson", 5_000, 10)],
    ...                       admitted=set(), last_mtime_ms=0)
    >>> [(a.name, a.mtime_ms) for a in plan]
    [('a.ndjson', 5000), ('b.ndjson', 5001)]
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from reckon.errors import UsageError
from storage.landing import SYMLINK_REASON, entry_reason, special_reason

__all__ = ["ADMISSION_POLL_SECONDS", "Admission", "LandedFile", "LandingAdmitter",
           "admission_plan"]

ADMISSION_POLL_SECONDS = 0.5  # how often a triggered stream looks at its landing dir


@dataclass(frozen=True)
class LandedFile:
    """An event file in the landing dir as one listing saw it."""

    name: str
    mtime_ms: int  # modification time, in the milliseconds Spark's file source sees
    size: int


@dataclass(frozen=True)
class Admission:
    """One landing file to admit, with the modification time its admitted copy gets."""

    name: str
    mtime_ms: int
    size: int
    keeps_own_time: bool  # the file's own time fits the order: a hard link will do


def admission_plan(landed: Iterable[LandedFile], admitted: Collection[str],
                   last_mtime_ms: int) -> list[Admission]:
    """The files of ``landed`` not yet ``admitted``, in name order, each with a modification
    time after ``last_mtime_ms`` (the last admitted one's) and after the one before it: its
    own time when that is late enough, else one millisecond after its predecessor."""
    plan: list[Admission] = []
    previous = last_mtime_ms
    for f in sorted((f for f in landed if f.name not in admitted), key=lambda f: f.name):
        mtime = max(f.mtime_ms, previous + 1)
        plan.append(Admission(name=f.name, mtime_ms=mtime, size=f.size,
                              keeps_own_time=mtime == f.mtime_ms))
        previous = mtime
    return plan


def _linked(source: Path, temporary: Path, opened: os.stat_result) -> bool:
    """Hard-link ``source`` (never through a symbolic link) to ``temporary``; True when the
    link is the regular file that was ``opened``, else nothing is left at ``temporary``."""
    try:
        os.link(source, temporary, follow_symlinks=False)
    except OSError:  # another file system, links not allowed, or the file is gone
        return False
    linked = os.lstat(temporary)
    if (linked.st_ino, linked.st_dev) == (opened.st_ino, opened.st_dev):
        return True
    temporary.unlink()
    return False


class LandingAdmitter:
    """Admits a landing dir's event files into the folder Spark's file source reads.

    Example:
        >>> admitter = LandingAdmitter(Path("landing"), Path("cp/admitted"))  # doctest: +SKIP
        >>> admitter.admit()                                                 # doctest: +SKIP
        9
    """

    def __init__(self, landing: Path, state_dir: Path) -> None:
        self.landing = landing
        self.files_dir = state_dir / "files"
        self._log_path = state_dir / "log.jsonl"
        self._sizes: dict[str, int] = {}  # admitted name -> size when admitted
        self._last_mtime_ms = 0
        self._grown: set[str] = set()  # reported once each
        self.files_dir.mkdir(parents=True, exist_ok=True)
        self._load()

    def _load(self) -> None:
        if self._log_path.is_file():
            for line in self._log_path.read_text().splitlines():
                if line.strip():
                    entry = json.loads(line)
                    self._remember(entry["name"], entry["mtime_ms"], entry["size"])
        # a crash between placing a file and logging it: the placed file is admitted
        unlogged = [e for e in os.scandir(self.files_dir)
                    if not e.name.startswith(".") and e.name not in self._sizes]
        found = [LandedFile(name=e.name, mtime_ms=e.stat().st_mtime_ns // 1_000_000,
                            size=e.stat().st_size) for e in sorted(unlogged, key=lambda e: e.name)]
        self._log([{"name": f.name, "mtime_ms": f.mtime_ms, "size": f.size} for f in found])
        for f in found:
            self._remember(f.name, f.mtime_ms, f.size)
        for stale in self.files_dir.glob(".*.admitting"):
            stale.unlink()

    def _remember(self, name: str, mtime_ms: int, size: int) -> None:
        self._sizes[name] = size
        self._last_mtime_ms = max(self._last_mtime_ms, mtime_ms)

    def _log(self, entries: list[dict[str, object]]) -> None:
        if not entries:
            return
        with self._log_path.open("a") as log:
            log.write("".join(json.dumps(e, sort_keys=True) + "\n" for e in entries))
            log.flush()
            os.fsync(log.fileno())

    def _listing(self) -> list[LandedFile]:
        try:
            with os.scandir(self.landing) as entries:
                found = [(e.name, e.stat(follow_symlinks=False)) for e in entries
                         if entry_reason(e) is None]  # regular event files only
        except FileNotFoundError:
            raise UsageError(f"landing dir {self.landing} is gone: the stream cannot read "
                             "it; restore it or stop the stream") from None
        return [LandedFile(name=name, mtime_ms=st.st_mtime_ns // 1_000_000, size=st.st_size)
                for name, st in found]

    def admit(self) -> int:
        """Admit every event file that landed since the last look; returns how many."""
        listing = self._listing()
        self._report_grown(listing)
        placed = [a for a in admission_plan(listing, self._sizes, self._last_mtime_ms)
                  if self._place(a)]
        self._log([{"name": a.name, "mtime_ms": a.mtime_ms, "size": a.size} for a in placed])
        for a in placed:
            self._remember(a.name, a.mtime_ms, a.size)
        return len(placed)

    def _place(self, a: Admission) -> bool:
        """Put ``a`` in the read folder under a hidden name, then rename it (Spark never sees
        a half-written file); False when the file vanished from the landing dir meanwhile, or
        is no longer a regular file (swapped for a link or a FIFO after the listing).

        The landing file is opened without following a link and without blocking, and only a
        regular file is placed: a hard link is kept only when it is that same file."""
        source = self.landing / a.name
        temporary = self.files_dir / f".{a.name}.admitting"
        temporary.unlink(missing_ok=True)
        try:
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return self._not_placed(a, "was removed before it could be read")
        except OSError:  # ELOOP: a symbolic link put there after the listing
            return self._not_placed(a, f"is not a regular file ({SYMLINK_REASON})")
        with os.fdopen(fd, "rb") as opened:
            st = os.fstat(fd)
            reason = special_reason(st.st_mode)
            if reason is not None:
                return self._not_placed(a, f"is not a regular file ({reason})")
            if not (a.keeps_own_time and _linked(source, temporary, st)):
                with temporary.open("wb") as copy:
                    shutil.copyfileobj(opened, copy)
                ns = st.st_mtime_ns if a.keeps_own_time else a.mtime_ms * 1_000_000
                os.utime(temporary, ns=(ns, ns))
        os.replace(temporary, self.files_dir / a.name)
        return True

    def _not_placed(self, a: Admission, why: str) -> bool:
        print(f"[stream] landing {self.landing}: {a.name} {why}; not read", file=sys.stderr,
              flush=True)
        return False

    def _report_grown(self, listing: list[LandedFile]) -> None:
        for f in listing:
            admitted_size = self._sizes.get(f.name)
            if admitted_size is not None and f.size != admitted_size and f.name not in self._grown:
                self._grown.add(f.name)
                print(f"[stream] landing {self.landing}: {f.name} changed after it was "
                      f"admitted ({admitted_size} bytes then, {f.size} now): each file is read "
                      "once, so what changed after its batch read it is not read (a change "
                      "before that may have been). Write each file under a name starting with "
                      "'.' and rename it when complete; send the missing lines in a new file",
                      file=sys.stderr, flush=True)
