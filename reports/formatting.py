"""How the report writes a value: on the page (HTML, PDF) and in a CSV cell.

Money is written in its currency's own ISO 4217 digits (``reckon.money``): ``EUR 1,234.50``,
``JPY 1,235``, ``KWD 0.125`` on the page; ``1234.50``, ``1235``, ``0.125`` in a CSV. Amounts
of two currencies are put side by side, never added. Shared by reports/sections/ (what each
section shows) and reports/render.py (the three formats).

Example: ``money(Decimal("1234.5"), "EUR") == "EUR 1,234.50"``.
"""

from __future__ import annotations

import os
from datetime import date, datetime
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

from reckon.money import format_amount, format_money, quantize_to_currency
from reckon.timeutil import format_micros, to_micros

__all__ = ["amount", "amounts", "cell", "exact", "hms", "money", "percent", "plural",
           "relative_link", "seconds", "ts", "window"]


def ts(value: datetime | None) -> str:
    """An instant as ISO-8601 UTC with a Z: '2026-01-01T00:00:10Z'; '-' for none."""
    return "-" if value is None else format_micros(to_micros(value))


def hms(value: datetime | None) -> str:
    """The time of day of ``ts``: '00:00:10Z'."""
    return "-" if value is None else ts(value)[11:]


def window(start: datetime, end: datetime, day: date) -> str:
    """A window of the report's ``day`` as times of day (the day is in the report's title and
    every page's footer), short enough for one line of the PDF's break list; a window that
    starts on another day keeps its date.

    Example: ``'23:51:20\u201323:51:30Z'``; ``'2026-11-25T23:59:55Z\u201300:00:05Z'``.
    """
    first = ts(start)
    same_day = first[:10] == day.isoformat()
    return f"{first[11:-1] if same_day else first}\u2013{hms(end)}"


def seconds(value: Decimal) -> str:
    """A duration in prose, at the precision a reader uses: tenths of a second from 1 s up,
    milliseconds below, no trailing zeros.

    >>> seconds(Decimal("1.968662")), seconds(Decimal("2.5")), seconds(Decimal("0.0123"))
    ('2', '2.5', '0.012')
    """
    step = Decimal("0.1") if abs(value) >= 1 else Decimal("0.001")
    return f"{value.quantize(step).normalize():f}"


def money(value: Decimal | None, code: str) -> str:
    """The amount with its currency, in the currency's own digits: 'EUR 1,234.50',
    'JPY 1,235', 'KWD 0.125'; '-' for null."""
    return "-" if value is None else format_money(value, code)


def amount(value: Decimal | None, code: str) -> str:
    """The number alone in ``code``'s digits ('1,234.50'), for a cell beside a currency
    column; '-' for null."""
    return "-" if value is None else format_amount(value, code)


def exact(value: Decimal | None, code: str) -> Decimal | None:
    """A CSV amount: exact, with exactly ``code``'s decimal places (nothing is rounded)."""
    return None if value is None else quantize_to_currency(value, code)


def amounts(by_code: dict[str, Decimal]) -> str:
    """Amounts of several currencies side by side, never added: 'EUR 12.50; JPY 1,200'."""
    return "; ".join(money(v, code) for code, v in sorted(by_code.items())) or "-"


def percent(ratio: Decimal | float | None, places: int = 4) -> str:
    """A ratio as people read it: 0.998867 -> '99.8867%'; '-' for none."""
    if ratio is None:
        return "-"
    # rounded down: 0.99999996 reads 99.9999%, never 100% while an event is missing
    scaled = (Decimal(str(ratio)) * 100).quantize(Decimal(1).scaleb(-places),
                                                   rounding=ROUND_FLOOR)
    return f"{scaled}%"


def plural(n: int, one: str, many: str | None = None) -> str:
    """'1 row', '2 rows', '3 copies' (``many`` when the plural is not ``one + 's'``)."""
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def cell(value: Any) -> str:
    """CSV cell: exact Decimal text, ISO-8601 Z times, empty for null."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return ts(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def relative_link(target: str | None, out_dir: Path | None) -> str | None:
    """A link from the report folder to ``target`` that still works when the folder and its
    neighbours are zipped and mailed: relative, with forward slashes.

    Example: ``relative_link("/wh/reports/data_docs/index.html", Path("/wh/reports/d"))`` is
    ``"../data_docs/index.html"``."""
    if target is None:
        return None
    if out_dir is None:
        return quote(Path(target).as_posix())
    return quote(Path(os.path.relpath(Path(target).resolve(), out_dir.resolve())).as_posix())
