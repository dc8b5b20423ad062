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
