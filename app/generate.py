"""A landing directory of NDJSON files in arrival order, with realistic faults.

Deterministic for a seed: the same configuration gives byte-identical files. Faults are
injected on purpose and counted in ``_manifest.json`` so tests can check that every one of
them is accounted for downstream:

- heavy-tailed delivery delays (log-normal body, Pareto tail): most events nearly on time,
  a few very late;
- one slow partition whose events all arrive ``slow_skew`` later (lateness is rarely random);
- one idle partition that delivers nothing for a stretch of the timeline;
- duplicates (the same event re-delivered, same payload, a little later, same partition);
- malformed lines of several kinds, one per quarantine rule worth exercising (an amount that
  breaks its currency's minor unit among them); future-dated events (a producer clock far
  ahead).

Keys are spread over partitions by hash, as a Kafka producer keyed by merchant would.

Currencies (``currency_mix``): most merchants settle in one currency, some in two or three
(``CURRENCIES_PER_MERCHANT``); a merchant's home currency is drawn with Zipf-like weights by
its place in ``GeneratorConfig.currencies`` (the first is the most common), and every currency
of the pool is some merchant's home when there are enough merchants. An amount is drawn in US
dollars (log-normal, median 25), converted at a rough magnitude (``UNITS_PER_USD``: JPY ~150x,
KWD ~0.3x), rounded to whole minor units of its currency, clipped to [1 minor unit,
1,000,000.00] and written with exactly the currency's ISO 4217 digits (JPY ``3750``, EUR
``23.10``, KWD ``7.750``). The manifest's ``total_amounts`` are exact per currency: amounts of
two currencies are never added (docs/decisions/0001-money-per-currency.md).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from reckon.errors import UsageError
from reckon.money import currency_problem, minor_unit
from reckon.timeutil import MICROS_PER_SECOND, parse_duration, parse_timestamp
from storage.landing import MANIFEST_NAME

__all__ = ["CURRENCIES_PER_MERCHANT", "DEFAULT_CURRENCIES", "MALFORMED_KINDS", "MIX_SCALE",
           "UNITS_PER_USD", "GeneratorConfig", "GeneratorManifest", "amount_text",
           "currency_mix", "generate_landing"]

#: Malformed kinds, named after the quarantine reason each ends in where one fits (the parse
#: says ``bad_event_time`` for ``bad_timestamp``; ``bad_amount``'s "-5.00" is
#: ``amount_out_of_range``; ``missing_field`` and ``invalid_json`` are the reasons).
MALFORMED_KINDS = ("invalid_json", "missing_field", "bad_amount", "unknown_currency",
                   "unsupported_currency", "exceeds_minor_unit", "bad_timestamp")
_EPOCH_US = np.datetime64("1970-01-01T00:00:00", "us")

#: Common 2-decimal currencies, one with 0 decimals (JPY) and one with 3 (KWD): first = most
#: merchants' home currency.
DEFAULT_CURRENCIES = ("USD", "EUR", "GBP", "JPY", "KWD")
#: Shares of merchants that settle in one, two and three currencies.
CURRENCIES_PER_MERCHANT = (0.75, 0.20, 0.05)
#: A merchant's events by currency, home currency first, per number of currencies it settles
#: in (out of ``MIX_SCALE``).
MIX_SCALE = 10_000
_SPLITS = {1: (10_000,), 2: (8_000, 2_000), 3: (7_000, 2_000, 1_000)}
#: Rough units of a currency per US dollar: the magnitude of generated amounts, not a rate
#: anything books. A currency not listed is drawn at the dollar's magnitude.
UNITS_PER_USD = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "CHF": 0.88, "CAD": 1.37, "AUD": 1.52,
                 "SEK": 10.5, "CNY": 7.2, "INR": 83.0, "JPY": 150.0, "KRW": 1350.0,
                 "KWD": 0.31, "BHD": 0.38, "OMR": 0.38, "TND": 3.1}
#: Median and log-normal spread of an amount, in US dollars.
_MEDIAN_USD, _SIGMA = 25.0, 1.0
#: Largest valid amount, in any currency: the default ``amount_max``.
_MAX_AMOUNT = 1_000_000


@dataclass(frozen=True)
class GeneratorConfig:
    events: int = 100_000
    partitions: int = 4
    keys: int = 50
    sources: tuple[str, ...] = ("pos", "web", "mobile", "partner-api")
    currencies: tuple[str, ...] = DEFAULT_CURRENCIES  # ISO 4217 codes, most common first
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
        _check_currencies(self.currencies)

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


def _check_currencies(codes: Sequence[str]) -> None:
    """Every code is a currency reckon books, listed once: else a one-line UsageError."""
    for code in codes:
        problem = currency_problem(code)
        if problem is not None:
            raise UsageError(f"currencies: {problem}; give ISO 4217 codes with 0 to 3 decimal "
                             "places, such as USD, EUR, JPY, KWD")
    twice = sorted({c for c in codes if list(codes).count(c) > 1})
    if twice:
        raise UsageError(f"currencies: {', '.join(twice)} listed more than once")


def currency_mix(keys: int, currencies: Sequence[str], seed: int) -> np.ndarray:
    """Each merchant's events by currency: a (keys x currencies) int array of shares out of
    ``MIX_SCALE`` (each row sums to it). Deterministic for (keys, currencies, seed), and
    drawn apart from the events, so the benchmark's Spark-built days share the mix."""
    rng = np.random.default_rng([seed, 4217])
    n = len(currencies)
    popular = 1.0 / np.arange(1, n + 1)
    home = rng.choice(n, size=keys, p=popular / popular.sum())
    if keys >= n:  # every currency of the pool is some merchant's home
        home[rng.permutation(keys)[:n]] = np.arange(n)
    settles_in = rng.choice(len(CURRENCIES_PER_MERCHANT), size=keys,
                            p=CURRENCIES_PER_MERCHANT) + 1
    shares = np.zeros((keys, n), dtype=np.int64)
    for k in range(keys):
        others = np.delete(np.arange(n), home[k])
        extra = min(int(settles_in[k]), n) - 1
        picked: list[int] = rng.choice(others, size=extra, replace=False, p=popular[others]
                                       / popular[others].sum()).tolist() if extra else []
        shares[k, [home[k], *picked]] = _SPLITS[extra + 1]
    return shares


def amount_text(minor: int, exponent: int) -> str:
    """``minor`` units of a currency with ``exponent`` places, with exactly those places:
    (3750, 0) -> "3750", (2310, 2) -> "23.10", (7750, 3) -> "7.750"."""
    sign = "-" if minor < 0 else ""
    whole, part = divmod(abs(minor), 10**exponent)
    return f"{sign}{whole}" if exponent == 0 else f"{sign}{whole}.{part:0{exponent}d}"


@dataclass
class GeneratorManifest:
    """What was written and what was injected; saved as _manifest.json beside the files."""

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
    # per currency, over unique valid events: the exact sum (with the currency's ISO digits)
    # and the count; a currency without a valid event is absent
    total_amounts: dict[str, str] = field(default_factory=dict)
    valid_events_by_currency: dict[str, int] = field(default_factory=dict)
    # each merchant's currencies, home currency first (see currency_mix)
    key_currencies: dict[str, list[str]] = field(default_factory=dict)

    @property
    def quarantined(self) -> int:
        return self.future_dated + sum(self.malformed.values())

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def _iso(us: np.ndarray) -> np.ndarray:
    text = np.datetime_as_string(_EPOCH_US + us.astype("timedelta64[us]"), unit="us")
    return np.char.add(text.astype(str), "Z")


def _key_name(index: int) -> str:
    return f"merchant-{index:04d}"


_SWAPS: dict[str, tuple[str, tuple[str, ...]]] = {
    # 10.1234: more places than any amount is stored with; -5.00: below amount_min
    "bad_amount": ("amount", ("12.3.4", "abc", "NaN", "1e400", "-5.00", "10.1234")),
    "unknown_currency": ("currency", ("usd", "EURO", "ABC", "US$")),   # not ISO 4217
    "unsupported_currency": ("currency", ("XXX", "XAU", "XDR", "CLF")),  # ISO, not booked
    "bad_timestamp": ("event_time", ("yesterday", "2026-13-45T25:61:00Z", "2026-01-01 10:00:00",
                                     "1700000000")),
}


def _malformed_line(kind: str, fields: dict[str, object], exponents: dict[str, int],
                    rng: np.random.Generator) -> str:
    if kind == "invalid_json":
        text = json.dumps(fields, separators=(",", ":"))
        return text[: int(rng.integers(5, max(6, len(text) - 2)))]
    broken = dict(fields)
    if kind == "missing_field":
        del broken[("amount", "key", "event_time", "event_id")[int(rng.integers(0, 4))]]
    elif kind == "exceeds_minor_unit":
        broken.update(_past_minor_unit(fields, exponents, rng))
    else:
        name, values = _SWAPS[kind]
        broken[name] = values[int(rng.integers(0, len(values)))]
    return json.dumps(broken, separators=(",", ":"))


def _past_minor_unit(fields: dict[str, object], exponents: dict[str, int],
                     rng: np.random.Generator) -> dict[str, object]:
    """The line's amount with one decimal place more than its currency has, the last one not
    zero: JPY "3750.5", EUR "23.105". A 3-place currency has no place left at the stored
    scale (a 4th is ``bad_amount``), so its line moves to the pool's currency with the fewest
    places (JPY when every one has 3). Below 1,000,000: never out of range as well."""
    code = str(fields["currency"])
    if exponents[code] >= 3:
        code = min(exponents, key=exponents.__getitem__)
        code = code if exponents[code] < 3 else "JPY"
    places = minor_unit(code)
    whole = min(int(str(fields["amount"]).split(".")[0]), _MAX_AMOUNT - 1)
    digits = [*rng.integers(0, 10, size=places).tolist(), int(rng.integers(1, 10))]
    return {"currency": code, "amount": f"{whole}." + "".join(map(str, digits))}


def _draw_currencies(mix: np.ndarray, key_idx: np.ndarray,
                     rng: np.random.Generator) -> np.ndarray:
    """Each event's currency (an index into the pool), by its merchant's shares."""
    roll = rng.integers(0, MIX_SCALE, size=key_idx.size)
    bounds = np.cumsum(mix, axis=1)
    currency = np.zeros(key_idx.size, dtype=np.int64)
    for j in range(mix.shape[1] - 1):
        currency += roll >= bounds[key_idx, j]
    return currency


def _draw_minor_units(currencies: Sequence[str], currency: np.ndarray,
                      rng: np.random.Generator) -> np.ndarray:
    """Each event's amount in whole minor units of its currency: dollars at a log-normal
    magnitude, converted, rounded, clipped to [1 minor unit, 1,000,000]."""
    scale = (10.0 ** np.array([minor_unit(c) for c in currencies]))[currency]
    rate = np.array([UNITS_PER_USD.get(c, 1.0) for c in currencies])[currency]
    usd = rng.lognormal(np.log(_MEDIAN_USD), _SIGMA, size=currency.size)
    minor: np.ndarray = np.clip(np.round(usd * rate * scale), 1, _MAX_AMOUNT * scale)
    return minor.astype(np.int64)


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
    currency = _draw_currencies(currency_mix(cfg.keys, cfg.currencies, cfg.seed), key_idx, rng)
    minor = _draw_minor_units(cfg.currencies, currency, rng)
    kind = np.zeros(n, dtype=np.int8)  # 0 valid, 1 future-dated, 2.. malformed kinds
    roll = rng.random(n)
    kind[roll < cfg.future_rate] = 1
    mal = (roll >= cfg.future_rate) & (roll < cfg.future_rate + cfg.malformed_rate)
    kind[mal] = 2 + rng.integers(0, len(MALFORMED_KINDS), size=int(mal.sum()))
    event_us = np.where(kind == 1, arrival_us + parse_duration(cfg.future_offset), event_us)
    cols = {
        "seq": np.arange(n), "event_us": event_us, "arrival_us": arrival_us,
        "key_idx": key_idx, "partition": partition, "minor": minor,
        "source": rng.integers(0, len(cfg.sources), size=n), "currency": currency, "kind": kind,
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
    exponents = {code: minor_unit(code) for code in cfg.currencies}
    places = np.array(list(exponents.values()))[plan["currency"]]
    amounts = [amount_text(m, e) for m, e in zip(plan["minor"].tolist(), places.tolist(),
                                                 strict=True)]
    width = max(6, len(str(cfg.events)))
    kinds: Counter[str] = Counter()
    for i in range(len(plan["seq"])):
        fields: dict[str, object] = {
            "event_id": f"evt-{cfg.seed}-{int(plan['seq'][i]):0{width}d}",
            "key": _key_name(int(plan["key_idx"][i])),
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
            yield _malformed_line(name, fields, exponents, rng)
            continue
        if k == 1:
            manifest.future_dated += 1
        elif plan["is_dup"][i]:
            manifest.duplicates += 1
        yield json.dumps(fields, separators=(",", ":"))
    manifest.malformed = {name: kinds.get(name, 0) for name in MALFORMED_KINDS}


def generate_landing(out: str | Path, cfg: GeneratorConfig) -> GeneratorManifest:
    """Write ``events-NNNNNN.ndjson`` files (arrival order) and ``_manifest.json`` into ``out``."""
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
    _tally_currencies(manifest, cfg, plan, valid)
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
    (folder / MANIFEST_NAME).write_text(manifest.to_json())
    return manifest


def _tally_currencies(manifest: GeneratorManifest, cfg: GeneratorConfig,
                      plan: dict[str, np.ndarray], valid: np.ndarray) -> None:
    """Per currency: the exact total and the count of unique valid events; per merchant: its
    currencies, home first."""
    for j, code in enumerate(cfg.currencies):
        mine = valid & (plan["currency"] == j)
        if mine.any():
            manifest.total_amounts[code] = amount_text(int(plan["minor"][mine].sum()),
                                                       minor_unit(code))
            manifest.valid_events_by_currency[code] = int(mine.sum())
    for k, shares in enumerate(currency_mix(cfg.keys, cfg.currencies, cfg.seed)):
        order = np.argsort(-shares, kind="stable")
        manifest.key_currencies[_key_name(k)] = [cfg.currencies[j] for j in order
                                                 if shares[j] > 0]


def _flush(folder: Path, buffer: list[str], manifest: GeneratorManifest) -> None:
    name = f"events-{len(manifest.files) + 1:06d}.ndjson"
    (folder / name).write_text("\n".join(buffer) + "\n")
    manifest.files.append(name)
    manifest.lines += len(buffer)
    buffer.clear()
