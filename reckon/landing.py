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

Example:
    >>> unread_reason("events-000001.jsonl")
    >>> unread_reason("day.ndjson.gz")
    'compressed: reckon reads plain text; decompress it into the landing dir'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EVENT_FILE_GLOB", "EVENT_SUFFIXES", "MANIFEST_NAME", "LandingSurvey", "survey", "unread_reason"]

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
            reason = unread_reason(entry.name, is_dir=entry.is_dir())
            if reason is None:
                events += 1
            else:
                unread.append((entry.name, reason))
    return LandingSurvey(folder=str(folder), event_files=events, unread=tuple(sorted(unread)))
