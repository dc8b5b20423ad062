"""The suites' derived columns without Spark: the JVM-free engine's one owner of each ``Derive``.

``audits.suites`` states each suite's derived columns as Spark columns; a small day's check runs
without a JVM (``audits.quality_local``) and needs the same columns on plain Python rows. This
module is their twin, rule for rule, on the same core functions (``reckon.eventtime``'s
``is_future_dated`` and ``is_beyond_allowed_lateness``, ``reckon.reconcile``'s ``residual`` and
``within_tolerance``, ``reckon.money``'s minor units), with Spark's null rules spelled out
(a comparison with a null is null; ``offending`` keeps the value only where the rule is false).
tests/test_quality_local.py runs both engines on streamed warehouses and compares every
expectation's outcome, so a rule changed on one side only fails there.

Rows are dicts of Python values, timestamps as integer microseconds (UTC), money as ``Decimal``
(never a float). ``LOCAL_DERIVES`` maps a table to its ``LocalDerive``: the columns it adds and
a function of one row and the day's ``LocalContext``:

>>> from decimal import Decimal
>>> _seconds(1_500_000)
Decimal('1.500000')
>>> _minor_unit_text({"amount": Decimal("5.500"), "currency": "JPY"}, ("amount",), ())
'amount 5.500 JPY'
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from audits.suite_model import GRAIN
from reckon.engine_config import CheckConfig, ParseConfig
from reckon.eventtime import WindowSpec, is_beyond_allowed_lateness, is_future_dated
from reckon.money import (
    accepted_currencies,
    breaks_minor_unit,
    iso_currencies,
    minor_unit_step,
    money_sum,
)
from reckon.reconcile import ReconStatus, Tolerance, residual, within_tolerance
from reckon.schema import AMOUNT_SCALE
from reckon.timeutil import parse_timestamp

__all__ = ["LOCAL_DERIVES", "LocalContext", "LocalDerive", "Row", "added_twice", "local_derive",
           "log_sums"]

Row = dict[str, Any]
Grain = tuple[int, str, str]  # (window_start us, key, currency)
_ZERO = Decimal(0).scaleb(-AMOUNT_SCALE)  # 0.000, a TOTAL's zero


@dataclass
class LocalContext:
    """What a derive reads besides the row: the suites' config and the day's other reads,
    filled by ``audits.quality_local`` before the table's rows are derived (the batches each
    window's delta was appended twice in, the event-log sums per replay, the replays whose
    pinned version could be read, and the smallest allowed lateness ever recorded)."""

    config: CheckConfig
    allowed_lateness: int = 0
    added_twice: Mapping[Grain, str] = field(default_factory=dict)
    sums: Mapping[tuple[str, Grain], tuple[Decimal, int]] = field(default_factory=dict)
    read: frozenset[str] | None = None  # None: no pinned version could be read


@dataclass(frozen=True)
class LocalDerive:
    """The columns a suite adds (in Spark's order) and the function that computes them."""

    columns: tuple[str, ...]
    derive: Callable[[Row, LocalContext], Row]


# ----------------------------------------------------------------------------- helpers


def _seconds(micros: int | None) -> Decimal | None:
    """Exact seconds at scale 6 (``DECIMAL(20,6)``, ``audits.suites._seconds``)."""
    return None if micros is None else Decimal(micros).scaleb(-6)


def _offending(holds: bool | None, value: Any) -> Any:
    """``audits.suite_model.offending``: the value where the rule is false, else None."""
    return value if holds is False else None


def _both(a: Any, b: Any, rule: Callable[[Any, Any], Any]) -> Any:
    return None if a is None or b is None else rule(a, b)


def _minor_unit_text(row: Row, amounts: Sequence[str], booked: Sequence[str]) -> str | None:
    """``audits.suites._minor_unit_break``: each amount not a whole number of the row's
    currency's minor units as ``<column> <amount> <currency>``, '; ' between; else None."""
    exponent = accepted_currencies(booked).get(row.get("currency") or "")
    parts = [f"{c} {row[c]} {row['currency']}" for c in amounts
             if exponent is not None and row[c] is not None
             and breaks_minor_unit(row[c], minor_unit_step(exponent))]
    return "; ".join(parts) or None


def _totals(amount: str) -> LocalDerive:
    """``audits.suites._derive_totals``: window width and minor units."""
    def derive(row: Row, ctx: LocalContext) -> Row:
        width = _both(row["window_end"], row["window_start"], lambda e, s: e - s)
        size = ctx.config.rules.windows.size
        return {"window_width_error_seconds": _offending(
                    None if width is None else width == size, _seconds(width)),
                "minor_unit_break": _minor_unit_text(row, (amount,), ctx.config.currencies)}

    return LocalDerive(("window_width_error_seconds", "minor_unit_break"), derive)


# ----------------------------------------------------------------------------- per table


def _event_log(row: Row, ctx: LocalContext) -> Row:
    config, amount = ctx.config, row["amount"]
    in_range = None if amount is None else config.amount_min <= amount <= config.amount_max
    event_us, arrival_us = row["event_time"], row["arrival_time"]
    future = _both(event_us, arrival_us,
                   lambda e, a: is_future_dated(e, a, config.rules.max_clock_skew))
    return {"amount_out_of_range": _offending(in_range, amount),
            "minor_unit_break": _minor_unit_text(row, ("amount",), config.currencies),
            "skew_beyond_bound_seconds": _offending(
                None if future is None else not future,
                _seconds(_both(event_us, arrival_us, lambda e, a: e - a)))}


def _provisional(row: Row, ctx: LocalContext) -> Row:
    grain = (row["window_start"], row["key"], row["currency"])
    return {**_totals("total_amount").derive(row, ctx),
            "batch_added_twice": ctx.added_twice.get(grain)}


def _late_events(row: Row, ctx: LocalContext) -> Row:
    end, wm, given = row["window_end"], row["watermark"], row["lateness_seconds"]
    expected = _seconds(_both(wm, end, lambda w, e: w - e))
    return {"beyond_grace": _both(end, wm, lambda e, w: is_beyond_allowed_lateness(e, w, ctx.allowed_lateness)),
            "lateness_error_seconds": _offending(
                _both(given, expected, lambda g, x: g == x),
                _both(given, expected, lambda g, x: g - x)),
            "minor_unit_break": _minor_unit_text(row, ("amount",), ctx.config.currencies)}


def _canonical(row: Row, ctx: LocalContext) -> Row:
    """``audits.event_log_match.against_event_log`` on one row."""
    totals = _totals("total_amount").derive(row, ctx)
    replay_id = row["replay_id"]
    if ctx.read is None:
        return {**totals, "event_log_comparable": False, "event_log_mismatch": None}
    comparable = None if replay_id is None else replay_id in ctx.read
    grain = (row["window_start"], row["key"], row["currency"])
    log_amount, log_count = ctx.sums.get((replay_id, grain), (_ZERO, 0))
    agrees = (None if row["total_amount"] is None or row["event_count"] is None
              else row["total_amount"] == log_amount and row["event_count"] == log_count)
    text = (None if row["currency"] is None else
            f"event log: {row['currency']} {_amount_text(log_amount, row['currency'])} in "
            f"{log_count} event(s)")
    return {**totals, "event_log_comparable": comparable,
            "event_log_mismatch": _offending(agrees, text) if comparable else None}


def _amount_text(amount: Decimal, currency: str) -> str:
    """``spark.money.amount_text_col``: the currency's ISO digits, thousands separators."""
    exponent = accepted_currencies(()).get(currency, AMOUNT_SCALE)
    return f"{amount:,.{exponent}f}"


_RECON_AMOUNTS = ("provisional_amount", "canonical_amount", "gap_amount", "late_amount",
                  "duplicate_amount", "residual_amount")


def _reconciliation(row: Row, ctx: LocalContext) -> Row:
    """``audits.suites._derive_reconciliation`` (the tolerance the day's audit applied)."""
    def amount(c: str) -> Decimal:
        return _ZERO if row[c] is None else Decimal(row[c])

    def count(c: str) -> int:
        return 0 if row[c] is None else int(row[c])

    c_amt, p_amt = amount("canonical_amount"), amount("provisional_amount")
    c_cnt, p_cnt = count("canonical_count"), count("provisional_count")
    res_amt = residual(c_amt - p_amt, amount("late_amount"), amount("duplicate_amount"))
    res_cnt = residual(c_cnt - p_cnt, count("late_count"), count("duplicate_count"))
    tolerance: Tolerance = ctx.config.tolerance
    explained = row["status"] in (ReconStatus.MATCHED.value, ReconStatus.EXPLAINED.value)
    holds = bool(within_tolerance(res_amt, res_cnt, c_amt, tolerance)) if explained else True
    stored = [(row["gap_amount"], c_amt - p_amt), (row["gap_count"], c_cnt - p_cnt),
              (row["residual_amount"], res_amt), (row["residual_count"], res_cnt)]
    return {"invariant_holds": holds,
            "stored_arithmetic_holds": all(v is not None and v == x for v, x in stored),
            "minor_unit_break": _minor_unit_text(row, _RECON_AMOUNTS, ctx.config.currencies)}


def _minor_units_of(amount: str) -> LocalDerive:
    return LocalDerive(("minor_unit_break",), lambda row, ctx: {
        "minor_unit_break": _minor_unit_text(row, (amount,), ctx.config.currencies)})


LOCAL_DERIVES: dict[str, LocalDerive] = {
    "event_log": LocalDerive(("amount_out_of_range", "minor_unit_break",
                              "skew_beyond_bound_seconds"), _event_log),
    "quarantine": LocalDerive((), lambda row, ctx: {}),
    "provisional_totals": LocalDerive(("window_width_error_seconds", "minor_unit_break",
                                       "batch_added_twice"), _provisional),
    "late_events": LocalDerive(("beyond_grace", "lateness_error_seconds", "minor_unit_break"),
                               _late_events),
    "canonical_totals": LocalDerive(("window_width_error_seconds", "minor_unit_break",
                                     "event_log_comparable", "event_log_mismatch"), _canonical),
    "uncaught_duplicates": _totals("duplicate_amount"),
    "reconciliation": LocalDerive(("invariant_holds", "stored_arithmetic_holds",
                                   "minor_unit_break"), _reconciliation),
}


def local_derive(table: str) -> LocalDerive:
    """The JVM-free derive of ``table``'s suite (``KeyError`` names a table without one)."""
    return LOCAL_DERIVES[table]


# ----------------------------------------------------------------------------- the day's reads


def added_twice(deltas: Sequence[Row]) -> dict[Grain, str]:
    """``audits.suites._deltas_added_twice`` on the day's provisional_deltas rows: per grain,
    ``batch 7 x2`` for each (query, batch) whose delta is there more than once (sorted)."""
    copies = Counter((r["window_start"], r["key"], r["currency"], r["query_id"], r["batch_id"])
                     for r in deltas)
    out: dict[Grain, list[str]] = {}
    for (ws, key, cur, _query, batch), n in sorted(copies.items(), key=lambda kv: str(kv[0])):
        if n > 1:
            out.setdefault((ws, key, cur), []).append(f"batch {batch} x{n}")
    return {grain: ", ".join(texts) for grain, texts in out.items()}


def _typed_ok(row: Row, parse: ParseConfig, booked: Mapping[str, int], min_us: int) -> bool:
    """``spark.parse.typed_checks``: no rule holds (a rule on a null value does not)."""
    amount, currency = row["amount"], row["currency"]
    if amount is not None and not parse.amount_min <= amount <= parse.amount_max:
        return False
    if currency is not None and currency not in iso_currencies():
        return False
    if currency is not None and currency not in booked:
        return False
    if (amount is not None and currency is not None
            and breaks_minor_unit(amount, minor_unit_step(booked[currency]))):
        return False
    event_us, arrival_us = row["event_time"], row["arrival_time"]
    if event_us is not None and event_us < min_us:
        return False
    return not (event_us is not None and arrival_us is not None
                and is_future_dated(event_us, arrival_us, parse.max_clock_skew))


def _arrival_key(row: Row) -> tuple[Any, ...]:
    """``spark.rules.arrival_order`` with Spark's nulls first."""
    return tuple((0,) if row[c] is None else (1, row[c])
                 for c in ("arrival_time", "partition", "input_file", "offset"))


def log_sums(rows: Sequence[Row], parse: ParseConfig, windows: WindowSpec,
             day_start: int, day_end: int) -> dict[Grain, tuple[Decimal, int]]:
    """``spark.replay.day_totals_from_log`` on the event_log rows of the replay's read range:
    valid events, the first copy of each event_id in arrival order, summed per window starting
    in ``[day_start, day_end)``, key and currency (exact Decimals).

    >>> log_sums([], parse, windows, 0, 86_400_000_000)  # doctest: +SKIP
    {}
    """
    booked = accepted_currencies(parse.currencies)
    min_us = parse_timestamp(parse.min_event_time, "min_event_time")
    first: dict[str, Row] = {}
    for row in rows:
        if _typed_ok(row, parse, booked, min_us):
            seen = first.get(row["event_id"])
            if seen is None or _arrival_key(row) < _arrival_key(seen):
                first[row["event_id"]] = row
    amounts: dict[Grain, list[Decimal]] = {}
    counts: Counter[Grain] = Counter()
    for row in first.values():
        for start in windows.window_starts(row["event_time"]):
            if day_start <= start < day_end:
                grain = (start, row["key"], row["currency"])
                counts[grain] += 1
                if row["amount"] is not None:
                    amounts.setdefault(grain, []).append(row["amount"])
    return {g: (money_sum(amounts.get(g, []), _ZERO), n) for g, n in counts.items()}


assert set(GRAIN) == {"window_start", "key", "currency"}  # the Grain tuple's order
