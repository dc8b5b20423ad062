"""Reconciliation arithmetic, in one module: gap, residual, tolerance and status per
(window, key, currency): amounts of two currencies never meet in one row.

The formulas (docs/semantics.md, "Reconciliation"), all exact (Decimal amounts, int counts):

- ``gap = canonical - provisional`` (a missing side counts as 0 and 0 events);
- ``residual = gap - late + duplicate_overcount``, where ``late`` is what the stream sent to
  the late side output for that window, key and currency, and ``duplicate_overcount`` is what it
  counted more than once (copies of an event_id it did not recognise as duplicates);
- the residual is *within tolerance* when its count is exactly 0 and
  ``|residual_amount| <= max(tolerance.absolute, tolerance.relative * |canonical_amount|)``;
- on Python values the arithmetic runs in ``reckon.money.money_context`` (exact for every
  ``DECIMAL(38,3)`` amount; a result that would need rounding raises ``decimal.Inexact``);
- the status is the first rule of ``STATUS_RULES`` that holds:
  MATCHED (both sides present, gap 0 and residual 0), EXPLAINED (residual within tolerance),
  MISSING_IN_STREAM (only canonical has the row), MISSING_IN_CANONICAL (only the stream has
  it, as a provisional row or in its late side output), UNEXPLAINED (both present, residual beyond tolerance). So MISSING_* and UNEXPLAINED are
  the unexplained breaks; a window whose every event was late is EXPLAINED, not missing.

Like ``reckon.eventtime``, the predicates use only ``+ - * <= == & |`` so the very same
functions apply to Python values and to Spark Columns (spark/rules.py builds the audit's
status column from ``STATUS_RULES``). Presence flags are booleans (Python) or boolean Columns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any, TypeVar

from reckon.errors import ConfigError
from reckon.money import money_context

__all__ = [
    "FALLBACK_STATUS",
    "STATUS_RULES",
    "UNEXPLAINED_STATUSES",
    "Measure",
    "ReconRow",
    "ReconStatus",
    "Tolerance",
    "reconcile",
    "reconcile_row",
    "residual",
    "within_tolerance",
]

T = TypeVar("T")
ZERO = Decimal("0.00")


class ReconStatus(StrEnum):
    MATCHED = "MATCHED"
    EXPLAINED = "EXPLAINED"
    UNEXPLAINED = "UNEXPLAINED"
    MISSING_IN_STREAM = "MISSING_IN_STREAM"
    MISSING_IN_CANONICAL = "MISSING_IN_CANONICAL"


# What a reviewer must look at: nothing (late events, duplicates) accounts for these.
UNEXPLAINED_STATUSES = (ReconStatus.UNEXPLAINED, ReconStatus.MISSING_IN_STREAM,
                        ReconStatus.MISSING_IN_CANONICAL)


@dataclass(frozen=True)
class Tolerance:
    """How large a residual may be and still count as explained. Default: exact (0, 0).

    ``absolute`` is money, in each row's own currency units; ``relative`` is a share of the
    canonical amount (e.g. ``Decimal("0.001")`` = 0.1 %). Counts are never tolerated.
    """

    absolute: Decimal = ZERO
    relative: Decimal = Decimal("0")

    def __post_init__(self) -> None:
        for name in ("absolute", "relative"):
            value = getattr(self, name)
            if isinstance(value, float) or not isinstance(value, (Decimal, int)):
                raise ConfigError(f"tolerance {name}={value!r} is not valid: give an exact "
                                  "Decimal (floats are not exact)")
            if value < 0:
                raise ConfigError(f"tolerance {name}={value} is not valid: it must be >= 0")

    def to_config(self) -> dict[str, str]:
        return {"tolerance_abs": str(self.absolute), "tolerance_rel": str(self.relative)}


def residual(gap: T, late: Any, duplicate_overcount: Any) -> T:
    """``gap - late + duplicate_overcount``: what neither late events nor duplicates explain."""
    return gap - late + duplicate_overcount  # type: ignore[no-any-return]


def _abs_within(x: Any, bound: Any) -> Any:
    """``|x| <= bound`` for ``bound >= 0``, without abs() so it works on Columns too."""
    return (x <= bound) & (-x <= bound)


def within_tolerance(residual_amount: Any, residual_count: Any, canonical_amount: Any,
                     tolerance: Tolerance) -> Any:
    """Count residual exactly 0 and ``|amount| <= max(absolute, relative * |canonical|)``."""
    rel = tolerance.relative
    by_relative = (_abs_within(residual_amount, canonical_amount * rel)
                   | _abs_within(residual_amount, -canonical_amount * rel))
    return (residual_count == 0) & (_abs_within(residual_amount, tolerance.absolute)
                                    | by_relative)


@dataclass(frozen=True)
class Measure:
    """The inputs of one (window, key, currency) row's status, as the rules see them."""

    has_provisional: Any
    has_canonical: Any
    gap_amount: Any
    gap_count: Any
    residual_amount: Any
    residual_count: Any
    within: Any


Rule = Callable[[Measure], Any]

# First rule that holds wins. Kept as data so the Spark audit builds its column from it.
STATUS_RULES: tuple[tuple[Rule, ReconStatus], ...] = (
    (lambda m: m.has_provisional & m.has_canonical & (m.gap_amount == 0) & (m.gap_count == 0)
     & (m.residual_amount == 0) & (m.residual_count == 0), ReconStatus.MATCHED),
    (lambda m: m.within, ReconStatus.EXPLAINED),
    (lambda m: (m.has_provisional == False) & m.has_canonical,  # noqa: E712
     ReconStatus.MISSING_IN_STREAM),
    (lambda m: m.has_canonical == False, ReconStatus.MISSING_IN_CANONICAL),  # noqa: E712
)
FALLBACK_STATUS = ReconStatus.UNEXPLAINED


@dataclass(frozen=True)
class ReconRow:
    """One reconciled (window, key, currency). ``None`` sides were absent; amounts are exact."""

    provisional: tuple[Decimal, int] | None
    canonical: tuple[Decimal, int] | None
    late: tuple[Decimal, int]
    duplicate: tuple[Decimal, int]
    gap: tuple[Decimal, int]
    residual: tuple[Decimal, int]
    status: ReconStatus


def reconcile_row(provisional: tuple[Decimal, int] | None, canonical: tuple[Decimal, int] | None,
                  late: tuple[Decimal, int] = (ZERO, 0),
                  duplicate: tuple[Decimal, int] = (ZERO, 0),
                  tolerance: Tolerance = Tolerance()) -> ReconRow:
    """The reference: one (window, key, currency) on plain Python values."""
    p_amt, p_cnt = provisional or (ZERO, 0)
    c_amt, c_cnt = canonical or (ZERO, 0)
    with money_context():  # exact for every DECIMAL(38,3) amount (the default keeps 28 digits)
        gap = (c_amt - p_amt, c_cnt - p_cnt)
        res = (residual(gap[0], late[0], duplicate[0]), residual(gap[1], late[1], duplicate[1]))
        m = Measure(provisional is not None, canonical is not None, gap[0], gap[1], res[0],
                    res[1], within_tolerance(res[0], res[1], c_amt, tolerance))
    status = next((s for rule, s in STATUS_RULES if rule(m)), FALLBACK_STATUS)
    return ReconRow(provisional, canonical, late, duplicate, gap, res, status)


def reconcile(provisional: Mapping[Any, tuple[Decimal, int]],
              canonical: Mapping[Any, tuple[Decimal, int]],
              late: Mapping[Any, tuple[Decimal, int]] | None = None,
              duplicate: Mapping[Any, tuple[Decimal, int]] | None = None,
              tolerance: Tolerance = Tolerance()) -> dict[Any, ReconRow]:
    """Full outer join on the (window, key, currency) keys of the two sides, then
    ``reconcile_row``.

    Late and duplicate entries for keys that neither side has still make a row (a window
    whose every event was late and that the replay has not seen would be such a row)."""
    late, duplicate = late or {}, duplicate or {}
    keys = set(provisional) | set(canonical) | set(late) | set(duplicate)
    return {k: reconcile_row(provisional.get(k), canonical.get(k), late.get(k, (ZERO, 0)),
                             duplicate.get(k, (ZERO, 0)), tolerance) for k in keys}
