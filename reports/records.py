"""The record of a rendered report: where its HTML, PDF and CSVs are and the hash reviewers
sign. The audits' own records (runs, breaks, stories, checks) are in audits/records.py; this
one is the report's, made by reports/render.py and stored by the report database.

Example:
    >>> from datetime import UTC, date, datetime
    >>> ReportRecord(day=date(2026, 1, 1), audit_run_id="audit-2026-01-01-abc",
    ...              created_at=datetime(2026, 1, 2, tzinfo=UTC), html_path="r.html",
    ...              pdf_path="r.pdf").csv_paths
    []
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime

__all__ = ["ReportRecord"]


@dataclass(frozen=True)
class ReportRecord:
    day: date
    audit_run_id: str
    created_at: datetime
    html_path: str
    pdf_path: str
    csv_paths: list[str] = field(default_factory=list)
    sha256: str = ""                   # of the HTML report (the content reviewers sign)
