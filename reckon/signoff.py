"""The sign-off rules, on plain values: which decisions there are, which of them sign a run
off, which close its open breaks, who may sign, which signed-off run a re-audit replaced, and
the review state of a run (``review_state``) in the words every view shows (``review_words``).

Everything that decides what a sign-off means asks this module: the report database's
constraint and queries (reports/db/), the log (reports.review), the CLI's ``--decision``
choices, the audit's "this run replaced a signed-off run" and the report's sign-off sentence;
the workbench, the report and its approval record, the CLI, the export and verify-log show a
run's state through ``review_state`` and ``review_words`` and nothing else.
The database's own PostgreSQL triggers (migration 0006) enforce the signer and four-eyes
rules a second time, on exact names; this module compares names as reckon.identity does.

Example:
    >>> signs_off("accepted"), signs_off("rejected"), closes_breaks("approved")
    (True, False, False)
    >>> four_eyes_refusal("ALICE", "alice", "run-1")[:40]
    "by='ALICE' may not sign off run 'run-1':"
    >>> review_words(review_state([("bob", "approved"), ("bob", "approved")], reconciler="al"))
    'Signed off: 1 of 1 approvals (bob)'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol, TypeVar

from reckon.errors import invalid
from reckon.identity import identity_key, same_person

__all__ = [
    "BREAK_ACTIONS",
    "BREAK_CLOSING_DECISIONS",
    "BREAK_REVIEW_STATUSES",
    "BREAK_STATUS_AFTER",
    "DECISIONS",
    "EXPORTED",
    "NO_EVENTS",
    "OPEN",
    "REJECTED",
    "REOPENED",
    "REVIEW_STATES",
    "SIGNED_OFF",
    "SIGNING_DECISIONS",
    "UNSETTLED_STATUSES",
    "Decided",
    "ReviewState",
    "closes_breaks",
    "decision_constraint",
    "four_eyes_refusal",
    "impersonation_refusal",
    "is_break_action",
    "replaced_signoff",
    "review_state",
    "review_status_constraint",
    "review_words",
    "signs_off",
]

#: The decision that withdraws its reviewer's standing decision on a run (a rejection
#: reopened, or an approval taken back): the run is as if that reviewer had not decided.
REOPENED: Final = "reopened"
#: Every decision the log takes, in the order the CLI offers them.
DECISIONS = ("approved", "rejected", "accepted", "resolved", REOPENED)
#: The decisions that sign a run off ("rejected" does not).
SIGNING_DECISIONS = ("approved", "accepted", "resolved")
#: The decisions that also move the run's *open* breaks to that review status.
BREAK_CLOSING_DECISIONS = ("accepted", "resolved")
#: Actions on one break of a run (the workbench's): entries of the same log, the break named
#: in the entry's note so the hash binds it. They decide nothing about the run: they do not
#: sign it off. A rejection (the break's explanation or acceptance is disputed) and a reopen
#: (back to open) each need a reason, the entry's note (migration 0014 added both). An
#: assignment names who is to review the break and by when, in its note (migration 0015).
BREAK_ACTIONS = ("break-comment", "break-accepted", "break-resolved", "break-rejected",
                 "break-reopened", "break-assigned")
#: A record that someone exported a run's breaks (a CSV or a PDF of the workbench's list, a
#: file of its report): an entry of the same log, by whoever exported (any workbench role,
#: the run's reconciler too: it decides nothing), naming what was exported (migration 0016).
EXPORTED: Final = "exported"
#: The review status a break action leaves its break in (a comment leaves it as it was).
BREAK_STATUS_AFTER: Final = {"break-accepted": "accepted", "break-resolved": "resolved",
                             "break-rejected": "rejected", "break-reopened": "open"}
#: The review statuses of a break still waiting for someone (an overdue break is one of them).
UNSETTLED_STATUSES = ("open", "rejected")
#: The review statuses of a break, in workflow order (break_reviews.review_status): the audit
#: sets open or explained; a reviewer's break action accepted, resolved, rejected or open.
BREAK_REVIEW_STATUSES = ("open", "explained", "accepted", "resolved", "rejected")


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


def review_status_constraint() -> str:
    """The SQL check of break_reviews' ``review_status`` (the text migration 0014 created).

    >>> review_status_constraint()
    "review_status IN ('open', 'explained', 'accepted', 'resolved', 'rejected')"
    """
    return "review_status IN (" + ", ".join(f"'{s}'" for s in BREAK_REVIEW_STATUSES) + ")"


def decision_constraint() -> str:
    """The SQL check of the log's ``decision`` column: every decision, break action and the
    export record (the text migration 0016 created).

    >>> decision_constraint()[:62]
    "decision IN ('approved', 'rejected', 'accepted', 'resolved', '"
    """
    return "decision IN (" + ", ".join(f"'{d}'" for d in (*DECISIONS, *BREAK_ACTIONS,
                                                           EXPORTED)) + ")"


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


# ----------------------------------------------------------------------------- review state

#: The states of a run's review (``ReviewState.state``). NO_EVENTS: the run reconciled no
#: rows (a quiet day) and nobody has decided on it: there is nothing to sign, and no view
#: lists it as waiting for a sign-off (a reviewer may still reject it, or approve it).
OPEN: Final = "open"
SIGNED_OFF: Final = "signed off"
REJECTED: Final = "rejected"
NO_EVENTS: Final = "no events"
REVIEW_STATES = (OPEN, SIGNED_OFF, REJECTED, NO_EVENTS)


@dataclass(frozen=True)
class ReviewState:
    """Where the review of one audit run stands (``review_state`` computes it).

    ``approvers`` and ``rejecters`` are the reviewers whose standing (latest) decision on the
    run signs it off or rejects it, in the order of those decisions, each named as in their
    latest entry; ``required`` approvers sign it off; ``decisions`` counts the run decisions
    read (break actions and the reconciler's own excluded).

    Example: ``ReviewState(SIGNED_OFF, ("bob",), (), 1, 1)`` is a run bob signed off alone.
    """

    state: str
    approvers: tuple[str, ...]
    rejecters: tuple[str, ...]
    required: int
    decisions: int

    @property
    def approvals(self) -> int:
        """How many distinct reviewers stand by an approval."""
        return len(self.approvers)

    @property
    def signed_off(self) -> bool:
        return self.state == SIGNED_OFF

    @property
    def awaits_signoff(self) -> bool:
        """Whether a reviewer is asked to sign the run (open: not a quiet day's run)."""
        return self.state == OPEN


def _standing(entries: Iterable[tuple[str, str]], reconciler: str
              ) -> tuple[dict[str, tuple[int, str, str]], int]:
    """Each reviewer's standing decision: identity key -> (order, name, decision); reopened
    withdraws it. Break actions and the reconciler's entries do not count."""
    standing: dict[str, tuple[int, str, str]] = {}
    counted = 0
    for order, (by, decision) in enumerate(entries):
        if decision not in DECISIONS or same_person(by, reconciler):
            continue
        counted += 1
        key = identity_key(by)
        if decision == REOPENED:
            standing.pop(key, None)
        else:
            standing[key] = (order, by, decision)
    return standing, counted


def review_state(entries: Iterable[tuple[str, str]], *, reconciler: str,
                 required: int = 1, rows: int | None = None) -> ReviewState:
    """The review state of one run from its log entries ``(by, decision)``, oldest first.

    Each reviewer (names compared as reckon.identity does) has one standing decision: their
    latest, withdrawn by ``reopened``. Approving twice is one approval; 'accepted' and
    'resolved' approve too (``SIGNING_DECISIONS``). The run is *rejected* while any standing
    decision is a rejection, *signed off* with ``required`` or more standing approvers (none
    of them the ``reconciler``), *no events* when the run reconciled no ``rows`` (0: a day
    without events) and no reviewer's decision stands, *open* otherwise. ``rows`` None: not
    known (a run is never taken for a quiet one by default).

    >>> review_state([("bob", "approved"), ("carol", "rejected")], reconciler="al").state
    'rejected'
    >>> review_state([("bob", "rejected"), ("bob", "reopened")], reconciler="al").state
    'open'
    >>> review_state([], reconciler="al", rows=0).state
    'no events'
    """
    if isinstance(required, bool) or not isinstance(required, int) or required < 1:
        raise invalid("required_approvers", required, "a whole number of approvers, 1 or more")
    standing, counted = _standing(entries, reconciler)
    ordered = sorted(standing.values())
    approvers = tuple(name for _, name, d in ordered if signs_off(d))
    rejecters = tuple(name for _, name, d in ordered if d == "rejected")
    state = (REJECTED if rejecters else SIGNED_OFF if len(approvers) >= required
             else NO_EVENTS if rows == 0 and not approvers else OPEN)
    return ReviewState(state=state, approvers=approvers, rejecters=rejecters,
                       required=required, decisions=counted)


def review_words(review: ReviewState) -> str:
    """The one sentence every view shows for ``review`` (no final full stop, so a view may
    quote it inside its own sentence).

    >>> review_words(ReviewState(OPEN, (), (), 1, 0))
    'Awaiting sign-off: 0 of 1 approvals'
    >>> review_words(ReviewState(REJECTED, ("carol",), ("bob",), 2, 3))
    'Rejected by bob: 1 of 2 approvals (carol)'
    >>> review_words(ReviewState(NO_EVENTS, (), (), 2, 0))
    'No events: nothing to sign'
    """
    if review.state == NO_EVENTS:
        return "No events: nothing to sign"
    head = {OPEN: "Awaiting sign-off", SIGNED_OFF: "Signed off",
            REJECTED: "Rejected by " + ", ".join(review.rejecters)}[review.state]
    tally = f"{review.approvals} of {review.required} approvals"
    who = f" ({', '.join(review.approvers)})" if review.approvers else ""
    return f"{head}: {tally}{who}"
