"""What the audits need of the report database, named here so that they never import it.

Why: the report database (reports/db/) stores what the audits produce, and reports/ sits
above audits/ (docs/code-map.md). An audit that opened the database itself would import
upwards and tie the two packages in a cycle. So the audits say here what they write and read,
and the caller (the app layer: app/pipeline.py, a test) hands them the database's
implementation: ``reports.db.repository.audit_recorder(settings)`` for an audit, a
``reports.db.repository.ReportDB`` for a data-quality check.

Breaks and their stories are written by Spark's executors, which cannot take a database
object along (it holds an engine and its connections). They get a *writer*: a module-level
function (picklable by reference) that opens the database from its URL in the worker, e.g.
``reports.db.executor_writes.insert_breaks``.

Example:
    >>> from reports.db.repository import audit_recorder  # doctest: +SKIP
    >>> audit_day(spark, config, day, recorder=audit_recorder(settings))  # doctest: +SKIP
    >>> audit_day(spark, config, day, recorder=None)  # not recorded  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Protocol

from audits.day_whatif import DayWhatIf
from audits.records import (
    AttributionRow,
    AuditRun,
    BreakRow,
    BreakStory,
    CheckRun,
    ExpectationResult,
)

__all__ = ["AuditLedger", "AuditRecorder", "BreaksWriter", "CheckLedger", "StoriesWriter"]


class BreaksWriter(Protocol):
    """Writes one Spark partition's breaks of ``run_id``; returns how many it wrote. Runs on
    an executor with only the URL, so it must be a module-level function."""

    def __call__(self, url: str, run_id: str, rows: Iterable[BreakRow]) -> int: ...


class StoriesWriter(Protocol):
    """Writes one Spark partition's break stories of ``run_id``; like :class:`BreaksWriter`."""

    def __call__(self, url: str, run_id: str, stories: Iterable[BreakStory]) -> int: ...


class AuditLedger(Protocol):
    """The report database as the driver of an audit uses it (``ReportDB`` is one)."""

    @property
    def url(self) -> str:
        """The database URL the executors' writers open."""
        ...

    def principal(self) -> str:
        """Who runs the audit (the OS account or the DB login role): the run's reconciler."""
        ...

    def ready(self) -> Any:
        """Migrate the schema once, here on the driver, before the executors write."""
        ...

    def record_audit_run(self, run: AuditRun, attribution: Sequence[AttributionRow],
                         whatif: DayWhatIf | None = None) -> None:
        """Store the run (it becomes current), its late attribution and its lateness what-ifs
        (audits/day_whatif.py; None: none computed), together."""
        ...

    def current_audit_run(self, day: date, kind: str = "nightly") -> AuditRun | None: ...

    def signoffs_of_day(self, day: date, kind: str = "nightly") -> list[dict[str, Any]]: ...


class CheckLedger(Protocol):
    """The report database as a data-quality check uses it: the day's current audit (whose
    tolerance the reconciliation suite judges by) and where the check's run goes."""

    def current_audit_run(self, day: date, kind: str = "nightly") -> AuditRun | None: ...

    def record_check_run(self, run: CheckRun, results: Sequence[ExpectationResult]) -> None: ...


@dataclass(frozen=True)
class AuditRecorder:
    """Where an audit records its run, breaks and break stories: the driver's ledger and the
    executors' writers, which open ``ledger.url`` themselves."""

    ledger: AuditLedger
    write_breaks: BreaksWriter
    write_stories: StoriesWriter
