"""The workbench's reads of the report database: days, runs, a page of breaks, a break's
evidence, the log's entries on a run or a break. Plain SQLAlchemy Core, no Spark.

Breaks page by keyset: a page is the next ``limit`` breaks of one run after a cursor
(window_start, key, currency), in the order of the unique index
``uq_breaks_run_identity (run_id, day, window_start, key, currency)``, so page 500 costs what
page 1 costs. Filters narrow the scan; the cursor is opaque text for the URL.

Example:
    >>> Cursor.decode(Cursor(datetime(2026, 1, 1, tzinfo=UTC), "m1", "EUR").encode()).key
    'm1'
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from reckon import signoff as signoff_rules
from reckon.errors import UsageError
from reckon.signoff import DECISIONS, UNSETTLED_STATUSES, review_words
from reports.approval_record import APPROVAL_HTML
from reports.db.models import (
    AUDIT_RUN_CURRENCIES,
    AUDIT_RUNS,
    BREAK_INPUTS,
    BREAK_REVIEWS,
    BREAK_STORIES,
    BREAKS,
    LATE_ATTRIBUTION,
    REPORTS,
    SIGNOFF_LOG,
)
from reports.db.repository import ReportDB
from reports.db.types import Magnitude, UTCDateTime
from reports.review import BreakTarget
from reports.review_state import review_states

__all__ = [
    "SORTS",
    "UNSETTLED",
    "BreakFilter",
    "BreakPage",
    "Cursor",
    "all_matches",
    "break_detail",
    "break_page",
    "days",
    "facets",
    "log_entries",
    "period",
    "replaced_signoff",
    "run_of_day",
]

PAGE_SIZE = 50
#: A page counts the matches up to here and says "more than" beyond: the count then costs at
#: most this many index steps, however large the day.
COUNT_CAP = 10_000


@dataclass(frozen=True)
class Cursor:
    """Where a page of breaks ends: the last break's (window_start, key, currency), and its
    absolute gap when the list is sorted by it (``magnitude``)."""

    window_start: datetime
    key: str
    currency: str
    magnitude: Decimal | None = None

    def encode(self) -> str:
        parts = [self.window_start.astimezone(UTC).isoformat(), self.key, self.currency]
        if self.magnitude is not None:
            parts.append(str(self.magnitude))
        raw = json.dumps(parts, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """The cursor ``encode`` wrote; anything else (a forged one nested 1,000 deep, which
        overflowed the JSON parser's recursion into a 500) is one clear UsageError."""
        try:
            if len(text) > _MAX_CURSOR_CHARS:
                raise ValueError("too long")
            parts = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
            if not isinstance(parts, list) or len(parts) not in (3, 4):
                raise ValueError("not a cursor")
            magnitude = None if len(parts) == 3 else Decimal(str(parts[3]))
            if magnitude is not None and (not magnitude.is_finite() or magnitude < 0):
                raise ValueError("not a magnitude")
            return cls(datetime.fromisoformat(parts[0]).astimezone(UTC), str(parts[1]),
                       str(parts[2]), magnitude)
        except (ValueError, TypeError, RecursionError, ArithmeticError):
            raise UsageError("after= is not a page cursor: follow the 'next page' link") from None


_MAX_CURSOR_CHARS = 4096  # a real cursor: a time, a key and a currency, base64


#: The break list's orders: by window (the default), or by absolute gap, largest first
#: within each currency (a yen is not a euro: no order compares amounts across currencies).
SORTS = ("window", "gap")


#: The review filter's word for "open or rejected" (UNSETTLED_STATUSES): what the period view
#: counts as still waiting for someone, and where its count links to.
UNSETTLED = "unsettled"


@dataclass(frozen=True)
class BreakFilter:
    """What the break list shows: review status, cause (the audit's status), currency,
    merchant (key, exact), minimal age in days, an input that contributed to the break:
    a partition and/or a source (audits.break_story.inputs_of: its late events or uncaught
    duplicates explain the gap, or it had events in a cell nothing explains), and a minimum
    absolute gap per currency (``min_gap``: (code, amount in that currency's units) pairs; a
    currency not named is not narrowed, as reckon.materiality treats a currency without a
    threshold). Empty = no filter. ``sort``: one of SORTS."""

    review_status: str = ""
    cause: str = ""
    currency: str = ""
    merchant: str = ""
    min_age_days: int = 0
    partition: str = ""
    source: str = ""
    min_gap: tuple[tuple[str, Decimal], ...] = ()
    sort: str = "window"
    assignee: str = ""
    overdue_on: date | None = None  # breaks still unsettled whose due date is before it

    @property
    def needs_review_row(self) -> bool:
        """Whether a filter reads the joined break_reviews' columns (the count then joins it
        too; assignee and overdue ask their own index, ``_assigned``)."""
        return bool(self.review_status or self.min_age_days > 0)

    def floor(self, currency: str) -> Decimal | None:
        """The minimum absolute gap asked for in ``currency`` (None: not narrowed)."""
        return dict(self.min_gap).get(currency)

    def where(self, now: datetime) -> list[sa.ColumnElement[bool]]:
        b, r = BREAKS, BREAK_REVIEWS
        out: list[sa.ColumnElement[bool]] = []
        if self.review_status == UNSETTLED:
            out.append(r.c.review_status.in_(UNSETTLED_STATUSES))
        elif self.review_status:
            out.append(r.c.review_status == self.review_status)
        if self.cause:
            out.append(b.c.status == self.cause)
        if self.currency:
            out.append(b.c.currency == self.currency)
        if self.merchant:
            out.append(b.c.key == self.merchant)
        if self.min_age_days > 0:
            out.append(r.c.first_seen_at <= now - timedelta(days=self.min_age_days))
        if self.min_gap:
            out.append(self._gap_floor())
        if self.assignee or self.overdue_on is not None:
            out.append(self._assigned())
        return out

    def _assigned(self) -> sa.ColumnElement[bool]:
        """The breaks whose review is assigned to ``assignee`` and/or overdue, as an IN over
        break_reviews' own index (assignee, or due date): the page then seeks only those
        breaks' entries of the list's index instead of walking the run's every break (a
        "my breaks" of none among 100,000 took 0.6 s)."""
        b, own = BREAKS, BREAK_REVIEWS.alias("assigned")
        where = []
        if self.assignee:
            where.append(own.c.assignee == self.assignee)
        if self.overdue_on is not None:
            where += [own.c.due_on < self.overdue_on,
                      own.c.review_status.in_(UNSETTLED_STATUSES)]
        chosen = sa.select(own.c.day, own.c.window_start, own.c.key, own.c.currency).where(
            *where)
        return sa.tuple_(b.c.day, b.c.window_start, b.c.key, b.c.currency).in_(chosen)

    def _gap_floor(self) -> sa.ColumnElement[bool]:
        """Each named currency's breaks of at least its amount; the others as they are."""
        b = BREAKS
        if self.currency:
            floor = self.floor(self.currency)
            return sa.true() if floor is None else b.c.gap_magnitude >= floor
        named = [code for code, _ in self.min_gap]
        return sa.or_(*(sa.and_(b.c.currency == code, b.c.gap_magnitude >= amount)
                        for code, amount in self.min_gap), b.c.currency.not_in(named))

    def inputs(self) -> list[tuple[str, str]]:
        """The (dimension, value) pairs asked for: partition first."""
        return [(d, v) for d, v in (("partition", self.partition), ("source", self.source))
                if v]

    def query(self) -> dict[str, str]:
        """The filters as the list's URL carries them (a page link, the CSV export)."""
        return {"status": self.review_status, "cause": self.cause, "currency": self.currency,
                "merchant": self.merchant, "age": str(self.min_age_days),
                "partition": self.partition, "source": self.source,
                "min_gap": ",".join(f"{c}={a}" for c, a in self.min_gap),
                "sort": "" if self.sort == "window" else self.sort,
                "assignee": self.assignee, "overdue": "1" if self.overdue_on else ""}


@dataclass
class BreakPage:
    rows: list[dict[str, Any]]
    total: int                         # matches, counted up to COUNT_CAP + 1
    next_cursor: str | None
    seconds: float = 0.0
    facets: dict[str, list[str]] = field(default_factory=dict)

    @property
    def total_text(self) -> str:
        """``1,234`` or ``more than 10,000``."""
        return f"more than {COUNT_CAP:,}" if self.total > COUNT_CAP else f"{self.total:,}"


def run_of_day(db: ReportDB, day: date, kind: str = "nightly", required_approvers: int = 1
               ) -> dict[str, Any] | None:
    """The current run of ``day`` (``kind``) with its currencies, its review state and the
    words every view shows for it (``review``, ``review_words``: reckon.signoff)."""
    a = AUDIT_RUNS
    with db.ready().connect() as conn:
        row = conn.execute(sa.select(a).where(a.c.day == day, a.c.kind == kind,
                                              a.c.is_current.is_(True))).mappings().first()
        runs = [] if row is None else [_with_figures(conn, dict(row), db)]
    return _with_reviews(db, runs, required_approvers)[0] if runs else None


def _with_figures(conn: sa.Connection, run: dict[str, Any], db: ReportDB) -> dict[str, Any]:
    c = AUDIT_RUN_CURRENCIES
    run["currencies"] = [dict(r) for r in conn.execute(
        sa.select(c).where(c.c.run_id == run["run_id"]).order_by(c.c.currency)).mappings()]
    report = conn.execute(sa.select(REPORTS.c.html_path).where(
        REPORTS.c.audit_run_id == run["run_id"]).order_by(REPORTS.c.created_at.desc())
        .limit(1)).scalar_one_or_none()
    run["report_path"] = None if report is None else db.resolve(report)  # on this warehouse
    run["approval_record"] = report is not None and (
        Path(run["report_path"]).parent / APPROVAL_HTML).is_file()
    return run


def _with_reviews(db: ReportDB, runs: list[dict[str, Any]], required_approvers: int
                  ) -> list[dict[str, Any]]:
    """Each run with its review state (reports.review_state.review_states: the one owner)."""
    states = review_states(db, [r["run_id"] for r in runs], required_approvers)
    for run in runs:
        run["review"] = states[run["run_id"]]
        run["review_words"] = review_words(run["review"])
    return runs


@dataclass(frozen=True)
class _Decision:
    """A log entry as reckon.signoff.replaced_signoff reads it."""

    run_id: str
    decision: str


def replaced_signoff(db: ReportDB, run: dict[str, Any], required_approvers: int = 1
                     ) -> dict[str, str] | None:
    """The signed-off run a re-audit replaced, with its review state's words as it stands (a
    re-audit leaves it as it was): ``run`` has no sign-off of its own and an earlier run of
    its day and kind was approved (the day's report says the same; a reviewer here would
    otherwise see an unsigned day and not know it had been signed).

    Example: bob approved ``nightly-1``, the lookback re-audited the day as ``nightly-2``:
    ``replaced_signoff(db, run_of_day(db, day))["run_id"] == "nightly-1"``."""
    raw = db.signoffs_of_day(run["day"], run["kind"])
    entries = [_Decision(e["run_id"], e["decision"]) for e in raw
               if e["decision"] in DECISIONS]  # not a break action nor an export
    started = {e["run_id"]: e["started_at"] for e in raw} | {run["run_id"]: run["started_at"]}
    replaced = signoff_rules.replaced_signoff(entries, run["run_id"], started)
    if replaced is None:
        return None
    state = review_states(db, [replaced.run_id], required_approvers)[replaced.run_id]
    return {"run_id": replaced.run_id, "review_words": review_words(state)}


def newest_run_id(db: ReportDB) -> str | None:
    """The id of the audit run started last (any day, kind or currency), None on an empty
    database: what an export of the whole, still empty, sign-off log is filed under.

    Example: ``newest_run_id(db) == "nightly-2026-01-31"`` after the month's last audit."""
    a = AUDIT_RUNS
    with db.ready().connect() as conn:
        found = conn.execute(sa.select(a.c.run_id).order_by(a.c.started_at.desc(),
                                                            a.c.run_id.desc()).limit(1))
        return found.scalar_one_or_none()


def days(db: ReportDB, limit: int = 120, required_approvers: int = 1) -> list[dict[str, Any]]:
    """The current runs, newest day first, each with its per-currency figures and review
    state."""
    a = AUDIT_RUNS
    with db.ready().connect() as conn:
        rows = conn.execute(sa.select(a).where(a.c.is_current.is_(True))
                            .order_by(a.c.day.desc(), a.c.kind).limit(limit)).mappings().all()
        runs = [_with_figures(conn, dict(r), db) for r in rows]
    return _with_reviews(db, runs, required_approvers)


def _break_select() -> sa.Select[Any]:
    b, r = BREAKS, BREAK_REVIEWS
    return sa.select(b, r.c.review_status, r.c.first_seen_at, r.c.assignee,
                     r.c.due_on).join(r, sa.and_(
        r.c.day == b.c.day, r.c.window_start == b.c.window_start, r.c.key == b.c.key,
        r.c.currency == b.c.currency))


def _narrowed(stmt: sa.Select[Any], run_id: str, day: date, filters: BreakFilter,
              moment: datetime) -> tuple[sa.Select[Any], tuple[sa.ColumnElement[Any], ...]]:
    """``stmt`` (over breaks) narrowed to the run's breaks that match, and the columns that
    order them. With an input filter the first input's rows lead: its primary key (run_id,
    dimension, value, day, window_start, key, currency) is then the page's index, so a page
    is one range of it however rare the input."""
    b = BREAKS
    order: tuple[sa.ColumnElement[Any], ...] = (b.c.window_start, b.c.key, b.c.currency)
    where = [b.c.run_id == run_id, b.c.day == day, *filters.where(moment)]
    for n, (dimension, value) in enumerate(filters.inputs()):
        i = BREAK_INPUTS.alias(f"input_{n}")
        stmt = stmt.join(i, sa.and_(i.c.run_id == b.c.run_id, i.c.day == b.c.day,
                                    i.c.window_start == b.c.window_start, i.c.key == b.c.key,
                                    i.c.currency == b.c.currency))
        where += [i.c.run_id == run_id, i.c.dimension == dimension, i.c.value == value,
                  i.c.day == day]
        if n == 0:
            order = (i.c.window_start, i.c.key, i.c.currency)
    return stmt.where(*where), order


def break_page(db: ReportDB, run_id: str, day: date, filters: BreakFilter,
               after: Cursor | None = None, limit: int = PAGE_SIZE,
               now: datetime | None = None) -> BreakPage:
    """One page of the run's breaks after ``after``, and how many match in all."""
    b = BREAKS
    moment = now or datetime.now(UTC)
    by_gap = filters.sort == "gap"
    if after is not None and (after.magnitude is not None) != by_gap:
        raise UsageError("after= is not a page cursor of this order: follow the 'next page' "
                         "link")
    base, order = _narrowed(_break_select(), run_id, day, filters, moment)
    stmt = base
    if after is not None and not by_gap:
        stmt = stmt.where(sa.tuple_(*order) > sa.tuple_(
            sa.literal(after.window_start, UTCDateTime()), sa.literal(after.key),
            sa.literal(after.currency)))
    stmt = stmt.order_by(*order).limit(limit + 1)
    # the review's columns need the join; else the count reads the breaks' index alone
    counted = _break_select() if filters.needs_review_row else sa.select(b.c.id)
    counted, _ = _narrowed(counted, run_id, day, filters, moment)
    count = sa.select(sa.func.count()).select_from(counted.limit(COUNT_CAP + 1).subquery())
    with db.ready().connect() as conn:
        rows = (_largest_first(conn, base, run_id, day, filters, after, limit + 1) if by_gap
                else [dict(r) for r in conn.execute(stmt).mappings()])
        total = int(conn.execute(count).scalar_one())
        _with_inputs(conn, run_id, day, rows)
    more = len(rows) > limit
    rows = rows[:limit]
    today = moment.date()
    for row in rows:
        row["age_days"] = max(0, (moment - row["first_seen_at"]).days)
        row["overdue"] = (row["due_on"] is not None and row["due_on"] < today
                          and row["review_status"] in UNSETTLED_STATUSES)
    last = rows[-1] if rows and more else None
    cursor = None if last is None else Cursor(
        last["window_start"], last["key"], last["currency"],
        last["gap_magnitude"] if by_gap else None).encode()
    return BreakPage(rows=rows, total=total, next_cursor=cursor)


def all_matches(db: ReportDB, run_id: str, day: date, filters: BreakFilter, *,
                cap: int) -> list[dict[str, Any]]:
    """Every break ``filters`` match, in the list's order, up to ``cap + 1`` (one more than
    ``cap`` says there are more), read page by page by keyset."""
    rows: list[dict[str, Any]] = []
    after: Cursor | None = None
    while len(rows) <= cap:
        page = break_page(db, run_id, day, filters, after, limit=min(5_000, cap + 1 - len(rows)))
        rows += page.rows
        if page.next_cursor is None:
            break
        after = Cursor.decode(page.next_cursor)
    return rows[:cap + 1]


def _largest_first(conn: sa.Connection, base: sa.Select[Any], run_id: str, day: date,
                   filters: BreakFilter, after: Cursor | None, wanted: int
                   ) -> list[dict[str, Any]]:
    """Up to ``wanted`` matches of ``base`` after ``after`` in the order currency, absolute
    gap largest first, window and key latest first: one backward range of
    ``ix_breaks_magnitude`` per currency (starting at a currency's minimum gap), so a deep
    page costs what the first costs."""
    b = BREAKS
    rows: list[dict[str, Any]] = []
    code: str | None = after.currency if after is not None else filters.currency or None
    if code is None:
        code = _next_currency(conn, run_id, day, None)
    resume = after
    while code is not None and len(rows) < wanted:
        stmt = base.where(b.c.currency == code)
        floor = filters.floor(code)
        if floor is not None:
            stmt = stmt.where(b.c.gap_magnitude >= floor)
        if resume is not None:
            stmt = stmt.where(sa.tuple_(b.c.gap_magnitude, b.c.window_start, b.c.key)
                              < sa.tuple_(sa.literal(resume.magnitude, Magnitude()),
                                          sa.literal(resume.window_start, UTCDateTime()),
                                          sa.literal(resume.key)))
            resume = None
        stmt = stmt.order_by(b.c.gap_magnitude.desc(), b.c.window_start.desc(),
                             b.c.key.desc()).limit(wanted - len(rows))
        rows += [dict(r) for r in conn.execute(stmt).mappings()]
        code = None if filters.currency else _next_currency(conn, run_id, day, code)
    return rows


def _next_currency(conn: sa.Connection, run_id: str, day: date, after: str | None
                   ) -> str | None:
    """The run's first currency with breaks after ``after`` (an index seek, not a scan)."""
    b = BREAKS
    where = [b.c.run_id == run_id, b.c.day == day]
    if after is not None:
        where.append(b.c.currency > after)
    found = conn.execute(sa.select(sa.func.min(b.c.currency)).where(*where)).scalar_one()
    return None if found is None else str(found)


def _with_inputs(conn: sa.Connection, run_id: str, day: date,
                 rows: list[dict[str, Any]]) -> None:
    """Each row's contributing inputs (``inputs``: ['partition 3', 'source pos']), read for
    the page's rows only, by the index on their cells."""
    i = BREAK_INPUTS
    for row in rows:
        row["inputs"] = []
    if not rows:
        return
    by_cell = {(r["window_start"], r["key"], r["currency"]): r for r in rows}
    # event_count is not in the primary key: without it SQLite scans the run's whole key
    found = conn.execute(sa.select(i.c.window_start, i.c.key, i.c.currency, i.c.dimension,
                                   i.c.value, i.c.event_count).where(
        i.c.run_id == run_id, i.c.day == day,
        i.c.window_start.in_(sorted({r["window_start"] for r in rows})),
        i.c.key.in_(sorted({r["key"] for r in rows}))))
    for f in found:
        hit = by_cell.get((f.window_start, f.key, f.currency))
        if hit is not None:
            hit["inputs"].append((f.dimension, f.value))
    for row in rows:
        row["inputs"] = [f"{d} {v}" for d, v in sorted(row["inputs"], key=_input_order)]


def _input_order(pair: tuple[str, str]) -> tuple[str, int, str]:
    """Partitions numerically, then sources by name."""
    dimension, value = pair
    return (dimension, int(value) if value.isdigit() else -1, value)


def facets(run: dict[str, Any]) -> dict[str, list[str]]:
    """The filter's choices, from the run's own figures (no scan of its breaks): the causes
    its rows have but MATCHED (a match is no break), and its currencies."""
    return {"cause": sorted(k for k, n in (run.get("status_counts") or {}).items()
                            if n and k != "MATCHED"),
            "currency": [str(c["currency"]) for c in run.get("currencies", ())]}


def break_detail(db: ReportDB, run_id: str, target: BreakTarget) -> dict[str, Any] | None:
    """A break with its review, the run's late-event attribution and the log's entries on it."""
    b, a = BREAKS, LATE_ATTRIBUTION
    with db.ready().connect() as conn:
        row = conn.execute(_break_select().where(
            b.c.run_id == run_id, b.c.window_start == target.window_start,
            b.c.key == target.key, b.c.currency == target.currency)).mappings().first()
        if row is None:
            return None
        item = dict(row)
        item["attribution"] = [dict(r) for r in conn.execute(
            sa.select(a).where(a.c.run_id == run_id).order_by(a.c.dimension, a.c.id))
            .mappings()]
        cell = _same_cell(BREAK_STORIES, run_id, item)
        story = conn.execute(sa.select(BREAK_STORIES).where(*cell)).mappings().first()
        item["story"] = None if story is None else dict(story)
        i = BREAK_INPUTS
        item["inputs"] = sorted((dict(r) for r in conn.execute(
            sa.select(i).where(*_same_cell(i, run_id, item))).mappings()),
            key=lambda r: _input_order((r["dimension"], r["value"])))
    item["entries"] = log_entries(db, run_id, target)
    return item


def _same_cell(table: sa.Table, run_id: str,
               item: dict[str, Any]) -> list[sa.ColumnElement[bool]]:
    return [table.c.run_id == run_id, table.c.day == item["day"],
            table.c.window_start == item["window_start"], table.c.key == item["key"],
            table.c.currency == item["currency"]]


def log_entries(db: ReportDB, run_id: str,
                target: BreakTarget | None = None) -> list[dict[str, Any]]:
    """The log's entries on a run (or on one of its breaks), oldest first."""
    log = SIGNOFF_LOG
    stmt = sa.select(log).where(log.c.run_id == run_id).order_by(log.c.seq)
    if target is not None:
        stmt = stmt.where(log.c.note.startswith(target.label() + ":", autoescape=True))
    with db.ready().connect() as conn:
        return [dict(r) for r in conn.execute(stmt).mappings()]


#: The longest period the period view shows at once, in days (a year and a day).
PERIOD_MAX_DAYS = 366


def period(db: ReportDB, start: date, end: date, *, kind: str = "nightly",
           required_approvers: int = 1, now: datetime | None = None) -> dict[str, Any]:
    """Each day of ``start``..``end`` (inclusive) with its current ``kind`` run and review
    state (None: never audited), how many of its breaks are still unsettled (open or
    rejected), those breaks counted by age bucket (reports.summary.AGE_BUCKETS) and currency
    (counts only: no amount is added, let alone across currencies), and the days still to
    sign: audited and awaiting sign-off or rejected, or never audited. A day not over yet
(today or later, UTC) without a run is ``open``: nothing to audit or sign.

    Example: ``period(db, date(2026, 1, 1), date(2026, 1, 31))["to_sign"]``."""
    from reports.summary import AGE_BUCKETS

    moment = now or datetime.now(UTC)
    a, b, r = AUDIT_RUNS, BREAKS, BREAK_REVIEWS
    with db.ready().connect() as conn:
        found = [dict(row) for row in conn.execute(sa.select(a).where(
            a.c.day >= start, a.c.day <= end, a.c.kind == kind,
            a.c.is_current.is_(True)).order_by(a.c.day)).mappings()]
        age = sa.case(*((r.c.first_seen_at > moment - timedelta(days=(hi or 0) + 1), n)
                        for n, (_, _, hi) in enumerate(AGE_BUCKETS) if hi is not None),
                      else_=len(AGE_BUCKETS) - 1)
        joined = sa.select(b.c.day, b.c.currency, age.label("bucket"),
                           sa.func.count().label("n")).select_from(b.join(
            a, sa.and_(a.c.run_id == b.c.run_id, a.c.is_current.is_(True), a.c.kind == kind))
            .join(r, sa.and_(r.c.day == b.c.day, r.c.window_start == b.c.window_start,
                             r.c.key == b.c.key, r.c.currency == b.c.currency))).where(
            b.c.day >= start, b.c.day <= end, r.c.review_status.in_(UNSETTLED_STATUSES)
        ).group_by(b.c.day, b.c.currency, age)
        counted = conn.execute(joined).all()
    runs = {run["day"]: run for run in _with_reviews(db, found, required_approvers)}
    unsettled: dict[date, int] = {}
    buckets: dict[tuple[str, str], int] = {}
    for row in counted:
        unsettled[row.day] = unsettled.get(row.day, 0) + int(row.n)
        label = AGE_BUCKETS[int(row.bucket)][0]
        buckets[(label, row.currency)] = buckets.get((label, row.currency), 0) + int(row.n)
    days_out, to_sign = [], []
    today = moment.astimezone(UTC).date()
    for offset in range((end - start).days + 1):
        day = start + timedelta(days=offset)
        run = runs.get(day)
        open_day = run is None and day >= today  # not over yet: nothing to audit or sign
        days_out.append({"day": day, "run": run, "unsettled": unsettled.get(day, 0),
                         "open": open_day})
        if not open_day and (run is None or run["review"].awaits_signoff
                             or run["review"].state == "rejected"):
            to_sign.append(day)
    currencies = sorted({code for _, code in buckets})
    return {"start": start, "end": end, "kind": kind, "days": days_out, "to_sign": to_sign,
            "runs": runs, "currencies": currencies,
            "buckets": [(label, [buckets.get((label, code), 0) for code in currencies])
                        for label, _, _ in AGE_BUCKETS],
            "unsettled": sum(unsettled.values())}
