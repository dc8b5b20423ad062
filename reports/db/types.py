"""The report database's column types: exact money and ratios, aware UTC times, JSON.

Why its own module: these rules are what make both backends agree to the cent and the
microsecond, and the models (reports/db/models.py) and nothing else build on them.

* Money is ``Decimal`` stored as ``NUMERIC(38,3)`` on PostgreSQL and as TEXT on SQLite
  (SQLite's NUMERIC affinity would round through a float). A value with more than 3 decimal
  places is refused, never rounded. Ratios (shares, lift, completeness) are unconstrained
  NUMERIC / TEXT.
* Times are aware UTC datetimes at microsecond precision; a naive datetime is taken as local
  time (what PySpark returns), as in :func:`reckon.timeutil.to_micros`.

Example:
    >>> from sqlalchemy.dialects import sqlite
    >>> Money().process_bind_param(Decimal("12.5"), sqlite.dialect())
    '12.500'
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, Inexact, InvalidOperation
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.engine import Dialect

from reckon.errors import invalid
from reckon.money import MONEY_CONTEXT

__all__ = ["ExactDecimal", "FloatText", "Magnitude", "Money", "UTCDateTime", "id_type",
           "json_type"]

_STORED = Decimal("0.001")  # the stored scale: every accepted currency's minor unit fits
_MONEY_LIMIT = Decimal(10) ** 35  # DECIMAL(38,3): 35 digits before the point


def _to_decimal(value: Any, what: str) -> Decimal:
    if isinstance(value, float):
        raise invalid(what, value, "a Decimal (or int / str); floats are not exact")
    try:
        return value if isinstance(value, Decimal) else Decimal(str(value))
    except InvalidOperation:
        raise invalid(what, value, "a decimal number") from None


class Money(sa.types.TypeDecorator[Decimal]):
    """Exact money: ``NUMERIC(38,3)`` on PostgreSQL, TEXT elsewhere; always returns Decimal
    with 3 places (the stored scale; the row's currency says how many are its own: format with
    reckon.money). More than 3 decimal places is an error (nothing is rounded silently). A
    Money column always sits next to a currency column: amounts are never summed across
    currencies here."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(sa.Numeric(38, 3, asdecimal=True))
        return dialect.type_descriptor(sa.Text())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        number = _to_decimal(value, "money")
        if not number.is_finite():
            raise invalid("money", value, "an amount that fits DECIMAL(38,3)")
        try:  # MONEY_CONTEXT: 38 digits and more are exact, and rounding raises Inexact
            stored = number.quantize(_STORED, context=MONEY_CONTEXT)
        except Inexact:
            raise invalid("money", value, "an amount with at most 3 decimal places") from None
        except InvalidOperation:  # more digits than MONEY_CONTEXT keeps: far too large
            raise invalid("money", value, "an amount that fits DECIMAL(38,3)") from None
        if stored.copy_abs() >= _MONEY_LIMIT:  # exact: abs() rounds to 28 digits
            raise invalid("money", value, "an amount that fits DECIMAL(38,3)")
        return stored if dialect.name == "postgresql" else str(stored)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        return Decimal(str(value)).quantize(_STORED, context=MONEY_CONTEXT)


#: A magnitude's stored text on SQLite: 35 digits, the point, 3 places (DECIMAL(38,3)'s range).
MAGNITUDE_CHARS = 39


class Magnitude(Money):
    """A non-negative exact amount that the database orders and compares as a number (a
    break's absolute gap, for the workbench's materiality filter and sort): ``NUMERIC(38,3)``
    on PostgreSQL; on SQLite TEXT zero-padded to a fixed width (``000...0001234.500``), whose
    byte order is the numeric order, so an index range answers ``>=`` and ``ORDER BY`` exactly
    (Money's plain text would sort ``9.000`` after ``10.000``). A negative value is refused.

    >>> from sqlalchemy.dialects import sqlite
    >>> Magnitude().process_bind_param(Decimal("12.5"), sqlite.dialect())[-8:]
    '0012.500'
    """

    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        stored = super().process_bind_param(value, dialect)
        if stored is None or dialect.name == "postgresql":
            if stored is not None and stored < 0:
                raise invalid("magnitude", value, "an amount of 0 or more")
            return stored
        if stored.startswith("-"):
            raise invalid("magnitude", value, "an amount of 0 or more")
        return stored.rjust(MAGNITUDE_CHARS, "0")


class ExactDecimal(sa.types.TypeDecorator[Decimal]):
    """An exact ratio or share: unconstrained NUMERIC on PostgreSQL, TEXT elsewhere."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(sa.Numeric(asdecimal=True))
        return dialect.type_descriptor(sa.Text())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        number = _to_decimal(value, "decimal")
        return number if dialect.name == "postgresql" else str(number)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        return None if value is None else Decimal(str(value))


class FloatText(sa.types.TypeDecorator[float]):
    """A float ratio (a what-if's completeness, an average latency in seconds: ratios for
    choosing a bound, never money) stored as its shortest ``repr`` text on both backends, so
    it reads back the same float bit for bit (a REAL or DOUBLE column would too on most
    drivers, but text says so and never rounds through a decimal). A Decimal is refused: this
    column is not for exact figures.

    >>> from sqlalchemy.dialects import sqlite
    >>> FloatText().process_bind_param(0.1 + 0.2, sqlite.dialect())
    '0.30000000000000004'
    """

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if isinstance(value, (Decimal, bool)) or not isinstance(value, (float, int)):
            raise invalid("float ratio", value, "a float (exact figures are Decimal columns)")
        return repr(float(value))

    def process_result_value(self, value: Any, dialect: Dialect) -> float | None:
        return None if value is None else float(value)


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out (TIMESTAMPTZ on PostgreSQL, naive UTC
    text on SQLite). A naive input is taken as local time, like PySpark's TIMESTAMP values."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise invalid("timestamp", value, "a datetime")
        moment = value.astimezone(UTC)
        return moment if dialect.name == "postgresql" else moment.replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def json_type() -> sa.types.TypeEngine[Any]:
    """JSON; JSONB on PostgreSQL."""
    return sa.JSON().with_variant(pg.JSONB(), "postgresql")


def id_type() -> sa.types.TypeEngine[int]:
    """A surrogate key that auto-increments on both backends."""
    # SQLite only auto-increments an INTEGER PRIMARY KEY (the rowid alias), not BIGINT.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")
