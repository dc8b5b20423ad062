"""The records the audits produce: a run, its breaks and their stories, who is late, a
data-quality check and its expectations. The report database stores them and the report
renders them (reports/ imports them from here, never the other way: the audits hand them to
a writer the caller gives them, audits/ledger.py).

Plain frozen dataclasses, one per row kind, so the audit, the data-quality checks, the report
and the database agree on fields. Money is ``Decimal`` (exact)
and always comes with its currency: every amount here is per currency, never a sum across
currencies (event counts may be added). Times are aware UTC datetimes, days are ``date`` (UTC).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

__all__ = [
    "AttributionRow",
    "AuditRun",
    "BreakInput",
    "BreakRow",
    "BreakStory",
    "CheckRun",
    "CurrencySummary",
    "ExpectationResult",
]


@dataclass(frozen=True)
class CurrencySummary:
    """One currency's figures in one audit run: its rows per status and its exact sums.
    ``gap = late - duplicate + residual`` holds per currency; ``tolerated`` is the part of
    the residual that a tolerance let pass on EXPLAINED rows (0 without a tolerance)."""

    currency: str
    rows: int                          # (window, key) rows of this currency
    status_counts: dict[str, int]      # ReconStatus value -> rows
    unexplained: int                   # rows in UNEXPLAINED_STATUSES
    provisional_total: Decimal
    canonical_total: Decimal
    gap_total: Decimal
    late_total: Decimal
    duplicate_total: Decimal
    residual_total: Decimal
    tolerated_total: Decimal
    provisional_events: int
    canonical_events: int
    late_events: int
    duplicate_events: int
    completeness: Decimal | None = None  # share of canonical events the stream counted once


@dataclass(frozen=True)
class AuditRun:
    """One reconciliation of one day. ``is_current`` is managed by the database: the newest
    run of a (day, kind) is current, earlier ones stay as history."""

    run_id: str
    day: date
    kind: str                          # 'nightly', 'adhoc', 'backfill', ...
    started_at: datetime
    duration_seconds: float
    reconciler: str                    # who ran it; may not sign it off
    params: dict[str, Any]             # tolerances, event-time rules (JSON-safe)
    status_counts: dict[str, int]      # reckon.reconcile.ReconStatus value -> rows, all currencies
    rows: int
    unexplained: int                   # rows in UNEXPLAINED_STATUSES, all currencies
    table_versions: dict[str, int]     # Delta table -> version read
    currencies: tuple[CurrencySummary, ...] = ()  # one per currency, by code; the money
    completeness: Decimal | None = None  # share of canonical events the stream counted
    is_current: bool = True
    # the material_gap the run was audited under (code -> exact amount text; {}: off; None:
    # recorded before runs kept it): every view marks the run's breaks by it
    material_gap: dict[str, str] | None = None


@dataclass(frozen=True)
class BreakRow:
    """One non-MATCHED (window, key, currency) of an audit run, with its explanation."""

    run_id: str
    day: date
    window_start: datetime
    window_end: datetime
    key: str
    currency: str
    status: str                        # ReconStatus value
    provisional_amount: Decimal | None
    canonical_amount: Decimal | None
    gap_amount: Decimal
    gap_count: int
    late_amount: Decimal
    late_count: int
    duplicate_amount: Decimal
    duplicate_count: int
    residual_amount: Decimal
    residual_count: int
    explanation: str


@dataclass(frozen=True)
class BreakInput:
    """One input (a partition, or a source) that contributed to a break: see
    audits.break_story.inputs_of for when an input counts as contributing."""

    dimension: str                     # 'partition' or 'source'
    value: str                         # '3', 'pos'
    late_count: int                    # its late events in the break's cell
    duplicate_count: int               # its copies the stream counted twice
    event_count: int                   # all its events in the cell (any fate)


@dataclass(frozen=True)
class BreakStory:
    """What ``reckon explain`` tells of one break's (window, key, currency), recorded by the
    audit from the table versions it read (audits/stories.py), so the workbench shows it
    without Spark. ``evidence``: the late events and uncaught duplicates that explain the gap,
    JSON-safe dicts (amounts as text in the currency's digits, times ISO-8601)."""

    run_id: str
    day: date
    window_start: datetime
    key: str
    currency: str
    lines: tuple[str, ...]
    evidence: tuple[dict[str, Any], ...]
    inputs: tuple[BreakInput, ...]
    events: int                        # events the story tells (its lines may stop earlier)


@dataclass(frozen=True)
class AttributionRow:
    """Who is late: one value of one dimension, its share of late events against its share of
    all events. ``lift = late_share / event_share`` (None when event_share is 0). Counts are
    over all currencies; the late amounts are kept per currency."""

    dimension: str                     # 'partition', 'source', 'currency', 'lateness_bucket',
    value: str                         # 'arrival_hour'
    late_events: int
    late_amounts: dict[str, Decimal]   # currency -> exact sum of the value's late events
    all_events: int
    late_share: Decimal
    event_share: Decimal
    lift: Decimal | None


@dataclass(frozen=True)
class CheckRun:
    run_id: str
    day: date
    started_at: datetime
    duration_seconds: float
    success: bool                      # no blocking expectation failed
    blocking_failures: int
    warnings: int
    suites: int
    expectations: int
    data_docs_path: str                # relative to the warehouse when inside it
    table_versions: dict[str, int] = field(default_factory=dict)  # Delta table -> version checked
    # the day's verdict and each suite's, in reckon.quality_verdict's words ('' and {} for runs
    # recorded before they were kept: their views fall back to ``success``)
    verdict: str = ""
    suite_verdicts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ExpectationResult:
    run_id: str
    suite: str
    table: str
    expectation: str                   # GX expectation type, e.g. expect_column_values_to_not_be_null
    column: str | None
    severity: str                      # 'blocking' or 'warning'
    success: bool
    unexpected_count: int | None
    sample: str                        # JSON text: up to 5 offending values or rows
    kwargs: str                        # JSON text of the expectation's arguments
