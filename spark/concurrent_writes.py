"""Independent Delta writes of one step (a stream batch, a replay) run side by side."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

__all__ = ["ConcurrentWrites"]


class ConcurrentWrites:
    """Independent table writes, each in its own thread (pyspark's InheritableThread, so
    Spark's thread-local job properties follow): most of a small commit's time is Delta's
    driver-side bookkeeping, which overlaps. ``wait`` joins them all; the first error is
    re-raised only after every write has ended, so a failed run never leaves a write running
    into its own re-run. ``step`` wraps each write (the stream times them).

    Example::

        writes = ConcurrentWrites()
        writes.start("quarantine", tb.replace_rows, rejected, wh, tb.QUARANTINE, cond)
        writes.start("canonical_totals", tb.replace_rows, totals, wh, tb.CANONICAL_TOTALS,
                     cond)
        writes.wait()
        writes.raise_first_error()
    """

    def __init__(self, step: Callable[[str], AbstractContextManager[None]] | None = None
                 ) -> None:
        self._step = step or (lambda _name: nullcontext())
        self._threads: list[Any] = []
        self._errors: list[BaseException] = []

    def start(self, name: str, fn: Callable[..., None], *args: Any) -> None:
        from pyspark import InheritableThread

        def run() -> None:
            try:
                with self._step(name):
                    fn(*args)
            except BaseException as exc:  # re-raised by raise_first_error
                self._errors.append(exc)

        thread = InheritableThread(target=run, name=f"reckon-write-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def wait(self) -> None:
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def raise_first_error(self) -> None:
        if self._errors:
            raise self._errors[0]
