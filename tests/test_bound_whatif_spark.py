"""Spark tier: the warehouse lateness analysis equals the pure curve on the same rows."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

import numpy as np
import pytest

from app.cli import main
from app.settings import load_settings
from audits.bound_whatif import DEFAULT_BOUNDS, analyze_day, analyze_inputs
from reckon.errors import UsageError
from reckon.timeutil import from_micros
from reckon.whatif import lateness_curve, normalize_bounds, recommend
from spark import tables

S = 1_000_000
DAY = date(2026, 1, 1)
BASE = 1_767_225_600 * S  # DAY at 00:00:00Z


def log_row(i: int, event_us: int, arrival_us: int, partition: int, *, offset: int | None,
            duplicate: bool | None = False, event_id: str | None = None) -> dict:
    moment = from_micros(event_us)
    return {"event_id": event_id or f"e{i}", "key": f"k{i % 3}", "amount": Decimal("1.00"),
            "currency": "USD", "event_time": moment, "source": f"s{partition}",
            "partition": partition, "offset": offset, "arrival_time": from_micros(arrival_us),
            "input_file": None, "payload": None, "batch_id": 0, "is_duplicate": duplicate,
            "event_date": moment.date()}


def synthetic_log(seed: int = 11, n: int = 240) -> list[dict]:
    """Three partitions (one slow), out of order, simultaneous arrivals, a silent spell,
    flagged duplicates, and a few rows of the next day."""
    rng = np.random.default_rng(seed)
    rows = []
    arrival = BASE + 3600 * S
    for i in range(n):
        arrival += int(rng.choice([0, 0, 200_000, S, 40 * S if i == n // 2 else S]))
        p = int(rng.integers(0, 3))
        delay = int(rng.exponential(800_000)) + (2 * S if p == 2 else 0)
        rows.append(log_row(i, arrival - delay, arrival, p, offset=None if i % 17 == 0 else i))
    rows.append(log_row(1000, micros(rows[5]["event_time"]), arrival + S, 1, offset=5000,
                        duplicate=True, event_id="e5"))
    rows.append(log_row(1001, BASE + 86_400 * S + 5 * S, arrival + 2 * S, 0, offset=5001))
    return rows


def write_log(spark, warehouse, rows) -> None:
    df = spark.createDataFrame(rows, tables.SCHEMAS[tables.EVENT_LOG])
    tables.ensure_table(spark, warehouse, tables.EVENT_LOG)
    tables.marked_append(df, warehouse, tables.EVENT_LOG, "test", 0)


def micros(moment) -> int:
    return round(moment.timestamp() * S)


def pure_curve(rows, settings, bounds, partition=None):
    """The same analysis by hand: filter, order by (arrival, partition, offset), numpy curve."""
    rules = settings.event_time_rules()
    kept = [r for r in rows if r["event_date"] == DAY and not r["is_duplicate"]
            and (partition is None or r["partition"] == partition)]
    kept.sort(key=lambda r: (micros(r["arrival_time"]), r["partition"], r["input_file"] or "",
                             -1 if r["offset"] is None else r["offset"]))
    t = np.array([micros(r["event_time"]) for r in kept], dtype=np.int64)
    a = np.array([micros(r["arrival_time"]) for r in kept], dtype=np.int64)
    p = np.array([r["partition"] for r in kept], dtype=np.int64)
    expected = rules.watermark.expected_partitions if partition is None else ()
    return len(kept), lateness_curve(t, a, p, rules.windows, bounds, allowed_lateness=rules.allowed_lateness,
                                     idle_timeout=rules.watermark.idle_timeout,
                                     expected_partitions=expected)


@pytest.fixture()
def wh_settings(warehouse):
    return load_settings(env={}, warehouse=str(warehouse), shuffle_partitions=2,
                         watermark_bound="4s", idle_timeout="10s", window="10s", slide="5s",
                         expected_partitions="0,1,2,3")


def test_analyze_day_equals_the_pure_curve_overall_and_per_partition(spark, wh_settings):
    rows = synthetic_log()
    write_log(spark, wh_settings.warehouse_path, rows)
    analysis = analyze_day(spark, wh_settings.whatif_config(), DAY, target="0.99")

    bounds = normalize_bounds([*DEFAULT_BOUNDS, "4s"])
    n, overall = pure_curve(rows, wh_settings, bounds)
    assert analysis.events == n == 240
    assert list(analysis.points) == overall
    assert analysis.recommended == recommend(overall, Decimal("0.99"))
    assert analysis.configured_bound == 4 * S and analysis.configured == overall[bounds.index(4 * S)]
    assert overall[0].dropped > 0  # the example is not trivial
    assert [pc.partition for pc in analysis.partitions] == [0, 1, 2]
    for pc in analysis.partitions:
        events, points = pure_curve(rows, wh_settings, bounds, partition=pc.partition)
        assert (pc.events, list(pc.points)) == (events, points)
        assert pc.recommended == recommend(points, Decimal("0.99"))
    # the slow partition needs a larger bound on its own than the fast ones
    slow, fast = analysis.partitions[2].recommended, analysis.partitions[0].recommended
    assert slow is not None and fast is not None and slow.bound > fast.bound


def test_lateness_command_json_and_errors(spark, wh_settings, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no stray ./reckon.toml; the rules come from the environment
    monkeypatch.delenv("RECKON_CONFIG", raising=False)
    for name, value in {"LATENESS": "4s", "IDLE_TIMEOUT": "10s", "WINDOW": "10s", "SLIDE": "",
                        "GRACE": "0s", "EXPECTED_PARTITIONS": ""}.items():
        monkeypatch.setenv(f"RECKON_{name}", value)
    wh = str(wh_settings.warehouse_path)
    assert main(["bound-whatif", "--warehouse", wh, "--date", "2026-01-01"]) == 2
    assert "holds no reckon table: check --warehouse" in capsys.readouterr().err

    write_log(spark, wh_settings.warehouse_path, synthetic_log(n=60))
    assert main(["bound-whatif", "--warehouse", wh, "--date", "2026-01-01", "--bounds", "0s,4s,1m",
                 "--target", "0.9", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["day"] == "2026-01-01" and payload["target"] == "0.9"
    assert payload["configured_bound_seconds"] == 4.0
    assert [p["bound_seconds"] for p in payload["points"]] == [0.0, 4.0, 60.0]
    assert set(payload["points"][0]) == {"bound_seconds", "completeness", "admitted",
                                         "dropped", "avg_emit_latency_seconds"}
    assert payload["attribution"] == []  # no late_events table in this warehouse

    # a day without events is a quiet day, not a mistake (28e80d5)
    assert main(["bound-whatif", "--warehouse", wh, "--date", "2026-02-01"]) == 0
    assert capsys.readouterr().out == "no events on 2026-02-01: nothing to analyse\n"
    assert main(["bound-whatif", "--warehouse", wh, "--date", "2026-01-01", "--target", "2"]) == 2
    assert "target='2' is not valid" in capsys.readouterr().err


def test_analyze_day_rejects_bad_bounds(spark, wh_settings):
    with pytest.raises(UsageError, match="bounds"):
        analyze_day(spark, wh_settings.whatif_config(), DAY, bounds=[-1])


def test_two_files_landing_at_the_same_moment_are_read_one_after_the_other(spark, warehouse):
    """Lines without their own arrival time share their file's: file a (events at 10, 20,
    30, 40 s) and file b (15, 25, 35, 45 s) on one partition, same arrival. The stream reads a,
    then b, so with bound 0 b's first three events find their windows closed (3 dropped);
    interleaved line by line (a0, b0, a1, ...) none would be."""
    settings = load_settings(env={}, warehouse=str(warehouse), shuffle_partitions=2,
                             window="10s", watermark_bound="0s")
    arrival = BASE + 3600 * S
    rows = [{**log_row(i, BASE + t * S, arrival, 0, offset=line), "input_file": name}
            for i, (name, line, t) in enumerate(
                [("b.ndjson", k, 15 + 10 * k) for k in range(4)]
                + [("a.ndjson", k, 10 + 10 * k) for k in range(4)])]
    write_log(spark, settings.warehouse_path, rows)
    analysis = analyze_day(spark, settings.whatif_config(), DAY, bounds=["0s"])
    assert [pt.dropped for pt in analysis.points] == [3]
    assert list(analysis.points) == pure_curve(rows, settings, [0])[1]


def test_attribution_json_keeps_late_amounts_per_currency():
    """`reckon bound-whatif --json`: a value's late amounts per currency, exact decimal text; the
    amounts of two currencies are never added (counts are)."""
    from audits.bound_whatif import _attribution_json
    from audits.records import AttributionRow

    row = AttributionRow("partition", "1", 3, {"USD": Decimal("10.100"), "EUR": Decimal("20.25"),
                                                "JPY": Decimal("7")},
                         4, Decimal("1.000000"), Decimal("0.250000"), Decimal("4.0000"))
    payload = json.loads(json.dumps(_attribution_json(row)))
    assert payload == {"dimension": "partition", "value": "1", "late_events": 3,
                       "late_amounts": {"EUR": "20.25", "JPY": "7", "USD": "10.100"},
                       "all_events": 4, "late_share": "1.000000", "event_share": "0.250000",
                       "lift": "4.0000"}
    assert list(payload["late_amounts"]) == ["EUR", "JPY", "USD"]
    assert "late_amount" not in payload


def _curve_rows(out: str, label: str) -> dict[str, list[str]]:
    """The rows of the table printed under ``Completeness <label>:``, by bound ('3s')."""
    part = out[out.index(f"Completeness {label}:"):].split("\n\n")[0]
    rows = [line.split() for line in part.splitlines()[2:]]  # after the label and the counts
    return {row[0]: row[1:] for row in rows if len(row) == 5 and row[0] != "bound"}


def test_lateness_command_shows_both_curves_of_a_streamed_day(streamed_scenario, capsys,
                                                               monkeypatch, tmp_path):
    """`reckon bound-whatif` on a day the real stream ran (partition 1 idles, then rejoins late):
    the per-batch curve, labelled as in the report, drops at the configured bound exactly the
    events the stream put in late_events; the per-event curve follows under its own label,
    with the one sentence on why they differ; `--json` carries both, per batch first."""
    from audits.bound_whatif_batches import CURVES_NOTE, PER_BATCH, PER_EVENT
    from tests.scenarios import SCENARIOS

    case = next(c for c in SCENARIOS if c.name.startswith("partition 1 goes idle"))
    wh = str(streamed_scenario(case.name).warehouse_path)
    monkeypatch.chdir(tmp_path)  # no stray ./reckon.toml; the rules come from the environment
    monkeypatch.delenv("RECKON_CONFIG", raising=False)
    for name, value in {"WINDOW": "10s", "LATENESS": "3s", "GRACE": "0s", "IDLE_TIMEOUT": "5s",
                        "EXPECTED_PARTITIONS": "0,1", "SLIDE": ""}.items():
        monkeypatch.setenv(f"RECKON_{name}", value)

    assert main(["bound-whatif", "--warehouse", wh, "--date", "2026-01-01"]) == 0
    out = capsys.readouterr().out
    assert out.index(f"Completeness {PER_BATCH}:") < out.index(f"Completeness {PER_EVENT}:")
    assert " ".join(CURVES_NOTE.split()) in " ".join(out.split())
    per_batch, per_event = _curve_rows(out, PER_BATCH), _curve_rows(out, PER_EVENT)
    assert per_batch["3s"][2] == str(len(case.late)) == "1"  # dropped: p1-t3-a107, as streamed
    assert per_batch.keys() == per_event.keys() and "5m" in per_batch

    assert main(["bound-whatif", "--warehouse", wh, "--date", "2026-01-01", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    batch, event = payload["curves"]
    assert (batch["granularity"], batch["label"]) == ("per_batch", PER_BATCH)
    assert (event["granularity"], event["label"]) == ("per_event", PER_EVENT)
    assert payload["curves_note"] == CURVES_NOTE and batch["note"] is None
    assert event["points"] == payload["points"]
    [configured] = [p for p in batch["points"] if p["bound_seconds"] == 3.0]
    assert configured["dropped"] == 1 and batch["events"] == sum(map(len, case.batches)) == 8
    assert [str(p["dropped"]) for p in batch["points"]] == [r[2] for r in per_batch.values()]
    assert [str(p["dropped"]) for p in event["points"]] == [r[2] for r in per_event.values()]


def test_bounds_per_source_on_the_warehouse_equal_the_pure_recommendation(spark, wh_settings,
                                                                           capsys, monkeypatch,
                                                                           tmp_path):
    """``reckon bound-whatif --per-source``: the day's log, in arrival order, through
    recommend_per_input inside Spark gives the pure recommendation; text and --json."""
    from reckon.whatif_inputs import recommend_per_input

    rows = synthetic_log()
    for i, row in enumerate(rows):  # three sources across the partitions, one of them slow
        row["source"] = ("radar", "http", "sat")[i % 3]
    write_log(spark, wh_settings.warehouse_path, rows)
    settings_ = wh_settings.with_values({}, expected_partitions=())
    rec = analyze_inputs(spark, settings_.whatif_config(), DAY, target="0.99")

    kept = sorted((r for r in rows if r["event_date"] == DAY and not r["is_duplicate"]),
                  key=lambda r: (micros(r["arrival_time"]), r["partition"],
                                 -1 if r["offset"] is None else r["offset"]))
    rules = settings_.event_time_rules()
    want = recommend_per_input(
        np.array([micros(r["event_time"]) for r in kept]),
        np.array([micros(r["arrival_time"]) for r in kept]),
        np.array([r["partition"] for r in kept]), [r["source"] for r in kept], rules.windows,
        normalize_bounds([*DEFAULT_BOUNDS, "4s"]), "0.99", allowed_lateness=rules.allowed_lateness,
        idle_timeout=rules.watermark.idle_timeout, running=True)
    assert rec.to_json_dict() == want.to_json_dict()
    assert [b.unit for b in rec.bounds] == ["http", "radar", "sat"]

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECKON_CONFIG", raising=False)
    for name, value in {"LATENESS": "4s", "IDLE_TIMEOUT": "10s", "WINDOW": "10s",
                        "SLIDE": "5s", "GRACE": "0s", "EXPECTED_PARTITIONS": ""}.items():
        monkeypatch.setenv(f"RECKON_{name}", value)
    wh = str(wh_settings.warehouse_path)
    assert main(["bound-whatif", "--warehouse", wh, "--date", "2026-01-01", "--per-source",
                 "--target", "0.99", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    replay = {k: payload.pop(k) for k in ("per_batch", "per_batch_unavailable", "configured",
                                          "configured_sources_without_events")}
    assert payload == {"day": "2026-01-01", **want.to_json_dict()}
    # the per-batch comparison replays the log's batches: here one (batch_id 0), judged
    # against no watermark, so nothing is late under any row's bounds
    assert replay["per_batch_unavailable"] is None
    assert {"bounds per source", "one bound", "the stream as configured"} <= set(
        replay["per_batch"])
    assert all(p["dropped"] == 0 for p in replay["per_batch"].values())
    assert replay["configured"] == "watermark bound 4s per partition"
    assert replay["configured_sources_without_events"] == []
    assert main(["bound-whatif", "--warehouse", wh, "--date", "2026-01-01", "--per-source",
                 "--target", "0.99"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("bounds per source for 2026-01-01, target completeness 0.99")
    assert "configure: watermark_bound_by_source = http=" in out
    # a configured bound of a source that sent nothing that day ("Sat" for "sat"): the
    # analysis goes on, and stderr says so in one warning line naming the day's sources
    monkeypatch.setenv("RECKON_WATERMARK_BOUND_BY_SOURCE", "Sat=5s,http=5s")
    assert main(["bound-whatif", "--warehouse", wh, "--date", "2026-01-01", "--target",
                 "0.99"]) == 0
    err = capsys.readouterr().err
    assert ("reckon bound-whatif: warning: bounds for inputs never seen on 2026-01-01: source "
            "'Sat' (seen: http, radar, sat): a misspelt name?") in err
