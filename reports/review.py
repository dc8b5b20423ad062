"""Break review and the hash-chained sign-off log (their commands: app.commands.review).

The sign-off log is append-only and tamper-evident. Entry ``n`` stores
``entry_hash = sha256(canonical JSON of {seq, at, run_id, by, decision, note, prev_hash,
signed})`` with ``prev_hash`` = entry ``n-1``'s ``entry_hash`` (64 zeros for seq 1). ``signed``
binds what was signed (``signed_figures``): the run's figures per currency, its status
counts, the table versions it read and its report's SHA-256, so a figure changed afterwards
no longer matches. Editing an entry breaks its own hash; deleting or reordering entries breaks
a ``seq`` or ``prev_hash`` link. Each append also records the new head (seq, hash) in the
warehouse (``_signoff_anchor.jsonl``), outside the log's table: entries removed from the end,
or a chain recomputed after an edit, no longer match what the warehouse recorded. A run whose
inputs a new replay rewrote after its audit cannot be signed (``changed_inputs``).

Whoever can write the database can recompute a chain, so each entry is also signed: the
signer's own ed25519 key (reckon.signing) signs ``entry_hash``, and verify-log checks it
against the key the administrator registered for that name (reports.signer_keys; decision
0011). The signed figures include a digest of the run's breaks rows (``breaks_digest``), and
verify-log hashes the signed report's files again. The anchor (and the published heads file,
``signoff_heads``, outside the warehouse) is written inside the append's transaction; a head
published outside the warehouse (``--expect-head``) is what shows a log erased or cut.

Four-eyes rule: the run's reconciler (the OS account that ran the audit) may not sign it off;
the signer is the OS account that runs ``reckon signoff``, and a name is compared under any
spelling that looks the same (reckon.identity: a Cyrillic or fullwidth letter, a zero-width space); the rules live in reckon.signoff. Decisions
'accepted' and 'resolved' also move the run's *open* breaks to that review status ('explained' breaks stay explained).
The workbench's actions on one break (BREAK_ACTIONS: comment, accept, resolve, reject, reopen)
are entries of the same log, under the same rules, with the break named in the note (for a
rejection or a reopen, the note is its reason); they sign nothing. Reopening an open break is
refused.

A break is a (day, window, key, currency): ``reckon breaks list`` shows each with its currency
and its amounts in that currency's own digits (``--json``: exact decimal text, same digits).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from reckon.errors import UsageError, invalid
from reckon.identity import same_person
from reckon.money import quantize_to_currency
from reckon.signing import verify_signature
from reckon.signoff import (
    BREAK_ACTIONS,
    BREAK_STATUS_AFTER,
    DECISIONS,
    EXPORTED,
    closes_breaks,
    four_eyes_refusal,
    impersonation_refusal,
)
from reports.approval_record import write_approval_record
from reports.db.engine import write_tx
from reports.db.models import (
    AUDIT_RUN_CURRENCIES,
    AUDIT_RUNS,
    BREAK_REVIEWS,
    BREAKS,
    REPORTS,
    SIGNER_KEYS,
    SIGNOFF_LOG,
    WORKBENCH_USERS,
)
from reports.db.repository import ReportDB
from reports.signer_keys import (
    Registration,
    registered_keys,
    registration_problems,
    revocations,
)
from storage.sharing import os_principal
from storage.signing_keys import SigningKey

__all__ = [
    "BREAK_ACTIONS",
    "BULK_CAP",
    "DECISIONS",
    "GENESIS_HASH",
    "Assignment",
    "BreakTarget",
    "LogTrust",
    "LogVerification",
    "SignoffEntry",
    "SignoffRefused",
    "append_break_actions",
    "append_signoff",
    "changed_inputs",
    "compute_entry_hash",
    "figures_in_minor_units",
    "read_log",
    "record_export",
    "sign_off",
    "verify_log",
]

GENESIS_HASH = "0" * 64
_APPEND_ATTEMPTS = 3


class SignoffRefused(UsageError):
    """A sign-off that the rules forbid: unknown run, or the reconciler signing their own run."""


@dataclass(frozen=True)
class SignoffEntry:
    """One entry of the sign-off log. ``at`` is an aware UTC datetime (microseconds)."""

    seq: int
    at: datetime
    run_id: str
    by: str
    decision: str
    note: str
    prev_hash: str
    entry_hash: str
    signed: str | None = None  # the figures signed (signed_figures), canonical JSON
    key_id: str | None = None  # the signer's key (reckon.signing); None: an unsigned entry
    signature: str | None = None  # its ed25519 signature of entry_hash, hex

    def to_json_dict(self) -> dict[str, Any]:
        """The entry as ``reckon signoff --json`` prints it (``at`` as the hash reads it)."""
        return {"seq": self.seq, "at": _format_at(self.at), "run_id": self.run_id,
                "by": self.by, "decision": self.decision, "note": self.note,
                "prev_hash": self.prev_hash, "entry_hash": self.entry_hash,
                "key_id": self.key_id}

    def recomputed_hash(self) -> str:
        """The hash the entry's current contents should carry."""
        return compute_entry_hash(seq=self.seq, at=self.at, run_id=self.run_id, by=self.by,
                                  decision=self.decision, note=self.note,
                                  prev_hash=self.prev_hash, signed=self.signed)


@dataclass(frozen=True)
class LogVerification:
    """Result of :func:`verify_log`. ``problems`` name the seq and what is wrong; ``head_hash``
    is the last entry's hash (64 zeros for an empty log): keep it elsewhere to detect
    truncation later."""

    ok: bool
    entries: int
    head_hash: str
    problems: list[str]
    legacy: int = 0  # unsigned entries accepted as written before signing keys


@dataclass(frozen=True)
class LogTrust:
    """What a long-lived signer (the workbench) is handed to append and verify: its signing
    key, the administrator's pinned public key, the last legacy seq and the published heads
    file (the settings signing_key, signoff_admin_key, signoff_legacy_through,
    signoff_heads).

    Example: ``LogTrust(signer=SigningKey.load(path), admin_key="ed25519:...")``."""

    signer: SigningKey | None = None
    admin_key: str | None = None
    legacy_through: int = 0
    heads: Path | None = None

    def verify(self, db: ReportDB, warehouse: Path | None,
               figures_of: Collection[str] | None = None) -> LogVerification:
        """verify_log with these keys and the last published head."""
        return verify_log(db, published_head(self.heads), warehouse, figures_of,
                          admin_key=self.admin_key, legacy_through=self.legacy_through)


@dataclass(frozen=True)
class BreakTarget:
    """One break of a run, as a break action names it: its window start, key and currency.

    Example: ``BreakTarget(datetime(2026, 1, 1, tzinfo=UTC), "m1", "EUR").label()`` is
    ``'break 2026-01-01T00:00:00.000000Z m1 EUR'``, the prefix of the action's note.
    """

    window_start: datetime
    key: str
    currency: str

    def label(self) -> str:
        return f"break {_format_at(self.window_start)} {self.key} {self.currency}"


@dataclass(frozen=True)
class Assignment:
    """Who is to review a break and by when (a 'break-assigned' entry): a workbench user who
    may act, never the run's reconciler; ``due_on`` None: no date.

    Example: ``Assignment("bob", date(2026, 1, 9)).words()`` is
    ``'assigned to bob, due 2026-01-09'``, the start of the entry's note after the label."""

    assignee: str
    due_on: date | None = None

    def words(self) -> str:
        due = "no due date" if self.due_on is None else f"due {self.due_on.isoformat()}"
        return f"assigned to {self.assignee}, {due}"


def _format_at(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def compute_entry_hash(*, seq: int, at: datetime, run_id: str, by: str, decision: str,
                       note: str, prev_hash: str, signed: str | None = None) -> str:
    """SHA-256 (hex) of the canonical JSON of an entry's fields: sorted keys, no whitespace,
    UTF-8, ``at`` as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``; ``signed`` (the figures signed) when the
    entry has it (entries older than migration 0005 do not)."""
    payload = {"seq": seq, "at": _format_at(at), "run_id": run_id, "by": by,
               "decision": decision, "note": note, "prev_hash": prev_hash}
    if signed is not None:
        payload["signed"] = signed
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


#: The amounts of each currency a sign-off binds (``signed_figures``), exact text as stored.
_SIGNED_MONEY = ("provisional_total", "canonical_total", "gap_total", "late_total",
                 "duplicate_total", "residual_total", "tolerated_total")


def figures_in_minor_units(signed: str) -> dict[str, Any]:
    """The signed figures (``signed_figures``' JSON) with each amount as exact text in its
    currency's own minor units (reckon.money), as every other output writes money; the
    stored text, which the entry's hash binds, keeps the database's scale.

    >>> figures_in_minor_units('{"currencies": {"JPY": {"gap_total": "4583.000"}}}')
    {'currencies': {'JPY': {'gap_total': '4583'}}}
    """
    figures = json.loads(signed)
    for code, amounts in (figures.get("currencies") or {}).items():
        for name in _SIGNED_MONEY:
            if amounts.get(name) is not None:
                amounts[name] = str(quantize_to_currency(Decimal(amounts[name]), code))
    return dict(figures)


def signed_figures(conn: sa.Connection, run_id: str) -> str | None:
    """What a sign-off of ``run_id`` signs, as canonical JSON: the run's day, kind, status
    counts, unexplained count, the table versions it read, each currency's totals (exact
    decimal text, as stored) and the SHA-256 of the newest report rendered for it. None for an unknown
    run. verify-log recomputes it: a figure changed afterwards no longer matches."""
    run = conn.execute(sa.select(AUDIT_RUNS).where(AUDIT_RUNS.c.run_id == run_id)).first()
    if run is None:
        return None
    currencies = {
        r.currency: {**{m: str(getattr(r, m)) for m in _SIGNED_MONEY},
                     "unexplained": int(r.unexplained),
                     "status_counts": dict(r.status_counts)}
        for r in conn.execute(sa.select(AUDIT_RUN_CURRENCIES)
                              .where(AUDIT_RUN_CURRENCIES.c.run_id == run_id))}
    report = conn.execute(sa.select(REPORTS.c.sha256).where(REPORTS.c.audit_run_id == run_id)
                          .order_by(REPORTS.c.created_at.desc()).limit(1)).scalar_one_or_none()
    figures = {"run_id": run_id, "day": run.day.isoformat(), "kind": run.kind,
               "status_counts": dict(run.status_counts), "unexplained": int(run.unexplained),
               "table_versions": dict(run.table_versions or {}), "currencies": currencies,
               "report_sha256": report, "breaks_sha256": breaks_digest(conn, run_id)}
    return json.dumps(figures, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def breaks_digest(conn: sa.Connection, run_id: str) -> str:
    """SHA-256 of the run's ``breaks`` rows (every column but the row id; money as exact
    text, times as ``_format_at``), in identity order: a sign-off binds the breaks it was
    made on, so a row edited afterwards no longer matches. Review statuses live elsewhere
    (break_reviews) and may move; the figures may not.

    Example: ``breaks_digest(conn, "run-1")`` -> 64 hex digits, the same on every call."""
    columns = [c for c in BREAKS.c if c.name != "id"]
    rows = conn.execute(sa.select(*columns).where(BREAKS.c.run_id == run_id).order_by(
        BREAKS.c.day, BREAKS.c.window_start, BREAKS.c.key, BREAKS.c.currency)).all()
    digest = hashlib.sha256()
    for row in rows:
        values = [_format_at(v) if isinstance(v, datetime) else None if v is None else str(v)
                  for v in row]
        digest.update(json.dumps(values, ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


ANCHOR_NAME = "_signoff_anchor.jsonl"  # in the warehouse: the log's head, outside its table


@contextlib.contextmanager
def _anchor_opened(warehouse: Path | None,
                   heads: Path | None = None) -> Iterator[Callable[[SignoffEntry], None]]:
    """The warehouse's anchor file (and the published heads file ``heads``, outside the
    warehouse), opened for appending before the entry is inserted, so an append and its
    anchor succeed or fail together: a file this account may not write stops the sign-off
    before anything is written (one line naming the file and the fix), and a commit that
    fails after the head was written takes the line back out.

    Example: ``with _anchor_opened(wh) as anchor: ...insert...; anchor(entry)``."""
    paths = [p for p in (None if warehouse is None or not warehouse.is_dir()
                         else warehouse / ANCHOR_NAME, heads) if p is not None]
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(_opened(p, warehouse)) for p in paths]
        sizes: list[tuple[Any, int]] = []  # each file's end when its head was written

        def anchor(entry: SignoffEntry) -> None:
            for handle in handles:
                _write_head(handle, entry, sizes)

        try:
            yield anchor
        except BaseException:
            for handle, size in sizes:
                handle.truncate(size)  # the entry was not committed: neither is its head
            raise


def _opened(path: Path, warehouse: Path | None) -> Any:
    """``path`` opened for appending, or one line naming it and the fix (a shared warehouse's
    file another account created without the group setting)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("a", encoding="utf-8")
    except PermissionError:
        raise UsageError(permission_fix(path, warehouse if path.name == ANCHOR_NAME
                                        else None)) from None


def _write_head(handle: Any, entry: SignoffEntry, sizes: list[tuple[Any, int]]) -> None:
    sizes.append((handle, handle.seek(0, os.SEEK_END)))
    handle.write(json.dumps({"seq": entry.seq, "entry_hash": entry.entry_hash,
                             "at": _format_at(entry.at)}, sort_keys=True) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def published_head(heads: Path | None) -> str | None:
    """The last head a sign-off published to ``heads`` (None when there is none yet)."""
    if heads is None or not heads.is_file():
        return None
    lines = [line for line in heads.read_text(encoding="utf-8").splitlines() if line.strip()]
    return str(json.loads(lines[-1])["entry_hash"]) if lines else None


def permission_fix(path: Path, root: Path | None = None) -> str:
    """The one line a signer reads when a shared warehouse's file is not writable to them.

    >>> permission_fix(Path("/nonexistent/wh/_signoff_anchor.jsonl"))[:40]
    'cannot write /nonexistent/wh/_signoff_an'
    """
    try:
        info = path.stat()
        owner = f" (mode {stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}, group gid " \
                f"{info.st_gid})"
    except OSError:
        owner = ""
    root = root or path.parent
    return (f"cannot write {path}{owner} as {os_principal()}: in a warehouse several accounts "
            f"sign, set shared_warehouse = \"group\" (RECKON_SHARED_WAREHOUSE=group) and give "
            f"the warehouse to their group once: chgrp -R GROUP {root} && chmod -R g+rwX "
            f"{root} && find {root} -type d -exec chmod g+s {{}} +")


def _anchor_problems(warehouse: Path | None, entries: list[SignoffEntry]) -> list[str]:
    """Every anchored head the log no longer holds as it was."""
    path = None if warehouse is None else warehouse / ANCHOR_NAME
    if path is None or not path.is_file():
        return []
    held = {e.seq: e.entry_hash for e in entries}
    problems = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        head = json.loads(line)
        seq, digest = int(head["seq"]), str(head["entry_hash"])
        if seq not in held:
            problems.append(f"seq {seq}: anchored in {path.name} at {head.get('at')} but gone "
                            "from the log (entries removed from the end?)")
        elif held[seq] != digest:
            problems.append(f"seq {seq}: its hash is not the one anchored in {path.name} "
                            "(the chain was recomputed after an edit)")
    return problems


# the tables whose rows of the day a replay replaces: an audit run read one version of each
_REPLAYED_TABLES = ("canonical_totals", "uncaught_duplicates")
_DATA_CHANGES = ("WRITE", "MERGE", "DELETE", "UPDATE", "RESTORE", "CREATE OR REPLACE TABLE",
                 "REPLACE TABLE", "TRUNCATE")


def changed_inputs(warehouse: Path, day: date, table_versions: dict[str, int]) -> str | None:
    """What rewrote the day's rows of a table the audit run read, after the version it read
    (a new replay of the day, a restore, a hand-made write); None when nothing did. Read from
    the Delta commit files, without Spark."""
    from storage import commits

    for name in _REPLAYED_TABLES:
        read = table_versions.get(name)
        if read is None:
            continue
        if not commits.table_exists(warehouse, name):
            return f"{name}, which it read at version {read}, is gone from {warehouse}"
        try:
            later = list(commits.commit_infos(warehouse, name, after=int(read)))
        except FileNotFoundError:
            return (f"{name}'s commits after version {read} (which it read) are gone, so "
                    "whether the day changed cannot be told")
        for version, info in later:
            predicate = str((info.get("operationParameters") or {}).get("predicate") or "")
            if info.get("operation") in _DATA_CHANGES and (not predicate
                                                           or day.isoformat() in predicate):
                return (f"{name} was rewritten for {day} at version {version} "
                        f"({info.get('operation')}, after version {read}, which the run read)")
    return None


def append_signoff(db: ReportDB, run_id: str, by: str, decision: str, note: str, *,
                   now: datetime | None = None, warehouse: Path | None = None,
                   target: BreakTarget | None = None, required_approvers: int = 1,
                   signer: SigningKey | None = None, heads: Path | None = None,
                   assignment: Assignment | None = None) -> SignoffEntry:
    """Append a decision on ``run_id`` to the log and return the new entry.

    Serialised against concurrent appenders and audits of the run's day (SQLite ``BEGIN
    IMMEDIATE``; PostgreSQL takes the log's advisory lock, then audit_runs', at READ
    COMMITTED, since ``FOR UPDATE`` on the last row would not stop a second appender from
    reading the same last row after the first commits); ``seq`` is also unique, so a lost race
    can only fail, never fork the chain. Refuses (:class:`SignoffRefused`) an unknown run, a
    run a later audit of its day replaced (decisions are made on the current figures), or a
    sign-off by the run's reconciler (names compared as reckon.identity does: NFKC, case,
    invisible characters and Unicode confusables folded).

    A break action (BREAK_ACTIONS) needs ``target``, a break of the run: its note starts with
    the break's label, and every action but a comment moves that break's review status
    (reckon.signoff.BREAK_STATUS_AFTER: accepted, resolved, rejected, open again).

    ``signer``: the signer's own key (reckon.signing), registered for ``by`` (or the
    workbench's service key): the entry carries its signature of ``entry_hash``. Without
    it the entry is unsigned, and verify-log reports it as such. ``heads``: a file outside
    the warehouse (the ``signoff_heads`` setting) the new head is published to, with the
    anchor.

    After a decision on the run, the approval record beside the run's report is rewritten
    (reports.approval_record, ``required_approvers`` deciding its state): the report shows its
    approval without a re-render, and its own bytes never change.
    """
    who, text = _checked_request(decision, by, note, target, assignment)
    engine = db.ready()
    for attempt in range(1, _APPEND_ATTEMPTS + 1):
        try:
            # audit_runs too: an audit recording a new run of the day waits, so a decision is
            # never appended to a run that stopped being current before the commit
            with _anchor_opened(warehouse, heads) as anchor, \
                    write_tx(engine, "signoff_log", "audit_runs") as conn:
                _refuse_unless_signable(conn, run_id, who, warehouse=warehouse, target=target,
                                        decision=decision)
                _refuse_unregistered(conn, signer, who)
                _refuse_unless_assignable(conn, run_id, assignment)
                at = (now or datetime.now(UTC)).astimezone(UTC)
                entry = _chained_entry(conn, run_id=run_id, by=who, decision=decision,
                                       note=text, at=at, signer=signer)
                _insert_entry(conn, entry)
                _apply_to_breaks(conn, run_id, decision, target, at, assignment)
                anchor(entry)  # written before the commit; taken back if it fails
            break
        except IntegrityError:
            if attempt == _APPEND_ATTEMPTS:
                raise
        except sa.exc.DBAPIError as exc:  # PostgreSQL's grants and triggers (migration 0006)
            if _sqlstate(exc.orig) != "42501":
                raise
            cause = str(exc.orig).strip().splitlines()[0]
            raise SignoffRefused(f"the report database refused the sign-off: {cause}") from None
    if target is None:
        write_approval_record(db, run_id, required_approvers)
    return entry


def record_export(db: ReportDB, run_id: str, by: str, what: str, *,
                  now: datetime | None = None, warehouse: Path | None = None,
                  signer: SigningKey | None = None, heads: Path | None = None) -> SignoffEntry:
    """Record that ``by`` exported ``what`` of ``run_id``'s breaks (a CSV or PDF of the
    filtered list, a file of the day's report): one ``exported`` entry of the chained log,
    hashed and anchored like every other. It decides nothing, so neither the four-eyes rule
    nor a role that may act applies (an auditor's export is recorded too); the run must exist.

    Example: ``record_export(db, "nightly-2026-01-01", "carl", "breaks.csv: 12 breaks")``."""
    who, text = (by or "").strip(), (what or "").strip()
    if not who:
        raise invalid("by", by, "who exported (not empty)")
    if not text:
        raise invalid("what", what, "what was exported (not empty)")
    try:
        with _anchor_opened(warehouse, heads) as anchor, \
                write_tx(db.ready(), "signoff_log") as conn:
            if conn.execute(sa.select(AUDIT_RUNS.c.run_id).where(
                    AUDIT_RUNS.c.run_id == run_id)).first() is None:
                raise SignoffRefused(f"run={run_id!r} is not valid: no audit run has this id")
            _refuse_unregistered(conn, signer, who)
            at = (now or datetime.now(UTC)).astimezone(UTC)
            entry = _chained_entry(conn, run_id=run_id, by=who, decision=EXPORTED,
                                   note=f"exported {text}", at=at, signer=signer)
            _insert_entry(conn, entry)
            anchor(entry)
    except sa.exc.DBAPIError as exc:  # PostgreSQL's signer trigger (migration 0016)
        if _sqlstate(exc.orig) != "42501":
            raise
        cause = str(exc.orig).strip().splitlines()[0]
        raise SignoffRefused(f"the report database refused the export record: {cause}") \
            from None
    return entry


#: The most breaks one bulk action takes (reckon's workbench asks for a narrower filter).
BULK_CAP = 5_000


def append_break_actions(db: ReportDB, run_id: str, by: str, decision: str, note: str,
                         targets: Sequence[BreakTarget], *, now: datetime | None = None,
                         warehouse: Path | None = None,
                         assignment: Assignment | None = None,
                         signer: SigningKey | None = None,
                         heads: Path | None = None) -> list[SignoffEntry]:
    """One break action (BREAK_ACTIONS) on each of ``targets``, breaks of ``run_id``: one log
    entry per break, each chained and hashed as :func:`append_signoff` writes it, all in one
    transaction (all are appended, or none). The same rules, checked before anything is
    written: the run is current and its inputs unchanged, every target is one of its breaks,
    ``by`` is not its reconciler (four eyes); at most :data:`BULK_CAP` breaks.

    Example: ``append_break_actions(db, "nightly-2026-01-01", "bob", "break-accepted",
    "late events of partition 3", targets)`` appends ``len(targets)`` entries."""
    if not targets:
        raise invalid("targets", "[]", "one break or more")
    if len(targets) > BULK_CAP:
        raise invalid("targets", f"{len(targets):,} breaks", f"at most {BULK_CAP:,} at once")
    if decision not in BREAK_ACTIONS:
        raise invalid("decision", decision, "a break action: one of " + ", ".join(BREAK_ACTIONS))
    checked = [_checked_request(decision, by, note, t, assignment) for t in targets]
    who = checked[0][0]
    at = (now or datetime.now(UTC)).astimezone(UTC)
    entries: list[SignoffEntry] = []
    try:
        with _anchor_opened(warehouse, heads) as anchor, \
                write_tx(db.ready(), "signoff_log", "audit_runs") as conn:
            for n, target in enumerate(targets):
                _refuse_unless_signable(conn, run_id, who,
                                        warehouse=warehouse if n == 0 else None,
                                        target=target, decision=decision)
            _refuse_unless_assignable(conn, run_id, assignment)
            _refuse_unregistered(conn, signer, who)
            signed = signed_figures(conn, run_id)
            for target, (_, text) in zip(targets, checked, strict=True):
                entry = _chained_entry(conn, run_id=run_id, by=who, decision=decision,
                                       note=text, at=at, signer=signer, signed=signed)
                _insert_entry(conn, entry)
                _apply_to_breaks(conn, run_id, decision, target, at, assignment)
                entries.append(entry)
            anchor(entries[-1])  # written before the commit; taken back if it fails
    except sa.exc.DBAPIError as exc:  # PostgreSQL's grants and triggers (migration 0006)
        if _sqlstate(exc.orig) != "42501":
            raise
        cause = str(exc.orig).strip().splitlines()[0]
        raise SignoffRefused(f"the report database refused the actions: {cause}") from None
    return entries


def _checked_request(decision: str, by: str, note: str, target: BreakTarget | None,
                     assignment: Assignment | None = None) -> tuple[str, str]:
    """``(who, note)`` of a well-formed request, before the database is touched: a known
    decision, a target exactly for a break action, a reviewer and a note (prefixed with the
    break's label for a break action); one line for the first mistake otherwise.

    >>> _checked_request("approved", " ana ", " figures checked ", None)
    ('ana', 'figures checked')
    """
    if decision not in DECISIONS + BREAK_ACTIONS:
        raise invalid("decision", decision, "one of " + ", ".join(DECISIONS + BREAK_ACTIONS))
    if (target is None) != (decision in DECISIONS):
        raise invalid("target", target, "a break exactly when the decision is a break action")
    if (assignment is None) != (decision != "break-assigned"):
        raise invalid("assignment", assignment, "who and by when exactly when the decision is "
                      "break-assigned")
    who = (by or "").strip()
    if not who:
        raise invalid("by", by, "the reviewer's name (not empty)")
    text = (note or "").strip()
    if assignment is not None:  # the assignment is what the entry says: its note may add why
        text = assignment.words() + (f": {text}" if text else "")
    if not text:
        raise invalid("note", note, "a note saying what was reviewed and decided (not empty)")
    if target is not None:
        text = f"{target.label()}: {text}"
    return who, text


def _refuse_unless_signable(conn: sa.Connection, run_id: str, who: str, *,
                            warehouse: Path | None, target: BreakTarget | None,
                            decision: str = "") -> None:
    """Raise :class:`SignoffRefused` unless ``who`` may decide on ``run_id`` now: the run
    exists and is its day's current one, its inputs have not changed since it was audited
    (when ``warehouse`` is given), ``target`` is one of its breaks, and ``who`` is not its
    reconciler (four eyes)."""
    runs = AUDIT_RUNS
    run = conn.execute(sa.select(runs.c.reconciler, runs.c.is_current, runs.c.day,
                                 runs.c.kind, runs.c.table_versions)
                       .where(runs.c.run_id == run_id)).first()
    if run is None:
        raise SignoffRefused(
            f"run={run_id!r} is not valid: no audit run has this id "
            "(`reckon breaks list` shows the run ids of current breaks)")
    if not run.is_current:
        current = conn.execute(sa.select(runs.c.run_id).where(
            runs.c.day == run.day, runs.c.kind == run.kind,
            runs.c.is_current.is_(True))).scalar_one_or_none()
        raise SignoffRefused(
            f"run={run_id!r} is not valid: a later audit of {run.day} ({run.kind}) "
            f"replaced it; review and sign off the current run {current!r}")
    changed = None if warehouse is None else changed_inputs(
        warehouse, run.day, dict(run.table_versions or {}))
    if changed is not None:
        raise SignoffRefused(
            f"run={run_id!r} is not valid: its inputs changed since it was "
            f"audited ({changed}); audit {run.day} again (`reckon audit --date "
            f"{run.day}`) and sign off the new run")
    if target is not None and not _break_in_run(conn, run_id, target):
        raise SignoffRefused(f"{target.label()} is not a break of run {run_id!r}")
    if decision == "break-reopened" and target is not None:
        status = _break_status(conn, run_id, target)
        if status == "open":
            raise SignoffRefused(f"{target.label()} is open already: nothing to reopen (a "
                                 "comment says something about it without moving it)")
    refusal = four_eyes_refusal(who, str(run.reconciler), run_id,
                                on_break=target is not None)
    if refusal is not None:
        raise SignoffRefused(refusal)


def _refuse_unregistered(conn: sa.Connection, signer: SigningKey | None, who: str) -> None:
    """Refuse a signing key no registration gives to ``who`` (nor to the workbench): the
    entry would be written, and then fail verify-log."""
    if signer is None:
        return
    reg = conn.execute(sa.select(SIGNER_KEYS.c.name, SIGNER_KEYS.c.scope).where(
        SIGNER_KEYS.c.key_id == signer.key_id).order_by(SIGNER_KEYS.c.seq.desc())).first()
    if reg is not None and reg.scope == "revoked":
        raise SignoffRefused(
            f"your signing key {signer.key_id} was revoked: make a new one (`reckon keys init "
            "--key-file FILE`, then point signing_key at it) and have the administrator "
            "register it")
    if reg is None:
        raise SignoffRefused(
            f"your signing key {signer.key_id} is not registered: ask the administrator to run "
            f"`reckon keys register {who} --public-key {signer.public_text}`")
    if reg.scope != "workbench" and not same_person(str(reg.name), who):
        raise SignoffRefused(f"signing key {signer.key_id} is {reg.name}'s, not {who}'s: each "
                             "person signs with their own key")


def _refuse_unless_assignable(conn: sa.Connection, run_id: str,
                              assignment: Assignment | None) -> None:
    """Raise :class:`SignoffRefused` unless ``assignment`` (if any) names an enabled workbench
    user who may act on the run's breaks: a reviewer or reconciler, not the run's reconciler
    (four eyes: they could not act on what they were given)."""
    if assignment is None:
        return
    users = WORKBENCH_USERS
    user = conn.execute(sa.select(users.c.name, users.c.role, users.c.enabled)
                        .where(users.c.name == assignment.assignee)).first()
    if user is None or not user.enabled or user.role not in ("reviewer", "reconciler"):
        raise SignoffRefused(f"assignee={assignment.assignee!r} is not valid: not an enabled "
                             "workbench user who may act (a reviewer or a reconciler)")
    reconciler = conn.execute(sa.select(AUDIT_RUNS.c.reconciler).where(
        AUDIT_RUNS.c.run_id == run_id)).scalar_one()
    if same_person(assignment.assignee, str(reconciler)):
        raise SignoffRefused(f"assignee={assignment.assignee!r} is not valid: "
                             f"{reconciler!r} reconciled run {run_id!r}, and its breaks need "
                             "a second person's review (four-eyes rule)")


def _chained_entry(conn: sa.Connection, *, run_id: str, by: str, decision: str, note: str,
                   at: datetime, signer: SigningKey | None = None,
                   signed: str | None = None) -> SignoffEntry:
    """The next entry of the chain: the last entry's ``seq + 1`` and hash (the genesis hash
    for the first), the run's signed figures, its own hash over all of it, and the signer's
    signature of that hash."""
    log = SIGNOFF_LOG
    last = conn.execute(sa.select(log.c.seq, log.c.entry_hash)
                        .order_by(log.c.seq.desc()).limit(1)).first()
    seq = 1 if last is None else int(last.seq) + 1
    prev = GENESIS_HASH if last is None else str(last.entry_hash)
    signed = signed if signed is not None else signed_figures(conn, run_id)
    digest = compute_entry_hash(seq=seq, at=at, run_id=run_id, by=by, decision=decision,
                                note=note, prev_hash=prev, signed=signed)
    return SignoffEntry(
        seq=seq, at=at, run_id=run_id, by=by, decision=decision, note=note, prev_hash=prev,
        signed=signed, entry_hash=digest,
        key_id=None if signer is None else signer.key_id,
        signature=None if signer is None else signer.sign(digest.encode("ascii")))


def _insert_entry(conn: sa.Connection, entry: SignoffEntry) -> None:
    conn.execute(sa.insert(SIGNOFF_LOG).values(
        seq=entry.seq, at=entry.at, run_id=entry.run_id, by=entry.by,
        decision=entry.decision, note=entry.note, prev_hash=entry.prev_hash,
        entry_hash=entry.entry_hash, signed=entry.signed, key_id=entry.key_id,
        signature=entry.signature))


def _apply_to_breaks(conn: sa.Connection, run_id: str, decision: str,
                     target: BreakTarget | None, at: datetime,
                     assignment: Assignment | None = None) -> None:
    """What the decision does to the breaks' review status: 'accepted' / 'resolved' move every
    open break of the run to that status, a break action the target (BREAK_STATUS_AFTER:
    accepted, resolved, rejected, open); the other decisions and a comment leave them as they
    are."""
    if closes_breaks(decision):
        _close_open_breaks(conn, run_id, decision, at)
    elif target is not None and decision in BREAK_STATUS_AFTER:
        _set_break_status(conn, run_id, target, BREAK_STATUS_AFTER[decision], at)
    elif target is not None and assignment is not None:
        r = BREAK_REVIEWS
        conn.execute(sa.update(r).where(
            r.c.last_seen_run_id == run_id, r.c.window_start == target.window_start,
            r.c.key == target.key, r.c.currency == target.currency)
            .values(assignee=assignment.assignee, due_on=assignment.due_on, updated_at=at))


def _sqlstate(error: object) -> str | None:
    """The SQLSTATE of a DB-API error (psycopg 3: ``sqlstate``; psycopg2: ``pgcode``)."""
    return getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)


def _close_open_breaks(conn: sa.Connection, run_id: str, status: str, at: datetime) -> int:
    reviews, breaks = BREAK_REVIEWS, BREAKS
    in_run = sa.exists().where(breaks.c.run_id == run_id, breaks.c.day == reviews.c.day,
                               breaks.c.window_start == reviews.c.window_start,
                               breaks.c.key == reviews.c.key,
                               breaks.c.currency == reviews.c.currency)
    # only breaks whose figures are this run's (the review last saw them in it)
    result = conn.execute(sa.update(reviews)
                          .where(reviews.c.review_status == "open",
                                 reviews.c.last_seen_run_id == run_id, in_run)
                          .values(review_status=status, updated_at=at))
    return int(result.rowcount or 0)


def _break_in_run(conn: sa.Connection, run_id: str, target: BreakTarget) -> bool:
    b = BREAKS
    return conn.execute(sa.select(b.c.id).where(
        b.c.run_id == run_id, b.c.window_start == target.window_start, b.c.key == target.key,
        b.c.currency == target.currency).limit(1)).first() is not None


def _break_status(conn: sa.Connection, run_id: str, target: BreakTarget) -> str | None:
    """The review status of one break (its identity's, as last seen in ``run_id``)."""
    r = BREAK_REVIEWS
    found = conn.execute(sa.select(r.c.review_status).where(
        r.c.last_seen_run_id == run_id, r.c.window_start == target.window_start,
        r.c.key == target.key, r.c.currency == target.currency)).scalar_one_or_none()
    return None if found is None else str(found)


def _set_break_status(conn: sa.Connection, run_id: str, target: BreakTarget, status: str,
                      at: datetime) -> None:
    """Move one break's review status (its identity's, as last seen in ``run_id``)."""
    r = BREAK_REVIEWS
    conn.execute(sa.update(r).where(
        r.c.last_seen_run_id == run_id, r.c.window_start == target.window_start,
        r.c.key == target.key, r.c.currency == target.currency)
        .values(review_status=status, updated_at=at))


def read_log(db: ReportDB) -> list[SignoffEntry]:
    """Every entry, in seq order, exactly as stored."""
    log = SIGNOFF_LOG
    with db.ready().connect() as conn:
        rows = conn.execute(sa.select(log).order_by(log.c.seq)).all()
    return [SignoffEntry(seq=int(r.seq), at=r.at, run_id=r.run_id, by=r.by,
                         decision=r.decision, note=r.note, prev_hash=r.prev_hash,
                         entry_hash=r.entry_hash, signed=r.signed, key_id=r.key_id,
                         signature=r.signature) for r in rows]


def verify_log(db: ReportDB, expected_head: str | None = None,
               warehouse: Path | None = None,
               figures_of: Collection[str] | None = None, *,
               admin_key: str | None = None, legacy_through: int = 0) -> LogVerification:
    """Walk the chain from seq 1: every seq present, every ``prev_hash`` equal to the previous
    entry's ``entry_hash`` (genesis: 64 zeros), every ``entry_hash`` equal to the hash of the
    entry's contents. With ``expected_head`` (a head hash recorded earlier), that entry must
    still be in the log. The signed figures are checked again for every entry, or only for
    the entries on the runs ``figures_of`` names (a page about one run: the chain costs
    microseconds an entry, the figures a query each).

    Every entry's signature is checked against the key the administrator (``admin_key``, the
    pinned ``signoff_admin_key``) registered for its signer; an unsigned entry is a problem
    unless its seq is at most ``legacy_through`` (entries from before signing keys, counted
    in ``legacy``). The signed report's bytes are hashed again where its files are.

    Example: ``verify_log(db, figures_of={"nightly-2026-01-01"}, admin_key=pinned).ok``."""
    entries = read_log(db)
    problems: list[str] = []
    expected_seq, expected_prev = 1, GENESIS_HASH
    for e in entries:
        if e.seq != expected_seq:
            missing = (f"seq {expected_seq}" if e.seq == expected_seq + 1
                       else f"seq {expected_seq} to {e.seq - 1}")
            problems.append(f"{missing} missing: seq {e.seq} follows seq {expected_seq - 1} "
                            "(entry deleted?)")
        if e.prev_hash != expected_prev:
            problems.append(f"seq {e.seq}: prev_hash {e.prev_hash[:16]}... does not match the "
                            f"previous entry's hash {expected_prev[:16]}... (an entry was "
                            "deleted, inserted or reordered)")
        if e.recomputed_hash() != e.entry_hash:
            problems.append(f"seq {e.seq}: entry_hash does not match the entry's contents "
                            "(the entry was edited after it was written)")
        expected_seq, expected_prev = e.seq + 1, e.entry_hash
    rechecked = entries if figures_of is None else [e for e in entries
                                                    if e.run_id in figures_of]
    problems += _figure_problems(db, rechecked) + _anchor_problems(warehouse, entries)
    signatures, legacy = _signature_problems(db, entries, admin_key, legacy_through)
    problems += signatures + _report_problems(db, rechecked)
    head = entries[-1].entry_hash if entries else GENESIS_HASH
    if expected_head is not None and expected_head != GENESIS_HASH and \
            expected_head not in {e.entry_hash for e in entries}:
        problems.append(f"head hash {expected_head[:16]}... recorded earlier is no longer in "
                        "the log (entries removed from the end?)")
    return LogVerification(ok=not problems, entries=len(entries), head_hash=head,
                           problems=problems, legacy=legacy)


def _signature_problems(db: ReportDB, entries: list[SignoffEntry], admin_key: str | None,
                        legacy_through: int) -> tuple[list[str], int]:
    """Each entry not signed by the key registered for its signer, and how many unsigned
    entries were accepted as legacy (seq <= ``legacy_through``)."""
    with db.ready().connect() as conn:
        problems = registration_problems(conn, admin_key)
        keys = registered_keys(conn, admin_key)
        revoked = revocations(conn, admin_key)
    legacy = sum(1 for e in entries if e.signature is None and e.seq <= legacy_through)
    if admin_key is None and any(e.signature is not None for e in entries):
        problems.append("no administrator key is pinned (signoff_admin_key), so no signer's "
                        "key can be trusted: set it to the administrator's public key")
        keys = {}
    unsigned = [e for e in entries if e.signature is None and e.seq > legacy_through]
    problems += [_unsigned_problem(run, legacy_through) for run in _runs_of(unsigned)]
    for e in entries:
        if e.signature is not None and admin_key is not None:
            problems += _entry_signature_problem(e, keys.get(str(e.key_id)),
                                                 revoked.get(str(e.key_id)))
    return problems, legacy


def _runs_of(entries: list[SignoffEntry]) -> list[list[SignoffEntry]]:
    """``entries`` cut into runs of consecutive seqs (an old log's thousand unsigned entries
    are one line, not a thousand)."""
    runs: list[list[SignoffEntry]] = []
    for e in entries:
        if runs and runs[-1][-1].seq + 1 == e.seq:
            runs[-1].append(e)
        else:
            runs.append([e])
    return runs


def _unsigned_problem(run: list[SignoffEntry], legacy_through: int) -> str:
    """One line for a run of unsigned entries, naming the signer(s) they claim.

    Example: ``seq 3: not signed by any key (... forged in bob's name, ...)``."""
    first, last = run[0].seq, run[-1].seq
    where = f"seq {first}" if first == last else f"seq {first} to {last}"
    names = ", ".join(sorted({e.by for e in run}))
    return (f"{where}: not signed by any key (written without its signer's key: forged in "
            f"{names}'s name, or from before signing keys; those are accepted only up to "
            f"signoff_legacy_through, now {legacy_through})")


def _entry_signature_problem(e: SignoffEntry, reg: Registration | None,
                             revoked_after: int | None = None) -> list[str]:
    """What is wrong with a signed entry's signature under its registration ``reg`` (none:
    the key was never registered): a key for another name, one revoked before this entry
    (``revoked_after``: the last seq it may sign), or contents it did not sign."""
    if reg is None:
        return [f"seq {e.seq}: signed with key {e.key_id}, which the administrator never "
                "registered (a forged entry?)"]
    if revoked_after is not None and e.seq > revoked_after:
        return [f"seq {e.seq}: signed with {reg.name}'s key {e.key_id}, which was revoked "
                f"after seq {revoked_after} (a lost or stolen key)"]
    if reg.scope != "workbench" and not same_person(reg.name, e.by):
        return [f"seq {e.seq}: names {e.by} as its signer but was signed with {reg.name}'s key "
                "(an entry made in another's name)"]
    if not verify_signature(reg.public_key, str(e.signature),
                            e.recomputed_hash().encode("ascii")):
        return [f"seq {e.seq}: its signature does not match its contents under {reg.name}'s "
                "key (rewritten after it was signed)"]
    return []


def _report_problems(db: ReportDB, entries: list[SignoffEntry]) -> list[str]:
    """Each signed report whose recorded files no longer hold the bytes signed: an edited
    ``report.html`` (or one gone) is named once, at the first entry that signed it."""
    problems, seen = [], set()
    with db.ready().connect() as conn:
        for e in entries:
            sha = json.loads(e.signed).get("report_sha256") if e.signed else None
            if not sha or (e.run_id, sha) in seen:
                continue
            seen.add((e.run_id, sha))
            paths = [Path(db.resolve(p)) for p in conn.execute(
                sa.select(REPORTS.c.html_path).where(REPORTS.c.audit_run_id == e.run_id,
                                                     REPORTS.c.sha256 == sha)).scalars()]
            found = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths
                     if p.is_file()}
            if sha in found.values() or not paths:
                continue
            if found:
                path, now = next(iter(found.items()))
                problems.append(f"seq {e.seq}: run {e.run_id}'s report {path} was edited after "
                                f"this entry signed it (SHA-256 {now[:16]}..., signed "
                                f"{sha[:16]}...)")
            else:
                problems.append(f"seq {e.seq}: run {e.run_id}'s signed report {paths[0]} is "
                                "gone")
    return problems


_FIGURE_WORDS = {"breaks_sha256": "breaks rows (their SHA-256)"}


def _figure_problems(db: ReportDB, entries: list[SignoffEntry]) -> list[str]:
    """Entries whose run's figures (signed_figures) are no longer what they signed."""
    problems = []
    with db.ready().connect() as conn:
        for e in entries:
            if e.signed is None:
                continue
            now = signed_figures(conn, e.run_id)
            was, is_ = json.loads(e.signed), json.loads(now) if now else {}
            if was.get("report_sha256") and conn.execute(sa.select(REPORTS.c.id).where(
                    REPORTS.c.audit_run_id == e.run_id,
                    REPORTS.c.sha256 == was["report_sha256"]).limit(1)).first():
                is_["report_sha256"] = was["report_sha256"]  # still recorded; newer ones may be
            is_ = {k: is_.get(k) for k in was}  # what the entry signed (older ones: less)
            if was != is_:
                changed = sorted(_FIGURE_WORDS.get(k, k) for k in was if was[k] != is_[k])
                problems.append(f"seq {e.seq}: run {e.run_id}'s {', '.join(changed)} changed "
                                "after this entry signed them")
    return problems


def sign_off(db: ReportDB, run_id: str, decision: str, note: str, *, by: str | None = None,
             warehouse: Path | None = None, required_approvers: int = 1,
             key: SigningKey | None = None, heads: Path | None = None) -> SignoffEntry:
    """``reckon signoff``: append a decision signed by whoever runs it (``db.principal()``:
    the OS account, or the login role on PostgreSQL), with their own key ``key``. ``by``,
    when given, may only name that identity: a sign-off is never made in another name.

    Example: ``sign_off(db, "run-1", "approved", "figures match the bank", by="bob",
    key=SigningKey.load(key_file("")))`` refuses unless the session runs as bob (spelled any
    way reckon.identity folds) and the key is bob's.
    """
    signer = db.principal()
    identity = ("the database role it logged in as" if db.engine.dialect.name == "postgresql"
                else "the OS account that runs it")
    refusal = impersonation_refusal(by, signer, identity)
    if refusal is not None:
        raise SignoffRefused(refusal)
    return append_signoff(db, run_id, signer, decision, note, warehouse=warehouse,
                          required_approvers=required_approvers, signer=key, heads=heads)
