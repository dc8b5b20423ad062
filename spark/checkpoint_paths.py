"""A stream checkpoint that was copied or restored to another path resumes there.

Spark's checkpoint records absolute paths in two places: the file source's log
(``sources/<n>/<batch>``, a line per file the source read:
``{"path":"file:///old/wh/_checkpoints/stream-landing/admitted/files/a.ndjson",...}``) and
a stateful operator's metadata (``state/<op>/_metadata/v2/<batch>``: its state schema files).
On a copy (``cp -a wh wh2``, a restore from backup) both still name the old place; a restart
re-plans the last batch from the source log and Spark fails with ``Wrong basePath`` (or, the
old place still there, would read the old copy's files). Everything else the stream keeps is
relative to the warehouse: Delta's logs name their files relative to the table, the
admission log (storage.admission) names landing files by name.

So before the query starts, ``relocate_checkpoint`` rewrites the recorded paths that lie
under the checkpoint's old location to its current one, one file at a time (write a hidden
copy, rename it over the file, drop Hadoop's ``.<file>.crc`` beside it, which no longer
matches; a missing checksum file is not checked). Where the old location was is read from
the paths themselves: everything before ``/admitted/files/`` in the source log, before
``/state/<op>/`` in the operator metadata. A rewrite cut short is finished by the next
start (the files already rewritten name the current location). Paths outside the
checkpoint are left as they are, and two different old locations are refused in one line.

>>> relocate_checkpoint(Path("/restored/wh/_checkpoints/stream-landing"))  # doctest: +SKIP
Relocated(old='/old/wh/_checkpoints/stream-landing', files=2)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from reckon.errors import UsageError

__all__ = ["Relocated", "hadoop_path_text", "relocate_checkpoint"]

# where a recorded path's checkpoint ends: the admitted files' folder, an operator's state
_ANCHORS = (re.compile(r"/admitted/files/[^/]+$"), re.compile(r"/state/\d+/"))
# characters java.net.URI leaves as they are in a path (Hadoop's Path.toUri quotes the rest;
# non-ASCII letters are kept too)
_URI_PATH_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                           "-_.!~*'();:@&=+$,/")


@dataclass(frozen=True)
class Relocated:
    """A checkpoint whose recorded paths were rewritten: where it was, and how many files."""

    old: str
    files: int


def hadoop_path_text(path: str) -> str:
    """``path`` quoted as Hadoop's ``Path.toUri()`` writes it (java.net.URI's rules: a space
    is ``%20``, ``:`` and ``+`` stay, a non-ASCII letter stays)."""
    out = []
    for ch in path:
        if ch in _URI_PATH_SAFE or (ord(ch) > 127 and ch.isprintable() and not ch.isspace()):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def _split_uri(text: str) -> tuple[str, str] | None:
    """A recorded ``file:`` URI as (scheme and authority part, path part), or None."""
    m = re.match(r"^(file:(?://[^/]*)?)(/.*)$", text)
    return (m.group(1), m.group(2)) if m else None


def _checkpoint_of(text: str) -> str | None:
    """The checkpoint a recorded path lies in (decoded), or None for any other string."""
    parts = _split_uri(text)
    if parts is None:
        return None
    for anchor in _ANCHORS:
        m = anchor.search(parts[1])
        if m:
            return unquote(parts[1][:m.start()])
    return None


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _moved(value: object, old: str, new_raw: str) -> object:
    """``value`` with every recorded path under ``old`` moved under ``new_raw`` (quoted)."""
    if isinstance(value, str):
        parts = _split_uri(value)
        if parts is None or _checkpoint_of(value) != old:
            return value
        scheme, raw = parts
        # the part after the checkpoint, as it was quoted: cut where the decoded prefix ends
        for cut in range(len(raw) + 1):
            if unquote(raw[:cut]) == old and (cut == len(raw) or raw[cut] == "/"):
                return scheme + new_raw + raw[cut:]
        return value
    if isinstance(value, dict):
        return {k: _moved(v, old, new_raw) for k, v in value.items()}
    if isinstance(value, list):
        return [_moved(v, old, new_raw) for v in value]
    return value


def _log_files(checkpoint: Path) -> list[Path]:
    """The checkpoint's files that record paths: the sources' logs, operator metadata."""
    found = [*checkpoint.glob("sources/*/*"), *checkpoint.glob("state/*/_metadata/v2/*")]
    return sorted(p for p in found if p.is_file() and not p.name.startswith("."))


def _read(path: Path) -> tuple[str, list[object | str]]:
    """A metadata log file: its version line, then its JSON lines (a line that is not JSON
    is kept as its text)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    body: list[object | str] = []
    for line in lines[1:]:
        try:
            body.append(json.loads(line) if line.startswith("{") else line)
        except ValueError:
            body.append(line)
    return lines[0], body


def relocate_checkpoint(checkpoint: Path) -> Relocated | None:
    """Rewrite the absolute paths a copied checkpoint still records under its old location
    to ``checkpoint``'s own; None when nothing names another location (the usual start)."""
    here = str(checkpoint.resolve())
    read = {p: _read(p) for p in _log_files(checkpoint)}
    olds = {cp for _, body in read.values() for entry in body for s in _strings(entry)
            if (cp := _checkpoint_of(s)) is not None} - {here}
    if not olds:
        return None
    if len(olds) > 1:
        raise UsageError(
            f"checkpoint {here} records paths under {len(olds)} other locations "
            f"({', '.join(sorted(olds))}): it was assembled from different copies; restore "
            "one whole copy of the warehouse, or start the stream with a new --checkpoint")
    (old,) = olds
    new_raw = hadoop_path_text(here)
    changed = 0
    for path, (version, body) in read.items():
        moved = [_moved(e, old, new_raw) if not isinstance(e, str) else e for e in body]
        if moved == body:
            continue
        text = "\n".join([version, *(e if isinstance(e, str)
                                     else json.dumps(e, separators=(",", ":")) for e in moved)])
        tmp = path.with_name(f".{path.name}.relocating")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
        changed += 1
    return Relocated(old=old, files=changed)
