"""Scenario ("transcript") cases: events in arrival order, batch boundaries, expected totals and
late rows. The same cases run through the pure reference, the Spark stream and the replay."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from reckon.money import minor_unit
from reckon.reference import Event

S = 1_000_000
#: The currencies random streams draw from: 2, 0 and 3 decimal places (ISO 4217 minor units).
CURRENCIES = ("EUR", "JPY", "KWD")
BASE = 1_767_225_600 * S  # 2026-01-01T00:00:00Z, 10-aligned


@dataclass(frozen=True)
class Scenario:
    name: str
    rules: dict[str, object]
    batches: list[list[Event]]
    # (start s, key, currency) -> total, n, status, revision: money is kept per currency
    totals: dict[tuple[int, str, str], tuple[str, int, str, int]]
    late: list[tuple[str, int, int]] = field(default_factory=list)  # event_id, window start s, lateness s
    duplicates: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    watermarks: list[int | None] | None = None  # seconds after BASE, one per batch


def ev(t: int, arrival: int, partition: int = 0, key: str | None = None,
       amount: str = "1.00", currency: str = "USD") -> Event:
    """An event at BASE + t seconds arriving at BASE + arrival seconds; the id names both (and
    the currency, when it is not USD)."""
    key = key or f"m{partition}"
    suffix = "" if currency == "USD" else f"-{currency}"
    return Event(f"p{partition}-t{t}-a{arrival}{suffix}", key, Decimal(amount), BASE + t * S,
                 BASE + arrival * S, partition, arrival, currency=currency)


def minor_units(units: int, currency: str) -> Decimal:
    """``units`` of ``currency``'s minor unit as an amount: 1234 EUR -> 12.34, JPY -> 1234,
    KWD -> 1.234 (exactly the currency's decimal places)."""
    return Decimal(units).scaleb(-minor_unit(currency))


def scenario_totals(case: Scenario) -> dict[tuple[int, str, str], tuple[Decimal, int, str, int]]:
    """The transcript's expected totals with exact Decimal amounts (compared by value: a
    stored total of 12.500 is the transcript's 12.50)."""
    return {k: (Decimal(total), n, status, rev) for k, (total, n, status, rev)
            in case.totals.items()}


def one_per_batch(seconds, key="merchant-x", partition=0, amount="1.00"):
    """Each event in its own batch; arrival one second after the previous one's."""
    return [[Event(f"e{i}-{t}", key, Decimal(amount), BASE + t * S, BASE + (100 + i) * S,
                   partition, i)] for i, t in enumerate(seconds)]


WORKED = [1, 3, 7, 12, 15, 8, 22, 26, 4]

SCENARIOS = [
    Scenario(
        "worked example, allowed lateness 0",
        dict(window="10s", watermark_bound="3s", allowed_lateness="0s"),
        one_per_batch(WORKED),
        {(0, "merchant-x", "USD"): ("3.00", 3, "FINAL", 0), (10, "merchant-x", "USD"): ("2.00", 2, "FINAL", 0),
         (20, "merchant-x", "USD"): ("2.00", 2, "OPEN", 0)},
        late=[("e5-8", 0, 2), ("e8-4", 0, 13)],
    ),
    Scenario(
        "worked example, allowed lateness 5s: 8 revises [0,10), only 4 is late",
        dict(window="10s", watermark_bound="3s", allowed_lateness="5s"),
        one_per_batch(WORKED),
        {(0, "merchant-x", "USD"): ("4.00", 4, "FINAL", 1), (10, "merchant-x", "USD"): ("2.00", 2, "CLOSED", 0),
         (20, "merchant-x", "USD"): ("2.00", 2, "OPEN", 0)},
        late=[("e8-4", 0, 13)],
    ),
]

SCENARIOS += [
    Scenario(
        "two revisions of a closed window in one batch count once; the next batch's adds one",
        dict(window="10s", watermark_bound="3s", allowed_lateness="10s"),
        # WM 11 after the first batch: [0,10) is CLOSED (within the allowed lateness until WM 20), so 2 and 3
        # revise it in one batch (revision 1), 5 in the next (revision 2); 25 moves WM to 22
        [[ev(1, 100), ev(14, 101)], [ev(2, 102), ev(3, 103)], [ev(5, 104)], [ev(25, 105)]],
        {(0, "m0", "USD"): ("4.00", 4, "FINAL", 2), (10, "m0", "USD"): ("1.00", 1, "CLOSED", 0),
         (20, "m0", "USD"): ("1.00", 1, "OPEN", 0)},
        watermarks=[11, 11, 11, 22],
    ),
    Scenario(
        "partition 1 trails partition 0 by ~6s: the min rule holds the watermark, none late",
        dict(window="10s", watermark_bound="7s", allowed_lateness="0s", expected_partitions=(0, 1)),
        [[ev(t0, 100 + i, 0), ev(t1, 100 + i, 1)]
         for i, (t0, t1) in enumerate(zip([20, 22, 24, 26, 28, 30], [15, 14, 19, 18, 23, 22],
                                          strict=True))],
        {(20, "m0", "USD"): ("5.00", 5, "OPEN", 0), (30, "m0", "USD"): ("1.00", 1, "OPEN", 0),
         (10, "m1", "USD"): ("4.00", 4, "OPEN", 0), (20, "m1", "USD"): ("2.00", 2, "OPEN", 0)},
        watermarks=[8, 8, 12, 12, 16, 16],
    ),
    Scenario(
        "partition 1 goes idle, stops holding the watermark, rejoins late without moving it back",
        dict(window="10s", watermark_bound="3s", allowed_lateness="0s", idle_timeout="5s",
             expected_partitions=(0, 1)),
        [[ev(1, 100, 0), ev(2, 100, 1)], [ev(5, 102, 0)], [ev(12, 104, 0)], [ev(16, 106, 0)],
         [ev(3, 107, 1)], [ev(22, 108, 0), ev(18, 108, 1)]],
        {(0, "m0", "USD"): ("2.00", 2, "FINAL", 0), (10, "m0", "USD"): ("2.00", 2, "OPEN", 0),
         (20, "m0", "USD"): ("1.00", 1, "OPEN", 0), (0, "m1", "USD"): ("1.00", 1, "FINAL", 0),
         (10, "m1", "USD"): ("1.00", 1, "OPEN", 0)},
        late=[("p1-t3-a107", 0, 3)],
        watermarks=[-2, -1, -1, 13, 13, 15],
    ),
    Scenario(
        "a future-dated event is quarantined and never moves the watermark",
        dict(window="10s", watermark_bound="3s", allowed_lateness="0s", max_clock_skew="5m"),
        [[ev(1, 100)], [ev(1000, 101)], [ev(4, 102)]],
        {(0, "m0", "USD"): ("2.00", 2, "OPEN", 0)},
        quarantined=["p0-t1000-a101"],
        watermarks=[-2, -2, 1],
    ),
    Scenario(
        "EUR, JPY and KWD on one key and window: three totals, never added; amounts finer "
        "than the currency's minor unit are quarantined",
        dict(window="10s", watermark_bound="3s", allowed_lateness="0s"),
        [[ev(1, 100, currency="EUR", amount="10.25"), ev(2, 100, currency="JPY", amount="1500"),
          ev(3, 100, currency="KWD", amount="0.125")],
         [ev(4, 101, currency="EUR", amount="0.75"), ev(5, 101, currency="JPY", amount="5.5"),
          ev(6, 101, currency="EUR", amount="1.005"), ev(7, 101, currency="KWD", amount="2.5")],
         [ev(8, 102, currency="JPY", amount="7"), ev(9, 102, currency="EUR", amount="1.500")]],
        {(0, "m0", "EUR"): ("12.500", 3, "OPEN", 0), (0, "m0", "JPY"): ("1507", 2, "OPEN", 0),
         (0, "m0", "KWD"): ("2.625", 2, "OPEN", 0)},
        quarantined=["p0-t5-a101-JPY", "p0-t6-a101-EUR"],
    ),
]
