"""What `reckon explain` answers, on either engine: one window's story, and its one refusal.

Why its own module: the story is read by two engines (Spark, audits/explain_spark.py; DuckDB,
reports/explain_duck.py) and must print the same lines and the same ``--json`` on both; each
chapter is told by the one story builder, ``audits.chapters.chapter_of``.

>>> str(no_events_error("m-x", 0, None)).split(":")[0]
"--key='m-x' has no events on 1970-01-01 (the day of --window)"
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from audits.chapters import WindowChapter
from reckon.errors import UsageError
from reckon.json_text import json_safe
from reckon.timeutil import format_micros, from_micros

__all__ = ["WindowStory", "no_events_error", "untold"]


@dataclass(frozen=True)
class WindowStory:
    key: str
    instant: int
    rules: dict[str, Any]
    chapters: tuple[WindowChapter, ...]      # per window, then per currency
    currency: str | None = None              # the --currency it was narrowed to

    @property
    def lines(self) -> tuple[str, ...]:
        out: list[str] = []
        for i, ch in enumerate(self.chapters):
            if i:
                out.append("")
            out.extend(ch.lines)
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: Decimal as text, times as ISO-8601 ``Z``."""

        def times(d: dict[str, Any]) -> Any:
            return {k: (format_micros(v) if k in _TIME_FIELDS and isinstance(v, int) else
                        times(v) if isinstance(v, dict) else
                        [times(x) if isinstance(x, dict) else x for x in v]
                        if isinstance(v, list) else v)
                    for k, v in d.items()}

        raw: dict[str, Any] = {"key": self.key, "currency": self.currency,
                               "instant": self.instant, "rules": self.rules,
                               "windows": [asdict(ch) for ch in self.chapters],
                               "lines": list(self.lines)}
        for ch in raw["windows"]:
            ch["lines"] = list(ch["lines"])
        return json_safe(times(raw))  # type: ignore[no-any-return]


_TIME_FIELDS = {"instant", "window_start", "window_end", "event_time", "arrival_time",
                "watermark", "processed_at", "closed_at", "watermark_at_close",
                "finalized_at"}


def untold(ch: WindowChapter) -> bool:
    """Nothing at all to tell: no event, quarantined line, row or history."""
    return not (ch.events or ch.quarantined or ch.history or ch.provisional or ch.canonical
                or ch.reconciliation)


def no_events_error(key: str, instant: int, currency: str | None) -> UsageError:
    """The one line for a key (or currency) without a single event on the window's day,
    the same on both engines (reports/explain_duck.py).

    """
    day = from_micros(instant).date()
    what = f"--key={key!r}" + (f" in {currency}" if currency else "")
    return UsageError(f"{what} has no events on {day} (the day of --window): check the key "
                      "(keys are case-sensitive), the currency and the day, e.g. with "
                      "`reckon sql \"SELECT DISTINCT key FROM event_log WHERE event_date = "
                      f"'{day}'\"`")
