"""A sample audited day in the report database, written through ReportDB's own writers (no
Spark): the tests, the screenshots and the paging measurement share it.

Breaks cycle through causes (late events, duplicates, unexplained, missing rows), currencies
(EUR, JPY, KWD) and merchants; a late break carries late events, a duplicate break the copies
the stream counted twice.

Example:
    >>> with ReportDB("sqlite://") as db:  # doctest: +SKIP
    ...     run_id = sample_day(db, date(2026, 1, 1), breaks=100, reconciler="alice")
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from reckon.money import minor_unit
from reports.db import ReportDB
from reports.records import AttributionRow, AuditRun, BreakRow, CurrencySummary

__all__ = ["sample_day"]

CURRENCIES = ("EUR", "JPY", "KWD")
CAUSES = ("EXPLAINED", "UNEXPLAINED", "EXPLAINED", "MISSING_IN_STREAM", "UNEXPLAINED")


def _amount(units: int, code: str) -> Decimal:
    return Decimal(units).scaleb(-minor_unit(code))


def _break(run_id: str, day: date, i: int) -> BreakRow:
    code, cause = CURRENCIES[i % 3], CAUSES[i % 5]
    start = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(seconds=10 * (i // 7))
    late = 1 + i % 3 if cause == "EXPLAINED" and i % 2 == 0 else 0
    dup = 1 if cause == "EXPLAINED" and i % 2 == 1 else 0
    late_amount, dup_amount = _amount(125 * late, code), _amount(250 * dup, code)
    residual = Decimal(0) if cause == "EXPLAINED" else _amount(99 + i % 50, code)
    gap = late_amount - dup_amount + residual
    canonical = _amount(10_000 + i, code)
    what = (f"{late} late event(s) past the watermark" if late else
            f"{dup} duplicate(s) counted twice by the stream" if dup else
            "no late event or duplicate accounts for the gap")
    return BreakRow(
        run_id=run_id, day=day, window_start=start, window_end=start + timedelta(seconds=10),
        key=f"merchant-{i % 7:02d}", currency=code, status=cause,
        provisional_amount=None if cause == "MISSING_IN_STREAM" else canonical - gap,
        canonical_amount=canonical, gap_amount=gap, gap_count=late - dup + (cause != "EXPLAINED"),
        late_amount=late_amount, late_count=late, duplicate_amount=-dup_amount,
        duplicate_count=dup, residual_amount=residual,
        residual_count=0 if cause == "EXPLAINED" else 1, explanation=what)


def _summary(code: str, rows: list[BreakRow]) -> CurrencySummary:
    mine = [r for r in rows if r.currency == code]
    counts: dict[str, int] = {}
    for r in mine:
        counts[r.status] = counts.get(r.status, 0) + 1

    def total(name: str) -> Decimal:
        return sum((getattr(r, name) or Decimal(0) for r in mine), Decimal(0))

    unexplained = sum(n for s, n in counts.items() if s != "EXPLAINED")
    return CurrencySummary(
        currency=code, rows=len(mine), status_counts=counts, unexplained=unexplained,
        provisional_total=total("provisional_amount"), canonical_total=total("canonical_amount"),
        gap_total=total("gap_amount"), late_total=total("late_amount"),
        duplicate_total=total("duplicate_amount"), residual_total=total("residual_amount"),
        tolerated_total=Decimal(0), provisional_events=len(mine), canonical_events=len(mine),
        late_events=sum(r.late_count for r in mine),
        duplicate_events=sum(r.duplicate_count for r in mine))


def _attribution() -> list[AttributionRow]:
    return [AttributionRow(dimension="partition", value="3", late_events=40,
                           late_amounts={"EUR": Decimal("12.50")}, all_events=1000,
                           late_share=Decimal("0.8"), event_share=Decimal("0.25"),
                           lift=Decimal("3.2")),
            AttributionRow(dimension="source", value="pos", late_events=10, late_amounts={},
                           all_events=3000, late_share=Decimal("0.2"),
                           event_share=Decimal("0.75"), lift=Decimal("0.27"))]


def _rows(run_id: str, day: date, breaks: int) -> Iterator[BreakRow]:
    return (_break(run_id, day, i) for i in range(breaks))


def sample_day(db: ReportDB, day: date, *, breaks: int, reconciler: str,
               run_id: str | None = None, now: datetime | None = None) -> str:
    """Record one audited day with ``breaks`` breaks; returns its run id."""
    run_id = run_id or f"nightly-{day.isoformat()}"
    rows = list(_rows(run_id, day, breaks))
    summaries = tuple(_summary(code, rows) for code in CURRENCIES)
    counts: dict[str, int] = {}
    for s in summaries:
        for k, n in s.status_counts.items():
            counts[k] = counts.get(k, 0) + n
    started = now or datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1, hours=2)
    run = AuditRun(run_id=run_id, day=day, kind="nightly", started_at=started,
                   duration_seconds=42.0, reconciler=reconciler,
                   params={"window": "10s", "watermark_bound": "3s"}, status_counts=counts,
                   rows=len(rows), unexplained=sum(s.unexplained for s in summaries),
                   table_versions={},  # no Delta table behind a sample
                   currencies=summaries)
    db.write_breaks(run_id, rows, now=now)
    db.record_audit_run(run, _attribution())
    return run_id
