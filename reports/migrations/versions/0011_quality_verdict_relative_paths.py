"""A check run keeps its quality verdict; file paths are kept relative to the warehouse.

* ``check_runs.verdict`` and ``check_runs.suite_verdicts``: the day's verdict and each suite's,
  in reckon.quality_verdict's words (``passed (no events)``, ``passed with 1 warning``,
  ``FAILED (2 blocking)``), decided once when the checks run, so that Data Docs, the report
  and the quality gate show the same. Runs recorded before: ``''`` and ``{}`` (their views
  fall back to ``success``).
* ``reports.html_path``, ``pdf_path``, ``csv_paths`` and ``check_runs.data_docs_path`` were
  absolute, so a warehouse copied or restored elsewhere looked up its reports under the old
  place (a re-audit kept no ``signed/`` copy). A path of a warehouse's own layout,
  ``<root>/reports/<YYYY-MM-DD>/...`` or ``<root>/reports/data_docs/...``, becomes
  ``reports/...``; the report database resolves it against the warehouse a command runs on.
  Any other path (``reckon report --out DIR``) stays as it was. Downgrading keeps the
  relative paths (the old root is not known any more).

Revision ID: 0011_quality_verdict_paths
Revises: 0009_workbench_sessions
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011_quality_verdict_paths"
down_revision: str | None = "0010_reopened_decision"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# the last "/reports/<day or data_docs>/" of an absolute path: the warehouse's own layout
_IN_WAREHOUSE = re.compile(r"^/.*/(reports/(?:\d{4}-\d{2}-\d{2}|data_docs)/.+)$")


def _relative(path: Any) -> Any:
    """``/old/wh/reports/2026-01-01/report.html`` -> ``reports/2026-01-01/report.html``."""
    if not isinstance(path, str):
        return path
    found = _IN_WAREHOUSE.match(path)
    return found.group(1) if found else path


def _csv_list(value: Any) -> list[Any]:
    return json.loads(value) if isinstance(value, str) else list(value or [])


def _relative_reports(conn: sa.Connection) -> None:
    reports = sa.table("reports", sa.column("id"), sa.column("audit_run_id"),
                       sa.column("html_path"), sa.column("pdf_path"), sa.column("sha256"),
                       sa.column("csv_paths", sa.JSON()))
    rows = conn.execute(sa.select(reports)).all()
    taken = {(r.audit_run_id, r.html_path, r.sha256) for r in rows}
    for r in rows:
        html = _relative(r.html_path)
        csvs = [_relative(p) for p in _csv_list(r.csv_paths)]
        if html != r.html_path and (r.audit_run_id, html, r.sha256) in taken:
            continue  # the same report is recorded under the relative path already
        taken.add((r.audit_run_id, html, r.sha256))
        if (html, _relative(r.pdf_path), csvs) != (r.html_path, r.pdf_path,
                                                   _csv_list(r.csv_paths)):
            conn.execute(sa.update(reports).where(reports.c.id == r.id).values(
                html_path=html, pdf_path=_relative(r.pdf_path), csv_paths=csvs))


def _relative_check_runs(conn: sa.Connection) -> None:
    runs = sa.table("check_runs", sa.column("run_id"), sa.column("data_docs_path"))
    for r in conn.execute(sa.select(runs)).all():
        if _relative(r.data_docs_path) != r.data_docs_path:
            conn.execute(sa.update(runs).where(runs.c.run_id == r.run_id).values(
                data_docs_path=_relative(r.data_docs_path)))


def upgrade() -> None:
    op.add_column("check_runs", sa.Column("verdict", sa.Text(), nullable=False,
                                          server_default=sa.text("''")))
    op.add_column("check_runs", sa.Column(
        "suite_verdicts", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
        nullable=False, server_default=sa.text("'{}'")))
    conn = op.get_bind()
    _relative_reports(conn)
    _relative_check_runs(conn)


def downgrade() -> None:
    with op.batch_alter_table("check_runs") as batch:
        batch.drop_column("suite_verdicts")
        batch.drop_column("verdict")
