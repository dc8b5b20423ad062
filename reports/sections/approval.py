"""The report's last sections: the data-quality check and the approval block, with the
day's sign-off state in one sentence (``signoff_text``, also the page's header line).

Each section's body (blocks) and CSV rows are built here from the ``ReportContext``;
``SECTIONS`` lists them in report order.
"""

from __future__ import annotations

from typing import Any

from reports import formatting as fmt
from reports.context import ReportContext, Signoff
from reports.sections.blocks import Block, Note, Section, Table

__all__ = ["SECTIONS", "approval_rows", "signoff_text"]


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


def signoff_text(ctx: ReportContext) -> str:
    """The day's sign-off state in one sentence (HTML and PDF): the decisions on this run, or
    that a run someone signed off was replaced by this one and what changed."""
    prior = ctx.superseded_signoff
    if prior is not None:
        changes = _gap_changes(prior, ctx)
        change = (", ".join(changes) if changes else
                  "the gap of every currency and the unexplained count are unchanged")
        return (f"Run {prior.run_id} of this day was {prior.decision} by {prior.by} at "
                f"{fmt.ts(prior.at)}; this audit replaced it ({change}): the day needs a new "
                "sign-off.")
    if not ctx.signoffs:
        return "Not signed off yet."
    return "; ".join(f"{e.decision.capitalize()} by {e.by} at {fmt.ts(e.at)}"
                     for e in ctx.signoffs) + "."


def approval_rows(ctx: ReportContext) -> list[tuple[str, str]]:
    """The approval block: what was prepared, by whom and when, who decided what and when,
    and the state of the sign-off (every format alike)."""
    rows = [("Audit run", f"{ctx.audit_run_id} ({ctx.audit_kind})"),
            ("Prepared by", f"{ctx.reconciler}, audit started {fmt.ts(ctx.audit_started_at)}")]
    rows += [(f"{e.decision.capitalize()} by", f"{e.by} at {fmt.ts(e.at)}")
             for e in ctx.signoffs]
    if not ctx.signoffs:
        rows.append(("Reviewed and signed off by", "-"))
    rows.append(("State", signoff_text(ctx)))
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
                  css="kv approval", row_heads=True),)


# ----------------------------------------------------------------------------- the list

SECTIONS: tuple[Section, ...] = (
    Section("quality", "Data quality", "quality.csv", ("figure", "value"), _quality_rows,
            _quality_body),
    Section("approval", "Approval", "approval.csv", ("step", "detail"),
            lambda ctx: approval_rows(ctx), _approval_body),
)
