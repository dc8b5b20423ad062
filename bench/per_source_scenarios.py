"""The days of the per-source benchmark (issue 41): named, seeded scenarios of three sources
on two partitions, and the landing files a stream reads them from.

Apart from the measuring (``bench.per_source_day``) so that a test or a notebook can make the
same day without the bench: every figure of it is a function of the scenario and its seed.

Example:
    >>> day = make_day(SCENARIOS["flushing_link"].scaled(minutes=1.5))
    >>> len(day) > 0, sorted(set(day.source.tolist()))
    (True, ['http', 'radar', 'sat'])
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from reckon.timeutil import format_micros
from reckon.whatif_batches import BatchedEvent

__all__ = [
    "DAY",
    "IDLE_TIMEOUT",
    "PARTITIONS",
    "SCENARIOS",
    "SOURCES",
    "TARGET",
    "WINDOW",
    "Day",
    "S",
    "Scenario",
    "make_day",
    "write_day",
]

S = 1_000_000
DAY = date(2026, 1, 1)
DAY_START = 1_767_225_600 * S  # 2026-01-01T00:00:00Z
SOURCES = ("radar", "sat", "http")
PARTITIONS = 2
WINDOW = "10s"
IDLE_TIMEOUT = "60s"
TARGET = "0.999"


@dataclass(frozen=True)
class Day:
    """A generated day in arrival order: event and arrival times (microseconds), partition,
    source, and the landing file (= micro-batch) each event arrives in."""

    event_us: np.ndarray
    arrival_us: np.ndarray
    partition: np.ndarray
    source: np.ndarray
    batch: np.ndarray

    def __len__(self) -> int:
        return len(self.event_us)

    def batched(self) -> list[BatchedEvent]:
        return [BatchedEvent(int(t), int(a), int(p), int(b), source=str(s))
                for t, a, p, s, b in zip(self.event_us.tolist(), self.arrival_us.tolist(),
                                         self.partition.tolist(), self.source.tolist(),
                                         self.batch.tolist(), strict=True)]


@dataclass(frozen=True)
class Scenario:
    """A named day: ``minutes`` of event time from 01:00 at ``rate`` events a second over the
    three sources, landing files of ``file_seconds`` of arrival, and how each source's
    arrival follows its event time (``arrive``: rng, event times, source names, start ->
    arrival times)."""

    name: str
    about: str
    minutes: float
    rate: float
    file_seconds: int
    seed: int
    arrive: Callable[[np.random.Generator, np.ndarray, np.ndarray, int], np.ndarray]

    def scaled(self, minutes: float | None = None, rate: float | None = None) -> Scenario:
        return Scenario(self.name, self.about, minutes or self.minutes, rate or self.rate,
                        self.file_seconds, self.seed, self.arrive)


def _flushing_link(rng: np.random.Generator, t: np.ndarray, src: np.ndarray,
                   start: int) -> np.ndarray:
    """``sat`` flushes in order every 15-45 s (0.5 s in flight); ``http`` 0-20 s late
    (retries, out of order); ``radar`` under 0.1 s."""
    span = int(t.max() - start) + 1 if len(t) else 1
    gaps = rng.integers(15 * S, 45 * S, span // (15 * S) + 2)
    flushes = start + np.cumsum(gaps)
    sat = flushes[np.searchsorted(flushes, t, side="right")] + S // 2
    return np.where(src == "sat", sat, np.where(
        src == "http", t + rng.integers(0, 20 * S, len(t)), t + rng.integers(0, S // 10, len(t))))


def _steady_lag(rng: np.random.Generator, t: np.ndarray, src: np.ndarray,
                start: int) -> np.ndarray:
    """``sat`` sends what it holds every 10 s (5 s into each window), 10 s in flight; ``http``
    0-3 s late; ``radar`` at once (the day measured on 2026-11-27)."""
    due = ((t - start - 5 * S) // (10 * S) + 1) * 10 * S + 5 * S + start + 10 * S
    return np.where(src == "sat", due, t) + np.where(
        src == "http", rng.integers(0, 3 * S, len(t)), 0)


SCENARIOS = {
    "flushing_link": Scenario(
        "flushing_link", "sat: a buffered link flushing in order every 15-45 s (its lag "
        "0-45 s); http: retried deliveries up to 20 s late, out of order; radar: at once",
        minutes=8, rate=10, file_seconds=5, seed=41, arrive=_flushing_link),
    "steady_lag": Scenario(
        "steady_lag", "sat: sends every 10 s, 10 s in flight (always 10-20 s behind); http: "
        "up to 3 s of jitter; radar: at once", minutes=25, rate=4, file_seconds=30, seed=41,
        arrive=_steady_lag),
}


def make_day(scenario: Scenario) -> Day:
    """The scenario's day, in arrival order (ties: generation order). Every (partition,
    source) input delivers one event at 01:00:00 exactly, so a stream knows all of them from
    its first batch."""
    rng = np.random.default_rng(scenario.seed)
    start = DAY_START + 3600 * S
    n = int(scenario.minutes * 60 * scenario.rate)
    t = start + np.sort(rng.integers(0, int(scenario.minutes * 60 * S), n))
    src = rng.choice(np.array(SOURCES, dtype=object), n)
    part = rng.integers(0, PARTITIONS, n)
    a = scenario.arrive(rng, t, src, start)
    opening = [(p, s) for p in range(PARTITIONS) for s in SOURCES]
    t = np.concatenate([np.full(len(opening), start), t])
    a = np.concatenate([np.full(len(opening), start), a])
    part = np.concatenate([np.array([p for p, _ in opening]), part])
    src = np.concatenate([np.array([s for _, s in opening], dtype=object), src])
    # the order the stream and the what-if read it in: arrival, then partition, then the
    # line in its file (here: generation order)
    order = np.lexsort((np.arange(len(t)), part, a))
    t, a, part, src = t[order], a[order], part[order], src[order]
    return Day(t, a, part, src, (a - start) // (scenario.file_seconds * S))


def write_day(landing: Path, day: Day) -> int:
    """The day as landing files, one per micro-batch, named in arrival order; returns how
    many files."""
    landing.mkdir(parents=True, exist_ok=True)
    files: dict[int, list[str]] = {}
    for i, (t, a, p, s, b) in enumerate(zip(day.event_us.tolist(), day.arrival_us.tolist(),
                                            day.partition.tolist(), day.source.tolist(),
                                            day.batch.tolist(), strict=True)):
        files.setdefault(b, []).append(json.dumps(
            {"event_id": f"e{i}", "key": f"m{i % 7}", "amount": "1.00", "currency": "EUR",
             "event_time": format_micros(t), "source": s, "partition": p,
             "arrival_time": format_micros(a)}, separators=(",", ":")))
    for k, lines in sorted(files.items()):
        path = landing / f"events-{k:05d}.ndjson"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_800_000_000 + k, 1_800_000_000 + k))
    return len(files)
