"""Money per currency: ISO 4217 minor units, the minor-unit rule, formatting with the ISO digits,
the overflow bound, and the Spark columns that apply the same rules (checked against them)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.settings import load_settings
from reckon.errors import ConfigError
from reckon.money import (
    MAX_DAY_PAIRS,
    MAX_EVENT_AMOUNT,
    CurrencyTotals,
    accepted_currencies,
    currency_problem,
    format_amount,
    format_money,
    minor_unit,
    minor_unit_violation,
    quantize_to_currency,
)
from reckon.schema import AMOUNT_PRECISION, AMOUNT_SCALE, TOTAL_TYPE

D = Decimal


def test_minor_units_are_iso_4217s():
    assert {c: minor_unit(c) for c in ("JPY", "KRW", "EUR", "USD", "GBP", "KWD", "BHD", "JOD",
                                       "OMR", "TND", "IQD")} == {
        "JPY": 0, "KRW": 0, "EUR": 2, "USD": 2, "GBP": 2, "KWD": 3, "BHD": 3, "JOD": 3,
        "OMR": 3, "TND": 3, "IQD": 3}  # IQD: ISO says 3 where CLDR's display digits say 0


@pytest.mark.parametrize(("code", "fragment"), [
    ("usd", "not an ISO 4217 currency code"),
    ("EURO", "not an ISO 4217 currency code"),
    ("XAU", "no minor unit"),          # gold
    ("XXX", "no minor unit"),          # "no currency"
    ("CLF", "4 decimal places"),       # a unit of account reckon cannot store exactly
])
def test_codes_reckon_does_not_book_say_why(code, fragment):
    assert fragment in (currency_problem(code) or "")
    with pytest.raises(ConfigError, match=fragment):
        minor_unit(code)


def test_the_allowlist_narrows_and_must_hold_bookable_codes():
    assert accepted_currencies(("JPY", "EUR")) == {"EUR": 2, "JPY": 0}
    assert "is not in the configured currencies" in currency_problem("GBP", ("EUR",))
    everything = accepted_currencies()
    assert {"EUR", "JPY", "KWD", "IQD"} <= set(everything) and "CLF" not in everything
    with pytest.raises(ConfigError, match="currencies: 'usd' is not an ISO 4217"):
        accepted_currencies(("usd",))
    with pytest.raises(ConfigError, match="XAU has no minor unit"):
        load_settings(env={}, currencies="EUR,XAU")


@pytest.mark.parametrize(("amount", "code", "breaks"), [
    ("5.5", "JPY", True), ("5", "JPY", False), ("5.000", "JPY", False),
    ("1.005", "EUR", True), ("1.50", "EUR", False), ("1.500", "EUR", False),
    ("0.125", "KWD", False), ("-0.001", "KWD", False), ("0.01", "JPY", True),
])
def test_the_minor_unit_rule_judges_the_value(amount, code, breaks):
    problem = minor_unit_violation(D(amount), code)
    assert (problem is not None) is breaks
    if breaks:
        assert problem == (f"amount {amount} has more decimal places than {code} allows "
                           f"({minor_unit(code)})")


@pytest.mark.parametrize(("amount", "code", "money", "number"), [
    ("1234.5", "EUR", "EUR 1,234.50", "1,234.50"),
    ("1234.500", "EUR", "EUR 1,234.50", "1,234.50"),
    ("1234567", "JPY", "JPY 1,234,567", "1,234,567"),
    ("1234567.000", "JPY", "JPY 1,234,567", "1,234,567"),
    ("0.125", "KWD", "KWD 0.125", "0.125"),
    ("1.5", "IQD", "IQD 1.500", "1.500"),         # ISO digits, not CLDR's (which round to 2)
    ("-7", "JPY", "-JPY 7", "-7"),
    ("0", "USD", "USD 0.00", "0.00"),
])
def test_amounts_are_written_with_their_currencys_iso_digits(amount, code, money, number):
    assert format_money(D(amount), code) == money
    assert format_amount(D(amount), code) == number


def test_a_stored_amount_finer_than_its_currency_is_shown_whole_never_rounded():
    assert quantize_to_currency(D("5.500"), "JPY") == D("5.500")  # a bug upstream stays visible
    assert format_amount(D("5.500"), "JPY") == "5.500"


@settings(max_examples=300, deadline=None)
@given(units=st.integers(min_value=-10**17, max_value=10**17),
       places=st.integers(min_value=0, max_value=3),
       code=st.sampled_from(["USD", "JPY", "KWD", "EUR", "CLF", "XXX"]),
       locale=st.sampled_from(["en_US", "de_DE", "fr_CH", "hi_IN"]))
def test_amounts_are_written_as_babels_own_formatters_write_them(units, places, code, locale):
    """The cached pattern and locale change nothing: the same text as Babel's
    format_currency and format_decimal with the same pattern, every locale and digit."""
    from babel.numbers import format_currency, format_decimal

    amount = quantize_to_currency(D(units).scaleb(-places), code)
    digits = max(-int(amount.as_tuple().exponent), 0)
    tail = "." + "0" * digits if digits else ""
    assert format_money(amount, code, locale) == format_currency(
        amount, code, format="\u00a4\u00a4\u00a0#,##0" + tail, locale=locale,
        currency_digits=False, decimal_quantization=False).replace("\u00a0", " ")
    assert format_amount(amount, code, locale) == format_decimal(
        amount, format="#,##0" + tail, locale=locale, decimal_quantization=False)


def test_currency_totals_keep_each_currency_apart_and_refuse_floats():
    totals = CurrencyTotals().add("EUR", D("1.10")).add("JPY", 5).add("EUR", D("2.005"))
    assert dict(totals) == {"EUR": D("3.105"), "JPY": D("5")}
    with pytest.raises(TypeError, match="never a float"):
        totals.add("EUR", 1.5)  # type: ignore[arg-type]


def test_no_figure_can_overflow_its_decimal():
    """The documented bound: a day's (event, window) pairs (fewer than 10^19, more than a
    64-bit count of events holds) times the largest amount (below 10^15, what DECIMAL(18,3)
    stores), four times over (residual = canonical - provisional - late + duplicate), stays
    below 10^35, the largest magnitude DECIMAL(38,3) holds."""
    assert AMOUNT_PRECISION - AMOUNT_SCALE == 15 and D(10) ** 15 == MAX_EVENT_AMOUNT
    assert MAX_DAY_PAIRS > 2**63
    total_integer_digits = int(TOTAL_TYPE.split("(")[1].split(",")[0]) - AMOUNT_SCALE
    assert D(10) ** total_integer_digits > 4 * MAX_EVENT_AMOUNT * MAX_DAY_PAIRS
    with pytest.raises(ConfigError, match="below 1,000,000,000,000,000"):
        load_settings(env={}, amount_max="1000000000000000")


# ------------------------------------------------------------------------------- Spark columns

amounts = st.integers(-10**9, 10**9).map(lambda n: D(n).scaleb(-3))
currencies = st.sampled_from(["EUR", "JPY", "KWD", "USD", "BHD", "KRW", "IQD"])


@pytest.mark.spark
@settings(max_examples=10, deadline=None)
@given(st.lists(st.tuples(amounts, currencies), min_size=1, max_size=60))
def test_the_spark_columns_apply_the_python_rules(spark, rows):
    from pyspark.sql import functions as F

    from spark.money import amount_text_col, minor_unit_break_col

    booked = load_settings(env={}).currencies
    df = spark.createDataFrame([(str(a), c) for a, c in rows], "amount string, currency string")
    df = df.select(F.col("amount").cast(f"decimal({AMOUNT_PRECISION},{AMOUNT_SCALE})")
                   .alias("amount"), "currency")
    got = [(r.breaks, None if r.breaks else r.text) for r in df.select(
        minor_unit_break_col(F.col("amount"), F.col("currency"), booked).alias("breaks"),
        amount_text_col(F.col("amount"), F.col("currency")).alias("text")).collect()]
    # a total is always whole in its minor unit, so only whole amounts need the same text
    want = [(minor_unit_violation(a, c) is not None,
             None if minor_unit_violation(a, c) else format_amount(a, c)) for a, c in rows]
    assert got == want


@pytest.mark.spark
def test_a_currency_reckon_does_not_book_has_no_verdict(spark):
    from pyspark.sql import functions as F

    from spark.money import minor_unit_break_col

    df = spark.createDataFrame([("1.00", "XAU"), ("1.00", "EUR")], "a string, c string")
    got = [r.v for r in df.select(minor_unit_break_col(
        F.col("a").cast("decimal(18,3)"), F.col("c"),
        load_settings(env={}, currencies="EUR").currencies).alias("v")).collect()]
    assert got == [None, False]
