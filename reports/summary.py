"""The break summary a reviewer reads before the row-level list: the day's breaks rolled up
by cause (reconciliation status), by key, by age and by review status.

Pure: it takes the breaks already read (reports.context.BreakLine) and returns rows. Money
stays per currency: each roll-up row is one (group, currency) with that currency's residual
and gap sums, never a sum across currencies.

    summary = summarise_breaks(context.all_breaks, statuses=STATUS_ORDER)
    summary.by_cause[0]   # SummaryRow(group='UNEXPLAINED', currency='EUR', breaks=3,
                          #            gap=Decimal('-12.50'), residual=Decimal('-12.50'))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from reckon.money import money_context
from reckon.signoff import BREAK_REVIEW_STATUSES

if TYPE_CHECKING:
    from reports.context import BreakLine

__all__ = ["AGE_BUCKETS", "TOP_KEYS", "BreakSummary", "SummaryRow", "summarise_breaks"]

TOP_KEYS = 10  # keys listed by name; the rest are one "other keys" row per currency
# (label, lowest age in days, highest age in days or None): how long a break has been open
AGE_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("new today", 0, 0), ("1-2 days", 1, 2), ("3-7 days", 3, 7), ("over a week", 8, None))
OTHER_KEYS = "other keys"


@dataclass(frozen=True)
class SummaryRow:
    """One (group, currency): how many breaks, their gap and residual in that currency."""

    group: str
    currency: str
    breaks: int
    gap: Decimal
    residual: Decimal


@dataclass(frozen=True)
class BreakSummary:
    by_cause: tuple[SummaryRow, ...]
    by_key: tuple[SummaryRow, ...]
    by_age: tuple[SummaryRow, ...]
    by_review: tuple[SummaryRow, ...]
    total: int

    def sections(self) -> tuple[tuple[str, tuple[SummaryRow, ...]], ...]:
        """(dimension, rows) in reading order, for HTML, PDF and CSV alike."""
        return (("cause", self.by_cause), ("key", self.by_key), ("age", self.by_age),
                ("review", self.by_review))


def _age_bucket(age: int | None) -> str:
    if age is None:
        return "unknown"
    for label, low, high in AGE_BUCKETS:
        if age >= low and (high is None or age <= high):
            return label
    return "unknown"


@dataclass
class _Sums:
    breaks: int = 0
    gap: Decimal = Decimal(0)
    residual: Decimal = Decimal(0)


def _roll_up(breaks: Iterable[BreakLine], group_of: Callable[[BreakLine], str],
             order: Sequence[str] = ()) -> tuple[SummaryRow, ...]:
    sums: dict[tuple[str, str], _Sums] = {}
    for b in breaks:
        cell = sums.setdefault((group_of(b), b.currency), _Sums())
        cell.breaks += 1
        with money_context():
            cell.gap += b.gap_amount
            cell.residual += b.residual_amount
    rank = {name: i for i, name in enumerate(order)}
    ordered = sorted(sums, key=lambda gc: (rank.get(gc[0], len(rank)), gc[0], gc[1]))
    return tuple(SummaryRow(group=g, currency=c, breaks=sums[(g, c)].breaks,
                            gap=sums[(g, c)].gap, residual=sums[(g, c)].residual)
                 for g, c in ordered)


def _top_keys(breaks: Sequence[BreakLine]) -> list[str]:
    """The keys with the most breaks (ties: by name)."""
    count: dict[str, int] = {}
    for b in breaks:
        count[b.key] = count.get(b.key, 0) + 1
    return sorted(count, key=lambda k: (-count[k], k))[:TOP_KEYS]


def summarise_breaks(breaks: Sequence[BreakLine], statuses: Sequence[str] = ()) -> BreakSummary:
    """Roll ``breaks`` up four ways; ``statuses`` orders the causes (ReconStatus order)."""
    named = _top_keys(breaks)
    top = set(named)
    return BreakSummary(
        by_cause=_roll_up(breaks, lambda b: b.status, statuses),
        by_key=_roll_up(breaks, lambda b: b.key if b.key in top else OTHER_KEYS,
                        [*named, OTHER_KEYS]),
        by_age=_roll_up(breaks, lambda b: _age_bucket(b.age_days),
                        [label for label, _lo, _hi in AGE_BUCKETS]),
        by_review=_roll_up(breaks, lambda b: b.review_status,
                           BREAK_REVIEW_STATUSES),
        total=len(breaks))
