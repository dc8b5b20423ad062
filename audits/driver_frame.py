"""A bounded day's rows as a pandas DataFrame holding the Python values Spark's ``collect`` gives.

Why: ``audits.quality`` validates a day of ordinary size in the driver's memory with GX's
pandas engine (one Arrow transfer) instead of as Spark jobs (several per expectation), and its
records must be the ones the Spark engine gives: the same unexpected counts and the same
samples, down to their JSON. GX's Spark engine samples with ``collect``, so every cell here is
what ``collect`` would make of it: every column has object dtype, a Decimal stays a
``Decimal`` (never a float), a nullable integer column stays ``int``/``None`` (pandas would
make it float64 with NaN), dates are ``date`` and timestamps the naive ``datetime`` that
PySpark's ``TimestampType.fromInternal`` makes. Only flat columns are taken (``is_flat``): a
struct, array or map would come back as Arrow's dicts and lists, not as ``Row`` objects.

The caller bounds the rows (the ``check_in_memory_rows`` setting): nothing here limits them.

Example::

    >>> df = spark.createDataFrame([(1, None)], "n long, m long")  # doctest: +SKIP
    >>> frame = driver_frame(df)  # doctest: +SKIP
    >>> frame["m"].tolist(), str(frame["m"].dtype)  # doctest: +SKIP
    ([None], 'object')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T

__all__ = ["arrow_frame", "driver_frame", "is_flat", "stable_order"]

_NESTED = (T.ArrayType, T.MapType, T.StructType, T.VariantType)
_TIMESTAMPS = (T.TimestampType, T.TimestampNTZType)


def is_flat(schema: T.StructType) -> bool:
    """Whether every column is a plain value (no struct, array, map or variant), so that
    ``driver_frame`` gives exactly what ``collect`` gives."""
    return not any(isinstance(f.dataType, _NESTED) for f in schema.fields)


def driver_frame(df: DataFrame) -> Any:
    """All of ``df``'s rows in the driver as a pandas DataFrame of object columns holding the
    values ``collect`` gives (see the module docstring); bound ``df`` before calling."""
    return arrow_frame(df.toArrow(), df.schema)


def arrow_frame(table: Any, schema: T.StructType) -> Any:
    """An Arrow table whose columns are ``schema``'s, in its order, as the pandas frame
    ``driver_frame`` makes: what ``collect`` would give of those Spark types. The JVM-free check
    (``audits.quality_local``) builds its frames from delta-rs and DuckDB reads with it, so
    both engines hand GX the same cells. E.g. a ``timestamp[us, UTC]`` column of a
    ``TimestampType`` field becomes naive ``datetime`` objects, a ``decimal128(38, 3)`` one
    ``Decimal('12.500')``."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    columns: dict[str, Any] = {}
    for i, spark_field in enumerate(schema.fields):
        column = table.column(i)
        kind = spark_field.dataType
        if isinstance(kind, _TIMESTAMPS):  # micros since the epoch, as Spark holds them
            micros = pc.cast(column, pa.int64()).to_pylist()
            values = [None if v is None else kind.fromInternal(v) for v in micros]
        else:
            values = column.to_pylist()
        columns[spark_field.name] = pd.Series(values, dtype=object)
    return pd.DataFrame(columns, columns=[f.name for f in schema.fields])


def stable_order(frame: Any, first: Sequence[str]) -> Any:
    """``frame``'s rows sorted by the columns ``first`` (a suite's index columns), then by the
    others, nulls last. Why: GX's samples are the first offending rows in frame order, and the
    order Spark hands rows over in is its plan's; sorted, the Spark and JVM-free engines show
    the same samples. E.g. rows keyed ``b``, None, ``a`` come out ``a``, ``b``, None."""
    names = [*first, *(c for c in frame.columns if c not in first)]
    keys = [tuple((1,) if v is None else (0, v) for v in row)
            for row in frame[names].itertuples(index=False, name=None)]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return frame.iloc[order].reset_index(drop=True)
