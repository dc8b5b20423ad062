"""The typed context a day's report is rendered from, and how it is built from the warehouse.

The renderer (reports/render.py) sees only a ``ReportContext``: frozen values, exact Decimals,
aware UTC datetimes, series already reduced to a few hundred points. ``build_context`` is the
only place that reads the warehouse and the report database, and it reads small aggregates
only (GROUP BY / LIMIT), through DuckDB over the Delta tables (delta-rs: no JVM, since a
report only reads; reports/duck.py). It computes no analysis: the lateness what-ifs are read
as the audit run recorded them (audits/day_whatif.py), so a report shows only what the run it
describes saw, whatever the stream appended since. Sections follow what reviewers read
first: configuration, row counts, per-status counts, the breaks, capped samples.

Money is per currency everywhere (docs/decisions/0001-money-per-currency.md): the headline is
one ``CurrencySummary`` per currency as the audit recorded it, every break, gap point and
attribution amount carries its currency, and nothing here adds amounts of two currencies
(event and row counts may be added). A run recorded before per-currency figures existed is
refused (``LayoutError``) rather than shown with figures it does not have.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from audits.day_whatif import CurveLine, DayWhatIf
from audits.records import AttributionRow, AuditRun, CurrencySummary
from reckon.engine_config import ReportConfig
from reckon.errors import LayoutError, UsageError
from reckon.eventtime import EventTimeRules
from reckon.materiality import run_rule
from reckon.money import money_context
from reckon.reconcile import UNEXPLAINED_STATUSES, ReconStatus
from reckon.signoff import DECISIONS, ReviewState, replaced_signoff
from reckon.timeutil import MICROS_PER_SECOND, day_bounds, from_micros, to_micros
from reckon.whatif_inputs import PerInputRecommendation
from storage import table_names as tb

__all__ = [
    "BREAKS_CAP",
    "LATENESS_BUCKETS",
    "BreakLine",
    "CurveLine",
    "GapPoint",
    "Headline",
    "HistogramBucket",
    "QualitySummary",
    "ReportContext",
    "Signoff",
    "WatermarkPoint",
    "build_context",
    "headline_from_run",
    "review_fields",
    "unexplained_amount",
    "whatif_fields",
    "whatif_note",
]

BREAKS_CAP = 200          # break rows shown in the report (the CSV has them all)
GAP_POINTS = 60           # at most this many buckets per currency in the gap series
WATERMARK_POINTS = 300    # at most this many batches in the watermark series
# Histogram edges in seconds: [0,1), [1,2), [2,5), ... [300, inf). Delays below 0 (clock skew)
# fall in the first bucket.
LATENESS_BUCKETS: tuple[int, ...] = (0, 1, 2, 5, 10, 30, 60, 300)
_ZERO = Decimal("0.000")  # the stored scale (DECIMAL(38,3)); each currency shows its own digits


@dataclass(frozen=True)
class Headline:
    """The day's figures as the audit recorded them: counts over every currency (rows,
    unexplained rows, completeness: counts may be added) and, per currency, its money
    (``currencies``: one CurrencySummary per currency, by code). There is no cross-currency
    amount here, on purpose."""

    rows: int
    unexplained_count: int
    completeness: Decimal | None
    currencies: tuple[CurrencySummary, ...] = ()


def unexplained_amount(summary: CurrencySummary) -> Decimal:
    """The residual of one currency's UNEXPLAINED / MISSING_* rows: its residual less the part
    a tolerance let pass on EXPLAINED rows (MATCHED rows have no residual)."""
    with money_context():
        return summary.residual_total - summary.tolerated_total


@dataclass(frozen=True)
class BreakLine:
    """One break (non-MATCHED (window, key, currency) row); its amounts are in ``currency``."""

    window_start: datetime
    window_end: datetime
    key: str
    currency: str
    status: str
    provisional_amount: Decimal | None
    canonical_amount: Decimal | None
    gap_amount: Decimal
    gap_count: int
    late_amount: Decimal
    duplicate_amount: Decimal
    residual_amount: Decimal
    explanation: str
    review_status: str
    age_days: int | None


@dataclass(frozen=True)
class GapPoint:
    """Reconciliation rows of one currency whose window starts in ``[bucket_start,
    bucket_start + width)``; the amounts are that currency's sums."""

    bucket_start: datetime
    currency: str
    windows: int
    provisional_amount: Decimal
    canonical_amount: Decimal
    gap_amount: Decimal
    late_amount: Decimal
    residual_amount: Decimal
    unexplained: int


@dataclass(frozen=True)
class HistogramBucket:
    """``events``: the day's events whose arrival delay (arrival - event time) falls in
    ``[lo, hi)`` seconds; ``late_events``: late side-output rows that far past their close."""

    lo_seconds: int
    hi_seconds: int | None
    events: int
    late_events: int

    @property
    def label(self) -> str:
        return f"{self.lo_seconds}s+" if self.hi_seconds is None else \
            f"{self.lo_seconds}-{self.hi_seconds}s"


@dataclass(frozen=True)
class WatermarkPoint:
    """After ``batch_id``: the global watermark (``partition`` None) or one partition's
    largest event time minus the lateness bound; ``idle``: the partition had gone idle then
    (the min rule left it out)."""

    batch_id: int
    processed_at: datetime
    partition: int | None
    watermark: datetime | None
    idle: bool = False
    #: global points only: the input holding the watermark back after the batch, and by how
    #: many seconds the watermark would be further without it (None on a table from before
    #: watermark_progress recorded them)
    held_by: str | None = None
    held_back_seconds: Decimal | None = None


@dataclass(frozen=True)
class QualitySummary:
    """The day's current check run as recorded, with its verdicts (reckon.quality_verdict's
    words; a run recorded before they were kept says ``passed``/``FAILED`` and no suite)."""

    run_id: str
    success: bool
    blocking_failures: int
    warnings: int
    suites: int
    expectations: int
    verdict: str = ""
    suite_verdicts: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.verdict:  # a run recorded before verdicts were kept
            object.__setattr__(self, "verdict", "passed" if self.success else "FAILED")

    @classmethod
    def of(cls, check: Any) -> QualitySummary:
        """From a recorded ``audits.records.CheckRun``."""
        return cls(check.run_id, check.success, check.blocking_failures, check.warnings,
                   check.suites, check.expectations,
                   verdict=check.verdict,
                   suite_verdicts=tuple(sorted(check.suite_verdicts.items())))


@dataclass(frozen=True)
class Signoff:
    """One decision of the sign-off log on an audit run of the report's day."""

    run_id: str
    decision: str
    by: str
    at: datetime
    gap_totals: dict[str, Decimal]  # the figures of the run it was made on: currency -> gap
    unexplained: int


@dataclass(frozen=True)
class ReportContext:
    day: date
    audit_run_id: str
    audit_kind: str
    audit_started_at: datetime
    reconciler: str
    configuration: tuple[tuple[str, str], ...]
    table_versions: tuple[tuple[str, int], ...]
    headline: Headline
    status_counts: tuple[tuple[str, int], ...]     # every ReconStatus, in its order (all
                                                   # currencies; per currency: headline)
    breaks: tuple[BreakLine, ...]                  # capped at breaks_cap
    breaks_total: int
    attribution: tuple[AttributionRow, ...] = ()
    gap_series: tuple[GapPoint, ...] = ()
    gap_bucket_seconds: int = 0
    lateness_histogram: tuple[HistogramBucket, ...] = ()
    lateness_curve: tuple[CurveLine, ...] = ()     # per event, as if every event moved the WM
    # per micro-batch, as the stream ran (audits.bound_whatif_batches): at the configured bound,
    # what the stream did; empty with ``batch_curve_note`` saying why when it cannot be had
    lateness_curve_batches: tuple[CurveLine, ...] = ()
    batch_curve_note: str | None = None
    configured_bound_seconds: Decimal | None = None
    recommended_bound_seconds: Decimal | None = None
    target_completeness: Decimal | None = None
    watermark_series: tuple[WatermarkPoint, ...] = ()
    # a bound per source against the best single bound (audits.bound_whatif.analyze_inputs):
    # None when the day's log has one source or no events
    per_source: PerInputRecommendation | None = None
    # the same comparison per micro-batch: the day's batches as the stream ran them replayed
    # under each compared policy (audits.bound_whatif_batches.per_source_batches), by the row it
    # belongs to (audits.bound_whatif_batches.PER_SOURCE_ROWS), the stream's own last; empty with
    # ``per_source_batches_note`` saying why when they cannot be had
    per_source_batches: tuple[tuple[str, CurveLine], ...] = ()
    per_source_batches_note: str | None = None
    configured_policy: str | None = None            # describe() of the policy the day ran with
    # the run was recorded without its what-ifs (before they were recorded with the run): the
    # one line the what-if sections show instead of them (``whatif_fields``)
    whatif_note: str | None = None
    quality: QualitySummary | None = None
    data_docs: str | None = None                   # file path of the GX Data Docs index
    signoffs: tuple[Signoff, ...] = ()             # decisions on this run, oldest first
    # the last sign-off of an earlier run of the day, when this run (which replaced it, e.g.
    # the nightly lookback's re-audit) has none yet: the day needs signing off again
    superseded_signoff: Signoff | None = None
    # that earlier run's review state as it stands (a re-audit leaves it as it was)
    superseded_review: ReviewState | None = None
    required_approvers: int = 1                    # reckon.signoff.review_state's ``required``
    # the material_gap setting (reckon.materiality): (code, minimum absolute gap); empty: off
    material_gap: tuple[tuple[str, Decimal], ...] = ()
    all_breaks: tuple[BreakLine, ...] = field(default=(), repr=False)  # for breaks.csv
    breaks_cap: int = BREAKS_CAP
    # the warehouse's event-time spec versions (storage.spec_log), oldest first, described
    spec_versions: tuple[str, ...] = ()

    @property
    def breaks_shown(self) -> int:
        return len(self.breaks)


def headline_from_run(run: AuditRun) -> Headline:
    """The headline of ``run``. A run with rows but no per-currency figures was recorded
    before they existed (its totals added currencies together and were dropped by the report
    DB's migration 0004): LayoutError, never a headline with made-up figures."""
    if run.rows and not run.currencies:
        raise LayoutError(
            f"audit run {run.run_id} of {run.day} was recorded before money was kept per "
            f"currency and has no per-currency figures to report: re-audit the day "
            f"(`reckon audit --date {run.day}`), then render the report again")
    return Headline(run.rows, run.unexplained, run.completeness, tuple(run.currencies))


def _utc(moment: datetime) -> datetime:
    return from_micros(to_micros(moment))


def _dec(value: Any) -> Decimal:
    return _ZERO if value is None else Decimal(value)


# ---------------------------------------------------------------------------- DuckDB reads
# The warehouse's small aggregates, read through DuckDB over the Delta tables (delta-rs,
# reports.duck): a report reads, it never needs a JVM. Orders are Spark's (ascending: nulls
# first), amounts stay DECIMAL(38, 3) (Decimal, never a float), times are UTC microseconds.
# tests/test_report_render.py compares each piece with the same figures computed by Spark.


class _Reads:
    """One locked DuckDB connection over the report's tables of ``warehouse`` (those that
    exist). Only reads: the what-ifs were computed and recorded with the audit run."""

    def __init__(self, warehouse: Path) -> None:
        from reports.duck import TableRef, _load, connect, lock

        self.conn = connect()
        self.present = {t for t in _READ if tb.table_exists(warehouse, t)}
        for name in sorted(self.present):
            self.conn.register(name, _load(warehouse, TableRef(name=name)))
        lock(self.conn)

    def rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """The rows of ``sql`` as dicts; every value is a bound parameter."""
        cursor = self.conn.execute(sql, params)
        names = [d[0] for d in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def columns(self, table: str) -> set[str]:
        return set(self.conn.table(table).columns)  # a registered view: no SQL text built


_READ = (tb.RECONCILIATION, tb.EVENT_LOG, tb.LATE_EVENTS, tb.WATERMARK_PROGRESS)
_RUN_ROWS = f"FROM {tb.RECONCILIATION} WHERE window_date = ? AND audit_run_id = ?"


def _recon_day(reads: _Reads, day: date, run: AuditRun) -> bool:
    """Whether the day has reconciliation rows of ``run``, the run the report's headline and
    breaks come from. Another audit of the day (an ad hoc run, a late retry) replaces the
    day's rows; the report then refuses to mix two runs' figures and says what to re-run."""
    if tb.RECONCILIATION not in reads.present:
        return False
    if run.rows and not reads.rows(f"SELECT 1 AS one {_RUN_ROWS} LIMIT 1", [day, run.run_id]):
        other = reads.rows(f"SELECT audit_run_id FROM {tb.RECONCILIATION} "
                           "WHERE window_date = ? LIMIT 1", [day])
        now = f"audit run {other[0]['audit_run_id']}" if other else "no audit run"
        raise UsageError(
            f"--date={day.isoformat()!r}: the day's reconciliation rows now belong to {now}, "
            f"not to the current {run.kind} run {run.run_id} the report describes; re-run "
            f"`reckon audit --date {day} --kind {run.kind}` so the rows and the run agree")
    return True


def _gap_series(reads: _Reads, day: date, run: AuditRun, window_us: int, currencies: int
                ) -> tuple[tuple[GapPoint, ...], int]:
    """Reconciliation rows of the run's day in at most GAP_POINTS buckets, each a whole
    number of windows wide, summed per (bucket, currency): one series per currency, never a
    sum of two currencies. ``currencies``: how many the run has (bounds the rows read)."""
    if not _recon_day(reads, day, run):
        return (), 0
    (span,) = reads.rows(f"SELECT min(epoch_us(window_start)) AS lo, "
                         f"max(epoch_us(window_start)) AS hi {_RUN_ROWS}", [day, run.run_id])
    if span["lo"] is None:
        return (), 0
    lo = int(span["lo"])
    windows = (int(span["hi"]) - lo) // window_us + 1
    width = -(-windows // GAP_POINTS) * window_us
    unexplained = [s.value for s in UNEXPLAINED_STATUSES]
    total = "CAST(0 AS DECIMAL(38, 3))"
    rows = reads.rows(f"""
        SELECT currency, (epoch_us(window_start) - ?) // ? * ? + ? AS b, count(*) AS n,
               sum(coalesce(provisional_amount, {total})) AS p,
               sum(coalesce(canonical_amount, {total})) AS c, sum(gap_amount) AS gap,
               sum(late_amount) AS late, sum(residual_amount) AS res,
               sum(CASE WHEN status IN ({", ".join("?" * len(unexplained))}) THEN 1 ELSE 0 END)
                 AS u
        {_RUN_ROWS} GROUP BY ALL ORDER BY currency NULLS FIRST, b NULLS FIRST LIMIT ?""",
                      [lo, width, width, lo, *unexplained, day, run.run_id,
                       (GAP_POINTS + 1) * max(currencies, 1)])
    return tuple(GapPoint(from_micros(r["b"]), r["currency"], int(r["n"]), _dec(r["p"]),
                          _dec(r["c"]), _dec(r["gap"]), _dec(r["late"]), _dec(r["res"]),
                          int(r["u"])) for r in rows), width // MICROS_PER_SECOND


def _bucket_sql(seconds: str) -> str:
    """The LATENESS_BUCKETS edge ``seconds`` falls in: the largest edge it reaches, else the
    first (below 0: clock skew, or unknown: null)."""
    whens = " ".join(f"WHEN {seconds} >= {edge} THEN {edge}"
                     for edge in reversed(LATENESS_BUCKETS[1:]))
    return f"CASE {whens} ELSE {LATENESS_BUCKETS[0]} END"


def _histogram(reads: _Reads, day: date) -> tuple[HistogramBucket, ...]:
    """The day's events (not flagged duplicates) by arrival delay, and its late side-output
    rows by how far past their window's close they came, in LATENESS_BUCKETS."""
    events: dict[int, int] = {}
    late: dict[int, int] = {}
    if tb.EVENT_LOG in reads.present:
        delay = f"(epoch_us(arrival_time) - epoch_us(event_time)) / {MICROS_PER_SECOND}"
        events = {r["b"]: r["n"] for r in reads.rows(
            f"SELECT {_bucket_sql(delay)} AS b, count(*) AS n FROM {tb.EVENT_LOG} "
            "WHERE event_date = ? AND NOT coalesce(is_duplicate, false) GROUP BY ALL", [day])}
    if tb.LATE_EVENTS in reads.present:
        late = {r["b"]: r["n"] for r in reads.rows(
            f"SELECT {_bucket_sql('lateness_seconds')} AS b, count(*) AS n "
            f"FROM {tb.LATE_EVENTS} WHERE window_date = ? GROUP BY ALL", [day])}
    edges = list(LATENESS_BUCKETS)
    return tuple(HistogramBucket(lo, edges[i + 1] if i + 1 < len(edges) else None,
                                 int(events.get(lo, 0)), int(late.get(lo, 0)))
                 for i, lo in enumerate(edges))


def _watermarks(reads: _Reads, rules: EventTimeRules, day: date
                ) -> tuple[WatermarkPoint, ...]:
    """Batches whose watermark lies in the day, up to the first that closed it (passed the end
    of its last window plus the allowed lateness: ``EventTimeRules.day_final_at``), sampled evenly to at
    most WATERMARK_POINTS batches; per partition: max event time - the partition's bound
    (``rules.watermark.bound``); the global point says which input held the watermark back."""
    if tb.WATERMARK_PROGRESS not in reads.present:
        return ()
    progress, wm = tb.WATERMARK_PROGRESS, "epoch_us(watermark)"
    required = rules.day_final_at(day)
    (closing,) = reads.rows(f"SELECT min({wm}) AS at FROM {progress} WHERE {wm} >= ?",
                            [required])
    upper, bound = (f"{wm} < ?", required) if closing["at"] is None else \
        (f"{wm} <= ?", int(closing["at"]))
    rows = f"SELECT * FROM {progress} WHERE {wm} >= ? AND {upper}"
    params = [day_bounds(day)[0], bound]
    (count,) = reads.rows(f"SELECT count(*) AS n FROM ({rows})", params)
    n = int(count["n"])
    if n == 0:
        return ()
    step = -(-n // WATERMARK_POINTS)
    have = reads.columns(progress)
    held = ", ".join(c if c in have else f"NULL AS {c}" for c in ("held_by", "held_back_seconds"))
    picked = reads.rows(f"""
        SELECT batch_id, epoch_us(processed_at) AS at_us, {wm} AS wm, {held},
               list_transform(map_entries(partition_max_event_time),
                              lambda e: [CAST(e.key AS BIGINT), epoch_us(e.value)]) AS parts,
               idle_partitions AS idle
        FROM (SELECT *, row_number() OVER (ORDER BY processed_at ASC NULLS FIRST,
                                                    batch_id ASC NULLS FIRST) AS _i
              FROM ({rows}))
        WHERE (_i - 1) % ? = 0 OR _i = ?
        ORDER BY at_us NULLS FIRST, batch_id NULLS FIRST LIMIT ?""",
                        [*params, step, n, WATERMARK_POINTS + 1])
    return tuple(point for r in picked for point in _batch_points(r, rules))


def _batch_points(r: dict[str, Any], rules: EventTimeRules) -> list[WatermarkPoint]:
    """One sampled batch: its global point, then one per partition in partition order."""
    at = from_micros(r["at_us"])
    idle = set(r["idle"] or ())
    out = [WatermarkPoint(
        r["batch_id"], at, None, None if r["wm"] is None else from_micros(r["wm"]),
        held_by=r["held_by"],
        held_back_seconds=None if r["held_back_seconds"] is None
        else Decimal(r["held_back_seconds"]))]
    for partition, max_us in sorted(r["parts"] or [], key=lambda e: e[0]):
        out.append(WatermarkPoint(r["batch_id"], at, int(partition),
                                  from_micros(max_us - rules.watermark.bound(int(partition))),
                                  idle=int(partition) in idle))
    return out


def _signoffs(db: Any, run: AuditRun) -> tuple[tuple[Signoff, ...], Signoff | None]:
    """The decisions on ``run``, and the last sign-off of an earlier run of its day and kind
    when ``run`` has none: a re-audit replaced a run finance had signed off."""
    raw = db.signoffs_of_day(run.day, run.kind)
    entries = [Signoff(e["run_id"], e["decision"], e["by"], _utc(e["at"]),
                       {code: Decimal(gap) for code, gap in sorted(e["gap_totals"].items())},
                       int(e["unexplained"])) for e in raw
               if e["decision"] in DECISIONS]  # break actions, exports: not decisions
    own = tuple(e for e in entries if e.run_id == run.run_id)
    started = {e["run_id"]: _utc(e["started_at"]) for e in raw}
    started[run.run_id] = _utc(run.started_at)
    return own, replaced_signoff(entries, run.run_id, started)


def review_fields(db: Any, run: AuditRun, required_approvers: int) -> dict[str, Any]:
    """What the report says of the run's review, read from the report database (no Spark):
    the decisions on it, and when a re-audit replaced a signed run, that run's last sign-off
    and its review state as it stands (reckon.signoff.review_state, through
    reports.review.review_states). ``ReportContext`` fields, by name.

    Example: ``replace(ctx, **review_fields(db, db.get_audit_run(run_id), 2))``."""
    from reports.review_state import review_states

    signoffs, superseded = _signoffs(db, run)
    superseded_review = None if superseded is None else review_states(
        db, [superseded.run_id], required_approvers).get(superseded.run_id)
    return {"signoffs": signoffs, "superseded_signoff": superseded,
            "superseded_review": superseded_review, "required_approvers": required_approvers}


def whatif_note(day: date) -> str:
    """The one line a report shows for what-ifs its audit run was recorded without.

    >>> whatif_note(date(2026, 1, 1))
    'Not recorded with this audit run; re-run `reckon audit --date 2026-01-01` to record it.'
    """
    return (f"Not recorded with this audit run; re-run `reckon audit --date {day.isoformat()}` "
            "to record it.")


def whatif_fields(whatif: DayWhatIf | None, run: AuditRun) -> dict[str, Any]:
    """The ``ReportContext`` fields of the what-ifs recorded with ``run`` (read, never
    computed here: audits/day_whatif.py computed them when the run was recorded), by name;
    for a run recorded without them, none but ``whatif_note``, the line saying so.

    Example: ``replace(ctx, **whatif_fields(db.audit_whatif(run.run_id), run))``."""
    if whatif is None:
        return {"whatif_note": whatif_note(run.day)}
    return {"lateness_curve": whatif.curve, "lateness_curve_batches": whatif.batch_curve,
            "batch_curve_note": whatif.batch_curve_note,
            "configured_bound_seconds": whatif.configured_bound_seconds,
            "recommended_bound_seconds": whatif.recommended_bound_seconds,
            "target_completeness": whatif.target_completeness,
            "per_source": whatif.per_source, "per_source_batches": whatif.per_source_batches,
            "per_source_batches_note": whatif.per_source_batches_note,
            "configured_policy": whatif.configured_policy}


def _breaks(db: Any, run: AuditRun) -> tuple[BreakLine, ...]:
    """Every break of the run with its review status and age (whole days from the break's
    first sighting to the run's start, so a re-render of the run gives the same figures),
    ordered by window, key, then currency (a break's identity)."""
    reviews = {(_utc(b["window_start"]), b["key"], b["currency"]): b
               for b in db.list_breaks(run.day, now=_utc(run.started_at))
               if b.get("run_id") == run.run_id}
    lines = []
    for b in db.breaks(run.run_id):
        review = reviews.get((_utc(b.window_start), b.key, b.currency), {})
        lines.append(BreakLine(
            _utc(b.window_start), _utc(b.window_end), b.key, b.currency, b.status,
            b.provisional_amount, b.canonical_amount, b.gap_amount, b.gap_count,
            b.late_amount, b.duplicate_amount, b.residual_amount, b.explanation,
            str(review.get("review_status") or "open"), review.get("age_days")))
    lines.sort(key=lambda b: (b.window_start, b.key, b.currency))
    return tuple(lines)


def build_context(config: ReportConfig, day: date, *,
                  breaks_cap: int = BREAKS_CAP) -> ReportContext:
    """Everything the report of ``day`` shows, from the current audit run of the day in the
    report database (its figures, breaks, attribution and the lateness what-ifs recorded with
    it: none is computed here) and small aggregates of the warehouse's Delta tables, read
    through DuckDB (no JVM: a report only reads).

    Example: ``build_context(settings.report_config(), date(2026, 1, 1)).audit_run_id``.
    """
    from audits.datadocs import data_docs_dir
    from reports.db.repository import ReportDB
    from storage.spec_log import recorded_versions

    db = ReportDB.from_settings(config)  # the database at config.report_db
    run = db.current_audit_run(day)
    if run is None:
        raise UsageError(f"--date={day.isoformat()!r} is not valid: no audit run of that day in "
                         f"the report database (run `reckon audit --date {day}` first)")
    whatif = config.whatif
    warehouse, rules = whatif.warehouse, whatif.rules
    params = {**dict(config.shown), **run.params}
    headline = headline_from_run(run)  # refuses a run without per-currency figures, first
    reads = _Reads(warehouse)
    gap, width = _gap_series(reads, day, run, rules.windows.step, len(headline.currencies))
    all_breaks = _breaks(db, run)
    check = db.current_check_run(day)
    docs = data_docs_dir(warehouse) / "index.html"
    return ReportContext(
        day=day, audit_run_id=run.run_id, audit_kind=run.kind,
        audit_started_at=_utc(run.started_at), reconciler=run.reconciler,
        configuration=tuple((k, _config_text(params[k])) for k in sorted(params)),
        table_versions=tuple(sorted((k, int(v)) for k, v in run.table_versions.items())),
        headline=headline,
        status_counts=tuple((s.value, int(run.status_counts.get(s.value, 0)))
                            for s in ReconStatus),
        breaks=all_breaks[:breaks_cap], breaks_total=len(all_breaks),
        attribution=tuple(db.attribution(run.run_id)), gap_series=gap,
        gap_bucket_seconds=width, lateness_histogram=_histogram(reads, day),
        **whatif_fields(db.audit_whatif(run.run_id), run),
        watermark_series=_watermarks(reads, rules, day),
        quality=None if check is None else QualitySummary.of(check),
        data_docs=str(docs) if docs.is_file() else None,
        **review_fields(db, run, config.required_approvers),
        all_breaks=all_breaks, breaks_cap=breaks_cap,
        material_gap=tuple(sorted(run_rule(run.material_gap,
                                           dict(config.material_gap)).items())),
        spec_versions=tuple(v.describe() for v in recorded_versions(warehouse)))


def _config_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or "-"
    if value is None or value == "":
        return "-"
    return str(value)

