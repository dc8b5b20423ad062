"""One small exception hierarchy. Messages name the argument, the bad value and what is allowed."""

from __future__ import annotations

from datetime import date

__all__ = [
    "ConcurrentAuditError",
    "ConcurrentWriterError",
    "ConfigError",
    "DataQualityError",
    "LayoutError",
    "NoEventsError",
    "NotBuiltYetError",
    "ReckonError",
    "UsageError",
    "WatermarkNotReadyError",
]


class ReckonError(Exception):
    """Base class: every error reckon raises on purpose. The CLI prints it without a traceback."""

    exit_code = 1


class UsageError(ReckonError):
    """A command-line argument or API argument is wrong."""

    exit_code = 2


class NoEventsError(UsageError):
    """A day with no events to analyse: a quiet day, not a mistake. ``reckon bound-whatif`` says
    "no events on D: nothing to analyse" and exits 0; the report writes the message as a note
    ("No per-batch curve: the stream archived no events of D."). It stays a UsageError so that
    a caller that needs the day's events (the demo's summary) still stops with exit 2.

    Example: ``NoEventsError(date(2026, 11, 25), "the stream archived no events of
    2026-11-25")``.
    """

    def __init__(self, day: date, message: str) -> None:
        super().__init__(message)
        self.day = day


class LayoutError(ReckonError):
    """The warehouse was written by an earlier table layout that cannot be mixed with this one
    (for example totals that added currencies together). The message says how to rebuild."""

    exit_code = 2


class ConfigError(ReckonError):
    """The configuration is invalid or could lose data; rejected at start-up."""

    exit_code = 2


class NotBuiltYetError(ReckonError):
    """A command of the CLI contract whose implementation has not landed yet."""

    exit_code = 3


class WatermarkNotReadyError(ReckonError):
    """The stream's watermark has not passed the point a nightly step needs."""


class DataQualityError(ReckonError):
    """A blocking data-quality expectation failed."""


class ConcurrentAuditError(ReckonError):
    """Two audits of one day overlapped; the one that lost recorded nothing. Run it again."""


class ConcurrentWriterError(ReckonError):
    """Another process is writing the same tables (storage.writer_lock); nothing was written.
    Its message names the holder."""

    exit_code = 4


def invalid(name: str, value: object, allowed: str) -> UsageError:
    """Build the standard 'bad argument' error: names the argument, the value, what is allowed."""
    return UsageError(f"{name}={value!r} is not valid: {allowed}")
