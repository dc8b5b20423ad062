"""The notebook's door to a warehouse: ``app.read.open("warehouse")``.

A read-only DuckDB connection with every table of the warehouse registered under its name
(provisional_totals derived from its deltas), read through delta-rs: no JVM, no Spark
session, a second to open. The connection cannot reach a file or the network, and its
configuration is locked (``reports.duck``); what a notebook creates stays in its memory.

>>> import app.read                                                        # doctest: +SKIP
>>> con = app.read.open("warehouse")                                       # doctest: +SKIP
>>> con.sql("SELECT currency, count(*) AS n FROM reconciliation GROUP BY 1").df()  # doctest: +SKIP
>>> con.sql("SELECT * FROM late_events").pl()    # a Polars frame               # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["open"]


def open(warehouse: str | Path = "warehouse") -> Any:
    """The warehouse's tables in a read-only DuckDB connection (``duckdb.DuckDBPyConnection``).
    A directory that is not there is a ``reckon.errors.UsageError`` saying so."""
    from reports.duck import open_warehouse

    return open_warehouse(warehouse)
