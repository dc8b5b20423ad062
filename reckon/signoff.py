"""The sign-off rules, on plain values: which decisions there are, which of them sign a run
off, which close its open breaks, who may sign, and which signed-off run a re-audit replaced.

Everything that decides what a sign-off means asks this module: the report database's
constraint and queries (reports/db/), the log (reports.review), the CLI's ``--decision``
choices, the audit's "this run replaced a signed-off run" and the report's sign-off sentence.
The database's own PostgreSQL triggers (migration 0006) enforce the signer and four-eyes
rules a second time, on exact names; this module compares names as reckon.identity does.

Example:
    >>> signs_off("accepted"), signs_off("rejected"), closes_breaks("approved")
    (True, False, False)
    >>> four_eyes_refusal("ALICE", "alice", "run-1")[:40]
    "by='ALICE' may not sign off run 'run-1':"
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from reckon.identity import same_person

__all__ = ["BREAK_ACTIONS", "BREAK_CLOSING_DECISIONS", "DECISIONS", "SIGNING_DECISIONS", "Decided",
           "closes_breaks", "decision_constraint", "four_eyes_refusal", "impersonation_refusal",
           "is_break_action", "replaced_signoff", "signs_off"]

#: Every decision the log takes, in the order the CLI offers them.
DECISIONS = ("approved", "rejected", "accepted", "resolved")
#: The decisions that sign a run off ("rejected" does not).
SIGNING_DECISIONS = ("approved", "accepted", "resolved")
#: The decisions that also move the run's *open* breaks to that review status.
BREAK_CLOSING_DECISIONS = ("accepted", "resolved")
#: Actions on one break of a run (the workbench's): entries of the same log, the break named
#: in the entry's note so the hash binds it. They decide nothing about the run: they do not
#: sign it off.
BREAK_ACTIONS = ("break-comment", "break-accepted", "break-resolved")


def signs_off(decision: str) -> bool:
    """Whether a log entry with ``decision`` signs its run off."""
    return decision in SIGNING_DECISIONS


def is_break_action(decision: str) -> bool:
    """Whether a log entry is an action on one break (the workbench's), not a decision on
    its run."""
    return decision in BREAK_ACTIONS


def closes_breaks(decision: str) -> bool:
    """Whether ``decision`` moves the run's open breaks to that review status."""
    return decision in BREAK_CLOSING_DECISIONS


def decision_constraint() -> str:
    """The SQL check of the log's ``decision`` column: every decision and break action (the
    text migration 0007 created).

    >>> decision_constraint()[:62]
    "decision IN ('approved', 'rejected', 'accepted', 'resolved', '"
    """
    return "decision IN (" + ", ".join(f"'{d}'" for d in DECISIONS + BREAK_ACTIONS) + ")"


def four_eyes_refusal(signer: str, reconciler: str, run_id: str, *,
                      on_break: bool = False) -> str | None:
    """Why ``signer`` may not sign off ``run_id`` (``on_break``: act on one of its breaks, a
    workbench comment, accept or resolve), or None: the run's reconciler never signs their
    own run nor reviews its breaks, under any spelling that looks the same (reckon.identity).

    >>> "may not act on the breaks" in four_eyes_refusal("alice", "alice", "r", on_break=True)
    True
    """
    if not same_person(signer, reconciler):
        return None
    if on_break:
        return (f"by={signer!r} may not act on the breaks of run {run_id!r}: {reconciler!r} "
                "reconciled it, and its breaks need a second person's review (four-eyes "
                "rule): another reviewer or reconciler comments on, accepts or resolves them")
    return (f"by={signer!r} may not sign off run {run_id!r}: {reconciler!r} reconciled it, "
            "and a run needs a second person's sign-off (four-eyes rule): another reviewer "
            "signs it as themselves (their own OS account, or their workbench login)")


def impersonation_refusal(by: str | None, signer: str, identity: str) -> str | None:
    """Why a sign-off naming ``by`` is refused when the session runs as ``signer``, or None:
    a sign-off is made by the identity that runs it (``identity`` says which: the OS account,
    or the database role), never in another name.

    >>> impersonation_refusal(None, "bob", "the OS account that runs it") is None
    True
    """
    if by is None or same_person(by, signer):
        return None
    return (f"--by={by!r} is not valid: this command signs as {signer!r} ({identity}), and a "
            "sign-off is made by that identity; log in as the reviewer (or drop --by)")


class Decided(Protocol):
    """A log entry as this module reads it: the run it was made on, and its decision."""

    @property
    def run_id(self) -> str: ...

    @property
    def decision(self) -> str: ...


Entry = TypeVar("Entry", bound=Decided)


def replaced_signoff(entries: Sequence[Entry], run_id: str,
                     started: Mapping[str, datetime]) -> Entry | None:
    """The signing entry a re-audit undid: when ``run_id`` has no signing entry of its own,
    the newest signing entry on a run of the same day that started before it; else None.
    ``entries`` are the day's log entries oldest first, ``started`` each run's start.

    >>> from collections import namedtuple
    >>> E = namedtuple("E", "run_id decision")
    >>> at = {"r1": datetime(2026, 1, 2, 1), "r2": datetime(2026, 1, 2, 2)}
    >>> replaced_signoff([E("r1", "approved")], "r2", at)
    E(run_id='r1', decision='approved')
    >>> replaced_signoff([E("r1", "approved"), E("r2", "accepted")], "r2", at) is None
    True
    """
    if any(e.run_id == run_id and signs_off(e.decision) for e in entries):
        return None
    earlier = [e for e in entries if e.run_id != run_id and signs_off(e.decision)
               and started[e.run_id] < started[run_id]]
    return earlier[-1] if earlier else None
