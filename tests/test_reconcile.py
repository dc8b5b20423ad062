"""Fast tier: reconciliation arithmetic (reckon.reconcile) and the audit on plain lists."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reckon.errors import ConfigError
from reckon.eventtime import EventTimeRules
from reckon.reconcile import ReconStatus, Tolerance, reconcile, reconcile_row
from reckon.reference import Event, duplicate_overcount, reconcile_outcome, stream_outcome
from tests.scenarios import BASE, CURRENCIES, S, minor_units

D = Decimal
Z = (D("0.00"), 0)


@pytest.mark.parametrize(("prov", "canon", "late", "dup", "tol", "status", "res"), [
    ((D("10.00"), 2), (D("10.00"), 2), Z, Z, Tolerance(), "MATCHED", Z),
    ((D("10.00"), 2), (D("15.00"), 3), (D("5.00"), 1), Z, Tolerance(), "EXPLAINED", Z),
    ((D("15.00"), 3), (D("10.00"), 2), Z, (D("5.00"), 1), Tolerance(), "EXPLAINED", Z),
    ((D("10.00"), 2), (D("15.00"), 3), Z, Z, Tolerance(), "UNEXPLAINED", (D("5.00"), 1)),
    # every event of the window was late: no provisional row, yet fully explained
    (None, (D("7.00"), 1), (D("7.00"), 1), Z, Tolerance(), "EXPLAINED", Z),
    (None, (D("7.00"), 1), Z, Z, Tolerance(), "MISSING_IN_STREAM", (D("7.00"), 1)),
    ((D("7.00"), 1), None, Z, Z, Tolerance(), "MISSING_IN_CANONICAL", (D("-7.00"), -1)),
    # offsetting errors: gap 0 but something is wrong -> not MATCHED
    ((D("10.00"), 2), (D("10.00"), 2), (D("3.00"), 1), Z, Tolerance(), "UNEXPLAINED",
     (D("-3.00"), -1)),
    # tolerances: absolute, relative to canonical, and counts never tolerated
    ((D("10.00"), 2), (D("10.05"), 2), Z, Z, Tolerance(D("0.05")), "EXPLAINED", (D("0.05"), 0)),
    ((D("10.00"), 2), (D("10.06"), 2), Z, Z, Tolerance(D("0.05")), "UNEXPLAINED",
     (D("0.06"), 0)),
    ((D("1000.00"), 2), (D("1001.00"), 2), Z, Z, Tolerance(relative=D("0.001")), "EXPLAINED",
     (D("1.00"), 0)),
    ((D("-1000.00"), 2), (D("-1001.00"), 2), Z, Z, Tolerance(relative=D("0.001")),
     "EXPLAINED", (D("-1.00"), 0)),
    ((D("10.00"), 2), (D("10.00"), 3), Z, Z, Tolerance(D("100")), "UNEXPLAINED", (D("0.00"), 1)),
])
def test_row_status_and_residual(prov, canon, late, dup, tol, status, res):
    row = reconcile_row(prov, canon, late, dup, tol)
    assert row.status == ReconStatus(status)
    assert row.residual == res


def test_tolerance_rejects_floats_and_negatives():
    with pytest.raises(ConfigError, match="floats are not exact"):
        Tolerance(0.01)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=">= 0"):
        Tolerance(D("-1"))


def test_full_outer_join_keeps_rows_only_late_or_duplicates_know():
    rows = reconcile({"a": (D("1.00"), 1)}, {"b": (D("2.00"), 1)}, {"c": (D("3.00"), 1)})
    assert {k: r.status.value for k, r in rows.items()} == {
        "a": "MISSING_IN_CANONICAL", "b": "MISSING_IN_STREAM", "c": "MISSING_IN_CANONICAL"}


events = st.tuples(st.integers(0, 30), st.sampled_from(["a", "b"]), st.integers(1, 5_000),
                   st.sampled_from(CURRENCIES), st.integers(0, 90), st.integers(0, 25),
                   st.integers(0, 2))


def _log(raw):
    """Events with re-deliveries: the same id twice carries the same payload."""
    out, offsets, payload = [], {}, {}
    for i, key, units, cur, t, delay, part in raw:
        key, units, cur, t = payload.setdefault(i, (key, units, cur, t))
        offsets[part] = offsets.get(part, -1) + 1
        out.append(Event(f"id{i}", key, minor_units(units, cur), BASE + t * S,
                         BASE + (t + delay) * S, part, offsets[part], currency=cur))
    return sorted(out, key=lambda e: (e.arrival_time, e.partition, e.offset))


@settings(max_examples=150, deadline=None)
@given(st.lists(events, max_size=40), st.integers(1, 5), st.sampled_from(["0s", "4s"]),
       st.sampled_from(["1s", "1h"]))
def test_clean_streams_are_fully_explained(raw, cut, allowed_lateness, horizon):
    """Nothing injected: canonical = provisional + late - duplicate for every row, no break
    is unexplained, and the late amounts equal the total gap plus what duplicates added."""
    log = _log(raw)
    rules = EventTimeRules.parse(window="10s", watermark_bound="3s", allowed_lateness=allowed_lateness,
                                 dedup_horizon=horizon, idle_timeout="1h")
    out = stream_outcome([log[i:i + cut] for i in range(0, len(log), cut)], rules)
    rows = reconcile_outcome(out, log, rules)
    assert all(r.status in (ReconStatus.MATCHED, ReconStatus.EXPLAINED) for r in rows.values())
    for r in rows.values():
        p = r.provisional or Z
        c = r.canonical or Z
        assert c[0] == p[0] + r.late[0] - r.duplicate[0]
        assert c[1] == p[1] + r.late[1] - r.duplicate[1]
    for currency in CURRENCIES:  # per currency: amounts of two currencies are never added
        mine = [r for (_, _, cur), r in rows.items() if cur == currency]
        gap = sum((r.gap[0] for r in mine), D(0))
        late = sum((r.late[0] for r in mine), D(0))
        dup = sum((r.duplicate[0] for r in mine), D(0))
        assert late == gap + dup, currency
    # with a tiny horizon some re-deliveries escape dedup: they are what duplicates explain
    assert sum(c for _, c in duplicate_overcount(out, rules).values()) == \
        len(out.admitted) - len({e.event_id for e, _ in out.admitted})


@settings(max_examples=60, deadline=None)
@given(st.lists(events, min_size=1, max_size=30), st.integers(1, 300))
def test_a_changed_provisional_amount_is_exactly_that_row_unexplained(raw, cents):
    log = _log(raw)
    rules = EventTimeRules.parse(window="10s", watermark_bound="3s", idle_timeout="1h")
    out = stream_outcome([log], rules)
    if not out.totals:
        return
    target = sorted(out.totals)[0]
    out.totals[target].total += D(cents) / 100
    rows = reconcile_outcome(out, log, rules)
    bad = {k: r for k, r in rows.items() if r.status is not ReconStatus.MATCHED
           and r.status is not ReconStatus.EXPLAINED}
    assert list(bad) == [target]
    assert bad[target].residual == (-D(cents) / 100, 0)
