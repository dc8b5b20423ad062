"""Scenario ("transcript") cases: events in arrival order, batch boundaries, expected totals and
late rows. The same cases run through the pure reference, the Spark stream and the replay."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from reckon.reference import Event

S = 1_000_000
BASE = 1_767_225_600 * S  # 2026-01-01T00:00:00Z, 10-aligned


@dataclass(frozen=True)
class Scenario:
    name: str
    rules: dict[str, object]
    batches: list[list[Event]]
    totals: dict[tuple[int, str], tuple[str, int, str, int]]  # (start s, key) -> total, n, status, rev
    late: list[tuple[str, int, int]] = field(default_factory=list)  # event_id, window start s, lateness s
    duplicates: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    watermarks: list[int | None] | None = None  # seconds after BASE, one per batch


def ev(t: int, arrival: int, partition: int = 0, key: str | None = None,
       amount: str = "1.00") -> Event:
    """An event at BASE + t seconds arriving at BASE + arrival seconds; the id names both."""
    key = key or f"m{partition}"
    return Event(f"p{partition}-t{t}-a{arrival}", key, Decimal(amount), BASE + t * S,
                 BASE + arrival * S, partition, arrival)


def one_per_batch(seconds, key="merchant-x", partition=0, amount="1.00"):
    """Each event in its own batch; arrival one second after the previous one's."""
    return [[Event(f"e{i}-{t}", key, Decimal(amount), BASE + t * S, BASE + (100 + i) * S,
                   partition, i)] for i, t in enumerate(seconds)]


WORKED = [1, 3, 7, 12, 15, 8, 22, 26, 4]

SCENARIOS = [
    Scenario(
        "worked example, grace 0",
        dict(window="10s", lateness="3s", grace="0s"),
        one_per_batch(WORKED),
        {(0, "merchant-x"): ("3.00", 3, "FINAL", 0), (10, "merchant-x"): ("2.00", 2, "FINAL", 0),
         (20, "merchant-x"): ("2.00", 2, "OPEN", 0)},
        late=[("e5-8", 0, 2), ("e8-4", 0, 13)],
    ),
    Scenario(
        "worked example, grace 5s: 8 revises [0,10), only 4 is late",
        dict(window="10s", lateness="3s", grace="5s"),
        one_per_batch(WORKED),
        {(0, "merchant-x"): ("4.00", 4, "FINAL", 1), (10, "merchant-x"): ("2.00", 2, "CLOSED", 0),
         (20, "merchant-x"): ("2.00", 2, "OPEN", 0)},
        late=[("e8-4", 0, 13)],
    ),
]

SCENARIOS += [
    Scenario(
        "two revisions of a closed window in one batch count once; the next batch's adds one",
        dict(window="10s", lateness="3s", grace="10s"),
        # WM 11 after the first batch: [0,10) is CLOSED (within grace until WM 20), so 2 and 3
        # revise it in one batch (revision 1), 5 in the next (revision 2); 25 moves WM to 22
        [[ev(1, 100), ev(14, 101)], [ev(2, 102), ev(3, 103)], [ev(5, 104)], [ev(25, 105)]],
        {(0, "m0"): ("4.00", 4, "FINAL", 2), (10, "m0"): ("1.00", 1, "CLOSED", 0),
         (20, "m0"): ("1.00", 1, "OPEN", 0)},
        watermarks=[11, 11, 11, 22],
    ),
    Scenario(
        "partition 1 trails partition 0 by ~6s: the min rule holds the watermark, none late",
        dict(window="10s", lateness="7s", grace="0s", expected_partitions=(0, 1)),
        [[ev(t0, 100 + i, 0), ev(t1, 100 + i, 1)]
         for i, (t0, t1) in enumerate(zip([20, 22, 24, 26, 28, 30], [15, 14, 19, 18, 23, 22],
                                          strict=True))],
        {(20, "m0"): ("5.00", 5, "OPEN", 0), (30, "m0"): ("1.00", 1, "OPEN", 0),
         (10, "m1"): ("4.00", 4, "OPEN", 0), (20, "m1"): ("2.00", 2, "OPEN", 0)},
        watermarks=[8, 8, 12, 12, 16, 16],
    ),
    Scenario(
        "partition 1 goes idle, stops holding the watermark, rejoins late without moving it back",
        dict(window="10s", lateness="3s", grace="0s", idle_timeout="5s",
             expected_partitions=(0, 1)),
        [[ev(1, 100, 0), ev(2, 100, 1)], [ev(5, 102, 0)], [ev(12, 104, 0)], [ev(16, 106, 0)],
         [ev(3, 107, 1)], [ev(22, 108, 0), ev(18, 108, 1)]],
        {(0, "m0"): ("2.00", 2, "FINAL", 0), (10, "m0"): ("2.00", 2, "OPEN", 0),
         (20, "m0"): ("1.00", 1, "OPEN", 0), (0, "m1"): ("1.00", 1, "FINAL", 0),
         (10, "m1"): ("1.00", 1, "OPEN", 0)},
        late=[("p1-t3-a107", 0, 3)],
        watermarks=[-2, -1, -1, 13, 13, 15],
    ),
    Scenario(
        "a future-dated event is quarantined and never moves the watermark",
        dict(window="10s", lateness="3s", grace="0s", max_clock_skew="5m"),
        [[ev(1, 100)], [ev(1000, 101)], [ev(4, 102)]],
        {(0, "m0"): ("2.00", 2, "OPEN", 0)},
        quarantined=["p0-t1000-a101"],
        watermarks=[-2, -2, 1],
    ),
]
