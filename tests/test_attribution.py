"""Spark tier: late-event attribution on a hand-computed example. Late amounts are kept per
currency (never added across currencies); event counts are over all currencies."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from app.settings import load_settings
from audits.attribution import late_attribution
from audits.records import AttributionRow
from reckon.timeutil import from_micros
from spark import tables

S = 1_000_000
DAY = date(2026, 1, 1)
BASE = 1_767_225_600 * S  # DAY at 00:00:00Z
H = 3600 * S

# event_id -> (partition, source, amount, arrival hour); every event happens at 09:00 + i s
EVENTS = {
    "e1": (0, "pos", "1.00", 9), "e2": (0, "pos", "2.00", 9), "e3": (0, "pos", "3.00", 9),
    "e4": (0, "pos", "4.00", 10), "e5": (1, "web", "10.10", 9), "e6": (1, "web", "20.25", 10),
    "e7": (2, "pos", "7.00", 23), "e8": (2, "pos", "8.00", 23),
}
CURRENCY = {"e6": "EUR"}  # every other event is USD


def event_row(event_id: str, i: int, *, duplicate: bool = False, day_offset: int = 0) -> dict:
    partition, source, amount, hour = EVENTS[event_id]
    event_us = BASE + day_offset * 24 * H + 9 * H + i * S
    return {"event_id": event_id, "key": "k", "amount": Decimal(amount),
            "currency": CURRENCY.get(event_id, "USD"),
            "event_time": from_micros(event_us), "source": source, "partition": partition,
            "offset": i, "arrival_time": from_micros(BASE + day_offset * 24 * H + hour * H + i * S),
            "input_file": None, "payload": None, "batch_id": 0, "is_duplicate": duplicate,
            "event_date": from_micros(event_us).date()}


def late_row(event_id: str, i: int, lateness: str, *, window_day: date = DAY) -> dict:
    row = event_row(event_id, i)
    start = from_micros(BASE + 9 * H)
    return {**{k: row[k] for k in ("event_id", "key", "amount", "currency", "event_time",
                                   "source", "partition", "offset", "arrival_time",
                                   "input_file")},
            "window_start": start, "window_end": from_micros(BASE + 9 * H + 10 * S),
            "watermark": from_micros(BASE + 9 * H + 10 * S + int(Decimal(lateness) * S)),
            "lateness_seconds": Decimal(lateness), "batch_id": 1, "window_date": window_day}


def write(spark, warehouse, name, rows) -> None:
    tables.ensure_table(spark, warehouse, name)
    tables.marked_append(spark.createDataFrame(rows, tables.SCHEMAS[name]), warehouse, name,
                             "test", 0)


def row(dim, value, late, amounts, events, late_share, event_share, lift) -> AttributionRow:
    """``amounts``: currency -> late amount text."""
    return AttributionRow(dim, value, late, {c: Decimal(a) for c, a in amounts.items()},
                          events, Decimal(late_share), Decimal(event_share),
                          None if lift is None else Decimal(lift))


def test_attribution_shares_and_lift_by_hand(spark, warehouse):
    settings = load_settings(env={}, warehouse=str(warehouse), shuffle_partitions=2)
    ids = list(EVENTS)
    log = [event_row(e, i) for i, e in enumerate(ids)]
    log.append(event_row("e1", 40, duplicate=True))     # flagged copy: not counted again
    log.append(event_row("e2", 41, day_offset=1))       # another day
    write(spark, warehouse, tables.EVENT_LOG, log)
    write(spark, warehouse, tables.LATE_EVENTS, [
        late_row("e5", 4, "0.5"), late_row("e5", 4, "5.5"),  # hopping: one event, two windows
        late_row("e6", 5, "2"),
        late_row("e3", 2, "1", window_day=date(2026, 1, 2)),  # another day's window
    ])

    got = late_attribution(spark, settings.warehouse_path, settings.event_time_rules(), DAY)

    # partition 1 carries every late event with a quarter of all events: lift 1 / 0.25 = 4;
    # its late USD 10.10 and EUR 20.25 stay apart (never "30.35")
    both = {"EUR": "20.25", "USD": "10.10"}
    assert got == [
        row("partition", "0", 0, {}, 4, "0.000000", "0.500000", "0.0000"),
        row("partition", "1", 2, both, 2, "1.000000", "0.250000", "4.0000"),
        row("partition", "2", 0, {}, 2, "0.000000", "0.250000", "0.0000"),
        row("source", "pos", 0, {}, 6, "0.000000", "0.750000", "0.0000"),
        row("source", "web", 2, both, 2, "1.000000", "0.250000", "4.0000"),
        # EUR: 1 of 8 events, half of the late ones: lift 4; USD: 7 of 8, the other half
        row("currency", "EUR", 1, {"EUR": "20.25"}, 1, "0.500000", "0.125000", "4.0000"),
        row("currency", "USD", 1, {"USD": "10.10"}, 7, "0.500000", "0.875000", "0.5714"),
        row("lateness_bucket", "1-5s", 1, {"EUR": "20.25"}, 1, "0.500000", "0.500000",
            "1.0000"),
        row("lateness_bucket", "5-30s", 1, {"USD": "10.10"}, 1, "0.500000", "0.500000",
            "1.0000"),
        row("arrival_hour", "09", 1, {"USD": "10.10"}, 4, "0.500000", "0.500000", "1.0000"),
        row("arrival_hour", "10", 1, {"EUR": "20.25"}, 2, "0.500000", "0.250000", "2.0000"),
        row("arrival_hour", "23", 0, {}, 2, "0.000000", "0.250000", "0.0000"),
    ]


def test_attribution_without_late_events_table(spark, warehouse):
    settings = load_settings(env={}, warehouse=str(warehouse), shuffle_partitions=2)
    write(spark, warehouse, tables.EVENT_LOG, [event_row("e1", 0), event_row("e7", 1)])
    got = late_attribution(spark, settings.warehouse_path, settings.event_time_rules(), DAY)
    assert [(r.dimension, r.value, r.late_events, r.all_events, r.event_share, r.lift)
            for r in got] == [
        ("partition", "0", 0, 1, Decimal("0.500000"), Decimal("0.0000")),
        ("partition", "2", 0, 1, Decimal("0.500000"), Decimal("0.0000")),
        ("source", "pos", 0, 2, Decimal("1.000000"), Decimal("0.0000")),
        ("currency", "USD", 0, 2, Decimal("1.000000"), Decimal("0.0000")),
        ("arrival_hour", "09", 0, 1, Decimal("0.500000"), Decimal("0.0000")),
        ("arrival_hour", "23", 0, 1, Decimal("0.500000"), Decimal("0.0000")),
    ]


def test_a_next_day_event_late_for_the_days_last_window_is_in_both_counts(spark, warehouse):
    """Hopping windows, 10 s every 5 s: an event at 00:00:02 of the next day belongs to the
    day's window [23:59:55, 00:00:05), and it is late there. The day's population of events
    (the denominator) is what its windows hold, so that event is in it, as in the numerator."""
    settings = load_settings(env={}, warehouse=str(warehouse), window="10s", slide="5s",
                             shuffle_partitions=2)
    midnight = BASE + 24 * H
    straggler = {**event_row("e1", 0), "event_id": "n1", "source": "atm", "partition": 1,
                 "event_time": from_micros(midnight + 2 * S),
                 "arrival_time": from_micros(midnight + 40 * S),
                 "event_date": from_micros(midnight).date()}
    write(spark, warehouse, tables.EVENT_LOG, [event_row("e1", 0), straggler])
    late = {**late_row("e1", 0, "35"), "event_id": "n1", "source": "atm", "partition": 1,
            "event_time": straggler["event_time"], "arrival_time": straggler["arrival_time"],
            "window_start": from_micros(midnight - 5 * S),
            "window_end": from_micros(midnight + 5 * S)}
    write(spark, warehouse, tables.LATE_EVENTS, [late])
    got = {(r.dimension, r.value): r for r in late_attribution(
        spark, settings.warehouse_path, settings.event_time_rules(), DAY)}
    atm = got[("source", "atm")]
    assert (atm.late_events, atm.all_events, atm.late_share, atm.event_share, atm.lift) == (
        1, 1, Decimal("1.000000"), Decimal("0.500000"), Decimal("2.0000"))
    assert got[("source", "pos")].all_events == 1


def test_an_uncaught_copy_is_counted_once_as_its_first_arrival(spark, warehouse):
    """Two unflagged copies of e4 (the second came back past the dedup horizon, from
    partition 2 and source 'web', and is stored first): the population counts e4 once, as
    its first arrival (partition 0, 'pos', 10:00)."""
    settings = load_settings(env={}, warehouse=str(warehouse), shuffle_partitions=2)
    again = {**event_row("e4", 3), "partition": 2, "source": "web", "offset": 90,
             "arrival_time": from_micros(BASE + 11 * H), "batch_id": 7}
    write(spark, warehouse, tables.EVENT_LOG, [again, event_row("e4", 3), event_row("e7", 6)])
    got = {(r.dimension, r.value): r.all_events for r in late_attribution(
        spark, settings.warehouse_path, settings.event_time_rules(), DAY)}
    assert got == {("partition", "0"): 1, ("partition", "2"): 1, ("source", "pos"): 2,
                   ("currency", "USD"): 2, ("arrival_hour", "10"): 1,
                   ("arrival_hour", "23"): 1}
