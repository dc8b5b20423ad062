"""The event-time contract: windows, watermark, lateness, duplicates, clock skew.

Every other part of reckon (the stream, the replay, the reference, the what-if analysis, the
audit) imports these rules; none re-implements them. See docs/semantics.md. The contract is
read in three modules, each the one owner of its rules:

- ``reckon.windows``: which windows an event time belongs to (``WindowSpec``);
- ``reckon.watermark``: how far event time has progressed (``WatermarkPolicy``,
  ``advance_watermark`` per batch, ``watermark_series`` per event, ``watermark_hold``);
- this module: what becomes of each event and each window under the watermark
  (``Disposition``, ``WindowStatus``, ``classify``, the lateness, skew and duplicate rules)
  and all the rules as one value (``EventTimeRules``).

This module is the contract's public face, as Beam's ``apache_beam.transforms.window`` is its
windowing's: it re-exports the public names of the other two (``__all__``), so
``from reckon.eventtime import WindowSpec, WatermarkState, classify`` is the one import a
caller needs.

Units: every time and duration is an integer number of microseconds since the Unix epoch (UTC).
Intervals are half-open: a window ``[start, end)`` contains ``start`` and not ``end``.

The arithmetic helpers (``WindowSpec.window_starts``, ``is_open``, ``is_beyond_allowed_lateness``,
``is_future_dated``, ``is_duplicate_of_recent``) use only ``+ - % < <= >``, so the very same
function applies to Python ints, numpy int64 arrays and Spark long Columns. ``t % step`` is a
floor remainder for Python and numpy and a truncated one in Spark; they agree for ``t >= 0``,
which validation guarantees (event times before 1970 are quarantined).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import Any, TypeVar

from reckon.errors import ConfigError
from reckon.timeutil import format_duration, parse_duration
from reckon.vocabulary import to_stored
from reckon.watermark import (
    Hold,
    InputKey,
    PartitionObservation,
    PartitionProgress,
    WatermarkPolicy,
    WatermarkState,
    advance_watermark,
    input_label,
    input_partition,
    shift_watermark_series,
    watermark_hold,
    watermark_series,
)
from reckon.windows import Window, WindowSpec

__all__ = [
    "Disposition",
    "EventTimeRules",
    "Hold",
    "InputKey",
    "PartitionObservation",
    "PartitionProgress",
    "WatermarkPolicy",
    "WatermarkState",
    "Window",
    "WindowSpec",
    "WindowStatus",
    "advance_watermark",
    "classify",
    "ends_passed",
    "input_label",
    "input_partition",
    "is_beyond_allowed_lateness",
    "is_duplicate_of_recent",
    "is_future_dated",
    "is_open",
    "shift_watermark_series",
    "watermark_hold",
    "watermark_series",
    "window_status",
]

T = TypeVar("T")


# --------------------------------------------------------------------------- classification


class Disposition(StrEnum):
    """What became of one input row (per window, for valid events). Every row gets exactly one."""

    ON_TIME = "on_time"        # window open: counted in the provisional total
    REVISION = "revision"      # window closed, within the allowed lateness: revision += 1
    LATE = "late"              # window final: side output, not counted
    DUPLICATE = "duplicate"    # same event_id seen within the dedup horizon: counted once
    QUARANTINED = "quarantined"  # failed parsing or validation: quarantine table with reason


class WindowStatus(StrEnum):
    OPEN = "OPEN"      # end > WM
    CLOSED = "CLOSED"  # end <= WM < end + allowed_lateness: emitted, may still be revised
    FINAL = "FINAL"    # end + allowed_lateness <= WM


def is_open(window_end: T, watermark: Any) -> T:
    """``end > WM``: the window still accepts events as on time."""
    return window_end > watermark  # type: ignore[no-any-return]


def is_beyond_allowed_lateness(window_end: T, watermark: Any, allowed_lateness: int) -> T:
    """``end + G <= WM``: the window is final; an event for it goes to the late side output."""
    return window_end + allowed_lateness <= watermark  # type: ignore[operator, no-any-return]


def ends_passed(before: T, after: T, step: int) -> tuple[T, T]:
    """``(first, last)``: the window ends a watermark moving from ``before`` to ``after``
    passes, i.e. every multiple of ``step`` (windows align to the epoch, so every end is one)
    with ``before < end <= after``; none when ``first > last``. Works on ints and Spark
    Columns alike, so the derived provisional_totals finds the batch
    that closed a window by equality instead of a range join.

    >>> ends_passed(25, 47, 10)
    (30, 40)
    """
    # (x % s + s) % s: the floor remainder on ints and on Spark's truncating % alike
    first: Any = before - (before % step + step) % step + step  # type: ignore[operator]
    last: Any = after - (after % step + step) % step  # type: ignore[operator]
    return first, last


def classify(window_end: int, watermark: int | None, allowed_lateness: int) -> Disposition:
    """Classify one (event, window) pair against the watermark left by the previous batch.

    No watermark yet (None) means no window has closed: everything is on time.
    """
    if watermark is None or is_open(window_end, watermark):
        return Disposition.ON_TIME
    if is_beyond_allowed_lateness(window_end, watermark, allowed_lateness):
        return Disposition.LATE
    return Disposition.REVISION


def window_status(window_end: int, watermark: int | None, allowed_lateness: int) -> WindowStatus:
    """Lifecycle of a window under watermark ``WM``: OPEN -> CLOSED -> FINAL."""
    if watermark is None or is_open(window_end, watermark):
        return WindowStatus.OPEN
    if is_beyond_allowed_lateness(window_end, watermark, allowed_lateness):
        return WindowStatus.FINAL
    return WindowStatus.CLOSED


def is_future_dated(event_time: T, arrival_time: Any, max_clock_skew: int) -> T:
    """``event_time > arrival_time + skew``: a bad clock; quarantined, never moves the watermark."""
    return event_time > arrival_time + max_clock_skew  # type: ignore[no-any-return]


def is_duplicate_of_recent(latest_prior_arrival: T, arrival_time: Any, horizon: int) -> T:
    """The stream's dedup rule: a copy is a duplicate when an earlier copy of the same event_id
    (earlier in arrival order) arrived no more than ``horizon`` before it. Pass the latest
    arrival time among the earlier copies; callers handle 'no earlier copy' (None/null)."""
    return latest_prior_arrival >= arrival_time - horizon  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- all rules together


@dataclass(frozen=True)
class EventTimeRules:
    """Everything that decides what happens to an event, as one frozen value.

    ``allowed_lateness`` G keeps a closed window revisable until ``WM >= end + G``;
    ``dedup_horizon`` bounds how far back (in arrival time) the stream looks for an earlier
    copy of an event_id; ``max_clock_skew`` bounds how far an event_time may run ahead of its
    arrival before it is quarantined as future-dated.
    """

    windows: WindowSpec
    watermark: WatermarkPolicy
    allowed_lateness: int = 0
    max_clock_skew: int = 5 * 60 * 1_000_000
    dedup_horizon: int = 3600 * 1_000_000

    def __post_init__(self) -> None:
        for name in ("allowed_lateness", "max_clock_skew", "dedup_horizon"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)}us is not valid: it must be >= 0")

    @classmethod
    def parse(cls, *, window: str | int = "10s", slide: str | int | None = None,
              watermark_bound: str | int = "3s", allowed_lateness: str | int = "0s",
              idle_timeout: str | int = "60s", max_clock_skew: str | int = "5m",
              dedup_horizon: str | int = "1h",
              expected_partitions: Iterable[int] = (), inputs: str = "",
              bound_by_partition: Mapping[Any, str | int] | None = None,
              bound_by_source: Mapping[str, str | int] | None = None) -> EventTimeRules:
        return cls(
            WindowSpec.parse(window, slide),
            WatermarkPolicy(parse_duration(watermark_bound, "watermark_bound"),
                            parse_duration(idle_timeout, "idle_timeout"),
                            tuple(expected_partitions),
                            by_source=_by_source(inputs, bool(bound_by_source)),
                            partition_bounds=_partition_bounds(bound_by_partition or {}),
                            source_bounds=tuple(
                                (str(k), parse_duration(v, f"watermark bound of source {k}"))
                                for k, v in (bound_by_source or {}).items())),
            allowed_lateness=parse_duration(allowed_lateness, "allowed_lateness"),
            max_clock_skew=parse_duration(max_clock_skew, "max_clock_skew"),
            dedup_horizon=parse_duration(dedup_horizon, "dedup_horizon"),
        )

    def day_final_at(self, day: date) -> int:
        """The watermark at which UTC day ``day`` is final: every window of the day (every
        window starting in it) is FINAL, so no event of the day can change a provisional
        total. That is the end of its last window plus the allowed lateness: ``end of the day
        + allowed_lateness`` for tumbling windows; hopping windows (and a step that does not
        divide 24 hours) reach into the next day. The nightly run waits for it; an audit
        before it may see transient breaks.

        >>> from reckon.timeutil import format_micros
        >>> rules = EventTimeRules.parse(window="10s", allowed_lateness="2s")
        >>> format_micros(rules.day_final_at(date(2026, 1, 1)))
        '2026-01-02T00:00:02Z'
        """
        _, last_window_end = self.windows.day_event_times(day)
        return last_window_end + self.allowed_lateness

    def is_day_final(self, day: date, watermark: int | None) -> bool:
        """Whether ``watermark`` (None: none yet) has made day ``day`` final
        (``day_final_at(day) <= watermark``, the FINAL rule of ``is_beyond_allowed_lateness``)."""
        if watermark is None:
            return False
        _, last_window_end = self.windows.day_event_times(day)
        return bool(is_beyond_allowed_lateness(last_window_end, watermark,
                                               self.allowed_lateness))

    def to_config(self) -> dict[str, Any]:
        """The rules as settings, by their names now; the bounds per input only when they are
        not the default (one bound for all), so a default spec reads exactly as it did before
        they existed. What a warehouse records is ``to_record``."""
        config = self._to_config()
        for name, default in (("watermark_inputs", "partition"),
                              ("watermark_bound_by_partition", {}),
                              ("watermark_bound_by_source", {})):
            if config[name] == default:
                del config[name]
        return config

    def to_record(self) -> dict[str, Any]:
        """The rules as a warehouse records them (the event-time spec, a batch's
        ``rules_json``, an audit run's parameters, the replay's id): ``to_config`` keyed by
        the first names (reckon.vocabulary), so that old readers and old warehouses agree.

        >>> sorted(EventTimeRules.parse(watermark_bound="5s").to_record())[:3]
        ['dedup_horizon', 'expected_partitions', 'grace']
        """
        return to_stored(self.to_config())

    def _to_config(self) -> dict[str, Any]:
        return {**self.windows.to_config(),
                "watermark_bound": format_duration(self.watermark.watermark_bound),
                "allowed_lateness": format_duration(self.allowed_lateness),
                "idle_timeout": format_duration(self.watermark.idle_timeout),
                "max_clock_skew": format_duration(self.max_clock_skew),
                "dedup_horizon": format_duration(self.dedup_horizon),
                "expected_partitions": list(self.watermark.expected_partitions),
                "watermark_inputs": "source" if self.watermark.by_source else "partition",
                "watermark_bound_by_partition": {
                    str(p): format_duration(b) for p, b in self.watermark.partition_bounds},
                "watermark_bound_by_source": {
                    k: format_duration(b) for k, b in self.watermark.source_bounds}}


#: ``watermark_inputs``: what has its own maximum and bound (see ``WatermarkPolicy``).
WATERMARK_INPUTS = ("partition", "source")


def _by_source(inputs: str, source_bounds: bool) -> bool:
    """Inputs by source when asked, or (not given: ``""``) when bounds by source are."""
    if inputs not in ("", *WATERMARK_INPUTS):
        raise ConfigError(f"watermark_inputs={inputs!r} is not valid: write \"partition\" "
                          "(one input per partition) or \"source\" (one per partition and "
                          "source)")
    return inputs == "source" or (inputs == "" and source_bounds)


def _partition_bounds(given: Mapping[Any, str | int]) -> tuple[tuple[int, int], ...]:
    out = []
    for key, value in given.items():
        try:
            partition = int(key)
        except ValueError:
            raise ConfigError(f"watermark_bound_by_partition: {key!r} is not a partition "
                              "number (write 0=5s,3=30s)") from None
        out.append((partition, parse_duration(value, f"watermark bound of partition {key}")))
    return tuple(out)
