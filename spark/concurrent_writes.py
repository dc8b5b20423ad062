"""Independent Spark work of one step run side by side: a stream batch's or a replay's Delta
writes (``ConcurrentWrites``), an audit's reads of its inputs (``side_by_side``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

__all__ = ["ConcurrentWrites", "side_by_side"]


def side_by_side(calls: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Each call's result by name, the calls run in threads of their own (as
    ``ConcurrentWrites``): most of opening a Delta table is driver-side work (listing and
    reading its log), which overlaps. The first error (in ``calls``' order) is raised once
    every call has ended.

    >>> side_by_side({"a": lambda: 1, "b": lambda: 2})
    {'a': 1, 'b': 2}
    """
    results: dict[str, Any] = {}
    errors: dict[str, BaseException] = {}

    def keep(name: str, call: Callable[[], Any]) -> None:
        try:
            results[name] = call()
        except BaseException as exc:  # raised below, in the calls' order
            errors[name] = exc

    threads = ConcurrentWrites()
    for name, call in calls.items():
        threads.start(name, keep, name, call)
    threads.wait()
    for name in calls:
        if name in errors:
            raise errors[name]
    return {name: results[name] for name in calls}


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
