"""Values that change every micro-batch (its id, the watermark it is judged against, its
processing time) as columns whose generated code is the same in every batch.

Spark writes a literal long or timestamp into the Java source it generates for a plan and
caches compiled classes by that source, so ``F.lit(batch_id)`` makes each batch's plans new
code: compiled again with Janino, then run in the JVM's interpreter until the JIT catches up,
in every batch. ``reckon.jvm.BatchConstant`` (jvm/parse) holds the value in the plan's
reference objects instead; the tests count the compilations of a steady batch.

>>> batch_constant(spark, 42)          # doctest: +SKIP
Column<'UDF()'>
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from reckon.timeutil import to_micros

__all__ = ["batch_constant", "batch_timestamp", "batch_value"]


def batch_constant(spark: SparkSession, value: int) -> Column:
    """``value`` as a non-null long column whose code does not depend on it."""
    from pyspark.sql.classic.column import Column as ClassicColumn

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return ClassicColumn(jvm.reckon.jvm.BatchConstant.longColumn(int(value)))


def batch_timestamp(spark: SparkSession, value: datetime | int) -> Column:
    """A timestamp (a datetime, or epoch microseconds) as such a column."""
    micros = to_micros(value) if isinstance(value, datetime) else int(value)
    return F.timestamp_micros(batch_constant(spark, micros))


def batch_value(spark: SparkSession, value: object) -> Column:
    """Any value of a per-batch record as a column whose code does not depend on it: a long,
    a double or a timestamp through ``reckon.jvm.BatchConstant``; a text, a decimal or a
    null as a literal (Spark keeps those out of the generated code already); a Column as is.

    >>> batch_value(spark, 3.5)          # doctest: +SKIP
    Column<'UDF()'>
    """
    from pyspark.sql.classic.column import Column as ClassicColumn

    if isinstance(value, Column):
        return value
    if isinstance(value, datetime):
        return batch_timestamp(spark, value)
    if isinstance(value, int) and not isinstance(value, bool):
        return batch_constant(spark, value)
    if isinstance(value, float):
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return ClassicColumn(jvm.reckon.jvm.BatchConstant.doubleColumn(value))
    return F.lit(value)
