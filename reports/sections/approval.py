"""The report's last sections: the data-quality check and the approval block, with the
day's sign-off state in one sentence (``signoff_text``, also the page's header line).

The report shows the review state only as it stood when it was rendered (its bytes are what
a sign-off binds, so they never change afterwards); the approval record beside it
(reports.approval_record) is rewritten at each decision and links back to it.

Each section's body (blocks) and CSV rows are built here from the ``ReportContext``;
``SECTIONS`` lists them in report order.
"""

from __future__ import annotations

from typing import Any

from reckon.signoff import ReviewState, review_state, review_words
from reports import formatting as fmt
from reports.approval_record import APPROVAL_HTML, APPROVAL_JSON
from reports.context import ReportContext, Signoff
from reports.sections.blocks import Block, Note, Section, Table

__all__ = ["SECTIONS", "approval_rows", "rendered_review", "signoff_text"]


# ----------------------------------------------------------------------------- sign-off


def _gap_changes(prior: Signoff, ctx: ReportContext) -> list[str]:
    """What changed between the signed run and this one: each currency whose gap differs
    (compared per currency, never summed), then the unexplained count."""
    now = {c.currency: c.gap_total for c in ctx.headline.currencies}
    changes = []
    for code in sorted(set(prior.gap_totals) | set(now)):
        before, after = prior.gap_totals.get(code), now.get(code)
        if before != after:
            changes.append(f"gap {fmt.money(before, code) if before is not None else 'no ' + code}"
                           f" -> {fmt.money(after, code) if after is not None else 'no ' + code}")
    if prior.unexplained != ctx.headline.unexplained_count:
        changes.append(f"unexplained breaks {prior.unexplained} -> "
                       f"{ctx.headline.unexplained_count}")
    return changes


def rendered_review(ctx: ReportContext) -> ReviewState:
    """The run's review state when the report was rendered (reckon.signoff.review_state over
    the decisions the context holds): all the report itself can truthfully say. Later
    decisions go to the approval record beside it (reports.approval_record)."""
    return review_state([(e.by, e.decision) for e in ctx.signoffs], reconciler=ctx.reconciler,
                        required=ctx.required_approvers, rows=ctx.headline.rows)


def signoff_text(ctx: ReportContext) -> str:
    """The day's sign-off state in one sentence (HTML and PDF): the run's state when rendered,
    in the words every view uses, pointing to the approval record for what came after; or
    that a run someone signed off was replaced by this one, its state, and what changed."""
    prior = ctx.superseded_signoff
    if prior is not None:
        changes = _gap_changes(prior, ctx)
        change = (", ".join(changes) if changes else
                  "the gap of every currency and the unexplained count are unchanged")
        was = (f"{prior.decision} by {prior.by} at {fmt.ts(prior.at)}"
               if ctx.superseded_review is None else review_words(ctx.superseded_review))
        return (f"Run {prior.run_id} of this day ({was}) was replaced by this audit "
                f"({change}): the day needs a new sign-off.")
    return (f"{review_words(rendered_review(ctx))} when this report was rendered; later "
            f"decisions: the approval record, {APPROVAL_HTML}.")


def approval_rows(ctx: ReportContext) -> list[tuple[str, str]]:
    """The approval block: what was prepared, by whom and when, the decisions and the state
    when the report was rendered, and where the current state is (the approval record)
    (every format alike)."""
    rows = [("Audit run", f"{ctx.audit_run_id} ({ctx.audit_kind})"),
            ("Prepared by", f"{ctx.reconciler}, audit started {fmt.ts(ctx.audit_started_at)}")]
    rows += [(f"{e.decision.capitalize()} by", f"{e.by} at {fmt.ts(e.at)}")
             for e in ctx.signoffs]
    rows.append(("State when rendered", review_words(rendered_review(ctx))))
    rows.append(("Approval record", f"{APPROVAL_HTML} (and {APPROVAL_JSON}) beside this report: "
                                    "every decision since and the current state, rewritten "
                                    "at each sign-off; it is authoritative, this block is not "
                                    "updated"))
    rows.append(("Integrity", "report.html's SHA-256 is recorded with the run in the report "
                              "database; each sign-off binds it and the run's figures "
                              "(`reckon verify-log` checks both)"))
    return rows


# ----------------------------------------------------------------------------- quality, approval


def _quality_body(ctx: ReportContext, docs: str | None) -> tuple[Block, ...]:
    """The check run's verdict and each suite's, as recorded (reckon.quality_verdict decided
    them when the checks ran; Data Docs and the gate show the same words)."""
    q = ctx.quality
    check = Note("No data-quality check run for this day.") if q is None else Note(
        f"Check run {q.run_id}: {q.verdict}, {q.blocking_failures} "
        f"blocking failure(s), {q.warnings} warning(s) over {q.expectations} expectations in "
        f"{q.suites} suites.", css="")
    blocks: tuple[Block, ...] = (check,)
    if q is not None and q.suite_verdicts:
        blocks += (Table(("suite", "verdict"), tuple(q.suite_verdicts), widths=(80, 100),
                         css="kv quality-suites"),)
    if docs is None:
        return blocks
    return (*blocks, Note("Great Expectations Data Docs: ", link=(docs, docs), id="data-docs",
                          tail=" (a relative link: keep the reports folder together)", css=""))


def _quality_rows(ctx: ReportContext) -> list[tuple[str, Any]]:
    q = ctx.quality
    if q is None:
        return [("check_run_id", None)]
    return [("check_run_id", q.run_id), ("verdict", q.verdict), ("success", q.success),
            ("blocking_failures", q.blocking_failures), ("warnings", q.warnings),
            ("expectations", q.expectations), ("suites", q.suites),
            *((f"suite {suite}", verdict) for suite, verdict in q.suite_verdicts)]


def _approval_body(ctx: ReportContext, _docs: str | None) -> tuple[Block, ...]:
    return (Table(("step", "detail"), tuple(approval_rows(ctx)), widths=(45, 135),
                  css="kv approval", row_heads=True),
            Note("Approval record: ", link=(APPROVAL_HTML, APPROVAL_HTML), id="approval-record",
                 tail=" (the current state and every decision; a relative link: keep the "
                      "report's folder together)", css=""))


# ----------------------------------------------------------------------------- the list

SECTIONS: tuple[Section, ...] = (
    Section("quality", "Data quality", "quality.csv", ("figure", "value"), _quality_rows,
            _quality_body),
    Section("approval", "Approval", "approval.csv", ("step", "detail"),
            lambda ctx: approval_rows(ctx), _approval_body),
)
