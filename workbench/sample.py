"""A sample audited day in the report database, written through ReportDB's own writers (no
Spark): the tests, the screenshots and the paging measurement share it.

Breaks cycle through causes (late events, duplicates, unexplained, missing rows), currencies
(EUR, JPY, KWD) and merchants; a late break carries late events, a duplicate break the copies
the stream counted twice. Each break's story is told by ``audits.chapters.chapter_of`` from
events made up to match its figures (late events from partitions 1 to 4 and sources pos,
mobile, partner; an uncaught copy from partition 2, source partner; in a cell nothing
explains, an event from partition 3), as the audit records it.

Example:
    >>> with ReportDB("sqlite://") as db:  # doctest: +SKIP
    ...     run_id = sample_day(db, date(2026, 1, 1), breaks=100, reconciler="alice")
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from audits.break_story import story_of
from audits.chapters import WindowReads, chapter_of
from audits.records import AttributionRow, AuditRun, BreakRow, BreakStory, CurrencySummary
from reckon.eventtime import EventTimeRules
from reckon.money import minor_unit, money_sum
from reckon.timeutil import to_micros
from reports.db.repository import ReportDB

__all__ = ["sample_day"]

CURRENCIES = ("EUR", "JPY", "KWD")
CAUSES = ("EXPLAINED", "UNEXPLAINED", "EXPLAINED", "MISSING_IN_STREAM", "UNEXPLAINED")
SOURCES = ("pos", "mobile", "partner")
RULES = EventTimeRules.parse(window="10s", watermark_bound="3s")
_S = 1_000_000


@dataclass(frozen=True)
class _Event:
    """An event_log row as reckon explain reads it (audits.chapters.WindowReads)."""

    event_id: str
    event_time: int
    arrival_time: int
    partition: int
    offset: int
    input_file: str | None
    batch_id: int
    amount: Decimal
    currency: str
    source: str
    is_duplicate: bool = False


@dataclass(frozen=True)
class _Late:
    watermark: int
    lateness_seconds: Decimal


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


def _events(row: BreakRow, i: int, start: int) -> tuple[list[_Event], dict[tuple, _Late]]:
    """Events that tell the break's figures: one counted on time (the provisional total),
    its late events, an uncaught second copy, or for a break nothing explains one more
    event from partition 3 counted on time."""
    code, end = row.currency, start + 10 * _S
    unit = Decimal(1).scaleb(-minor_unit(code))
    events, late = [], {}
    if row.provisional_amount is not None:
        events.append(_Event(f"e{i}-0", start + 2 * _S, start + 3 * _S, i % 3, 10 * i, None, 1,
                             row.provisional_amount, code, SOURCES[i % 3]))
    if row.status != "EXPLAINED":
        events.append(_Event(f"e{i}-u", start + _S, start + 2 * _S, 3, 10 * i, None, 1,
                             unit * (99 + i % 50), code, "partner"))
    for n in range(row.late_count):
        e = _Event(f"e{i}-l{n}", start + (4 + n) * _S, end + (5 + n) * _S, 1 + (i + n) % 4,
                   10 * i + n, None, 9, unit * 125, code, SOURCES[(i + n) % 3])
        events.append(e)
        late[(e.event_id, e.batch_id, e.partition, e.offset, e.input_file)] = _Late(
            end + (4 + n) * _S, Decimal(4 + n).quantize(Decimal("0.000001")))
    if row.duplicate_count:
        copy = _Event(f"e{i}-d", start + 6 * _S, start + 7 * _S, 0, 10 * i + 5, None, 1,
                      unit * 250, code, "pos")
        events += [copy, _Event(copy.event_id, copy.event_time, start + 8 * _S, 2, 7, None,
                                2, copy.amount, code, "partner")]
    return sorted(events, key=lambda e: e.arrival_time), late


def _story(row: BreakRow, i: int) -> BreakStory:
    """The break's story, told by the one story builder from the made-up events."""
    start = to_micros(row.window_start)
    events, late = _events(row, i, start)
    end = start + 10 * _S
    current = {} if row.provisional_amount is None else {row.currency: {
        "total_amount": row.provisional_amount, "event_count": 1 + row.duplicate_count,
        "status": "FINAL", "revision": 0, "last_batch_id": 2, "closed_batch_id": 3,
        "finalized_batch_id": 4, "closed_at": end + 3 * _S, "watermark_at_close": end,
        "finalized_at": end + 4 * _S}}
    canonical = {} if row.canonical_amount is None else {row.currency: {
        "total_amount": row.canonical_amount, "event_count": len(events) - row.duplicate_count,
        "replay_id": "replay-sample"}}
    recon = {row.currency: {name: getattr(row, name) for name in (
        "status", "gap_amount", "gap_count", "late_amount", "late_count", "duplicate_amount",
        "duplicate_count", "residual_amount", "residual_count")} | {"audit_run_id": row.run_id}}
    reads = WindowReads(events=events, late=late, before={}, current=current, history={},
                        canonical=canonical, recon=recon, quarantined=[])
    return story_of(row.run_id, row.day, chapter_of(reads, row.key, start, end, row.currency,
                                                    RULES))


def _summary(code: str, rows: list[BreakRow]) -> CurrencySummary:
    mine = [r for r in rows if r.currency == code]
    counts: dict[str, int] = {}
    for r in mine:
        counts[r.status] = counts.get(r.status, 0) + 1

    def total(name: str) -> Decimal:
        return money_sum(getattr(r, name) or Decimal(0) for r in mine)

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


#: A break's made-up events (cause, counts, partitions, sources) repeat every 60 breaks.
_CYCLE = 60


def _stories(rows: list[BreakRow], told: int) -> Iterator[BreakStory]:
    """The first ``told`` breaks' stories; the others carry their inputs only (the same as
    their cycle's first break's: a story costs milliseconds, mostly formatting money, and a
    day of 100,000 breaks for the paging measurement needs the inputs, not the lines)."""
    inputs: dict[int, BreakStory] = {}
    for i, row in enumerate(rows):
        if i < told:
            yield _story(row, i)
            continue
        if i % _CYCLE not in inputs:
            inputs[i % _CYCLE] = _story(rows[i % _CYCLE], i % _CYCLE)
        yield BreakStory(run_id=row.run_id, day=row.day, window_start=row.window_start,
                         key=row.key, currency=row.currency, lines=(), evidence=(),
                         inputs=inputs[i % _CYCLE].inputs, events=0)


def sample_day(db: ReportDB, day: date, *, breaks: int, reconciler: str,
               run_id: str | None = None, now: datetime | None = None,
               told: int = 2_000, material_gap: dict[str, str] | None = None) -> str:
    """Record one audited day with ``breaks`` breaks (the first ``told`` with their whole
    story), audited under ``material_gap`` (code -> amount text; None: as runs recorded before
    they kept it); returns its run id."""
    run_id = run_id or f"nightly-{day.isoformat()}"
    rows = list(_rows(run_id, day, breaks))
    summaries = tuple(_summary(code, rows) for code in CURRENCIES if rows)  # none: no events
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
                   currencies=summaries, material_gap=material_gap)
    db.write_breaks(run_id, rows, now=now)
    db.write_break_stories(run_id, _stories(rows, told))
    db.record_audit_run(run, _attribution())
    return run_id
