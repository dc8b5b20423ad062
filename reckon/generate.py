"""A landing directory of NDJSON files in arrival order, with realistic faults.

Deterministic for a seed: the same configuration gives byte-identical files. Faults are
injected on purpose and counted in ``manifest.json`` so tests can check that every one of
them is accounted for downstream:

- heavy-tailed delivery delays (log-normal body, Pareto tail): most events nearly on time,
  a few very late;
- one slow partition whose events all arrive ``slow_skew`` later (lateness is rarely random);
- one idle partition that delivers nothing for a stretch of the timeline;
- duplicates (the same event re-delivered, same payload, a little later, same partition);
- malformed lines of several kinds; future-dated events (a producer clock far ahead).

Keys are spread over partitions by hash, as a Kafka producer keyed by merchant would.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from reckon.errors import UsageError
from reckon.timeutil import MICROS_PER_SECOND, parse_duration, parse_timestamp

__all__ = ["MALFORMED_KINDS", "GeneratorConfig", "GeneratorManifest", "generate_landing"]

MALFORMED_KINDS = ("invalid_json", "missing_field", "bad_amount", "unknown_currency",
                   "bad_timestamp")
_EPOCH_US = np.datetime64("1970-01-01T00:00:00", "us")


@dataclass(frozen=True)
class GeneratorConfig:
    events: int = 100_000
    partitions: int = 4
    keys: int = 50
    sources: tuple[str, ...] = ("pos", "web", "mobile", "partner-api")
    currencies: tuple[str, ...] = ("USD", "EUR", "GBP")
    start: str = "2026-01-01T00:00:00Z"
    rate: float = 200.0               # events per second of event time
    median_delay: str = "300ms"       # body of the delay distribution (log-normal median)
    tail_share: float = 0.03          # share of events in the heavy tail
    tail_scale: str = "2s"            # Pareto scale of the tail
    tail_alpha: float = 1.2           # Pareto shape (smaller = heavier)
    max_delay: str = "30m"
    slow_partition: int | None = -1   # -1 = the last partition; None = no slow partition
    slow_skew: str = "2s"
    idle_partition: int | None = 0    # None = no idle partition
    idle_from: float = 0.45           # idle stretch, as fractions of the timeline
    idle_until: float = 0.6
    duplicate_rate: float = 0.01
    duplicate_delay: str = "5s"       # max extra delay of a re-delivery (keep < dedup horizon)
    malformed_rate: float = 0.002
    future_rate: float = 0.0005
    future_offset: str = "1d"
    lines_per_file: int = 10_000
    seed: int = 7

    def __post_init__(self) -> None:
        checks = [
            (self.events >= 0, "events", "a count >= 0"),
            (self.partitions >= 1, "partitions", "at least 1"),
            (self.keys >= 1, "keys", "at least 1"),
            (self.rate > 0, "rate", "events per second > 0"),
            (0 <= self.tail_share <= 1, "tail_share", "a share in [0, 1]"),
            (self.tail_alpha > 0, "tail_alpha", "> 0"),
            (0 <= self.duplicate_rate < 1, "duplicate_rate", "a rate in [0, 1)"),
            (0 <= self.malformed_rate < 1, "malformed_rate", "a rate in [0, 1)"),
            (0 <= self.future_rate < 1, "future_rate", "a rate in [0, 1)"),
            (0 <= self.idle_from <= self.idle_until <= 1, "idle_from/idle_until",
             "0 <= idle_from <= idle_until <= 1"),
            (self.lines_per_file >= 1, "lines_per_file", "at least 1"),
            (len(self.sources) >= 1 and len(self.currencies) >= 1, "sources/currencies",
             "at least one each"),
        ]
        for ok, name, allowed in checks:
            if not ok:
                raise UsageError(f"{name}={getattr(self, name.split('/')[0], '?')!r} is not "
                                 f"valid: {allowed}")
        for name in ("median_delay", "tail_scale", "max_delay", "slow_skew", "duplicate_delay",
                     "future_offset"):
            parse_duration(getattr(self, name), name)
        parse_timestamp(self.start, "start")

    @property
    def slow(self) -> int | None:
        if self.slow_partition is None or self.partitions < 2:
            return None
        return self.slow_partition % self.partitions

    @property
    def idle(self) -> int | None:
        if self.idle_partition is None or self.partitions < 2:
            return None
        return self.idle_partition % self.partitions


@dataclass
class GeneratorManifest:
    """What was written and what was injected; saved as manifest.json beside the files."""

    config: dict[str, object]
    files: list[str] = field(default_factory=list)
    lines: int = 0
    valid_events: int = 0          # unique logical events that pass validation
    duplicates: int = 0            # extra deliveries of a valid event (same payload)
    future_dated: int = 0
    malformed: dict[str, int] = field(default_factory=dict)
    lines_per_partition: dict[str, int] = field(default_factory=dict)
    expected_partitions: list[int] = field(default_factory=list)
    slow_partition: int | None = None
    idle_partition: int | None = None
    event_time_min: str = ""
    event_time_max: str = ""
    total_amount: str = "0.00"     # sum over unique valid events, exact

    @property
    def quarantined(self) -> int:
        return self.future_dated + sum(self.malformed.values())

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def _iso(us: np.ndarray) -> np.ndarray:
    text = np.datetime_as_string(_EPOCH_US + us.astype("timedelta64[us]"), unit="us")
    return np.char.add(text.astype(str), "Z")


def _cents_to_str(cents: np.ndarray) -> list[str]:
    return [f"{c // 100}.{c % 100:02d}" for c in cents.tolist()]


def _malformed_line(kind: str, fields: dict[str, object], rng: np.random.Generator) -> str:
    if kind == "invalid_json":
        text = json.dumps(fields, separators=(",", ":"))
        return text[: int(rng.integers(5, max(6, len(text) - 2)))]
    broken = dict(fields)
    if kind == "missing_field":
        del broken[("amount", "key", "event_time", "event_id")[int(rng.integers(0, 4))]]
    elif kind == "bad_amount":
        broken["amount"] = ("12.3.4", "abc", "NaN", "1e400", "-5.00", "10.123")[
            int(rng.integers(0, 6))]
    elif kind == "unknown_currency":
        broken["currency"] = ("XXX", "usd", "", "EURO")[int(rng.integers(0, 4))]
    elif kind == "bad_timestamp":
        broken["event_time"] = ("yesterday", "2026-13-45T25:61:00Z", "2026-01-01 10:00:00",
                                "1700000000")[int(rng.integers(0, 4))]
    return json.dumps(broken, separators=(",", ":"))


def _plan(cfg: GeneratorConfig) -> dict[str, np.ndarray]:
    """Every delivered line as columns, in arrival order."""
    rng = np.random.default_rng(cfg.seed)
    n = cfg.events
    start_us = parse_timestamp(cfg.start)
    span_us = int(n / cfg.rate * MICROS_PER_SECOND)
    event_us = start_us + np.sort(rng.integers(0, max(span_us, 1), size=n))
    # keys: Zipf-like popularity; partition = key index % partitions (hash partitioning)
    weights = 1.0 / np.arange(1, cfg.keys + 1) ** 0.8
    key_idx = rng.choice(cfg.keys, size=n, p=weights / weights.sum())
    partition = key_idx % cfg.partitions
    if cfg.idle is not None:
        lo = start_us + int(cfg.idle_from * span_us)
        hi = start_us + int(cfg.idle_until * span_us)
        in_idle = (partition == cfg.idle) & (event_us >= lo) & (event_us < hi)
        # those merchants are quiet then; the traffic goes to merchants on other partitions
        other_keys = np.flatnonzero(np.arange(cfg.keys) % cfg.partitions != cfg.idle)
        if other_keys.size:
            key_idx[in_idle] = rng.choice(other_keys, size=int(in_idle.sum()))
            partition = key_idx % cfg.partitions
    # delays: log-normal body, Pareto tail, capped
    median = parse_duration(cfg.median_delay)
    delay = rng.lognormal(np.log(max(median, 1)), 0.6, size=n)
    tail = rng.random(n) < cfg.tail_share
    delay[tail] = parse_duration(cfg.tail_scale) * (1 + rng.pareto(cfg.tail_alpha, tail.sum()))
    delay = np.minimum(delay, parse_duration(cfg.max_delay)).astype(np.int64)
    if cfg.slow is not None:
        delay[partition == cfg.slow] += parse_duration(cfg.slow_skew)
    arrival_us = event_us + delay
    cents = np.clip(np.round(rng.lognormal(np.log(2500), 1.0, size=n)), 1, 1_000_000_00)
    kind = np.zeros(n, dtype=np.int8)  # 0 valid, 1 future-dated, 2.. malformed kinds
    roll = rng.random(n)
    kind[roll < cfg.future_rate] = 1
    mal = (roll >= cfg.future_rate) & (roll < cfg.future_rate + cfg.malformed_rate)
    kind[mal] = 2 + rng.integers(0, len(MALFORMED_KINDS), size=int(mal.sum()))
    event_us = np.where(kind == 1, arrival_us + parse_duration(cfg.future_offset), event_us)
    cols = {
        "seq": np.arange(n), "event_us": event_us, "arrival_us": arrival_us,
        "key_idx": key_idx, "partition": partition, "cents": cents.astype(np.int64),
        "source": rng.integers(0, len(cfg.sources), size=n),
        "currency": rng.integers(0, len(cfg.currencies), size=n), "kind": kind,
        "is_dup": np.zeros(n, dtype=bool),
    }
    # duplicates: re-deliveries of valid events, a little later, on the same partition
    dup_of = np.flatnonzero((rng.random(n) < cfg.duplicate_rate) & (kind == 0))
    if dup_of.size:
        extra = rng.integers(1, max(2, parse_duration(cfg.duplicate_delay)), size=dup_of.size)
        dups = {k: v[dup_of].copy() for k, v in cols.items()}
        dups["arrival_us"] = dups["arrival_us"] + extra
        dups["is_dup"][:] = True
        cols = {k: np.concatenate([cols[k], dups[k]]) for k in cols}
    order = np.lexsort((cols["is_dup"], cols["seq"], cols["arrival_us"]))
    return {k: v[order] for k, v in cols.items()}


def _lines(cfg: GeneratorConfig, plan: dict[str, np.ndarray],
           manifest: GeneratorManifest) -> Iterator[str]:
    rng = np.random.default_rng(cfg.seed + 1)  # for malformed variations only
    event_iso, arrival_iso = _iso(plan["event_us"]), _iso(plan["arrival_us"])
    amounts = _cents_to_str(plan["cents"])
    width = max(6, len(str(cfg.events)))
    kinds: Counter[str] = Counter()
    for i in range(len(plan["seq"])):
        fields: dict[str, object] = {
            "event_id": f"evt-{cfg.seed}-{int(plan['seq'][i]):0{width}d}",
            "key": f"merchant-{int(plan['key_idx'][i]):04d}",
            "amount": amounts[i],
            "currency": cfg.currencies[int(plan["currency"][i])],
            "event_time": str(event_iso[i]),
            "source": cfg.sources[int(plan["source"][i])],
            "partition": int(plan["partition"][i]),
            "arrival_time": str(arrival_iso[i]),
        }
        k = int(plan["kind"][i])
        if k >= 2:
            name = MALFORMED_KINDS[k - 2]
            kinds[name] += 1
            yield _malformed_line(name, fields, rng)
            continue
        if k == 1:
            manifest.future_dated += 1
        elif plan["is_dup"][i]:
            manifest.duplicates += 1
        yield json.dumps(fields, separators=(",", ":"))
    manifest.malformed = {name: kinds.get(name, 0) for name in MALFORMED_KINDS}


def generate_landing(out: str | Path, cfg: GeneratorConfig) -> GeneratorManifest:
    """Write ``events-NNNNNN.ndjson`` files (arrival order) and ``manifest.json`` into ``out``."""
    folder = Path(out)
    if folder.exists() and any(folder.glob("events-*.ndjson")):
        raise UsageError(f"--out {folder} already holds event files; choose an empty folder")
    folder.mkdir(parents=True, exist_ok=True)
    plan = _plan(cfg)
    manifest = GeneratorManifest(config={k: v for k, v in asdict(cfg).items()})
    manifest.expected_partitions = list(range(cfg.partitions))
    manifest.slow_partition, manifest.idle_partition = cfg.slow, cfg.idle
    valid = (plan["kind"] == 0) & ~plan["is_dup"]
    manifest.valid_events = int(valid.sum())
    total_cents = int(plan["cents"][valid].sum())
    manifest.total_amount = f"{total_cents // 100}.{total_cents % 100:02d}"
    if valid.any():
        ev = plan["event_us"][valid]
        manifest.event_time_min, manifest.event_time_max = (str(x) for x in _iso(
            np.array([ev.min(), ev.max()])))
    counts = Counter(plan["partition"].tolist())
    manifest.lines_per_partition = {str(p): counts.get(p, 0) for p in range(cfg.partitions)}
    buffer: list[str] = []
    for line in _lines(cfg, plan, manifest):
        buffer.append(line)
        if len(buffer) == cfg.lines_per_file:
            _flush(folder, buffer, manifest)
    if buffer:
        _flush(folder, buffer, manifest)
    (folder / "manifest.json").write_text(manifest.to_json())
    return manifest


def _flush(folder: Path, buffer: list[str], manifest: GeneratorManifest) -> None:
    name = f"events-{len(manifest.files) + 1:06d}.ndjson"
    (folder / name).write_text("\n".join(buffer) + "\n")
    manifest.files.append(name)
    manifest.lines += len(buffer)
    buffer.clear()
