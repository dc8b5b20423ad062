"""reckon.money's rules as Spark columns: the minor-unit predicate and amounts written with
their currency's own ISO 4217 digits. Currency data comes from reckon.money (the ``iso4217``
package); no table is restated here, and tests/test_money.py checks each column against the
Python rule on random amounts and currencies."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reckon.money import accepted_currencies
from reckon.schema import AMOUNT_PRECISION, AMOUNT_SCALE

__all__ = ["amount_text_col", "minor_unit_break_col"]


def _currency_exponents(currencies: tuple[str, ...]) -> dict[int, list[str]]:
    """Minor unit -> the booked currencies that have it."""
    by_exponent: dict[int, list[str]] = {}
    for code, exponent in accepted_currencies(currencies).items():
        by_exponent.setdefault(exponent, []).append(code)
    return by_exponent


def minor_unit_break_col(amount: Column, currency: Column, currencies: tuple[str, ...]
                         ) -> Column:
    """reckon.money.breaks_minor_unit as a column: the amount is not a whole number of its
    currency's minor units; null for a currency reckon does not book. Rounding a compact
    decimal to the currency's places is a long division in Spark (a remainder would go
    through BigDecimal for every row), so the column compares the amount with itself rounded;
    tests/test_money.py checks it against the Python rule. Currency sets are hashed lookups.
    ``currencies`` are the booked ones (the ``currencies`` setting; empty: every ISO 4217
    currency with 0 to 3 minor digits), e.g. ``minor_unit_break_col(amount, currency, ())``."""
    verdict: Column = F.lit(None).cast("boolean")
    for exponent, codes in sorted(_currency_exponents(currencies).items()):
        if exponent >= AMOUNT_SCALE:  # stored at this scale: every amount is whole
            rounded = F.lit(False)
        else:
            # one more digit than the amount has before its point: rounding up never overflows
            whole = AMOUNT_PRECISION - AMOUNT_SCALE + 1
            rounded = amount.cast(T.DecimalType(whole + exponent, exponent)) != amount
        verdict = F.when(currency.isin(codes), rounded).otherwise(verdict)
    return verdict


def amount_text_col(amount: Column, currency: Column) -> Column:
    """``amount`` as text with its currency's ISO digits and thousands separators
    (``1,234.50`` EUR, ``1,235`` JPY, ``0.125`` KWD): Spark's format_number over the exact
    decimal, one CASE branch per minor unit. A currency reckon does not book keeps the stored
    scale (it cannot have a total, but a row may still be shown)."""
    text: Column = F.format_number(amount, AMOUNT_SCALE)
    for exponent, codes in sorted(_currency_exponents(()).items()):
        if exponent != AMOUNT_SCALE:
            text = F.when(currency.isin(codes), F.format_number(amount, exponent)).otherwise(text)
    return text
