"""Windows: which windows an event time belongs to (part of the event-time contract, see
``reckon.eventtime`` and docs/semantics.md).

Windows are aligned to the Unix epoch, tumbling or hopping, like Beam's ``FixedWindows`` and
``SlidingWindows``. Units: microseconds since the epoch (UTC); a window ``[start, end)`` is
half-open. ``WindowSpec.window_starts`` uses only ``- % *``, so it applies to Python ints,
numpy int64 arrays and Spark long Columns alike (``t >= 0``, see ``reckon.eventtime``).

>>> spec = WindowSpec.parse("10s", slide="5s")
>>> spec.describe(), spec.window_starts(12_000_000)
('hopping 10s every 5s', [10000000, 5000000])
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any, TypeVar

from reckon.errors import ConfigError
from reckon.timeutil import day_bounds, format_duration, format_micros, parse_duration

__all__ = ["Window", "WindowSpec"]

T = TypeVar("T")


@dataclass(frozen=True, order=True)
class Window:
    """The half-open interval ``[start, end)`` in microseconds."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ConfigError(f"Window end {self.end} must be after start {self.start}")

    def __repr__(self) -> str:
        return f"Window[{format_micros(self.start)}, {format_micros(self.end)})"

    def contains(self, t: int) -> bool:
        return self.start <= t < self.end

    def intersects(self, other: Window) -> bool:
        """True when the two half-open intervals share at least one instant."""
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class WindowSpec:
    """Tumbling (``slide`` None) or hopping windows aligned to the Unix epoch.

    Tumbling, width W: ``start = floor(t / W) * W``, ``end = start + W``.
    Hopping, size W and slide S (W a multiple of S): every window whose start is a multiple of
    S with ``start <= t < start + W``; an event belongs to exactly W / S windows.
    """

    size: int
    slide: int | None = None

    def __post_init__(self) -> None:
        if self.size <= 0:
            raise ConfigError(f"window={self.size}us is not valid: the window width must be > 0")
        if self.slide is not None:
            if self.slide <= 0 or self.slide > self.size or self.size % self.slide:
                raise ConfigError(
                    f"slide={format_duration(self.slide)} is not valid for window="
                    f"{format_duration(self.size)}: the slide must be > 0 and divide the window"
                )
            if self.slide == self.size:
                object.__setattr__(self, "slide", None)

    @classmethod
    def parse(cls, window: str | int, slide: str | int | None = None) -> WindowSpec:
        return cls(parse_duration(window, "window"),
                   None if slide in (None, "", 0) else parse_duration(slide, "slide"))

    @property
    def step(self) -> int:
        """Distance between consecutive window starts (the slide, or the width if tumbling)."""
        return self.slide or self.size

    @property
    def windows_per_event(self) -> int:
        return self.size // self.step

    def window_starts(self, t: T) -> list[T]:
        """Starts of every window containing ``t`` (int, numpy array or Spark Column), newest first."""
        # T has no arithmetic bound (int, ndarray and Column share no protocol): Any, not int.
        base: Any = t - t % self.step  # type: ignore[operator]
        return [base - k * self.step for k in range(self.windows_per_event)]

    def covered_event_times(self, first_start: int, end_start: int) -> tuple[int, int]:
        """``[lo, hi)``: every event time held by the windows whose start is in
        ``[first_start, end_start)`` (empty, ``lo == hi``, if no window starts there).

        Windows are aligned to the epoch, not to the range: the first one starts at the first
        multiple of the step at or after ``first_start`` and the last one ends ``size`` after
        the last multiple before ``end_start``. A day's last windows therefore reach into the
        next day -- with hopping windows, or when the step does not divide 24 hours (a 7-minute
        window starting 23:55 ends at 00:02) -- so a day's replay, audit, duplicate count and
        the nightly wait must reach that far, and no earlier than the day's first window."""
        step = self.step
        first = -(-first_start // step) * step
        last = -(-end_start // step) * step - step
        if last < first:
            return first, first
        return first, last + self.size

    def day_event_times(self, day: date) -> tuple[int, int]:
        """``[lo, hi)``: every event time held by the windows of a UTC day (those starting in
        it), what each day-scoped read takes (covered_event_times of the day)."""
        return self.covered_event_times(*day_bounds(day))

    def assign(self, t: int) -> tuple[Window, ...]:
        """Windows containing event time ``t``, oldest first."""
        return tuple(Window(s, s + self.size) for s in reversed(self.window_starts(t)))

    def describe(self) -> str:
        if self.slide is None:
            return f"tumbling {format_duration(self.size)}"
        return f"hopping {format_duration(self.size)} every {format_duration(self.slide)}"

    def to_config(self) -> dict[str, str | None]:
        return {"window": format_duration(self.size),
                "slide": None if self.slide is None else format_duration(self.slide)}
