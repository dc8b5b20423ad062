"""The typed context a day's report is rendered from, and how it is built from the warehouse.

The renderer (reports/render.py) sees only a ``ReportContext``: frozen values, exact Decimals,
aware UTC datetimes, series already reduced to a few hundred points. ``build_context`` is the
only place that touches Spark and the report database, and it reads small aggregates only
(groupBy / limit; never a whole table to the driver). Sections follow what reviewers read
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

from audits.records import AttributionRow, AuditRun, CurrencySummary
from reckon.engine_config import ReportConfig, WhatIfConfig
from reckon.errors import LayoutError, UsageError
from reckon.eventtime import EventTimeRules
from reckon.materiality import run_rule
from reckon.money import money_context
from reckon.reconcile import UNEXPLAINED_STATUSES, ReconStatus
from reckon.signoff import DECISIONS, ReviewState, replaced_signoff
from reckon.timeutil import MICROS_PER_SECOND, day_bounds, from_micros, to_micros
from reckon.whatif_inputs import PerInputRecommendation

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
class CurveLine:
    bound_seconds: Decimal
    completeness: float      # a ratio for choosing a bound, never money
    admitted: int
    dropped: int
    avg_emit_latency: float | None


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
    # per micro-batch, as the stream ran (audits.lateness_batches): at the configured bound,
    # what the stream did; empty with ``batch_curve_note`` saying why when it cannot be had
    lateness_curve_batches: tuple[CurveLine, ...] = ()
    batch_curve_note: str | None = None
    configured_bound_seconds: Decimal | None = None
    recommended_bound_seconds: Decimal | None = None
    target_completeness: Decimal | None = None
    watermark_series: tuple[WatermarkPoint, ...] = ()
    # a bound per source against the best single bound (audits.lateness.analyze_inputs):
    # None when the day's log has one source or no events
    per_source: PerInputRecommendation | None = None
    # the same comparison per micro-batch: the day's batches as the stream ran them replayed
    # under each compared policy (audits.lateness_batches.per_source_batches), by the row it
    # belongs to (audits.lateness_batches.PER_SOURCE_ROWS), the stream's own last; empty with
    # ``per_source_batches_note`` saying why when they cannot be had
    per_source_batches: tuple[tuple[str, CurveLine], ...] = ()
    per_source_batches_note: str | None = None
    configured_policy: str | None = None            # describe() of the policy the day ran with
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
    # the warehouse's event-time spec versions (spark.spec), oldest first, described
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


# ----------------------------------------------------------------------------- Spark reads


def _recon_day(spark: Any, wh: Path, day: date, run: AuditRun) -> Any:
    """The day's reconciliation rows written by ``run``, the run the report's headline and
    breaks come from. Another audit of the day (an ad hoc run, a late retry) replaces the
    day's rows; the report then refuses to mix two runs' figures and says what to re-run."""
    from pyspark.sql import functions as F

    from spark import tables as tb

    if not tb.table_exists(wh, tb.RECONCILIATION):
        return None
    day_rows = (tb.read_table(spark, wh, tb.RECONCILIATION)
                .filter(F.col("window_date") == F.lit(day)))
    rows = day_rows.filter(F.col("audit_run_id") == F.lit(run.run_id))
    if run.rows and not rows.limit(1).count():
        other = [r.audit_run_id for r in day_rows.select("audit_run_id").limit(1).collect()]
        now = f"audit run {other[0]}" if other else "no audit run"
        raise UsageError(
            f"--date={day.isoformat()!r}: the day's reconciliation rows now belong to {now}, "
            f"not to the current {run.kind} run {run.run_id} the report describes; re-run "
            f"`reckon audit --date {day} --kind {run.kind}` so the rows and the run agree")
    return rows


def _gap_series(recon: Any, window_us: int, currencies: int
                ) -> tuple[tuple[GapPoint, ...], int]:
    """Reconciliation rows of the day in at most GAP_POINTS buckets, each a whole number of
    windows wide, summed per (bucket, currency): one series per currency, never a sum of
    two currencies. ``currencies``: how many the run has (bounds the rows collected)."""
    from pyspark.sql import functions as F

    if recon is None:
        return (), 0
    span = recon.agg(F.min(F.unix_micros("window_start")).alias("lo"),
                     F.max(F.unix_micros("window_start")).alias("hi")).collect()[0]
    if span.lo is None:
        return (), 0
    windows = (span.hi - span.lo) // window_us + 1
    per_bucket = -(-windows // GAP_POINTS)
    width = per_bucket * window_us
    bucket = (F.floor((F.unix_micros("window_start") - F.lit(span.lo)) / F.lit(width))
              * F.lit(width) + F.lit(span.lo)).cast("long")
    unexplained = F.col("status").isin(*[s.value for s in UNEXPLAINED_STATUSES])
    rows = (recon.groupBy("currency", bucket.alias("b"))
            .agg(F.count(F.lit(1)).alias("n"),
                 F.sum(F.coalesce("provisional_amount", F.lit(_ZERO))).alias("p"),
                 F.sum(F.coalesce("canonical_amount", F.lit(_ZERO))).alias("c"),
                 F.sum("gap_amount").alias("gap"), F.sum("late_amount").alias("late"),
                 F.sum("residual_amount").alias("res"),
                 F.sum(F.when(unexplained, 1).otherwise(0)).alias("u"))
            .orderBy("currency", "b").limit((GAP_POINTS + 1) * max(currencies, 1)).collect())
    return tuple(GapPoint(from_micros(r.b), r.currency, r.n, _dec(r.p), _dec(r.c), _dec(r.gap),
                          _dec(r.late), _dec(r.res), int(r.u)) for r in rows), \
        width // MICROS_PER_SECOND


def _bucket_col(seconds: Any) -> Any:
    from pyspark.sql import functions as F

    expr = F.lit(LATENESS_BUCKETS[0])
    for edge in LATENESS_BUCKETS[1:]:
        expr = F.when(seconds >= F.lit(edge), F.lit(edge)).otherwise(expr)
    return expr


def _histogram(spark: Any, wh: Path, day: date) -> tuple[HistogramBucket, ...]:
    from pyspark.sql import functions as F

    from spark import tables as tb

    events: dict[int, int] = {}
    late: dict[int, int] = {}
    if tb.table_exists(wh, tb.EVENT_LOG):
        delay = (F.unix_micros("arrival_time") - F.unix_micros("event_time")) / F.lit(
            MICROS_PER_SECOND)
        events = {r.b: r.n for r in (
            tb.read_table(spark, wh, tb.EVENT_LOG)
            .filter((F.col("event_date") == F.lit(day))
                    & ~F.coalesce(F.col("is_duplicate"), F.lit(False)))
            .groupBy(_bucket_col(delay).alias("b")).agg(F.count(F.lit(1)).alias("n"))
            .collect())}
    if tb.table_exists(wh, tb.LATE_EVENTS):
        late = {r.b: r.n for r in (
            tb.read_table(spark, wh, tb.LATE_EVENTS)
            .filter(F.col("window_date") == F.lit(day))
            .groupBy(_bucket_col(F.col("lateness_seconds")).alias("b"))
            .agg(F.count(F.lit(1)).alias("n")).collect())}
    edges = list(LATENESS_BUCKETS)
    return tuple(HistogramBucket(lo, edges[i + 1] if i + 1 < len(edges) else None,
                                 int(events.get(lo, 0)), int(late.get(lo, 0)))
                 for i, lo in enumerate(edges))


def _curve(spark: Any, whatif: WhatIfConfig, day: date
           ) -> tuple[tuple[CurveLine, ...], Decimal | None, Decimal | None, Decimal | None]:
    try:
        from audits.lateness import analyze_day
    except ImportError:  # the lateness analysis has not landed: the report goes without it
        return (), None, None, None
    try:
        analysis = analyze_day(spark, whatif, day)
    except UsageError:  # no events that day
        return (), None, None, None

    points = tuple(CurveLine(_seconds(p.bound), p.completeness, p.admitted, p.dropped,
                             p.avg_emit_latency) for p in analysis.points)
    rec = None if analysis.recommended is None else _seconds(analysis.recommended.bound)
    return points, _seconds(analysis.configured_bound), rec, analysis.target


def _per_source(spark: Any, whatif: WhatIfConfig, day: date) -> PerInputRecommendation | None:
    """Bounds per source for the day (issue 41), or None for a day of one source or none."""
    from audits.lateness import analyze_inputs

    try:
        rec = analyze_inputs(spark, whatif, day)
    except UsageError:  # no events that day
        return None
    return rec if len(rec.bounds) > 1 else None


def _per_source_batches(spark: Any, whatif: WhatIfConfig, day: date,
                        rec: PerInputRecommendation | None
                        ) -> tuple[tuple[tuple[str, CurveLine], ...], str | None, str]:
    """The per-source comparison per micro-batch (audits.lateness_batches), or nothing and
    the one line that says why; and the policy its "the stream as configured" row is: the
    one the day's batches ran with (``whatif_of_day``), not a spec changed since."""
    from audits.lateness_batches import per_source_batches, whatif_of_day

    if rec is None:
        return (), None, whatif.rules.watermark.describe()
    ran = whatif_of_day(spark, whatif, day)
    points, why_not = per_source_batches(spark, ran, day, rec)
    return (tuple((name, CurveLine(_seconds(p.bound), p.completeness, p.admitted, p.dropped,
                                   p.avg_emit_latency)) for name, p in points.items()),
            why_not, ran.rules.watermark.describe())


def _batch_curve(spark: Any, whatif: WhatIfConfig, day: date
                 ) -> tuple[tuple[CurveLine, ...], str | None]:
    """The per-batch what-if (audits.lateness_batches), or no points and the one line that
    says why (no archived events that day, batches of several stream queries)."""
    from audits.lateness_batches import analyze_day_batches

    try:
        curve = analyze_day_batches(spark, whatif, day)
    except UsageError as exc:
        return (), str(exc)
    return tuple(CurveLine(_seconds(p.bound), p.completeness, p.admitted, p.dropped,
                           p.avg_emit_latency) for p in curve.points), None


def _seconds(us: int) -> Decimal:
    """Microseconds as exact seconds without trailing zeros: 3000000 -> Decimal('3')."""
    return (Decimal(us) / Decimal(MICROS_PER_SECOND)).normalize() + Decimal(0)


def _watermarks(spark: Any, wh: Path, rules: EventTimeRules, day: date
                ) -> tuple[WatermarkPoint, ...]:
    """Batches whose watermark lies in the day, up to the first that closed it (passed the end
    of its last window plus grace: ``EventTimeRules.day_final_at``), sampled evenly to at
    most WATERMARK_POINTS batches; per partition: max event time - the partition's bound
    (``rules.watermark.bound``); the global point says which input held the watermark back."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from spark import tables as tb

    policy = rules.watermark
    if not tb.table_exists(wh, tb.WATERMARK_PROGRESS):
        return ()
    d0, _ = day_bounds(day)
    wm = F.col("watermark")
    progress = tb.read_table(spark, wh, tb.WATERMARK_PROGRESS)
    required = F.timestamp_micros(F.lit(rules.day_final_at(day)))
    closing = progress.filter(wm >= required).agg(F.min("watermark").alias("at")).first()
    upper = (wm < required) if closing is None or closing.at is None else (wm <= F.lit(closing.at))
    rows = progress.filter((wm >= F.timestamp_micros(F.lit(d0))) & upper)
    n = rows.count()
    if n == 0:
        return ()
    step = -(-n // WATERMARK_POINTS)
    numbered = rows.withColumn("_i", F.row_number().over(
        Window.orderBy("processed_at", "batch_id")))
    picked = (numbered.filter(((F.col("_i") - 1) % F.lit(step) == 0) | (F.col("_i") == F.lit(n)))
              .select("batch_id", F.unix_micros("processed_at").alias("at"),
                      F.unix_micros("watermark").alias("wm"),
                      F.map_entries("partition_max_event_time").alias("parts"),
                      F.col("idle_partitions").alias("idle"),
                      *[(F.col(c) if c in progress.columns else F.lit(None)).alias(c)
                        for c in ("held_by", "held_back_seconds")])
              .orderBy("at", "batch_id").limit(WATERMARK_POINTS + 1).collect())
    out: list[WatermarkPoint] = []
    for r in picked:
        at = from_micros(r.at)
        out.append(WatermarkPoint(
            r.batch_id, at, None, None if r.wm is None else from_micros(r.wm),
            held_by=r.held_by,
            held_back_seconds=None if r.held_back_seconds is None
            else Decimal(r.held_back_seconds)))
        for entry in sorted(r.parts or [], key=lambda e: e[0]):
            partition = int(entry[0])
            out.append(WatermarkPoint(r.batch_id, at, partition,
                                      from_micros(to_micros(entry[1]) - policy.bound(partition)),
                                      idle=partition in set(r.idle or ())))
    return tuple(out)


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


def build_context(spark: Any, config: ReportConfig, day: date, *,
                  breaks_cap: int = BREAKS_CAP) -> ReportContext:
    """Everything the report of ``day`` shows, from the current audit run of the day in the
    report database and small aggregates of the warehouse's Delta tables.

    Example: ``build_context(spark, settings.report_config(), date(2026, 1, 1)).audit_run_id``.
    """
    from reports.db.repository import ReportDB
    from spark.spec import recorded_versions

    db = ReportDB.from_settings(config)  # the database at config.report_db
    run = db.current_audit_run(day)
    if run is None:
        raise UsageError(f"--date={day.isoformat()!r} is not valid: no audit run of that day in "
                         f"the report database (run `reckon audit --date {day}` first)")
    whatif = config.whatif
    warehouse, rules = whatif.warehouse, whatif.rules
    params = {**dict(config.shown), **run.params}
    configuration = tuple((k, _config_text(params[k])) for k in sorted(params))
    headline = headline_from_run(run)  # refuses a run without per-currency figures, first
    recon = _recon_day(spark, warehouse, day, run)
    all_breaks = _breaks(db, run)
    gap, width = _gap_series(recon, rules.windows.step, len(headline.currencies))
    curve, configured, recommended, target = _curve(spark, whatif, day)
    batch_curve, batch_note = _batch_curve(spark, whatif, day)
    per_source = _per_source(spark, whatif, day)
    per_source_batches, per_source_note, ran_policy = _per_source_batches(spark, whatif, day,
                                                                          per_source)
    check = db.current_check_run(day)
    quality = None if check is None else QualitySummary.of(check)
    docs: Path | None = None
    try:
        from audits.quality import data_docs_dir

        docs = data_docs_dir(warehouse) / "index.html"
    except ImportError:
        docs = warehouse / "reports" / "data_docs" / "index.html"
    statuses = tuple((s.value, int(run.status_counts.get(s.value, 0))) for s in ReconStatus)
    return ReportContext(
        day=day, audit_run_id=run.run_id, audit_kind=run.kind,
        audit_started_at=_utc(run.started_at), reconciler=run.reconciler,
        configuration=configuration,
        table_versions=tuple(sorted((k, int(v)) for k, v in run.table_versions.items())),
        headline=headline, status_counts=statuses, breaks=all_breaks[:breaks_cap],
        breaks_total=len(all_breaks),
        attribution=tuple(db.attribution(run.run_id)), gap_series=gap,
        gap_bucket_seconds=width,
        lateness_histogram=_histogram(spark, warehouse, day),
        lateness_curve=curve, lateness_curve_batches=batch_curve, per_source=per_source,
        per_source_batches=per_source_batches, per_source_batches_note=per_source_note,
        configured_policy=ran_policy,
        batch_curve_note=batch_note, configured_bound_seconds=configured,
        recommended_bound_seconds=recommended, target_completeness=target,
        watermark_series=_watermarks(spark, warehouse, rules, day),
        quality=quality, data_docs=str(docs) if docs.is_file() else None,
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

