"""The approval record beside a day's report: ``approval.html`` (self-contained, opens offline)
and ``approval.json``, rewritten at each decision on the run, so the report folder shows who
approved or rejected it without re-rendering the report (minutes of Spark) and without
changing the report's own bytes, whose SHA-256 the sign-off log binds.

The record names the report (``report.html`` and its SHA-256 as recorded in the report
database), every decision on the run (seq, time, who, what, note, entry hash) and the run's
state in the words every view shows (reckon.signoff.review_words). No Spark; a few queries
and two small files. ``reports.review.append_signoff`` writes it after each decision on a run,
``reports.render.render_day`` after rendering, and ``keep_signed_report`` moves it with the
report it belongs to.

Example:
    >>> write_approval_record(db, "nightly-2026-01-01", required_approvers=2)  # doctest: +SKIP
    PosixPath('.../reports/2026-01-01/approval.html')
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from reckon.signoff import review_state, review_words
from reports.db.models import AUDIT_RUNS, REPORTS, SIGNOFF_LOG
from reports.db.repository import ReportDB
from reports.review_state import RunDecision, run_decisions

__all__ = [
    "APPROVAL_FILES",
    "APPROVAL_HTML",
    "APPROVAL_JSON",
    "approval_record",
    "write_approval_record",
]

APPROVAL_HTML = "approval.html"
APPROVAL_JSON = "approval.json"
APPROVAL_FILES = (APPROVAL_HTML, APPROVAL_JSON)
_LOCK = ".approval.lock"  # held while the record is read and rewritten


def _at(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _decision(e: RunDecision) -> dict[str, Any]:
    return {"seq": e.seq, "at": _at(e.at), "by": e.by, "decision": e.decision, "note": e.note,
            "entry_hash": e.entry_hash}


def approval_record(db: ReportDB, run_id: str, required_approvers: int = 1
                    ) -> tuple[Path, dict[str, Any]] | None:
    """The folder of ``run_id``'s newest recorded report and the record to write there, or
    None when the run has no rendered report on this machine (rendering writes it then) or
    the file there is no longer the bytes recorded for it."""
    runs, reports = AUDIT_RUNS, REPORTS
    with db.ready().connect() as conn:
        run = conn.execute(sa.select(runs.c.day, runs.c.kind, runs.c.reconciler, runs.c.rows)
                           .where(runs.c.run_id == run_id)).first()
        report = conn.execute(sa.select(reports.c.html_path, reports.c.sha256)
                              .where(reports.c.audit_run_id == run_id)
                              .order_by(reports.c.created_at.desc(), reports.c.id.desc())
                              .limit(1)).first()
        decided = run_decisions(conn, [run_id])[run_id]
        head = conn.execute(sa.select(SIGNOFF_LOG.c.entry_hash).order_by(
            SIGNOFF_LOG.c.seq.desc()).limit(1)).scalar_one_or_none()
    if run is None or report is None:
        return None
    html = Path(db.resolve(report.html_path))  # relative to the warehouse when inside it
    if not html.is_file() or hashlib.sha256(html.read_bytes()).hexdigest() != report.sha256:
        return None  # not rendered here, or another rendering holds the place: not its report
    state = review_state([(e.by, e.decision) for e in decided], reconciler=str(run.reconciler),
                         required=required_approvers, rows=int(run.rows))
    record = {
        "run_id": run_id, "day": run.day.isoformat(), "kind": run.kind,
        "reconciler": run.reconciler, "report": html.name,
        "report_sha256": report.sha256, "state": state.state, "words": review_words(state),
        "approvers": list(state.approvers), "rejecters": list(state.rejecters),
        "approvals": state.approvals, "required_approvers": state.required,
        "decisions": [_decision(e) for e in decided],
        # the log's head as this record was written: delivered with the report, outside the
        # warehouse, it is what `reckon verify-log --expect-head` checks a later log against
        "log_head": head or "0" * 64,
    }
    return html.parent, record


def _html(record: dict[str, Any]) -> str:
    """The record as one self-contained page (inline style, no script, no external link)."""
    rows = "\n".join(
        f"<tr><td>{d['seq']}</td><td>{escape(d['at'])}</td><td>{escape(d['by'])}</td>"
        f"<td>{escape(d['decision'])}</td><td>{escape(d['note'])}</td>"
        f"<td><code>{escape(d['entry_hash'][:16])}...</code></td></tr>"
        for d in record["decisions"]) or '<tr><td colspan="6">No decision yet.</td></tr>'
    report = escape(record["report"])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Approval record: {escape(record['day'])} {escape(record['kind'])}</title>
<style>body{{font:14px/1.4 sans-serif;margin:2em;max-width:60em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:left}}
.signed-off{{color:#1b6b2f}}.rejected{{color:#b3261e}}.open{{color:#8a5a00}}</style></head>
<body>
<h1>Approval record: {escape(record['day'])} <small>{escape(record['kind'])}</small></h1>
<p id="state" class="{escape(record['state'].replace(' ', '-'))}"><b>{escape(record['words'])}.</b></p>
<p>Audit run <code id="run-id">{escape(record['run_id'])}</code>, reconciled by
{escape(record['reconciler'])}; {record['required_approvers']} distinct approver(s) required,
never the reconciler.</p>
<p>Report: <a href="{report}">{report}</a>, SHA-256 <code id="report-sha256">{escape(record['report_sha256'])}</code>
(as recorded in the report database; every decision below binds it; <code>reckon verify-log</code> checks
them). This record is rewritten at each decision; the report's own bytes never change.</p>
<p>Sign-off log head as this record was written: <code id="log-head">{escape(record['log_head'])}</code>.
Keep it outside the warehouse (this file, mail): <code>reckon verify-log --expect-head</code> with it
shows any later rewrite or erasure of the log.</p>
<table><thead><tr><th>Seq</th><th>At (UTC)</th><th>By</th><th>Decision</th><th>Note</th>
<th>Entry hash</th></tr></thead>
<tbody>
{rows}
</tbody></table>
</body></html>
"""


def _replace(path: Path, text: str) -> None:
    """Write ``text`` whole or not at all (a reader never sees half a record)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def write_approval_record(db: ReportDB, run_id: str, required_approvers: int = 1
                          ) -> Path | None:
    """Write ``approval.json`` and ``approval.html`` beside ``run_id``'s newest report; the
    HTML's path, or None when the run has no rendered report here.

    Two decisions committed at once (two reviewers, the CLI and the workbench) each rewrite
    the record: the log is read again under a lock on the folder, so whichever writes last
    read both decisions, and the record never goes back to an older state."""
    found = approval_record(db, run_id, required_approvers)
    if found is None:
        return None
    folder = found[0]
    try:
        lock = os.open(folder / _LOCK, os.O_RDONLY | os.O_CREAT, 0o666)  # any reviewer's
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
            found = approval_record(db, run_id, required_approvers)
            if found is None:
                return None
            record = found[1]
            _replace(folder / APPROVAL_JSON, json.dumps(record, indent=2, sort_keys=True) + "\n")
            _replace(folder / APPROVAL_HTML, _html(record))
        finally:
            os.close(lock)
    except OSError as exc:  # the decision is in the log already: say so, do not fail it
        print(f"reckon: the decision on run {run_id} is recorded, but its approval record in "
              f"{folder} could not be written ({exc.strerror or exc}): sign again from an "
              "account that may write that folder, or run `reckon report` for the day",
              file=sys.stderr)
        return None
    return folder / APPROVAL_HTML
