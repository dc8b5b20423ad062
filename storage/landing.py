"""Which files of a landing directory the stream reads, and what it says about the others.

Producers leave more than events in a landing dir: a manifest, a file still being written
under a temporary name, a compressed archive, a CSV someone dropped by mistake. Every file is
either read or reported (counted and named, with the reason), never skipped in silence.

Read: ``*.ndjson``, ``*.jsonl`` and ``*.json``, each one JSON object per line (a ``.json``
file holding one JSON array is read line by line, and every line that is not an object is
quarantined as ``bad_json``: counted, never lost). Not read: names starting with ``.`` or
``_`` (Spark's file source skips them: the convention for a file still being written, renamed
when complete, and for side files such as the generator's ``_manifest.json``), compressed
files (decompress them into the landing dir), folders, anything else.

Only regular files are read. A symbolic link is refused, wherever it points (a link
``x.ndjson -> /etc/passwd`` would otherwise put that file's lines in quarantine): copy or
move the file itself into the landing dir. A FIFO, a socket or a device is skipped (reading
a FIFO blocks until someone writes to it, and would stop the stream from starting). Each is
reported with its reason, like any other file not read.

Example:
    >>> unread_reason("events-000001.jsonl")
    >>> unread_reason("day.ndjson.gz")
    'compressed: reckon reads plain text; decompress it into the landing dir'
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EVENT_FILE_GLOB", "EVENT_SUFFIXES", "MANIFEST_NAME", "SYMLINK_REASON", "LandingSurvey",
           "entry_reason", "special_reason", "survey", "unread_reason"]

EVENT_SUFFIXES = (".ndjson", ".jsonl", ".json")
# what a generated landing dir holds beside its event files; the leading '_' keeps it out
MANIFEST_NAME = "_manifest.json"
EVENT_FILE_GLOB = "*.{ndjson,jsonl,json}"  # Hadoop glob syntax (Spark's pathGlobFilter)
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip", ".lz4", ".snappy", ".deflate", ".7z")
_SHOWN = 5  # unread files named in one message; the rest are counted


def unread_reason(name: str, *, is_dir: bool = False) -> str | None:
    """Why the stream does not read a landing entry called ``name``; None when it does."""
    if is_dir:
        return "a folder: the landing dir is read one level deep"
    if name.startswith((".", "_")):
        return ("hidden: a name starting with '.' or '_' is a file still being written or a "
                "side file")
    if name.endswith(EVENT_SUFFIXES):  # as Spark's glob matches: case-sensitive
        return None
    if name.lower().endswith(_COMPRESSED):
        return "compressed: reckon reads plain text; decompress it into the landing dir"
    return ("not an event file: reckon reads .ndjson, .jsonl and .json (lower case), one JSON "
            "object per line")


SYMLINK_REASON = ("a symbolic link: reckon reads regular files only; copy or move the file "
                  "itself into the landing dir")


def special_reason(mode: int) -> str | None:
    """Why a landing entry with ``os.lstat`` mode ``mode`` is not read for what it is (a
    link, FIFO, socket or device); None for a regular file. A folder is left to unread_reason.

    Example:
        >>> special_reason(stat.S_IFIFO | 0o644)
        'a FIFO: reckon reads regular files only (a FIFO blocks the reader until written)'
    """
    if stat.S_ISLNK(mode):
        return SYMLINK_REASON
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO: reckon reads regular files only (a FIFO blocks the reader until written)"
    if stat.S_ISSOCK(mode):
        return "a socket: reckon reads regular files only"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device: reckon reads regular files only"
    return "not a regular file: reckon reads regular files only"


def entry_reason(entry: os.DirEntry[str]) -> str | None:
    """Why the stream does not read the landing entry ``entry``; None when it does. Looks at
    the entry itself, never through a link (``lstat``), and opens nothing."""
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except FileNotFoundError:
        return "removed while the landing dir was read"
    return special_reason(mode) or unread_reason(entry.name, is_dir=stat.S_ISDIR(mode))


@dataclass(frozen=True)
class LandingSurvey:
    """What a landing dir holds: how many event files, and each other entry with its reason."""

    folder: str
    event_files: int
    unread: tuple[tuple[str, str], ...]  # (name, reason), by name

    def describe(self) -> str:
        """One line for the stream's log."""
        head = (f"landing {self.folder}: {self.event_files} event file"
                f"{'' if self.event_files == 1 else 's'} (.ndjson, .jsonl, .json)")
        if self.event_files == 0:
            head += ", 0 files to read"
        if not self.unread:
            return head
        return f"{head}; {describe_unread(self.unread)}"


def describe_unread(unread: tuple[tuple[str, str], ...]) -> str:
    """``2 not read: a.csv (not an event file: ...), _manifest.json (hidden: ...)``."""
    shown = ", ".join(f"{name} ({reason})" for name, reason in unread[:_SHOWN])
    more = f" and {len(unread) - _SHOWN} more" if len(unread) > _SHOWN else ""
    return f"{len(unread)} not read: {shown}{more}"


def survey(folder: str | Path) -> LandingSurvey:
    """Look at every entry of ``folder`` (one directory listing, no file opened)."""
    events = 0
    unread: list[tuple[str, str]] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            reason = entry_reason(entry)
            if reason is None:
                events += 1
            else:
                unread.append((entry.name, reason))
    return LandingSurvey(folder=str(folder), event_files=events, unread=tuple(sorted(unread)))
