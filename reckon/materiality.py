"""Which breaks are material: the one rule (pure, no I/O) every view marks breaks by.

A reviewer triages by size, and size only means something inside one currency: a JPY 3 break
and a EUR 30,000 break are not alike, and no threshold is ever converted or summed across
currencies. The ``material_gap`` setting gives a minimum absolute gap per currency
("EUR=1000,JPY=100000"); a break whose absolute gap reaches its currency's threshold is
material. A currency the setting does not name has no threshold, so every break in it is
material (the safe side: a threshold nobody set never hides a break). With the setting empty
nothing is marked: materiality is off.

Example:
    >>> rule = thresholds({"EUR": "1000", "JPY": "100000"})
    >>> is_material(Decimal("-30000.00"), "EUR", rule), is_material(Decimal("3"), "JPY", rule)
    (True, False)
    >>> is_material(Decimal("0.01"), "KWD", rule), is_material(Decimal("5"), "EUR", {})
    (True, None)
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from reckon.errors import ConfigError, UsageError
from reckon.money import currency_problem, minor_unit, minor_unit_violation

__all__ = ["gap_floors", "is_material", "material_words", "run_rule", "thresholds"]


def thresholds(given: Mapping[str, str]) -> dict[str, Decimal]:
    """The ``material_gap`` setting checked once: ISO 4217 code -> minimum absolute gap, an
    exact, non-negative amount in that currency's units.

    >>> thresholds({" eur ": "1000.50"})
    {'EUR': Decimal('1000.50')}
    """
    out: dict[str, Decimal] = {}
    for raw_code, raw_amount in given.items():
        code = raw_code.strip().upper()
        problem = currency_problem(code)
        if problem is not None:
            raise ConfigError(f"material_gap: {problem}; write CODE=AMOUNT pairs, e.g. "
                              "EUR=1000,JPY=100000")
        try:
            amount = Decimal(str(raw_amount).strip())
        except InvalidOperation:
            amount = Decimal(-1)
        if not amount.is_finite() or amount < 0:
            raise ConfigError(f"material_gap: {code}={raw_amount!r} is not a non-negative "
                              f"amount in {code}, e.g. {code}=1000")
        out[code] = amount
    return out


def is_material(gap: Decimal | None, currency: str | None,
                rule: Mapping[str, Decimal]) -> bool | None:
    """Whether a break of ``gap`` in ``currency`` is material under ``rule`` (``thresholds``);
    None when materiality is off (no threshold set at all)."""
    if not rule:
        return None
    threshold = rule.get(currency or "", Decimal(0))
    return (gap or Decimal(0)).copy_abs() >= threshold  # exact: abs() rounds to 28 digits


def material_words(mark: bool | None) -> str:
    """How a view writes the mark: ``material``, ``-`` (below its threshold) or empty (off).

    >>> material_words(True), material_words(False), material_words(None)
    ('material', '-', '')
    """
    return "" if mark is None else "material" if mark else "-"


_LARGEST = Decimal(10) ** 35  # the report database's DECIMAL(38,3) holds no larger amount


def gap_floors(text: str, currency: str = "") -> tuple[tuple[str, Decimal], ...]:
    """A minimum absolute gap per currency as a filter asks for it (the workbench's
    ``min_gap``): ``EUR=1000,JPY=100000``, or a bare amount for the one ``currency`` chosen.
    Each amount is exact and a whole number of its currency's minor units (JPY=0.5 is no yen
    amount); a mistake is one UsageError line. Sorted by code; empty text: no floor.

    >>> gap_floors("jpy=100000, EUR=1000.50")
    (('EUR', Decimal('1000.50')), ('JPY', Decimal('100000')))
    >>> gap_floors("250", "JPY")
    (('JPY', Decimal('250')),)
    """
    text = text.strip()
    if not text:
        return ()
    if "=" not in text:
        if not currency:
            raise UsageError(f"min_gap={text!r} is not valid: an amount is in one currency; "
                             "choose the currency, or write CODE=AMOUNT pairs, e.g. "
                             "EUR=1000,JPY=100000")
        text = f"{currency}={text}"
    out: dict[str, Decimal] = {}
    for pair in text.split(","):
        raw_code, _, raw_amount = pair.partition("=")
        code = raw_code.strip().upper()
        problem = currency_problem(code) if code else "a currency code is missing"
        if problem is not None:
            raise UsageError(f"min_gap={text!r} is not valid: {problem}; write CODE=AMOUNT "
                             "pairs, e.g. EUR=1000,JPY=100000")
        try:
            amount = Decimal(raw_amount.strip())
        except InvalidOperation:
            amount = Decimal(-1)
        if not amount.is_finite() or amount < 0 or amount >= _LARGEST:
            raise UsageError(f"min_gap: {code}={raw_amount.strip()!r} is not valid: a "
                             f"non-negative amount in {code}, e.g. {code}=1000")
        if minor_unit_violation(amount, code) is not None:
            raise UsageError(f"min_gap: {code}={raw_amount.strip()} is not valid: {code} has "
                             f"{minor_unit(code)} decimal places")
        if code in out:
            raise UsageError(f"min_gap={text!r} is not valid: {code} is named twice")
        out[code] = amount
    return tuple(sorted(out.items()))


def run_rule(recorded: Mapping[str, str] | None,
             setting: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """The rule a run's breaks are marked by: the ``material_gap`` recorded with the run when
    it was audited (``{}``: materiality was off), so every view agrees however the setting
    changed since; the current ``setting`` only for a run recorded before runs kept it
    (``recorded`` None).

    >>> run_rule({"EUR": "1000"}, {"EUR": Decimal("5")})
    {'EUR': Decimal('1000')}
    >>> run_rule(None, {"EUR": Decimal("5")}), run_rule({}, {"EUR": Decimal("5")})
    ({'EUR': Decimal('5')}, {})
    """
    if recorded is None:
        return dict(setting)
    return {code: Decimal(str(amount)) for code, amount in recorded.items()}
