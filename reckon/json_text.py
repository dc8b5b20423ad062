"""Values as plain JSON, exactly: what every ``--json`` output and export writes.

Why one owner: an amount must reach JSON as the exact text of its Decimal (``"12.50"``, never a
float), a time as ISO-8601 ``Z``, in every view (the CLI, the workbench's exports, the
postmortem stories), so that two views of one fact print the same characters.

>>> json_safe({"amount": Decimal("12.50"), "n": 2})
{'amount': '12.50', 'n': 2}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from reckon.timeutil import format_micros, to_micros

__all__ = ["json_safe"]


def json_safe(value: Any) -> Any:
    """A value as plain JSON: Decimal -> its exact text, datetime -> ISO-8601 ``Z`` (naive
    datetimes are taken as local time, which is what PySpark returns), date -> YYYY-MM-DD,
    Spark Rows and mappings -> objects, sequences -> lists, NaN and infinities -> "nan",
    "inf", "-inf" (JSON has no such numbers)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):  # JSON has no NaN or Infinity: their names, as strings
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return format_micros(to_micros(value))
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    as_dict = getattr(value, "asDict", None)  # pyspark.sql.Row
    if callable(as_dict):
        return {str(k): json_safe(v) for k, v in as_dict(recursive=False).items()}
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    return str(value)
