"""Time as values: event times and durations are integer microseconds since the Unix epoch, UTC.

Integers keep window arithmetic exact (no float rounding at microsecond precision) and the
same formulas then work on Python ints, numpy int64 arrays and Spark long columns.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from reckon.errors import UsageError, invalid

__all__ = [
    "MICROS_PER_DAY",
    "MICROS_PER_SECOND",
    "day_bounds",
    "days_between",
    "days_from_flags",
    "describe_duration",
    "format_duration",
    "format_micros",
    "from_micros",
    "parse_date",
    "parse_duration",
    "parse_timestamp",
    "to_micros",
]

MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
_UNITS = {"us": 1, "ms": 1_000, "s": MICROS_PER_SECOND, "m": 60 * MICROS_PER_SECOND,
          "h": 3_600 * MICROS_PER_SECOND, "d": MICROS_PER_DAY}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|h|d)\s*$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_duration(text: str | int, name: str = "duration") -> int:
    """'500ms', '10s', '5m', '1h', '1d' (or an int of microseconds) -> microseconds, >= 0."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise invalid(name, text, "a duration must not be negative")
        return text
    m = _DURATION.match(str(text))
    if not m:
        raise invalid(name, text, "write a duration like 500ms, 10s, 5m, 1h or 1d")
    number, unit = m.groups()
    micros = round(float(number) * _UNITS[unit]) if "." in number else int(number) * _UNITS[unit]
    return micros


def format_duration(micros: int) -> str:
    """Inverse of parse_duration for whole units: 10_000_000 -> '10s'."""
    if micros == 0:
        return "0s"
    for unit in ("d", "h", "m", "s", "ms", "us"):
        if micros % _UNITS[unit] == 0:
            return f"{micros // _UNITS[unit]}{unit}"
    return f"{micros}us"  # pragma: no cover - 'us' always divides


def describe_duration(micros: int) -> str:
    """A duration in words for people, to the second: 7_263_000_000 -> '2 hours 1 minute 3
    seconds', 0 -> '0 seconds', 1_500 -> 'under a second'. (``format_duration`` writes the
    configuration syntax, '7263s'.)"""
    seconds = abs(micros) // MICROS_PER_SECOND
    if seconds == 0:
        return "0 seconds" if micros == 0 else "under a second"
    parts = []
    for name, size in (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {name}{'' if count == 1 else 's'}")
    return " ".join(parts)


def to_micros(moment: datetime) -> int:
    """A datetime -> microseconds since the epoch. A naive datetime is taken as local time,
    which is what PySpark returns for TIMESTAMP values (the process's own time zone)."""
    if moment.tzinfo is None:
        moment = moment.astimezone(UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * MICROS_PER_SECOND + delta.microseconds


def from_micros(micros: int) -> datetime:
    """Microseconds since the epoch -> an aware UTC datetime."""
    return _EPOCH + timedelta(microseconds=int(micros))


def format_micros(micros: int | None) -> str:
    """ISO-8601 UTC with a trailing Z; microseconds only when not zero. None -> '-'."""
    if micros is None:
        return "-"
    moment = from_micros(micros)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}"
    return text + "Z"


def parse_timestamp(text: str, name: str = "timestamp") -> int:
    """ISO-8601 with a zone ('Z' or +hh:mm) -> microseconds. A time without a zone is rejected."""
    try:
        moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise invalid(name, text, "an ISO-8601 time with a zone, e.g. 2026-01-01T09:42:00Z") from None
    if moment.tzinfo is None:
        raise invalid(name, text, "an ISO-8601 time with a zone, e.g. 2026-01-01T09:42:00Z")
    return to_micros(moment)


def parse_date(value: date | str, name: str = "date") -> date:
    """A UTC day from 'YYYY-MM-DD' text (white space around it ignored) or a ``date``, for
    every flag, parameter and argument that names a day. A ``datetime`` is refused: a moment
    is not a day, and which day it falls on depends on its zone.

    >>> parse_date(" 2026-01-01 "), parse_date(date(2026, 1, 1))
    (datetime.date(2026, 1, 1), datetime.date(2026, 1, 1))
    >>> parse_date("2026-02-30", "--date")
    Traceback (most recent call last):
    reckon.errors.UsageError: --date='2026-02-30' is not valid: a date written YYYY-MM-DD, a day of the calendar (2026-02 has 28 days)
    """
    if isinstance(value, datetime):
        raise invalid(name, value, "a day (YYYY-MM-DD), not a timestamp")
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value).strip())
    except ValueError:
        raise invalid(name, value, "a date written YYYY-MM-DD" + _why_not_a_day(str(value))) \
            from None


def _why_not_a_day(text: str) -> str:
    """What is wrong with text shaped like YYYY-MM-DD that is not a day ('' for other text):
    '2026-11-31' is written right, and "a date written YYYY-MM-DD" alone would not say why.

    >>> _why_not_a_day("2026-11-31"), _why_not_a_day("2026-13-01"), _why_not_a_day("01/02")
    (', a day of the calendar (2026-11 has 30 days)', ', a day of the calendar (no month 13)', '')
    """
    import calendar
    import re

    shape = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", text.strip())
    if shape is None:
        return ""
    year, month = int(shape[1]), int(shape[2])
    if not 1 <= month <= 12:
        return f", a day of the calendar (no month {month})"
    return (f", a day of the calendar ({year:04d}-{month:02d} has "
            f"{calendar.monthrange(year, month)[1]} days)")


def day_bounds(day: date) -> tuple[int, int]:
    """[start, end) of a UTC day in microseconds."""
    start = to_micros(datetime(day.year, day.month, day.day, tzinfo=UTC))
    return start, start + MICROS_PER_DAY


def days_from_flags(day: str | None, first: str | None, last: str | None) -> list[date]:
    """The days a nightly command runs for, oldest first: ``--date D`` or ``--from D1 --to D2``
    (inclusive), as the CLI takes them (a backfill without Airflow)."""
    if day and (first or last):
        raise UsageError("give either --date D or --from D1 --to D2, not both")
    if day:
        return [parse_date(day, "--date")]
    if not (first and last):
        raise UsageError("give --date YYYY-MM-DD, or --from D1 --to D2 for a range")
    return days_between(parse_date(first, "--from"), parse_date(last, "--to"))


def days_between(first: date, last: date) -> list[date]:
    """``[first, last]`` day by day, oldest first."""
    if last < first:
        raise UsageError(f"--to {last} is before --from {first}: give an increasing range")
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]
