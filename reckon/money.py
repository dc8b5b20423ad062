"""Money: ISO 4217 currencies, their minor units, exact per-currency sums, and how amounts read.

Why one module: every total reckon keeps is per (window, key, currency), and amounts of two
currencies are never added. The rules that make that true live here, on plain Python values:

- **Which currencies exist** and **how many decimal places each has** come from the ISO 4217
  list as the ``iso4217`` package ships it (the official minor units: JPY 0, EUR 2, KWD 3),
  never from a hand-written table. Babel (CLDR) is used only to *write* amounts: CLDR's
  display digits differ from ISO's for a few currencies (IQD: ISO 3, CLDR 0), and an amount is
  always shown with its ISO digits, so nothing is rounded on the page.
- **Accepted currencies**: ISO 4217 codes with a minor unit of 0 to ``MAX_MINOR_UNIT`` places
  (the scale reckon stores exactly). Funds, metals and test codes (XAU, XDR, XXX: no minor
  unit) and the two 4-place units of account (CLF, UYW) are ISO codes reckon does not book.
  A configured allowlist narrows the set further.
- **The minor-unit rule**: an amount is a whole number of its currency's minor units. JPY
  ``5.5`` and EUR ``1.005`` break it; EUR ``1.50`` and ``1.500`` are the same value and keep it.
- **Limits**: an event's amount fits ``DECIMAL(18,3)`` (below ``MAX_EVENT_AMOUNT``, 10**15) and
  every total ``DECIMAL(38,3)`` (below 10**35); sums are taken at ``DECIMAL(38,3)``. A day holds
  at most ``MAX_DAY_PAIRS`` (10**19) (event, window) pairs, more than a 64-bit event count can
  reach, so a total, and any day figure summed over windows, stays below 10**34; a gap or a
  residual combines at most four of them, below 4 * 10**34. Nothing can overflow. An amount
  beyond ``DECIMAL(18,3)`` is refused at parse time (``bad_amount``), never overflowed.
- **Exact to 38 digits and beyond**: Python's default decimal context keeps 28 significant
  digits, fewer than ``DECIMAL(38,3)`` holds (35 before the point, 3 after), and it rounds
  silently. Every operation on money (a sum, a gap, a residual, a quantize, a ``%``, a
  negation or an ``abs``, the formatting) runs in ``MONEY_CONTEXT`` (``with
  money_context():``, ``money_sum``): ``MONEY_DIGITS`` significant digits and ``Inexact``
  trapped, so a result that would not be exact raises ``decimal.Inexact`` instead of being
  rounded. It is a local context, never the process's global one (other libraries keep
  theirs). An absolute value is ``copy_abs()``, which never rounds (``abs()`` does).

Example:

>>> from decimal import Decimal
>>> minor_unit("JPY"), minor_unit("EUR"), minor_unit("KWD")
(0, 2, 3)
>>> minor_unit_violation(Decimal("5.5"), "JPY")
'amount 5.5 has more decimal places than JPY allows (0)'
>>> format_money(Decimal("1234.5"), "EUR"), format_money(Decimal("-7"), "JPY")
('EUR 1,234.50', '-JPY 7')
>>> sorted(CurrencyTotals().add("EUR", Decimal("1.10")).add("JPY", 5).add("EUR", 2).items())
[('EUR', Decimal('3.10')), ('JPY', Decimal('5'))]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from decimal import (
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
    localcontext,
)
from functools import cache
from typing import Any

from reckon.errors import ConfigError

__all__ = [
    "AMOUNT_INTEGER_DIGITS",
    "MAX_DAY_PAIRS",
    "MAX_EVENT_AMOUNT",
    "MAX_MINOR_UNIT",
    "MONEY_CONTEXT",
    "MONEY_DIGITS",
    "CurrencyTotals",
    "accepted_currencies",
    "breaks_minor_unit",
    "currency_problem",
    "format_amount",
    "format_money",
    "iso_currencies",
    "minor_unit",
    "minor_unit_step",
    "minor_unit_violation",
    "money_context",
    "money_sum",
    "quantize_to_currency",
]

#: The most decimal places any accepted currency has; amounts are stored at this scale.
MAX_MINOR_UNIT = 3
#: Digits before the decimal point of one event's amount: ``DECIMAL(18,3)``.
AMOUNT_INTEGER_DIGITS = 15
#: An event's amount is strictly below this in magnitude (what ``DECIMAL(18,3)`` holds).
MAX_EVENT_AMOUNT = Decimal(10) ** AMOUNT_INTEGER_DIGITS
#: The (event, window) pairs of the largest day reckon supports: 4 sums of that many addends
#: below ``MAX_EVENT_AMOUNT`` stay below 10**35, which ``DECIMAL(38,3)`` holds.
MAX_DAY_PAIRS = 10**19
#: Significant digits of every money operation: ``DECIMAL(38,3)`` holds 38, a gap or residual
#: of four such values 39, a sum of many breaks' gaps a few more, and a relative tolerance
#: times an amount the digits of both; 80 leaves room for all of them. Python's default is 28.
MONEY_DIGITS = 80
#: The one decimal context money is computed in (``money_context``): ``MONEY_DIGITS`` digits,
#: and ``Inexact`` trapped besides the default traps, so nothing is ever rounded silently (a
#: result that needs more digits raises ``decimal.Inexact``). ``Rounded`` alone is not trapped:
#: quantizing ``1.500`` to ``1.50`` drops a zero, which changes no value.
MONEY_CONTEXT = Context(prec=MONEY_DIGITS, rounding=ROUND_HALF_EVEN,
                        traps=[InvalidOperation, DivisionByZero, Overflow, Inexact])


def money_context() -> AbstractContextManager[Context]:
    """``with money_context():`` runs the block's Decimal arithmetic in (a copy of)
    ``MONEY_CONTEXT``: exact for every value ``DECIMAL(38,3)`` holds, and for their sums.
    Local to the block (and thread), never the process's global context.

    >>> big = Decimal("99999999999999999999999999999999999.999")
    >>> with money_context():
    ...     big + Decimal("0.001")
    Decimal('100000000000000000000000000000000000.000')
    """
    return localcontext(MONEY_CONTEXT)


def money_sum(amounts: Iterable[Decimal | int], start: Decimal = Decimal(0)) -> Decimal:
    """``start`` plus every amount, exactly (in ``MONEY_CONTEXT``). Amounts of one currency."""
    total = start
    with money_context():
        for amount in amounts:
            if isinstance(amount, float):
                raise TypeError("money is never a float: give a Decimal")
            total = total + Decimal(amount)
    return total


@cache
def iso_currencies() -> Mapping[str, int | None]:
    """Every ISO 4217 code the ``iso4217`` package lists -> its minor unit (None: N.A.)."""
    from iso4217 import Currency

    return {c.code: c.exponent for c in Currency}


def minor_unit(code: str) -> int:
    """The ISO 4217 minor unit (decimal places) of ``code``; ConfigError for a code reckon
    does not book (see ``currency_problem``)."""
    problem = currency_problem(code)
    if problem is not None:
        raise ConfigError(problem)
    exponent = iso_currencies()[code]
    assert exponent is not None  # currency_problem refuses codes without a minor unit
    return exponent


def currency_problem(code: str, allowed: Iterable[str] = ()) -> str | None:
    """Why ``code`` cannot be booked, or None. ``allowed``: a configured allowlist (empty:
    every accepted ISO 4217 currency)."""
    exponent = iso_currencies().get(code, -1)
    if exponent == -1:
        return f"{code!r} is not an ISO 4217 currency code"
    if exponent is None:
        return f"{code} has no minor unit in ISO 4217 (a fund, metal or test code)"
    if exponent > MAX_MINOR_UNIT:
        return (f"{code} has {exponent} decimal places in ISO 4217; reckon keeps amounts to "
                f"{MAX_MINOR_UNIT}")
    allowlist = tuple(allowed)
    if allowlist and code not in allowlist:
        return f"{code} is not in the configured currencies ({', '.join(allowlist)})"
    return None


def accepted_currencies(allowed: Iterable[str] = ()) -> dict[str, int]:
    """Code -> minor unit of every currency reckon books: the allowlist if one is given
    (each must be bookable), else every ISO 4217 code with a minor unit of 0 to 3 places."""
    allowlist = tuple(allowed)
    for code in allowlist:
        problem = currency_problem(code)
        if problem is not None:
            raise ConfigError(f"currencies: {problem}; list ISO 4217 codes such as EUR, JPY, "
                              "KWD, or leave the setting empty for all of them")
    codes = allowlist or tuple(iso_currencies())
    return {code: exp for code in sorted(codes)
            if (exp := iso_currencies()[code]) is not None and exp <= MAX_MINOR_UNIT}


def minor_unit_step(exponent: int) -> Decimal:
    """The smallest amount of a currency with ``exponent`` places: 1, 0.01, 0.001."""
    return Decimal(1).scaleb(-exponent)


def breaks_minor_unit(amount: Any, step: Any) -> Any:
    """``amount`` is not a whole number of minor units of size ``step``. Only ``%`` and ``!=``:
    the same predicate applies to Decimals and to Spark Columns (spark/parse.py); on Decimals
    it runs in ``MONEY_CONTEXT`` (the default context cannot divide a 38-digit amount)."""
    if isinstance(amount, Decimal):
        with money_context():
            return amount % step != 0
    return amount % step != 0


def minor_unit_violation(amount: Decimal, code: str) -> str | None:
    """The quarantine detail when ``amount`` is not a whole number of ``code``'s minor units,
    else None. ``code`` must be accepted (the currency rule runs first)."""
    exponent = minor_unit(code)
    if breaks_minor_unit(amount, minor_unit_step(exponent)):
        return f"amount {amount} has more decimal places than {code} allows ({exponent})"
    return None


def quantize_to_currency(amount: Decimal, code: str) -> Decimal:
    """``amount`` with exactly its currency's decimal places. Never rounds: an amount with
    more non-zero places than the currency has keeps them all (it would be a bug upstream,
    and hiding it would be worse)."""
    exponent = iso_currencies().get(code)
    if exponent is None or exponent > MAX_MINOR_UNIT:
        return amount
    step = minor_unit_step(exponent)
    with money_context():
        return amount.quantize(step) if amount % step == 0 else amount


def _places(amount: Decimal) -> int:
    """Decimal places ``amount`` is written with (0 for a special value)."""
    exponent = amount.as_tuple().exponent
    return max(-exponent, 0) if isinstance(exponent, int) else 0


@cache
def _babel_locale(name: str) -> Any:
    """Babel's Locale for ``name``, parsed once (format_* parse it again on every call)."""
    from babel.core import Locale

    return Locale.parse(name)


@cache
def _babel_pattern(pattern: str) -> Any:
    """Babel's NumberPattern for a CLDR pattern string, parsed once."""
    from babel.numbers import parse_pattern

    return parse_pattern(pattern)


def format_amount(amount: Decimal, code: str, locale: str = "en_US") -> str:
    """The number alone, grouped, with the currency's own ISO digits: ``1,234.50`` (EUR),
    ``1,235`` (JPY), ``1.500`` (KWD). For table cells whose column or row names the currency.
    Babel (CLDR) writes it, through the pattern and locale it would parse on each call: a
    report or an audit's break stories format tens of thousands of amounts."""
    exact = quantize_to_currency(amount, code)
    places = _places(exact)
    pattern = "#,##0" + ("." + "0" * places if places else "")
    with money_context():  # Babel's abs(), normalize() and quantize() would round at 28 digits
        return str(_babel_pattern(pattern).apply(exact, _babel_locale(locale),
                                                 decimal_quantization=False))


def format_money(amount: Decimal, code: str, locale: str = "en_US") -> str:
    """The ISO code and the amount: ``EUR 1,234.50``, ``-JPY 7``, ``KWD 0.125``. Babel (CLDR)
    writes it (what ``babel.numbers.format_currency`` does, with its pattern and locale
    parsed once); the digits are the ISO minor unit's."""
    exact = quantize_to_currency(amount, code)
    places = _places(exact)
    pattern = "\u00a4\u00a4\u00a0#,##0" + ("." + "0" * places if places else "")
    with money_context():  # as in format_amount
        text = _babel_pattern(pattern).apply(exact, _babel_locale(locale), currency=code,
                                             currency_digits=False, decimal_quantization=False)
    return str(text).replace("\u00a0", " ")


class CurrencyTotals(dict[str, Decimal]):
    """Exact sums kept apart per currency: the only way reckon adds amounts for a headline.
    ``add`` returns the object so sums can be chained; sums are taken in ``MONEY_CONTEXT``."""

    def add(self, code: str, amount: Decimal | int) -> CurrencyTotals:
        self[code] = money_sum((amount,), self.get(code, Decimal(0)))
        return self
