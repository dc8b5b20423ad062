"""A table's Delta log read from its commit files, without Spark, and the batch marks
reckon writes into it.

Micro-batch writes are idempotent by batch id: each commit carries a *batch mark* (app id,
table, batch id) in its ``userMetadata``, which ``DESCRIBE HISTORY`` shows. A writer that may
be re-running a batch (the first batch after a restart) reads the newest mark of its app id
from the table's commit files and skips the write if the batch is already there; one app id
per stream query. The mark also records the table versions the batch read, so that its re-run
reads the same. (Delta's own ``txnAppId`` option does the same check, but in Delta 4.4 every
such write reconstructs the table's full state to find the last version, about a second per
write on 2 cores even when nothing is re-run.) The marked write itself is
``spark.tables.marked_append`` (it conforms the rows to the table's schema first).

Reading the commit files directly (the Delta protocol: one JSON action per line) answers
"which version is newest", "what did each commit do" and "which batch is in" in milliseconds;
``DESCRIBE HISTORY`` answers the same with a Spark job (~0.1 s warm per table). This module
imports no Spark: it is plain file reading.

Example::

    version = current_version(warehouse, "event_log")
    last = last_marked_batch(warehouse, "event_log", app_id)   # None: never wrote it
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["CLOCK_READ", "added_file_stats", "batch_mark", "batch_mark_reads", "commit_infos",
           "current_version", "last_marked_batch", "log_dir", "marked_commit", "marked_commits",
           "parse_batch_mark", "table_exists"]


def log_dir(warehouse: str | Path, name: str) -> Path:
    """The Delta log folder of table ``name``: ``<warehouse>/<name>/_delta_log`` (a table
    lives at ``spark.tables.table_path``).

    >>> log_dir("/wh", "event_log").as_posix()
    '/wh/event_log/_delta_log'
    """
    return Path(warehouse) / name / "_delta_log"


def table_exists(warehouse: str | Path, name: str) -> bool:
    """Whether table ``name`` exists in the warehouse (its Delta log folder does): plain file
    reading, so a sign-off's check of its run's inputs imports no Spark."""
    return log_dir(warehouse, name).is_dir()


# a commit; not a log compaction (N.M.compacted.json), a checkpoint, a checksum, a commit in
# flight (.N.json.<uuid>.tmp) or a staged commit (_staged_commits/). Delta itself cannot load a
# version that has a checkpoint but no commit file, so the newest commit file is the version.
_COMMIT_FILE = re.compile(r"(\d{20})\.json")


def current_version(warehouse: str | Path, name: str) -> int | None:
    """The newest committed version of table ``name``, from its log's file names, or None if
    it has no commit. ``DESCRIBE HISTORY`` gives the same number but runs a Spark job for it
    (~0.1 s warm per table; the audit pins four). Commits are numbered without gaps, so the
    newest is found by probing for the commit files after the version ``_last_checkpoint``
    names; without that hint, or if its commit file was cleaned up, the log is listed.
    Path-based tables only: a catalog-managed table keeps its newest commits in
    ``_staged_commits`` until they are published."""
    log = log_dir(warehouse, name)
    try:
        hint: int | None = int(json.loads((log / "_last_checkpoint").read_text())["version"])
    except (OSError, ValueError, KeyError, TypeError):
        hint = None
    if hint is None or not (log / f"{hint:020d}.json").is_file():
        if not log.is_dir():
            return None
        with os.scandir(log) as entries:
            found = [m for entry in entries if (m := _COMMIT_FILE.fullmatch(entry.name))]
        return max((int(m.group(1)) for m in found), default=None)
    version = hint
    while (log / f"{version + 1:020d}.json").is_file():
        version += 1
    return version


_MARK_KEY = "reckon_batch"


#: The key under which a batch mark's ``reads`` records the batch's processing time
#: (microseconds): the clock is read once per batch, like the table versions, so that a
#: re-run of the batch writes the same rows its first run would have.
CLOCK_READ = "@processed_at_us"


def batch_mark(app_id: str, name: str, batch_id: int,
               reads: Mapping[str, int] | None = None) -> str:
    """The userMetadata of a commit that writes batch ``batch_id`` of ``app_id`` to ``name``.
    ``reads``: the version of each table the batch read (name -> version), so that a re-run of
    the batch reads exactly what its first run read, whatever was committed in between."""
    mark: dict[str, Any] = {"app": app_id, "table": name, "batch": batch_id}
    if reads:
        mark["reads"] = dict(reads)
    return json.dumps({_MARK_KEY: mark}, sort_keys=True)


def parse_batch_mark(user_metadata: str | None) -> tuple[str, str, int] | None:
    """(app id, table, batch id) of a batch mark; None for any other userMetadata."""
    if not user_metadata or _MARK_KEY not in user_metadata:
        return None
    try:
        mark = json.loads(user_metadata)[_MARK_KEY]
        return str(mark["app"]), str(mark["table"]), int(mark["batch"])
    except (ValueError, TypeError, KeyError):
        return None


def batch_mark_reads(user_metadata: str | None) -> dict[str, int]:
    """The ``reads`` of a batch mark (empty if it records none, or is no mark)."""
    if parse_batch_mark(user_metadata) is None:
        return {}
    assert user_metadata is not None
    reads = json.loads(user_metadata)[_MARK_KEY].get("reads")
    try:
        return {str(k): int(v) for k, v in reads.items()} if isinstance(reads, dict) else {}
    except (ValueError, TypeError):
        return {}


def last_marked_batch(warehouse: str | Path, name: str, app_id: str, *,
                      at_version: int | None = None) -> int | None:
    """The newest batch ``app_id`` committed to ``name``, or as of ``at_version`` (that
    version and older). None if it never wrote the table (by then). Reads commit files only,
    newest first, no table state."""
    for _version, mark in marked_commits(warehouse, name, at_version=at_version):
        if mark[0] == app_id:
            return mark[2]
    return None


def _commit_info(lines: Iterable[str]) -> dict[str, Any] | None:
    """The commitInfo action of a Delta commit file (the Delta protocol: one JSON action per
    line; Delta writes commitInfo first, so the rest is rarely read), or None."""
    for line in lines:
        if '"commitInfo"' in line:
            info = json.loads(line).get("commitInfo")
            return info if isinstance(info, dict) else None
    return None


def _commit_user_metadata(lines: Iterable[str]) -> str | None:
    """The userMetadata of a Delta commit file's commitInfo action, or None."""
    value = (_commit_info(lines) or {}).get("userMetadata")
    return None if value is None else str(value)


def commit_infos(warehouse: str | Path, name: str,
                 after: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(version, commitInfo) of the commits to ``name`` after version ``after``, oldest first:
    what Delta's history() shows (operation, operationMetrics, userMetadata), read from the
    commit files without a Spark job. For recent versions: a commit file that log retention
    already removed raises FileNotFoundError."""
    head = current_version(warehouse, name)
    log = log_dir(warehouse, name)
    for version in range(after + 1, (head if head is not None else after) + 1):
        with (log / f"{version:020d}.json").open(encoding="utf-8") as commit:
            info = _commit_info(commit)
        if info is not None:
            yield version, info


def added_file_stats(warehouse: str | Path, name: str, *, newest: int = 200
                     ) -> Iterator[tuple[int, list[dict[str, Any] | None]]]:
    """(version, the parsed ``stats`` of each file the commit adds, None where a file has none)
    for the newest ``newest`` commits of ``name``, newest first, read from the commit files
    (the Delta protocol's ``add`` actions) without a Spark job. Stops where log retention
    removed the older commits."""
    head = current_version(warehouse, name)
    if head is None:
        return
    log = log_dir(warehouse, name)
    for version in range(head, max(head - newest, -1), -1):
        try:
            text = (log / f"{version:020d}.json").read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        stats: list[dict[str, Any] | None] = []
        for line in text.splitlines():
            if '"add"' in line:
                add = json.loads(line).get("add")
                if isinstance(add, dict):
                    raw = add.get("stats")
                    stats.append(json.loads(raw) if isinstance(raw, str) else None)
        yield version, stats


def marked_commit(warehouse: str | Path, name: str, app_id: str,
                  batch_id: int) -> tuple[int, dict[str, int]] | None:
    """(version, recorded reads) of the commit that holds batch ``batch_id`` of ``app_id`` in
    ``name``, or None if no commit does."""
    for version, user_metadata in _user_metadata_newest_first(warehouse, name, None):
        mark = parse_batch_mark(user_metadata)
        if mark is None or mark[1] != name or mark[0] != app_id:
            continue
        if mark[2] == batch_id:
            return version, batch_mark_reads(user_metadata)
        if mark[2] < batch_id:
            return None  # newest first: the app's older batches, so not there
    return None


def marked_commits(warehouse: str | Path, name: str, *,
                   at_version: int | None = None) -> Iterator[tuple[int, tuple[str, str, int]]]:
    """(version, batch mark) of the commits to ``name`` that carry a mark for it, newest first
    (from ``at_version`` down, if given), only as far as the caller iterates. The commit files
    are read one by one (Delta's history() reads the same files in a Spark job, ~0.1 s warm
    even for one commit), so a walk costs what it reads: the newest mark of a stream query is
    in the last few commits, and a version far behind the table's head (an audit of last week:
    tens of thousands of stream commits since) costs no more than a recent one."""
    for version, user_metadata in _user_metadata_newest_first(warehouse, name, at_version):
        mark = parse_batch_mark(user_metadata)
        if mark is not None and mark[1] == name:
            yield version, mark


def _user_metadata_newest_first(warehouse: str | Path, name: str,
                                at_version: int | None) -> Iterator[tuple[int, str | None]]:
    if at_version is None:
        at_version = current_version(warehouse, name)
        if at_version is None:
            return
    log = log_dir(warehouse, name)
    for version in range(at_version, -1, -1):
        try:
            with (log / f"{version:020d}.json").open(encoding="utf-8") as commit:
                user_metadata = _commit_user_metadata(commit)
        except FileNotFoundError:
            return  # older commits expired (log retention): their marks went with them
        yield version, user_metadata
