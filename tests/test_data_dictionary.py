"""Fast tier: docs/data-dictionary.md lists every column of every table with the type the code
declares, and nothing else, so the page cannot drift from spark/tables.py."""

from __future__ import annotations

import re

from reckon.config import PROJECT_ROOT
from spark import tables as tb

_TABLE = re.compile(r"^## (\w+)$")
_ROW = re.compile(r"^\| (\w+) \| ([\w<>,()]+) \| .+ \|$")


def _documented() -> dict[str, dict[str, str]]:
    tables: dict[str, dict[str, str]] = {}
    current: str | None = None
    for line in (PROJECT_ROOT / "docs" / "data-dictionary.md").read_text().splitlines():
        if m := _TABLE.match(line):
            current = m.group(1) if m.group(1) in tb.SCHEMAS else None
        elif current and (m := _ROW.match(line)) and m.group(1) != "column":
            tables.setdefault(current, {})[m.group(1)] = m.group(2)
    return tables


def test_every_table_and_column_is_documented_with_its_type():
    want = {name: {f.name: f.dataType.simpleString() for f in schema.fields}
            for name, schema in tb.SCHEMAS.items()}
    assert _documented() == want


def test_every_total_is_documented_per_currency():
    documented = _documented()
    for name in (tb.PROVISIONAL_TOTALS, tb.CANONICAL_TOTALS, tb.UNCAUGHT_DUPLICATES,
                 tb.RECONCILIATION):
        assert list(documented[name])[:4] == ["window_start", "window_end", "key", "currency"]
