"""Fast tier: the landing-directory generator is deterministic and its manifest is true."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from decimal import Decimal

import numpy as np
import pytest

from reckon.errors import UsageError
from reckon.generate import MALFORMED_KINDS, GeneratorConfig, generate_landing
from reckon.timeutil import parse_timestamp

SMALL = GeneratorConfig(events=20_000, partitions=4, keys=30, lines_per_file=3_000,
                        malformed_rate=0.01, future_rate=0.003, duplicate_rate=0.02)


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
    """An independent re-implementation of what the manifest claims, from the bytes alone."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return "invalid_json"
    if any(k not in row for k in ("event_id", "key", "amount", "event_time", "currency")):
        return "missing_field"
    if not re.fullmatch(r"\d{1,16}(\.\d{1,2})?", str(row["amount"])):
        return "bad_amount"
    if Decimal(row["amount"]) > Decimal("1000000.00"):
        return "bad_amount"
    if row["currency"] not in currencies:
        return "unknown_currency"
    try:
        event = parse_timestamp(row["event_time"])
    except Exception:
        return "bad_timestamp"
    if event > parse_timestamp(row["arrival_time"]) + 300_000_000:
        return "future"
    return "valid"


def test_same_seed_gives_byte_identical_output(tmp_path):
    a = generate_landing(tmp_path / "a", SMALL)
    b = generate_landing(tmp_path / "b", SMALL)
    assert a.lines == b.lines and _digest(tmp_path / "a") == _digest(tmp_path / "b")
    c = generate_landing(tmp_path / "c", GeneratorConfig(**{**SMALL.__dict__, "seed": 8}))
    assert _digest(tmp_path / "c") != _digest(tmp_path / "a") and c.lines > 0


def test_manifest_counts_match_the_files(tmp_path):
    m = generate_landing(tmp_path, SMALL)
    lines = _read(tmp_path)
    assert len(lines) == m.lines == json.loads((tmp_path / "manifest.json").read_text())["lines"]
    kinds = Counter(_classify(line, SMALL.currencies) for line in lines)
    assert {k: kinds[k] for k in MALFORMED_KINDS} == m.malformed
    assert all(v > 0 for v in m.malformed.values())
    assert kinds["future"] == m.future_dated > 0
    valid = [json.loads(x) for x in lines if _classify(x, SMALL.currencies) == "valid"]
    ids = Counter(r["event_id"] for r in valid)
    assert len(ids) == m.valid_events
    assert sum(n - 1 for n in ids.values()) == m.duplicates > 0
    unique = {r["event_id"]: r for r in valid}
    assert sum(Decimal(r["amount"]) for r in unique.values()) == Decimal(m.total_amount)
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
