"""Metrics observed on the rows as a job writes them, with a quiet day in mind.

``DataFrame.observe`` collects aggregates in the same pass as the write (no second job over
the rows). When the optimizer proves a plan empty (a day without events: the partition filter
finds no file), it drops the observed node with everything else, no metrics are collected, and
PySpark's ``Observation.get`` fails on the empty result with a bare Java AssertionError. An
empty input has known metrics (zero rows, zero sums), which ``observed`` returns instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import Observation

__all__ = ["observed"]


def observed(observation: Observation, empty: Mapping[str, Any]) -> dict[str, Any]:
    """The observation's metrics by name, or ``empty`` (what they are over no rows) when Spark
    collected none because the observed plan had no rows at all.

    >>> observed(Observation("day"), {"rows": 0})  # doctest: +SKIP
    {'rows': 0}
    """
    try:
        row = observation.get
    except Py4JJavaError as exc:
        if "java.lang.AssertionError" not in str(exc.java_exception.toString()):
            raise
        return dict(empty)
    metrics = dict(row) if isinstance(row, Mapping) else row.asDict()
    return {**empty, **metrics}
