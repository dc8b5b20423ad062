"""A file of events for the bound what-if (``reckon bound-whatif-curve FILE``): CSV or
Parquet with event_time and arrival_time (and optionally partition), read into the plain
arrays ``reckon.whatif`` works on. A file a user hands in: every bad value is one clear line
naming the file, the column and the row.

>>> event_us, arrival_us, partitions = read_events_file("events.csv")  # doctest: +SKIP
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from reckon.errors import UsageError, invalid

__all__ = ["read_events_file"]

_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
# a time of day followed by a zone: 'Z' or +hh[:mm]; a bare date's '-01' is not a zone
_ZONE = re.compile(r"[Tt ]\d{2}(?::\d{2}(?::\d{2}(?:[.,]\d+)?)?)?\s*(?:Z|z|[+-]\d{2}(?::?\d{2})?)$")



def read_events_file(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(event_us, arrival_us, partition or None)`` of a CSV or Parquet file, in arrival order.

    Needs columns ``event_time`` and ``arrival_time``: ISO-8601 strings with a zone (``Z`` or
    ``+hh:mm``), or timestamp columns (a timestamp without a zone is read as UTC, the Parquet
    convention). ``partition`` (integers) is optional. Arrival order is the file order after a
    stable sort on arrival_time, so rows that arrived at the same instant keep file order.
    """
    file = Path(path)
    kind = _SUFFIXES.get(file.suffix.lower())
    if kind is None:
        raise invalid("--events", str(file), "a .csv, .parquet or .pq file")
    if not file.is_file():
        raise invalid("--events", str(file), "an existing CSV or Parquet file (no such file)")
    frame = _read_frame(file, kind)
    missing = [c for c in ("event_time", "arrival_time") if c not in frame.columns]
    if missing:
        raise UsageError(
            f"{file}: missing column(s) {', '.join(missing)}; the file needs event_time and "
            f"arrival_time (optional: partition); it has: {', '.join(map(str, frame.columns))}")
    if frame.empty:
        raise UsageError(f"{file}: has no rows; nothing to analyse")
    event_us = _micros(frame["event_time"], file, "event_time")
    arrival_us = _micros(frame["arrival_time"], file, "arrival_time")
    partition = _partitions(frame["partition"], file) if "partition" in frame.columns else None
    order = np.argsort(arrival_us, kind="stable")
    return (event_us[order], arrival_us[order],
            None if partition is None else partition[order])


def _read_frame(file: Path, kind: str) -> pd.DataFrame:
    try:
        if kind == "csv":
            # times stay text: parsed below with a zone check; nothing guessed from a sample
            return pd.read_csv(file, dtype={"event_time": str, "arrival_time": str},
                               keep_default_na=False, na_values=[""])
        import pyarrow.parquet as pq

        names = pq.read_schema(file).names
        wanted = [c for c in ("event_time", "arrival_time", "partition") if c in names]
        return pd.read_parquet(file, columns=wanted) if wanted else pd.DataFrame(columns=names)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise UsageError(f"{file}: cannot be read as {kind.upper()}: {exc}") from None


def _micros(column: pd.Series, file: Path, name: str) -> np.ndarray:
    if isinstance(column.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(column):
        moments = column
    elif pd.api.types.is_object_dtype(column) or pd.api.types.is_string_dtype(column):
        text = column.astype("string").str.strip()
        bad = text.isna() | ~text.str.contains(_ZONE, na=False)
        if bad.any():
            _bad_value(file, name, column, bad)
        moments = pd.to_datetime(text, utc=True, format="ISO8601", errors="coerce")
    else:
        raise UsageError(f"{file}: column {name} has type {column.dtype}; allowed: ISO-8601 "
                         "strings with a zone (e.g. 2026-01-01T09:42:00Z) or timestamps")
    if moments.isna().any():
        _bad_value(file, name, column, moments.isna())
    if isinstance(moments.dtype, pd.DatetimeTZDtype):
        moments = moments.dt.tz_convert("UTC").dt.tz_localize(None)
    return moments.to_numpy().astype("datetime64[us]").astype(np.int64)


def _bad_value(file: Path, name: str, column: pd.Series, bad: pd.Series) -> None:
    row = int(np.flatnonzero(bad.to_numpy())[0])
    raise UsageError(
        f"{file}: column {name}, row {row + 1}: {column.iloc[row]!r} is not a time; allowed: "
        "ISO-8601 with a zone (e.g. 2026-01-01T09:42:00Z or +01:00) or a timestamp column")


def _partitions(column: pd.Series, file: Path) -> np.ndarray:
    if column.isna().any() or not pd.api.types.is_integer_dtype(column):
        bad = column.isna() | ~column.astype(str).str.fullmatch(r"-?\d+")
        row = int(np.flatnonzero(bad.to_numpy())[0]) if bad.any() else 0
        raise UsageError(f"{file}: column partition, row {row + 1}: {column.iloc[row]!r} is "
                         "not a partition number; allowed: integers (or leave the column out)")
    return column.to_numpy(dtype=np.int64)


# ----------------------------------------------------------------------- bound-whatif-curve


