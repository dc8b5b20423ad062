"""Break review and the hash-chained sign-off log (their commands: reckon.commands.review).

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

import hashlib
import json
import os
from collections.abc import Collection, Sequence
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
    SIGNOFF_LOG,
    WORKBENCH_USERS,
)
from reports.db.repository import ReportDB

__all__ = [
    "BREAK_ACTIONS",
    "BULK_CAP",
    "DECISIONS",
    "GENESIS_HASH",
    "Assignment",
    "BreakTarget",
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

    def to_json_dict(self) -> dict[str, Any]:
        """The entry as ``reckon signoff --json`` prints it (``at`` as the hash reads it)."""
        return {"seq": self.seq, "at": _format_at(self.at), "run_id": self.run_id,
                "by": self.by, "decision": self.decision, "note": self.note,
                "prev_hash": self.prev_hash, "entry_hash": self.entry_hash}

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
               "report_sha256": report}
    return json.dumps(figures, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


ANCHOR_NAME = "_signoff_anchor.jsonl"  # in the warehouse: the log's head, outside its table


def _anchor(warehouse: Path | None, entry: SignoffEntry) -> None:
    """Append the new head (seq, hash) to the warehouse's anchor file: truncating the log or
    recomputing its chain in the database no longer matches what the warehouse recorded."""
    if warehouse is None or not warehouse.is_dir():
        return
    line = json.dumps({"seq": entry.seq, "entry_hash": entry.entry_hash,
                       "at": _format_at(entry.at)}, sort_keys=True)
    with (warehouse / ANCHOR_NAME).open("a", encoding="utf-8") as anchor:
        anchor.write(line + "\n")
        anchor.flush()
        os.fsync(anchor.fileno())


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
    from spark import commits

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
                   target: BreakTarget | None = None,
                   required_approvers: int = 1,
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
            with write_tx(engine, "signoff_log", "audit_runs") as conn:
                _refuse_unless_signable(conn, run_id, who, warehouse=warehouse, target=target,
                                        decision=decision)
                _refuse_unless_assignable(conn, run_id, assignment)
                at = (now or datetime.now(UTC)).astimezone(UTC)
                entry = _chained_entry(conn, run_id=run_id, by=who, decision=decision,
                                       note=text, at=at)
                _insert_entry(conn, entry)
                _apply_to_breaks(conn, run_id, decision, target, at, assignment)
            _anchor(warehouse, entry)
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
                  now: datetime | None = None, warehouse: Path | None = None) -> SignoffEntry:
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
        with write_tx(db.ready(), "signoff_log") as conn:
            if conn.execute(sa.select(AUDIT_RUNS.c.run_id).where(
                    AUDIT_RUNS.c.run_id == run_id)).first() is None:
                raise SignoffRefused(f"run={run_id!r} is not valid: no audit run has this id")
            at = (now or datetime.now(UTC)).astimezone(UTC)
            entry = _chained_entry(conn, run_id=run_id, by=who, decision=EXPORTED,
                                   note=f"exported {text}", at=at)
            _insert_entry(conn, entry)
    except sa.exc.DBAPIError as exc:  # PostgreSQL's signer trigger (migration 0015)
        if _sqlstate(exc.orig) != "42501":
            raise
        cause = str(exc.orig).strip().splitlines()[0]
        raise SignoffRefused(f"the report database refused the export record: {cause}") \
            from None
    _anchor(warehouse, entry)
    return entry


#: The most breaks one bulk action takes (reckon's workbench asks for a narrower filter).
BULK_CAP = 5_000


def append_break_actions(db: ReportDB, run_id: str, by: str, decision: str, note: str,
                         targets: Sequence[BreakTarget], *, now: datetime | None = None,
                         warehouse: Path | None = None,
                         assignment: Assignment | None = None) -> list[SignoffEntry]:
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
        with write_tx(db.ready(), "signoff_log", "audit_runs") as conn:
            for n, target in enumerate(targets):
                _refuse_unless_signable(conn, run_id, who,
                                        warehouse=warehouse if n == 0 else None,
                                        target=target, decision=decision)
            _refuse_unless_assignable(conn, run_id, assignment)
            signed = signed_figures(conn, run_id)
            for target, (_, text) in zip(targets, checked, strict=True):
                entry = _chained_entry(conn, run_id=run_id, by=who, decision=decision,
                                       note=text, at=at, signed=signed)
                _insert_entry(conn, entry)
                _apply_to_breaks(conn, run_id, decision, target, at, assignment)
                entries.append(entry)
    except sa.exc.DBAPIError as exc:  # PostgreSQL's grants and triggers (migration 0006)
        if _sqlstate(exc.orig) != "42501":
            raise
        cause = str(exc.orig).strip().splitlines()[0]
        raise SignoffRefused(f"the report database refused the actions: {cause}") from None
    _anchor(warehouse, entries[-1])
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
                   at: datetime, signed: str | None = None) -> SignoffEntry:
    """The next entry of the chain: the last entry's ``seq + 1`` and hash (the genesis hash
    for the first), the run's signed figures, and its own hash over all of it."""
    log = SIGNOFF_LOG
    last = conn.execute(sa.select(log.c.seq, log.c.entry_hash)
                        .order_by(log.c.seq.desc()).limit(1)).first()
    seq = 1 if last is None else int(last.seq) + 1
    prev = GENESIS_HASH if last is None else str(last.entry_hash)
    signed = signed if signed is not None else signed_figures(conn, run_id)
    return SignoffEntry(
        seq=seq, at=at, run_id=run_id, by=by, decision=decision, note=note,
        prev_hash=prev, signed=signed,
        entry_hash=compute_entry_hash(seq=seq, at=at, run_id=run_id, by=by,
                                      decision=decision, note=note,
                                      prev_hash=prev, signed=signed))


def _insert_entry(conn: sa.Connection, entry: SignoffEntry) -> None:
    conn.execute(sa.insert(SIGNOFF_LOG).values(
        seq=entry.seq, at=entry.at, run_id=entry.run_id, by=entry.by,
        decision=entry.decision, note=entry.note, prev_hash=entry.prev_hash,
        entry_hash=entry.entry_hash, signed=entry.signed))


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
                         entry_hash=r.entry_hash, signed=r.signed) for r in rows]


def verify_log(db: ReportDB, expected_head: str | None = None,
               warehouse: Path | None = None,
               figures_of: Collection[str] | None = None) -> LogVerification:
    """Walk the chain from seq 1: every seq present, every ``prev_hash`` equal to the previous
    entry's ``entry_hash`` (genesis: 64 zeros), every ``entry_hash`` equal to the hash of the
    entry's contents. With ``expected_head`` (a head hash recorded earlier), that entry must
    still be in the log. The signed figures are checked again for every entry, or only for
    the entries on the runs ``figures_of`` names (a page about one run: the chain costs
    microseconds an entry, the figures a query each).

    Example: ``verify_log(db, figures_of={"nightly-2026-01-01"}).ok``."""
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
    head = entries[-1].entry_hash if entries else GENESIS_HASH
    if expected_head is not None and expected_head != GENESIS_HASH and \
            expected_head not in {e.entry_hash for e in entries}:
        problems.append(f"head hash {expected_head[:16]}... recorded earlier is no longer in "
                        "the log (entries removed from the end?)")
    return LogVerification(ok=not problems, entries=len(entries), head_hash=head,
                           problems=problems)


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
            if was != is_:
                changed = sorted(k for k in was.keys() | is_.keys() if was.get(k) != is_.get(k))
                problems.append(f"seq {e.seq}: run {e.run_id}'s {', '.join(changed)} changed "
                                "after this entry signed them")
    return problems


def sign_off(db: ReportDB, run_id: str, decision: str, note: str, *, by: str | None = None,
             warehouse: Path | None = None, required_approvers: int = 1) -> SignoffEntry:
    """``reckon signoff``: append a decision signed by whoever runs it (``db.principal()``:
    the OS account, or the login role on PostgreSQL). ``by``, when given, may only name that
    identity: a sign-off is never made in another name.

    Example: ``sign_off(db, "run-1", "approved", "figures match the bank", by="bob")``
    refuses unless the session runs as bob (spelled any way reckon.identity folds).
    """
    signer = db.principal()
    identity = ("the database role it logged in as" if db.engine.dialect.name == "postgresql"
                else "the OS account that runs it")
    refusal = impersonation_refusal(by, signer, identity)
    if refusal is not None:
        raise SignoffRefused(refusal)
    return append_signoff(db, run_id, signer, decision, note, warehouse=warehouse,
                          required_approvers=required_approvers)
