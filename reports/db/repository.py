"""``ReportDB``: the report database as the driver reads and writes it (audit runs, breaks
and their review, attribution, data-quality runs, rendered reports, the sign-off log's
questions), and ``audit_recorder``, what an audit records with.

Why its own module: this is the one door the app layer, the report, the review and the
workbench open; the schema (models.py), the engines and locks (engine.py) and the executors'
writes (executor_writes.py) stay behind it. Cheap to construct; the schema is migrated
(Alembic ``upgrade head``) on first use. All SQL goes through SQLAlchemy constructs with
bound parameters.

Example:
    >>> with ReportDB("sqlite://") as db:
    ...     db.audit_runs()
    []
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import fields, replace
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from audits.day_whatif import DayWhatIf
from audits.ledger import AuditRecorder
from audits.records import (
    AttributionRow,
    AuditRun,
    BreakRow,
    BreakStory,
    CheckRun,
    CurrencySummary,
    ExpectationResult,
)
from reckon.errors import UsageError, invalid
from reports.db.engine import insert_for, make_engine, migrate_engine, note_migrated, write_tx
from reports.db.executor_writes import insert_break_stories, insert_breaks
from reports.db.models import (
    AUDIT_RUN_CURRENCIES,
    AUDIT_RUNS,
    BREAK_REVIEWS,
    BREAKS,
    CHECK_RUNS,
    EXPECTATION_RESULTS,
    LATE_ATTRIBUTION,
    REPORTS,
    REVIEW_STATUSES,
    SIGNOFF_LOG,
)
from reports.db.whatif_rows import read_whatif, write_whatif
from reports.records import ReportRecord
from storage.sharing import create_group_writable, os_principal

__all__ = ["ReportDB", "audit_recorder"]


def _now() -> datetime:
    return datetime.now(UTC)


_R = TypeVar("_R")


def _record_values(record: Any, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(record) if f.name not in exclude}


def _to_record(cls: type[_R], model: Any) -> _R:
    return cls(**{f.name: getattr(model, f.name) for f in fields(cls)})  # type: ignore[arg-type]


def _age_days(first_seen: datetime, now: datetime) -> int:
    return max(0, (now - first_seen).days)


def _insert_run(conn: sa.Connection, runs: sa.Table, values: dict[str, Any],
                scope: tuple[sa.ColumnElement[bool], ...]) -> bool:
    """Insert a run row (audit or check) by the one rule both kinds of run keep: a run_id
    already recorded changes nothing (False: the caller writes nothing else either), and the
    run becomes current within ``scope`` (its day, and kind) unless a run that started later
    is already there, so a delayed retry of an old run never displaces a newer one; it is
    kept as history then. ``values`` holds the row's columns but ``is_current``.

    Example: recording run-new (10:00) then run-old (09:00) of one day leaves run-new
    current and run-old in the history; recording run-old again inserts nothing.
    """
    if conn.execute(sa.select(runs.c.run_id).where(runs.c.run_id == values["run_id"])).first():
        return False
    newer = conn.execute(sa.select(runs.c.run_id).where(
        *scope, runs.c.started_at > values["started_at"]).limit(1)).first()
    if newer is None:
        conn.execute(sa.update(runs).where(*scope, runs.c.is_current.is_(True))
                     .values(is_current=False))
    conn.execute(sa.insert(runs).values(**values, is_current=newer is None,
                                        recorded_at=_now()))
    return True


class ReportDB:
    """The report database behind one SQLAlchemy URL. Cheap to construct; the schema is
    migrated (Alembic ``upgrade head``) on first use.

    ``warehouse``: the warehouse this command runs on. A file path recorded inside it (a
    report's files, the Data Docs index) is stored relative to it and read back resolved
    against it, so a warehouse copied or restored elsewhere (``cp -a wh wh2``) finds its own
    files, never the old place's (migration 0011 made older absolute paths relative). Paths
    outside the warehouse (``reckon report --out DIR``) are stored as given.

    Example: with ``warehouse=Path("/srv/wh")``, ``/srv/wh/reports/2026-01-01/report.html`` is
    stored as ``reports/2026-01-01/report.html`` and read back as
    ``/srv/wh2/reports/2026-01-01/report.html`` by a ``ReportDB`` of ``/srv/wh2``."""

    def __init__(self, url: str, warehouse: str | Path | None = None) -> None:
        if not url or "://" not in url:
            raise invalid("url", url, "a SQLAlchemy URL such as sqlite:///path/reckon.db or "
                                      "postgresql+psycopg://user@host/db")
        self.url = url
        self.warehouse = None if warehouse is None else Path(warehouse).expanduser().resolve()
        self.engine = make_engine(url)
        insert_for(self.engine.dialect.name)  # reject unsupported backends now
        self._migrated = False
        self._migrate_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Any) -> ReportDB:
        """The database of ``settings.report_db`` for the warehouse of
        ``settings.warehouse_path`` (Settings, ReportConfig); creates the SQLite file's
        folder."""
        url = settings.report_db
        parsed = sa.make_url(url)
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "",
                                                                             ":memory:"):
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            create_group_writable(Path(parsed.database).expanduser(),
                                  str(getattr(settings, "shared_warehouse", "")))
        return cls(url, getattr(settings, "warehouse_path", None))

    def stored_path(self, path: str) -> str:
        """``path`` as recorded: relative (POSIX) when inside the warehouse, else as given.

        >>> ReportDB("sqlite://", "/srv/wh").stored_path("/srv/wh/reports/data_docs/index.html")
        'reports/data_docs/index.html'
        """
        if self.warehouse is None or not Path(path).is_absolute():
            return path
        resolved = Path(path).expanduser().resolve()
        if not resolved.is_relative_to(self.warehouse):
            return path
        return resolved.relative_to(self.warehouse).as_posix()

    def resolve(self, stored: str) -> str:
        """A recorded path as a path on this machine: a relative one under the warehouse.

        >>> ReportDB("sqlite://", "/srv/wh2").resolve("reports/2026-01-01/report.html")
        '/srv/wh2/reports/2026-01-01/report.html'
        """
        if self.warehouse is None or not stored or Path(stored).is_absolute():
            return stored
        return str(self.warehouse / stored)

    def __repr__(self) -> str:
        return f"ReportDB({self.engine.url.render_as_string(hide_password=True)!r})"

    def close(self) -> None:
        """Release pooled connections."""
        self.engine.dispose()

    def __enter__(self) -> ReportDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ schema
    def migrate(self) -> None:
        """Bring the schema to Alembic's head. Idempotent; safe in concurrent processes."""
        with self._migrate_lock:
            try:
                migrate_engine(self.engine)
            except sa.exc.DBAPIError as exc:
                orig = exc.orig
                if (getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)) != "42501":
                    raise
                raise UsageError(
                    "the report database's schema is behind this reckon and this role may not "
                    "migrate it: run any reckon command (e.g. `reckon verify-log`) once as the "
                    "database's owner, then try again") from None
            self._migrated = True
        note_migrated(self.url)  # the executor writes in this process need not check

    def ready(self) -> Engine:
        """The engine, after making sure the schema is migrated (once per instance)."""
        if not self._migrated:
            self.migrate()
        return self.engine

    def principal(self) -> str:
        """Who this session acts as: on PostgreSQL the role it logged in as (``session_user``,
        which ``SET ROLE`` does not change; the database's triggers check the same name),
        elsewhere the OS account (storage.sharing.os_principal). An audit records it as its
        reconciler; a sign-off is made by it."""
        engine = self.ready()
        if engine.dialect.name != "postgresql":
            return os_principal()
        with engine.connect() as conn:
            return str(conn.execute(sa.text("SELECT session_user")).scalar_one())

    # ------------------------------------------------------------------ audit runs
    def record_audit_run(self, run: AuditRun, attribution: Sequence[AttributionRow],
                         whatif: DayWhatIf | None = None) -> None:
        """Store a run, its attribution and its lateness what-ifs (None: not computed, e.g. a
        benchmark's audit) in one transaction. The run becomes current for its (day, kind)
        unless a run that started later is already recorded (a delayed retry of an old run
        never displaces a newer one); older runs stay as history. Recording the same run_id
        again changes nothing.

        Example: ``db.record_audit_run(run, [], day_whatif(config, run.day))``."""
        runs = AUDIT_RUNS
        with write_tx(self.ready(), runs.name) as conn:
            values = _record_values(run, exclude=("is_current", "currencies"))
            if not _insert_run(conn, runs, values, (runs.c.day == run.day,
                                                    runs.c.kind == run.kind)):
                return
            if run.currencies:
                conn.execute(sa.insert(AUDIT_RUN_CURRENCIES),
                             [{**_record_values(c), "run_id": run.run_id}
                              for c in run.currencies])
            if attribution:
                conn.execute(sa.insert(LATE_ATTRIBUTION),
                             [{**_record_values(a), "run_id": run.run_id} for a in attribution])
            if whatif is not None:
                write_whatif(conn, run.run_id, whatif)

    def _audit_runs(self, stmt: sa.Select[Any]) -> list[AuditRun]:
        c = AUDIT_RUN_CURRENCIES
        with self.ready().connect() as conn:
            rows = list(conn.execute(stmt))
            by_run: dict[str, list[CurrencySummary]] = {}
            ids = [r.run_id for r in rows]
            for i in range(0, len(ids), 500):  # bounded IN lists
                for r in conn.execute(sa.select(c).where(c.c.run_id.in_(ids[i:i + 500]))
                                      .order_by(c.c.run_id, c.c.currency)):
                    by_run.setdefault(r.run_id, []).append(_to_record(CurrencySummary, r))
        runs = []
        for r in rows:
            fields_ = {f.name: getattr(r, f.name) for f in fields(AuditRun)
                       if f.name != "currencies"}
            runs.append(AuditRun(**fields_, currencies=tuple(by_run.get(r.run_id, ()))))
        return runs

    def current_audit_run(self, day: date, kind: str = "nightly") -> AuditRun | None:
        t = AUDIT_RUNS
        runs = self._audit_runs(sa.select(t).where(t.c.day == day, t.c.kind == kind,
                                                   t.c.is_current.is_(True)))
        return runs[0] if runs else None

    def audit_runs(self, day: date | None = None) -> list[AuditRun]:
        """Every recorded run (of ``day`` when given), newest first (history included)."""
        t = AUDIT_RUNS
        stmt = sa.select(t).order_by(t.c.started_at.desc(), t.c.recorded_at.desc())
        if day is not None:
            stmt = stmt.where(t.c.day == day)
        return self._audit_runs(stmt)

    def get_audit_run(self, run_id: str) -> AuditRun | None:
        t = AUDIT_RUNS
        runs = self._audit_runs(sa.select(t).where(t.c.run_id == run_id))
        return runs[0] if runs else None

    def attribution(self, run_id: str) -> list[AttributionRow]:
        t = LATE_ATTRIBUTION
        with self.ready().connect() as conn:
            rows = conn.execute(sa.select(t).where(t.c.run_id == run_id).order_by(t.c.id))
            out = []
            for r in rows:
                values = {f.name: getattr(r, f.name) for f in fields(AttributionRow)}
                values["late_amounts"] = {code: Decimal(str(amount)) for code, amount
                                          in sorted((r.late_amounts or {}).items())}
                out.append(AttributionRow(**values))
            return out

    def audit_whatif(self, run_id: str) -> DayWhatIf | None:
        """The lateness what-ifs recorded with ``run_id`` (audits/day_whatif.py), or None for a
        run recorded without them (before migration 0018, or by an audit that recorded none).

        Example: ``db.audit_whatif(run.run_id).recommended_bound_seconds`` -> Decimal('5')."""
        with self.ready().connect() as conn:
            return read_whatif(conn, run_id)

    # ------------------------------------------------------------------ breaks
    def write_breaks(self, run_id: str, rows: Iterable[BreakRow], *,
                     now: datetime | None = None) -> int:
        """Driver-side :func:`insert_breaks` (same rules)."""
        self.ready()
        return insert_breaks(self.url, run_id, rows, now=now)

    def write_break_stories(self, run_id: str, stories: Iterable[BreakStory]) -> int:
        """Driver-side :func:`insert_break_stories`."""
        self.ready()
        return insert_break_stories(self.url, run_id, stories)

    def breaks(self, run_id: str) -> list[BreakRow]:
        t = BREAKS
        with self.ready().connect() as conn:
            rows = conn.execute(sa.select(t).where(t.c.run_id == run_id)
                                .order_by(t.c.day, t.c.window_start, t.c.key, t.c.currency))
            return [_to_record(BreakRow, r) for r in rows]

    def list_breaks(self, day: date | None = None, review_status: str | None = None, *,
                    kind: str | None = None, now: datetime | None = None,
                    currency: str | None = None, key: str | None = None,
                    min_gap: Decimal | None = None) -> list[dict[str, Any]]:
        """Breaks of the current audit runs (of every kind unless ``kind`` is given) with their
        review status and ``age_days`` = whole days since the identity was first seen; only
        ``currency``'s, ``key``'s, and those whose gap is at least ``min_gap`` in absolute
        value (in the break's own currency: 10 is 10 EUR or 10 JPY), when given.

        Example: ``db.list_breaks(currency="JPY", min_gap=Decimal(1000))``."""
        if review_status is not None and review_status not in REVIEW_STATUSES:
            raise invalid("review_status", review_status, "one of " + ", ".join(REVIEW_STATUSES))
        moment = now or _now()
        b, r, a = BREAKS, BREAK_REVIEWS, AUDIT_RUNS
        stmt = (
            sa.select(b, a.c.kind, a.c.material_gap.label("run_material_gap"), r.c.review_status,
                      r.c.first_seen_at, r.c.last_seen_run_id, r.c.assignee, r.c.due_on,
                      r.c.updated_at.label("review_updated_at"))
            .join(a, sa.and_(a.c.run_id == b.c.run_id, a.c.is_current.is_(True)))
            .join(r, sa.and_(r.c.day == b.c.day, r.c.window_start == b.c.window_start,
                             r.c.key == b.c.key, r.c.currency == b.c.currency))
            .order_by(b.c.day, b.c.window_start, b.c.key, b.c.currency, a.c.kind)
        )
        if day is not None:
            stmt = stmt.where(b.c.day == day)
        if kind is not None:
            stmt = stmt.where(a.c.kind == kind)
        if review_status is not None:
            stmt = stmt.where(r.c.review_status == review_status)
        if currency is not None:
            stmt = stmt.where(b.c.currency == currency)
        if key is not None:
            stmt = stmt.where(b.c.key == key)
        with self.ready().connect() as conn:
            out = []
            for row in conn.execute(stmt).mappings():
                item = dict(row)
                # amounts are exact decimal text in the database: compared here, as Decimals
                # (copy_abs: exact; abs() would round a 38-digit amount to 28 digits)
                if min_gap is not None and item["gap_amount"].copy_abs() < min_gap:
                    continue
                item.pop("id", None)
                item.pop("gap_magnitude", None)  # the workbench's sort key, not an amount
                item["age_days"] = _age_days(item["first_seen_at"], moment)
                out.append(item)
            return out

    def signoffs_of_day(self, day: date, kind: str = "nightly") -> list[dict[str, Any]]:
        """The sign-off log's entries on every audit run of ``day`` (``kind``), oldest first,
        each with its run's figures (``gap_totals``: currency -> gap) and whether the run is
        current."""
        log, runs, cur = SIGNOFF_LOG, AUDIT_RUNS, AUDIT_RUN_CURRENCIES
        stmt = (sa.select(log.c.seq, log.c.at, log.c.run_id, log.c.by, log.c.decision,
                          runs.c.is_current, runs.c.unexplained, runs.c.started_at)
                .join(runs, runs.c.run_id == log.c.run_id)
                .where(runs.c.day == day, runs.c.kind == kind).order_by(log.c.seq))
        with self.ready().connect() as conn:
            entries = [dict(row) for row in conn.execute(stmt).mappings()]
            gaps: dict[str, dict[str, Decimal]] = {}
            for run_id in {e["run_id"] for e in entries}:
                gaps[run_id] = {r.currency: r.gap_total for r in conn.execute(
                    sa.select(cur.c.currency, cur.c.gap_total).where(cur.c.run_id == run_id)
                    .order_by(cur.c.currency))}
        for entry in entries:
            entry["gap_totals"] = gaps.get(entry["run_id"], {})
        return entries

    # ------------------------------------------------------------------ data quality
    def record_check_run(self, run: CheckRun, results: Sequence[ExpectationResult]) -> None:
        """Store a check run and its results in one transaction; newest (by started_at) is
        current for its day; the same run_id again changes nothing."""
        runs = CHECK_RUNS
        with write_tx(self.ready(), runs.name) as conn:
            values = {**_record_values(run),
                      "data_docs_path": self.stored_path(run.data_docs_path)}
            if not _insert_run(conn, runs, values, (runs.c.day == run.day,)):
                return
            for result in results:
                if result.run_id != run.run_id:
                    raise invalid("ExpectationResult.run_id", result.run_id,
                                  f"the check run being recorded ({run.run_id!r})")
            if results:
                conn.execute(sa.insert(EXPECTATION_RESULTS),
                             [_record_values(x) for x in results])

    def current_check_run(self, day: date) -> CheckRun | None:
        t = CHECK_RUNS
        with self.ready().connect() as conn:
            row = conn.execute(sa.select(t).where(t.c.day == day,
                                                  t.c.is_current.is_(True))).first()
            if row is None:
                return None
        run = _to_record(CheckRun, row)
        return replace(run, data_docs_path=self.resolve(run.data_docs_path))

    def expectation_results(self, run_id: str) -> list[ExpectationResult]:
        t = EXPECTATION_RESULTS
        with self.ready().connect() as conn:
            rows = conn.execute(sa.select(t).where(t.c.run_id == run_id).order_by(t.c.id))
            return [_to_record(ExpectationResult, r) for r in rows]

    # ------------------------------------------------------------------ reports
    def record_report(self, rec: ReportRecord) -> None:
        """Store a rendered report; recording the same (run, HTML path, sha256) again is a
        no-op."""
        engine = self.ready()
        t = REPORTS
        insert = insert_for(engine.dialect.name)
        values = _record_values(rec)
        values.update(html_path=self.stored_path(rec.html_path),
                      pdf_path=self.stored_path(rec.pdf_path),
                      csv_paths=[self.stored_path(p) for p in rec.csv_paths])
        with write_tx(engine) as conn:
            conn.execute(insert(t).values(**values).on_conflict_do_nothing(
                index_elements=["audit_run_id", "html_path", "sha256"]))

    def _newest_report(self, where: sa.ColumnElement[bool]) -> ReportRecord | None:
        """The newest report matching ``where`` (by created_at, then recording order)."""
        t = REPORTS
        with self.ready().connect() as conn:
            row = conn.execute(sa.select(t).where(where)
                               .order_by(t.c.created_at.desc(), t.c.id.desc()).limit(1)).first()
            if row is None:
                return None
        rec = _to_record(ReportRecord, row)
        return replace(rec, html_path=self.resolve(rec.html_path),
                       pdf_path=self.resolve(rec.pdf_path),
                       csv_paths=[self.resolve(p) for p in rec.csv_paths])

    def report_at(self, html_path: str) -> ReportRecord | None:
        """The newest report recorded with this HTML path, or None."""
        return self._newest_report(REPORTS.c.html_path == self.stored_path(html_path))

    def current_report(self, day: date) -> ReportRecord | None:
        """The newest report of ``day`` (by created_at, then recording order)."""
        return self._newest_report(REPORTS.c.day == day)


def audit_recorder(settings: Any) -> AuditRecorder:
    """How an audit records into ``settings.report_db``: this database on the driver, and
    the module-level writers its executors call with the URL (audits/ledger.py says why the
    audit is handed them instead of opening the database itself).

    Example:
        >>> audit_day(spark, settings.audit_config(), day,
        ...           recorder=audit_recorder(settings))  # doctest: +SKIP
    """
    return AuditRecorder(ledger=ReportDB.from_settings(settings), write_breaks=insert_breaks,
                         write_stories=insert_break_stories)
