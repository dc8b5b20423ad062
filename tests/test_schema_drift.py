"""Spark tier: producers drift. What the stream does when incoming events change shape.

- An added field is tolerated: the event is valid and the field is kept in event_log.payload
  (the raw line is archived as received), so a later reader can still see it.
- A removed required field is quarantined as ``missing_field`` naming the field; a renamed
  field is the same thing (the old name is missing; the new name is just an extra field).
- A field whose type changed: text fields read a JSON number or boolean as its text (an
  ``event_id`` of 42 becomes "42"); an object or array there is ``wrong_type``. The amount
  may arrive as a JSON number: it is ACCEPTED when the number is a whole number of its
  currency's minor units (EUR 12.5 -> 12.500, 12 -> 12.000, 1.5e2 -> 150.000, stored at scale
  3), ``exceeds_minor_unit`` when it is finer than the currency (EUR 1.005), and
  ``bad_amount`` beyond the stored scale (1.0005). The number is judged by its exact value,
  never through a double (which would read 1.000000000000000001 as "1.0" and book 1.00):
  that is ``bad_amount`` too. Producers should still send strings.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pyspark.sql import functions as F

from app.settings import load_settings
from spark import tables as tb
from spark.stream import BatchProcessor

V1 = {"event_id": "d-v1", "key": "acct", "amount": "10.00", "currency": "EUR",
      "event_time": "2026-03-01T12:00:00Z", "source": "web", "partition": 0,
      "arrival_time": "2026-03-01T12:00:02Z"}


def _drifted(event_id: object, drop: tuple[str, ...] = (), **changes: object) -> str:
    body = {k: v for k, v in V1.items() if k not in drop}
    body.update({"event_id": event_id, **changes})
    return json.dumps(body, separators=(",", ":"))


def _rename(event_id: str, old: str, new: str) -> str:
    body = {**V1, "event_id": event_id}
    return json.dumps({(new if k == old else k): v for k, v in body.items()},
                      separators=(",", ":"))


# line -> None (valid; the amount text the event log must hold) or (reason, detail fragment)
CASES: dict[str, tuple[str, str | tuple[str, str]]] = {
    "v1": (json.dumps(V1), "10.000"),
    "added-field": (_drifted("d-added", channel="app", tags=["a", "b"], geo={"lat": 1.5}),
                    "10.000"),
    "added-null-field": (_drifted("d-added-null", refund_of=None), "10.000"),
    "removed-source": (_drifted("d-no-source", drop=("source",)), ("missing_field", "source")),
    "removed-two": (_drifted("d-no-two", drop=("currency", "key")),
                    ("missing_field", "key,currency")),
    "renamed-amount": (_rename("d-renamed", "amount", "value"), ("missing_field", "amount")),
    "renamed-event_time": (_rename("d-renamed-t", "event_time", "ts"),
                           ("missing_field", "event_time")),
    "amount-number": (_drifted("d-num", amount=12.5), "12.500"),
    "amount-integer": (_drifted("d-int", amount=12), "12.000"),
    "amount-number-3-places": (_drifted("d-num3", amount=1.005),
                               ("exceeds_minor_unit", "EUR 1.005")),
    "amount-number-4-places": (_drifted("d-num4", amount=1.0005), ("bad_amount", "1.0005")),
    "amount-number-yen": (_drifted("d-yen", amount=1500, currency="JPY"), "1500.000"),
    "amount-number-exponent": (_drifted("d-exp").replace('"10.00"', "1.5e2"), "150.000"),
    "amount-number-beyond-double": (_drifted("d-dbl").replace('"10.00"', "1.000000000000000001"),
                                    ("bad_amount", "1.000000000000000001")),
    "amount-number-20-places": (_drifted("d-dbl20").replace('"10.00"', "0.10000000000000000001"),
                                ("bad_amount", "0.10000000000000000001")),
    "amount-number-spaced": (_drifted("d-sp").replace('"amount":"10.00"', '"amount" : 7.25'),
                             "7.250"),
    "event_id-number": (_drifted(42), "10.000"),
    "event_id-object": (_drifted({"v": 1}), ("wrong_type", "event_id")),
    "currency-number": (_drifted("d-cur", currency=978), ("unknown_currency", "978")),
}


@pytest.fixture(scope="module")
def drift_outcome(spark, tmp_path_factory) -> dict[str, tuple]:
    wh = tmp_path_factory.mktemp("drift") / "wh"
    names = list(CASES)
    raw = spark.createDataFrame(
        [(CASES[n][0], None, i, datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC), "drift")
         for i, n in enumerate(names)],
        "payload string, transport_partition int, offset long, transport_time timestamp, "
        "input_file string")
    BatchProcessor.of(spark, load_settings(env={}, warehouse=str(wh), shuffle_partitions=2),
                   query_id="drift")(raw, 0)
    log = tb.read_table(spark, wh, tb.EVENT_LOG).select(
        "offset", "event_id", F.col("amount").cast("string").alias("amount"), "payload")
    bad = tb.read_table(spark, wh, tb.QUARANTINE).select("offset", "reason", "detail", "payload")
    out: dict[str, tuple] = {}
    for r in log.collect():
        out[names[r.offset]] = ("valid", r.amount, r.payload, r.event_id)
    for r in bad.collect():
        assert names[r.offset] not in out
        out[names[r.offset]] = (r.reason, r.detail, r.payload)
    return out


def test_every_drifted_line_has_its_outcome(drift_outcome):
    assert set(drift_outcome) == set(CASES)  # nothing lost, nothing twice
    got, want = {}, {}
    for name, (line, expected) in CASES.items():
        row = drift_outcome[name]
        assert row[2] == line, name  # the raw line is archived unchanged, valid or not
        if isinstance(expected, str):
            got[name], want[name] = row[:2], ("valid", expected)
        else:
            reason, fragment = expected
            got[name] = (row[0], fragment in (row[1] or ""))
            want[name] = (reason, True)
    assert got == want


def test_added_fields_are_preserved_in_the_event_log(drift_outcome):
    _, _, payload, event_id = drift_outcome["added-field"]
    assert event_id == "d-added"
    kept = json.loads(payload)
    assert (kept["channel"], kept["tags"], kept["geo"]) == ("app", ["a", "b"], {"lat": 1.5})
    assert "refund_of" in json.loads(drift_outcome["added-null-field"][2])


def test_a_numeric_event_id_is_read_as_its_text(drift_outcome):
    assert drift_outcome["event_id-number"][3] == "42"


def test_missing_field_detail_names_every_missing_field(drift_outcome):
    assert drift_outcome["removed-two"][1] == "missing or empty: key,currency"
    assert drift_outcome["renamed-amount"][1] == "missing or empty: amount"
