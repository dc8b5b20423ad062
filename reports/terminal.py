"""Readable terminal tables and JSON-safe values, shared by the CLI commands.

One formatting rule for every command, so `reckon sql`, `reckon explain` and the others print
money exactly (Decimal text, never a float repr), times as ISO-8601 UTC with a trailing ``Z``
and nulls as an empty-looking ``-``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, TextIO

from reckon.json_text import json_safe

__all__ = ["format_value", "json_safe", "print_json", "print_table", "table_text"]

_MAX_CELL = 60




def format_value(value: Any) -> str:
    """One cell's text: exact decimals, ISO times, ``-`` for null, JSON for nested values."""
    if value is None:
        return "-"
    safe = json_safe(value)
    if isinstance(safe, (dict, list)):
        return json.dumps(safe, sort_keys=True, separators=(",", ":"))
    if isinstance(safe, bool):
        return "true" if safe else "false"
    return str(safe)


def _cell(value: Any) -> str:
    text = format_value(value).replace("\n", " ")
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…"


def table_text(rows: Sequence[Sequence[Any] | Mapping[str, Any]], columns: Sequence[str]) -> str:
    """Rows as an aligned text table with a header rule. Numbers (and Decimals) align right."""
    cells = [[_cell(r.get(c) if isinstance(r, Mapping) else r[i]) for i, c in enumerate(columns)]
             for r in rows]
    numeric = [bool(cells) and all(
        (isinstance(r.get(c) if isinstance(r, Mapping) else r[i], (int, float, Decimal))
         and not isinstance(r.get(c) if isinstance(r, Mapping) else r[i], bool))
        or (r.get(c) if isinstance(r, Mapping) else r[i]) is None
        for r in rows) for i, c in enumerate(columns)]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w)
                 for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    out = [line(list(columns)), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in cells]
    return "\n".join(out)


def print_table(rows: Sequence[Sequence[Any] | Mapping[str, Any]], columns: Sequence[str],
                file: TextIO | None = None) -> None:
    """Print ``rows`` (tuples in ``columns`` order, or dicts keyed by column) as a table."""
    print(table_text(rows, columns), file=file or sys.stdout)


def print_json(payload: Any, file: TextIO | None = None) -> None:
    print(json.dumps(json_safe(payload), indent=2, sort_keys=False, allow_nan=False),
          file=file or sys.stdout)
