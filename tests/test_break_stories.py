"""The audit records each break's ``reckon explain`` story and the inputs that contributed to
it (audits/stories.py), so the workbench shows the terminal's story without Spark. The stream
is the real one (its foreachBatch, BatchProcessor), the replay and audit too; the recorded
lines must be exactly what ``explain_window`` prints for the same window, key and currency."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from itertools import pairwise
from pathlib import Path

import pytest
import sqlalchemy as sa

from audits.explain_spark import explain_window
from reckon.config import Settings
from reckon.eventtime import EventTimeRules
from reckon.reference import Event
from reckon.timeutil import format_micros
from reports.db.models import BREAK_INPUTS, BREAK_STORIES
from reports.db.repository import ReportDB
from tests.scenarios import BASE, SCENARIOS, S, ev
from tests.streamkit import copy_warehouse, stream_settings


def explain(spark, settings, key, instant, currency=None):
    """``explain_window`` as ``reckon explain`` calls it: the settings' warehouse and rules."""
    return explain_window(spark, settings.warehouse_path, settings.event_time_rules(), key,
                          instant, currency)


GRACE_CASE = next(c for c in SCENARIOS if c.name.startswith("worked example, allowed lateness 5s"))


def _worked_example_in_five_batches() -> list[list[Event]]:
    """GRACE_CASE's events (same ids, times and arrivals) in 5 batches instead of 9: [1, 3, 7],
    [12, 15] (watermark 12: [0,10) closed, within the allowed lateness), [8] (revises it), [22, 26]
    (watermark 23: [0,10) final), [4] (late by 13 s). Every event meets the watermark it met
    one batch at a time, so the stream judges each the same; the four batches saved only
    moved the watermark by steps the story does not tell."""
    events = [e for [e] in GRACE_CASE.batches]  # one event a batch
    return [events[a:b] for a, b in pairwise([0, 3, 5, 6, 8, len(events)])]


def _judged(batches: list[list[Event]], rules: EventTimeRules) -> tuple[dict, list]:
    """The reference stream's totals (amount, count, status, revision) and late events
    (id, window, lateness): what the batching must not change."""
    from reckon.reference import stream_outcome

    out = stream_outcome(batches, rules)
    return ({k: (r.total, r.count, r.status, r.revision) for k, r in out.totals.items()},
            [(r.event.event_id, r.window, r.lateness) for r in out.late])


DAY = date.fromisoformat(format_micros(BASE)[:10])


def _stream(spark, settings, batches: list[list[Event]], query: str) -> None:
    from spark.stream import BatchProcessor
    from tests.test_replay_audit import _raw

    processor = BatchProcessor.of(spark, settings, query_id=query)
    for i, batch in enumerate(batches):
        processor(_raw(spark, batch), i)


def _recorded(settings, run_id: str) -> tuple[list[dict], list[dict]]:
    with ReportDB.from_settings(settings) as db, db.ready().connect() as conn:
        stories = [dict(r) for r in conn.execute(sa.select(BREAK_STORIES).where(
            BREAK_STORIES.c.run_id == run_id).order_by(BREAK_STORIES.c.window_start,
                                                      BREAK_STORIES.c.key)).mappings()]
        inputs = [dict(r) for r in conn.execute(sa.select(BREAK_INPUTS).where(
            BREAK_INPUTS.c.run_id == run_id)).mappings()]
    return stories, inputs


def test_a_recorded_story_is_the_one_explain_prints(spark, tmp_path) -> None:
    """The worked example: in [0,10) one event revised the closed window and one arrived
    13 s past its close, a late event from partition 0: the window's break is EXPLAINED,
    and its recorded story, word for word, is explain's; partition 0 contributed."""
    from audits.audit import audit_day
    from reports.db.repository import audit_recorder
    from spark.replay import replay_day

    settings = stream_settings(tmp_path / "wh", **GRACE_CASE.rules)
    batches = _worked_example_in_five_batches()
    rules = settings.event_time_rules()  # the worked example's outcome, in fewer batches:
    assert _judged(batches, rules) == _judged(GRACE_CASE.batches, rules)
    _stream(spark, settings, batches, "stories-grace")
    replay_day(spark, settings.replay_config(), DAY)
    result = audit_day(spark, settings.audit_config(), DAY, recorder=audit_recorder(settings))
    assert result.breaks_recorded == 1
    stories, inputs = _recorded(settings, result.run_id)
    [story] = stories
    assert (story["key"], story["currency"], story["events"]) == ("merchant-x", "USD", 5)
    told = explain(spark, settings, "merchant-x", BASE + 1 * S, "USD")
    assert story["lines"] == list(told.lines)
    assert "late by 13.0 s" in story["lines"][0] and "reconciliation: EXPLAINED" in "\n".join(
        story["lines"])
    [late] = story["evidence"]
    assert (late["event_id"], late["fate"], late["partition"], late["amount"]) == (
        "e8-4", "late", 0, "1.00")
    assert {(i["dimension"], i["value"], i["late_count"], i["duplicate_count"])
            for i in inputs} == {("partition", "0", 1, 0), ("source", "test", 1, 0)}


def test_an_uncaught_duplicate_and_an_unexplained_cell_name_their_inputs(spark, tmp_path
                                                                         ) -> None:
    """Key A's event arrives again past a 5 s dedup horizon from partition 1 (source 'kiosk'):
    the stream counts it twice, the break is explained by a duplicate, and partition 1 (not
    partition 0, whose copy was the first) contributed through its duplicate."""
    from audits.audit import audit_day
    from reports.db.repository import audit_recorder
    from spark.replay import replay_day

    settings = stream_settings(tmp_path / "wh", window="10s", watermark_bound="1h",
                               dedup_horizon="5s")
    first = ev(1, 2, key="A", amount="3.00")
    again = replace(first, arrival_time=BASE + 20 * S, offset=20, partition=1, source="kiosk")
    _stream(spark, settings, [[first, ev(3, 3, key="B")], [again]], "stories-dup")
    replay_day(spark, settings.replay_config(), DAY)
    result = audit_day(spark, settings.audit_config(), DAY, recorder=audit_recorder(settings))
    stories, inputs = _recorded(settings, result.run_id)
    assert [(s["key"], s["events"]) for s in stories] == [("A", 2)]
    [story] = stories
    assert story["lines"] == list(explain(spark, settings, "A", BASE + S, "USD").lines)
    assert [(e["event_id"], e["fate"], e["partition"]) for e in story["evidence"]] == [
        (first.event_id, "uncaught duplicate", 1)]
    assert sorted((i["dimension"], i["value"], i["duplicate_count"], i["event_count"])
                  for i in inputs) == [("partition", "1", 1, 1), ("source", "kiosk", 1, 1)]


#: Three keys, each in a window of its own, each counted twice: a copy arrives 30 s after the
#: first, past the 5 s dedup horizon of ``_counted_twice_settings``.
FIRSTS = [ev(1 + 10 * i, 2 + 10 * i, key=key, amount=f"{i + 1}.25")
          for i, key in enumerate(("A", "C", "D"))]


def _counted_twice_settings(warehouse: Path) -> Settings:
    """A 5 s dedup horizon, and lateness so wide that no copy is late."""
    return stream_settings(warehouse, window="10s", watermark_bound="1h", dedup_horizon="5s")


@pytest.fixture(scope="module")
def counted_twice(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FIRSTS and their copies streamed and the day replayed, once for both report databases:
    neither the stream nor the replay touches the report database, so each database's test
    audits (and records into its database from) a copy of the same replayed warehouse."""
    from spark.replay import replay_day

    settings = _counted_twice_settings(tmp_path_factory.mktemp("counted-twice") / "wh")
    again = [replace(e, arrival_time=e.arrival_time + 30 * S, offset=e.offset + 50,
                     partition=1) for e in FIRSTS]
    _stream(spark, settings, [FIRSTS, again], "stories-many")
    replay_day(spark, settings.replay_config(), DAY)
    return settings.warehouse_path


def test_every_break_of_a_run_is_told_once_in_either_database(spark, counted_twice, tmp_path,
                                                              db_url) -> None:
    """Three keys each counted twice (a copy past a 5 s dedup horizon), in windows of their
    own: three breaks, told in parallel on the executors and written into SQLite by one
    writer (gathered) or into PostgreSQL by each partition; each recorded story is, line for
    line, what ``reckon explain`` prints for its window."""
    from audits.audit import audit_day
    from reports.db.repository import audit_recorder

    settings = replace(_counted_twice_settings(copy_warehouse(counted_twice, tmp_path)),
                       report_db_url=db_url)
    result = audit_day(spark, settings.audit_config(), DAY, recorder=audit_recorder(settings))
    stories, _ = _recorded(settings, result.run_id)
    assert result.breaks_recorded == 3
    assert [(s["key"], s["events"]) for s in stories] == [("A", 2), ("C", 2), ("D", 2)]
    for story, event in zip(stories, FIRSTS, strict=True):
        told = explain(spark, settings, story["key"], event.event_time, "USD")
        assert story["lines"] == list(told.lines)


def test_a_per_source_warehouse_is_told_by_the_watermark_its_stream_used(spark, tmp_path,
                                                                        capsys) -> None:
    """Inputs by source, radar's bound 0 s and http's 8 s: http holds the watermark at 11 s
    when radar's event of 5 s arrives ([0,10) closed: late, 1 s past the close), where one
    bound of 0 s for all would have said 19 s. ``reckon explain`` and the audit's recorded
    story say "late" for exactly the events in late_events, at the watermark the stream
    recorded, and tell the rules the stream ran with, its bounds per source included."""
    import json

    from app.cli import main
    from audits.audit import audit_day
    from reports.db.repository import audit_recorder
    from spark import tables as tb
    from spark.replay import replay_day

    settings = stream_settings(tmp_path / "wh", window="10s", watermark_bound="0s",
                               watermark_bound_by_source="http=8s,radar=0s")

    def at(t: int, arrival: int, source: str) -> Event:
        return replace(ev(t, arrival, key="m"), source=source,
                       event_id=f"{source}-t{t}-a{arrival}")

    _stream(spark, settings, [[at(1, 1, "radar"), at(2, 2, "http")],
                              [at(15, 15, "radar"), at(14, 15, "http")],
                              [at(19, 19, "http"), at(20, 20, "radar")],
                              [at(5, 21, "radar"), at(12, 21, "http")]], "stories-by-source")
    late = {r.event_id: round(r.watermark.timestamp() * 1_000_000)
            for r in tb.read_table(spark, settings.warehouse_path, tb.LATE_EVENTS).collect()}
    assert late == {"radar-t5-a21": BASE + 11 * S}
    replay_day(spark, settings.replay_config(), DAY)
    result = audit_day(spark, settings.audit_config(), DAY, recorder=audit_recorder(settings))

    capsys.readouterr()
    assert main(["explain", "--warehouse", str(settings.warehouse_path), "--key", "m",
                 "--window", format_micros(BASE + 5 * S), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rules"]["watermark_bound_by_source"] == {"http": "8s", "radar": "0s"}
    [window] = doc["windows"]
    assert {e["event_id"]: e["watermark"] for e in window["events"]
            if e["fate"] == "late"} == late
    [story], _ = _recorded(settings, result.run_id)
    assert story["lines"] == window["lines"]
    assert {e["event_id"]: e["watermark"] for e in story["evidence"] if e["fate"] == "late"
            } == {event_id: format_micros(wm) for event_id, wm in late.items()}
