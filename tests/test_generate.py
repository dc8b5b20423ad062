"""Fast tier: the landing-directory generator is deterministic and its manifest is true,
per currency; one Spark-tier test checks that the parse quarantines every malformed kind for
the reason it is named after."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from decimal import Decimal

import numpy as np
import pytest

from app import generate
from app.generate import (
    CURRENCIES_PER_MERCHANT,
    MALFORMED_KINDS,
    MANIFEST_NAME,
    MIX_SCALE,
    GeneratorConfig,
    currency_mix,
    generate_landing,
)
from reckon.errors import UsageError
from reckon.money import currency_problem, iso_currencies, minor_unit, minor_unit_violation
from reckon.timeutil import parse_timestamp

SMALL = GeneratorConfig(events=20_000, partitions=4, keys=30, lines_per_file=3_000,
                        malformed_rate=0.01, future_rate=0.003, duplicate_rate=0.02)
# the parse's amount: at most 15 digits before the point and 3 after (DECIMAL(18,3))
_AMOUNT = re.compile(r"-?\d{1,15}(\.\d{1,3})?")
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})")


def _digest(folder):
    h = hashlib.sha256()
    for f in sorted(folder.glob("*")):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def _read(folder):
    lines = []
    for f in sorted(folder.glob("events-*.ndjson")):
        lines.extend(f.read_text().splitlines())
    return lines


def _classify(line, currencies):
    """An independent re-implementation of what the manifest claims, from the bytes alone,
    with the parse's rules in its order (spark/parse.py) and reckon.money's currency data;
    the answer is the generator's malformed kind (an amount out of range is ``bad_amount``)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return "invalid_json"
    if any(k not in row for k in ("event_id", "key", "amount", "event_time", "currency")):
        return "missing_field"
    if not _AMOUNT.fullmatch(str(row["amount"])):
        return "bad_amount"
    try:
        event = parse_timestamp(row["event_time"]) if _ISO.fullmatch(row["event_time"]) else None
    except UsageError:
        event = None
    if event is None:
        return "bad_timestamp"
    amount, code = Decimal(row["amount"]), row["currency"]
    if not Decimal(0) <= amount <= Decimal("1000000.00"):
        return "bad_amount"
    if code not in iso_currencies():
        return "unknown_currency"
    if currency_problem(code, currencies) is not None:
        return "unsupported_currency"
    if minor_unit_violation(amount, code) is not None:
        return "exceeds_minor_unit"
    if event > parse_timestamp(row["arrival_time"]) + 300_000_000:
        return "future"
    return "valid"


def _valid_rows(folder, currencies):
    return [json.loads(x) for x in _read(folder) if _classify(x, currencies) == "valid"]


def test_same_seed_gives_byte_identical_output(tmp_path):
    a = generate_landing(tmp_path / "a", SMALL)
    b = generate_landing(tmp_path / "b", SMALL)
    assert a.lines == b.lines and _digest(tmp_path / "a") == _digest(tmp_path / "b")
    c = generate_landing(tmp_path / "c", GeneratorConfig(**{**SMALL.__dict__, "seed": 8}))
    assert _digest(tmp_path / "c") != _digest(tmp_path / "a") and c.lines > 0


def test_manifest_counts_match_the_files(tmp_path):
    m = generate_landing(tmp_path, SMALL)
    lines = _read(tmp_path)
    assert len(lines) == m.lines == json.loads((tmp_path / MANIFEST_NAME).read_text())["lines"]
    kinds = Counter(_classify(line, SMALL.currencies) for line in lines)
    assert {k: kinds[k] for k in MALFORMED_KINDS} == m.malformed
    assert all(v > 0 for v in m.malformed.values())
    assert kinds["future"] == m.future_dated > 0
    valid = [json.loads(x) for x in lines if _classify(x, SMALL.currencies) == "valid"]
    ids = Counter(r["event_id"] for r in valid)
    assert len(ids) == m.valid_events
    assert sum(n - 1 for n in ids.values()) == m.duplicates > 0
    unique = {r["event_id"]: r for r in valid}
    totals: dict[str, Decimal] = {}
    for r in unique.values():  # per currency: amounts of two currencies are never added
        totals[r["currency"]] = totals.get(r["currency"], Decimal(0)) + Decimal(r["amount"])
    assert {c: Decimal(t) for c, t in m.total_amounts.items()} == totals
    assert sorted(m.total_amounts) == sorted(SMALL.currencies)  # every currency has events
    for code, text in m.total_amounts.items():  # written with the currency's own ISO digits
        assert len(text.partition(".")[2]) == minor_unit(code), (code, text)
    assert m.valid_events_by_currency == dict(Counter(r["currency"] for r in unique.values()))
    assert sum(m.valid_events_by_currency.values()) == m.valid_events
    assert m.lines == m.valid_events + m.duplicates + m.quarantined


def test_files_are_in_arrival_order_with_per_partition_offsets_implied(tmp_path):
    generate_landing(tmp_path, SMALL)
    arrivals = [json.loads(x)["arrival_time"] for x in _read(tmp_path)
                if _classify(x, SMALL.currencies) in ("valid", "future")]
    assert arrivals == sorted(arrivals)


def test_delays_are_heavy_tailed_and_the_slow_partition_is_slow(tmp_path):
    generate_landing(tmp_path, GeneratorConfig(events=50_000, malformed_rate=0, future_rate=0))
    rows = [json.loads(x) for x in _read(tmp_path)]
    delay = np.array([parse_timestamp(r["arrival_time"]) - parse_timestamp(r["event_time"])
                      for r in rows]) / 1e6
    part = np.array([r["partition"] for r in rows])
    fast = delay[part != 3]
    p50, p99, p999 = np.quantile(fast, [0.5, 0.99, 0.999])
    assert p50 < 1.0                      # most events nearly on time
    assert p99 > 10 * p50                 # a long tail
    assert p999 > 10 * p50 and fast.max() > 60
    assert np.median(delay[part == 3]) > p50 + 1.5   # slow partition skewed by ~2s


def test_idle_partition_delivers_nothing_in_its_stretch(tmp_path):
    cfg = GeneratorConfig(events=20_000, malformed_rate=0, future_rate=0, duplicate_rate=0)
    generate_landing(tmp_path, cfg)
    rows = [json.loads(x) for x in _read(tmp_path)]
    start = parse_timestamp(cfg.start)
    span = cfg.events / cfg.rate * 1e6
    in_stretch = [r for r in rows if start + 0.47 * span
                  <= parse_timestamp(r["event_time"]) < start + 0.58 * span]
    assert in_stretch and all(r["partition"] != 0 for r in in_stretch)
    assert any(r["partition"] == 0 for r in rows)


def test_refuses_to_overwrite_a_landing_directory(tmp_path):
    generate_landing(tmp_path, GeneratorConfig(events=10))
    with pytest.raises(UsageError, match="already holds event files"):
        generate_landing(tmp_path, GeneratorConfig(events=10))


def test_most_merchants_settle_in_one_currency_some_in_two_or_three() -> None:
    codes = ("USD", "EUR", "GBP", "JPY", "KWD")
    mix = currency_mix(200, codes, seed=7)
    assert mix.shape == (200, 5) and (mix.sum(axis=1) == MIX_SCALE).all()
    per_merchant = Counter((mix > 0).sum(axis=1).tolist())
    assert per_merchant[1] / 200 == pytest.approx(CURRENCIES_PER_MERCHANT[0], abs=0.1)
    assert per_merchant[2] > 0 and per_merchant[3] > 0 and set(per_merchant) == {1, 2, 3}
    homes = Counter(mix.argmax(axis=1).tolist())
    assert set(homes) == set(range(5))             # every currency is some merchant's home
    assert homes[0] > homes[4]                     # the first listed is the most common
    assert (currency_mix(200, codes, seed=7) == mix).all()
    assert (currency_mix(200, codes, seed=8) != mix).any()
    assert (currency_mix(3, ("JPY",), seed=1) == MIX_SCALE).all()  # one currency: all in it


def test_amounts_have_their_currencys_digits_and_magnitude(tmp_path) -> None:
    m = generate_landing(tmp_path, SMALL)
    rows = {r["event_id"]: r for r in _valid_rows(tmp_path, SMALL.currencies)}.values()
    by_currency: dict[str, list[Decimal]] = {}
    for r in rows:
        places = len(r["amount"].partition(".")[2])
        assert places == minor_unit(r["currency"]), r  # JPY "3750", EUR "23.10", KWD "7.750"
        assert "." in r["amount"] or places == 0
        assert r["currency"] in m.key_currencies[r["key"]], r  # a merchant's own currencies
        by_currency.setdefault(r["currency"], []).append(Decimal(r["amount"]))
    median = {c: float(np.median([float(a) for a in v])) for c, v in by_currency.items()}
    assert 100 <= median["JPY"] / median["USD"] <= 200
    assert 0.2 <= median["KWD"] / median["USD"] <= 0.45
    assert all(Decimal("0.001") <= min(v) and max(v) <= Decimal("1000000")
               for v in by_currency.values())
    single = [k for k, codes in m.key_currencies.items() if len(codes) == 1]
    assert len(single) > len(m.key_currencies) / 2


def test_amounts_are_clipped_to_the_default_range_in_their_currency(tmp_path,
                                                                    monkeypatch) -> None:
    monkeypatch.setattr(generate, "_MEDIAN_USD", 50_000.0)  # most JPY amounts above a million
    cfg = GeneratorConfig(events=3_000, keys=10, malformed_rate=0.05, future_rate=0)
    m = generate_landing(tmp_path, cfg)
    kinds = Counter(_classify(x, cfg.currencies) for x in _read(tmp_path))
    assert {k: kinds[k] for k in MALFORMED_KINDS} == m.malformed  # still each its own kind
    jpy = [Decimal(r["amount"]) for r in _valid_rows(tmp_path, cfg.currencies)
           if r["currency"] == "JPY"]
    assert jpy and max(jpy) == Decimal("1000000")


def test_minor_unit_breaks_follow_the_line_or_move_to_a_currency_with_room(tmp_path) -> None:
    """An amount one place past its currency's minor unit; a 3-place currency has no room at
    the stored scale, so a pool of 3-place currencies breaks JPY's."""
    cfg = GeneratorConfig(events=4_000, keys=5, currencies=("KWD", "BHD"),
                          malformed_rate=0.2, future_rate=0)
    m = generate_landing(tmp_path, cfg)
    broken = [json.loads(x) for x in _read(tmp_path)
              if _classify(x, ()) == "exceeds_minor_unit"]
    assert len(broken) == m.malformed["exceeds_minor_unit"] > 0
    assert {r["currency"] for r in broken} == {"JPY"}
    assert all(re.fullmatch(r"\d+\.[1-9]", r["amount"]) for r in broken)
    assert sorted(m.total_amounts) == ["BHD", "KWD"]


@pytest.mark.parametrize(("codes", "message"), [
    (("USD", "XAU"), "XAU has no minor unit"),
    (("EURO",), "'EURO' is not an ISO 4217 currency code"),
    (("CLF",), "CLF has 4 decimal places"),
    (("USD", "EUR", "USD"), "USD listed more than once"),
])
def test_currencies_must_be_bookable_iso_codes(codes, message) -> None:
    with pytest.raises(UsageError, match=message) as err:
        GeneratorConfig(currencies=codes)
    assert "\n" not in str(err.value) and str(err.value).startswith("currencies: ")


#: The parse's reason for each malformed kind (spark/parse.py); bad_amount's "-5.00" is a
#: well-formed amount below amount_min.
_REASONS = {"bad_timestamp": {"bad_event_time"}, "bad_amount": {"bad_amount",
                                                                "amount_out_of_range"}}


def test_every_malformed_line_is_quarantined_for_its_kind(spark, tmp_path) -> None:
    """Spark tier: the parse agrees with the manifest line by line: a valid line passes, a
    future-dated one is future_dated, and each malformed kind ends in its reason."""
    from pyspark.sql import functions as F

    from app.settings import load_settings
    from spark.parse import parse_events

    cfg = GeneratorConfig(events=3_000, keys=20, malformed_rate=0.1, future_rate=0.01)
    generate_landing(tmp_path / "landing", cfg)
    lines = _read(tmp_path / "landing")
    raw = spark.createDataFrame([(i, line) for i, line in enumerate(lines)],
                                "offset long, payload string").select(
        "payload", F.lit(None).cast("int").alias("transport_partition"), "offset",
        F.lit("2026-01-02T00:00:00Z").cast("timestamp").alias("transport_time"),
        F.lit("events").alias("input_file"))
    settings = load_settings(env={}, warehouse=str(tmp_path / "wh"))
    reasons = {r["offset"]: r["reason"] for r in
               parse_events(raw, settings.parse_config()).select("offset", "reason").collect()}
    expected = {"valid": {None}, "future": {"future_dated"}}
    for i, line in enumerate(lines):
        kind = _classify(line, cfg.currencies)
        assert reasons[i] in expected.get(kind, _REASONS.get(kind, {kind})), (kind, line)
