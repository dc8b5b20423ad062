"""`reckon explain` tells the story of a window the real stream processed: the worked example
with allowed lateness 5 s has, in window [0,10), three events on time, one (at 8 s) that revised the
closed window and one (at 4 s) that arrived 13 s past its close and went to late_events.
Money is per currency: a key's window with EUR, JPY and KWD events is three chapters, each
with its own totals in its own digits, never added."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

import pytest

from app.cli import main
from audits.explain_spark import explain_window
from reckon.errors import UsageError
from reckon.timeutil import format_micros
from tests.scenarios import BASE, SCENARIOS, S


def explain(spark, settings, key, instant, currency=None):
    """``explain_window`` as ``reckon explain`` calls it: the settings' warehouse and rules."""
    return explain_window(spark, settings.warehouse_path, settings.event_time_rules(), key,
                          instant, currency)


GRACE_CASE = next(c for c in SCENARIOS if c.name.startswith("worked example, allowed lateness 5s"))
CURRENCY_CASE = next(c for c in SCENARIOS if c.name.startswith("EUR, JPY and KWD"))


def iso(seconds: int) -> str:
    return format_micros(BASE + seconds * S)


@pytest.fixture(scope="module")
def streamed(streamed_scenario):
    return streamed_scenario(GRACE_CASE.name)


def test_story_of_a_window_with_one_revision_and_one_late_event(spark, streamed):
    story = explain(spark, streamed, "merchant-x", BASE + 6 * S)
    assert len(story.chapters) == 1
    ch = story.chapters[0]
    assert (ch.window_start, ch.window_end, ch.currency) == (BASE, BASE + 10 * S, "USD")
    fates = [(e.event_id, e.fate, e.batch_id, e.revision) for e in ch.events]
    assert fates == [("e0-1", "on_time", 0, None), ("e1-3", "on_time", 1, None),
                     ("e2-7", "on_time", 2, None), ("e5-8", "revised", 5, 1),
                     ("e8-4", "late", 8, None)]
    late = ch.events[-1]
    assert late.watermark == BASE + 23 * S and late.lateness_seconds == Decimal("13.000000")
    assert ch.counts == {"on_time": 3, "revised": 1, "late": 1}
    assert ch.provisional is not None
    assert (ch.provisional["total_amount"], ch.provisional["event_count"],
            ch.provisional["status"], ch.provisional["revision"],
            ch.provisional["closed_batch_id"], ch.provisional["finalized_batch_id"]) == \
        (Decimal("4.00"), 4, "FINAL", 1, 4, 6)
    # the provisional row over time, from its deltas and the batches that closed it
    assert [(h.last_batch_id, str(h.total_amount), h.event_count, h.status, h.revision)
            for h in ch.history] == [
        (0, "1.00", 1, "OPEN", 0), (1, "2.00", 2, "OPEN", 0), (2, "3.00", 3, "OPEN", 0),
        (2, "3.00", 3, "CLOSED", 0), (5, "4.00", 4, "CLOSED", 1), (5, "4.00", 4, "FINAL", 1)]
    assert ch.canonical is None and ch.reconciliation is None

    lines = story.lines
    assert lines[0] == (f"window [{iso(0)}, {iso(10)}) key merchant-x, currency USD: 5 events: "
                        f"3 counted on time, 1 revised the window in batch 5 (revision 1), 1 "
                        f"late by 13.0 s (watermark {iso(23)})")
    assert lines[1] == (f"  provisional: USD 4.00 over 4 events, FINAL, revision 1; closed in "
                        f"batch 4 at watermark {iso(12)}; final in batch 6")
    assert lines[2] == "  canonical: not replayed yet"
    assert any(line.startswith("  e5-8: USD 1.00 at " + iso(8)) and
               line.endswith("batch 5): revised the closed window (revision 1)")
               for line in lines)
    assert any(line.startswith("  e8-4: USD 1.00 at " + iso(4)) and line.endswith(
        f"late by 13.0 s (watermark {iso(23)}): in late_events, not in the total")
        for line in lines)


def test_explain_cli_json_and_text(spark, streamed, capsys):
    args = ["explain", "--warehouse", str(streamed.warehouse_path), "--key", "merchant-x",
            "--window", iso(12)]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    [w] = doc["windows"]
    assert (w["window_start"], w["window_end"], w["currency"]) == (iso(10), iso(20), "USD")
    assert [(e["event_id"], e["fate"]) for e in w["events"]] == [("e3-12", "on_time"),
                                                                 ("e4-15", "on_time")]
    assert w["provisional"]["total_amount"] == "2.00" and w["provisional"]["status"] == "CLOSED"
    assert doc["rules"]["allowed_lateness"] == "5s"
    assert main(args) == 0
    assert capsys.readouterr().out.startswith(
        f"window [{iso(10)}, {iso(20)}) key merchant-x, currency USD: 2 events: 2 counted on "
        "time")
    # a key the day never saw is a mistake, said in one line; a quiet window of a busy key is not
    assert main(["explain", "--warehouse", str(streamed.warehouse_path), "--key", "nobody",
                 "--window", iso(12)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("reckon explain: error: --key='nobody' has no events on ") and len(
        err.strip().splitlines()) == 1
    assert main(["explain", "--warehouse", str(streamed.warehouse_path), "--key", "merchant-x",
                 "--window", iso(600)]) == 0
    assert "0 events: no events" in capsys.readouterr().out
    assert main([*args, "--currency", "usd"]) == 0  # narrowed to the key's only currency
    assert "currency USD: 2 events" in capsys.readouterr().out
    assert main([*args, "--currency", "EUR"]) == 2  # a currency the key never had that day
    assert "--key='merchant-x' in EUR has no events on " in capsys.readouterr().err
    assert main([*args, "--currency", "XAU"]) == 2
    assert "--currency='XAU' is not valid" in capsys.readouterr().err


def test_a_window_with_three_currencies_is_told_per_currency(spark, streamed_scenario,
                                                             capsys):
    """Key m0's window [0,10) has EUR, JPY and KWD events: one chapter per currency, each
    with its own total in its own digits (EUR 12.50, JPY 1,507, KWD 2.625), and the lines the
    minor-unit rule quarantined in the chapter of the currency they name. Never a sum."""
    settings = streamed_scenario(CURRENCY_CASE.name)
    story = explain(spark, settings, "m0", BASE + 5 * S)
    assert [ch.currency for ch in story.chapters] == ["EUR", "JPY", "KWD"]
    eur, jpy, kwd = story.chapters
    assert [(ch.provisional["total_amount"], ch.provisional["event_count"])  # type: ignore[index]
            for ch in story.chapters] == [(Decimal("12.50"), 3), (Decimal("1507"), 2),
                                          (Decimal("2.625"), 2)]
    assert str(jpy.provisional["total_amount"]) == "1507"  # type: ignore[index]
    assert [e.amount for e in kwd.events] == [Decimal("0.125"), Decimal("2.500")]
    assert [q.currency for q in jpy.quarantined] == ["JPY"] and len(eur.quarantined) == 1
    assert kwd.quarantined == ()
    lines = story.lines
    heads = [line for line in lines if line.startswith("window [")]
    assert heads == [
        f"window [{iso(0)}, {iso(10)}) key m0, currency EUR: 3 events: 3 counted on time; "
        "1 quarantined",
        f"window [{iso(0)}, {iso(10)}) key m0, currency JPY: 2 events: 2 counted on time; "
        "1 quarantined",
        f"window [{iso(0)}, {iso(10)}) key m0, currency KWD: 2 events: 2 counted on time"]
    assert "  provisional: EUR 12.50 over 3 events, OPEN, revision 0" in lines
    assert "  provisional: JPY 1,507 over 2 events, OPEN, revision 0" in lines
    assert "  provisional: KWD 2.625 over 2 events, OPEN, revision 0" in lines
    sums = ("15.125", "1,519.5", "1519.5", "1,509.625", "1509.625", "1,522.125", "1522.125")
    assert not any(total in line for line in lines for total in sums)  # never added
    args = ["explain", "--warehouse", str(settings.warehouse_path), "--key", "m0",
            "--window", iso(5)]
    assert main([*args, "--currency", "KWD", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["currency"] == "KWD" and [w["currency"] for w in doc["windows"]] == ["KWD"]
    assert doc["windows"][0]["provisional"]["total_amount"] == "2.625"
    assert [e["amount"] for e in doc["windows"][0]["events"]] == ["0.125", "2.500"]


def test_explain_rejects_a_time_without_zone(tmp_path):
    with pytest.raises(UsageError, match="--window"):
        import argparse

        from app.commands.investigate import cmd_explain
        from app.settings import load_settings

        cmd_explain(argparse.Namespace(key="k", window_at="2026-01-01T00:00:00", json=False),
                    load_settings(env={}, warehouse=str(tmp_path)))


def test_an_event_that_opens_a_closed_windows_row_is_its_first_revision(spark, tmp_path):
    """Key B's only event (at 8 s) arrives after key A moved the watermark to 12 s: window
    [0,10) is closed but within the allowed lateness, so the stream inserts B's row already CLOSED, in the
    same batch, as revision 1. The story must say the event revised the window, as the stream
    judged it (its batch's watermark_before), not "on time" because no batch followed the close."""
    from app.settings import load_settings
    from spark.stream import BatchProcessor
    from tests.scenarios import ev
    from tests.test_replay_audit import _raw

    settings = load_settings(env={}, warehouse=str(tmp_path / "wh"), window="10s",
                             watermark_bound="0s", allowed_lateness="5s", shuffle_partitions=2)
    processor = BatchProcessor.of(spark, settings, query_id="explain-revision")
    processor(_raw(spark, [ev(12, 13, key="A")]), 0)
    processor(_raw(spark, [ev(8, 14, key="B")]), 1)
    [chapter] = explain(spark, settings, "B", BASE + 8 * S).chapters
    assert chapter.provisional is not None
    assert (chapter.provisional["status"], chapter.provisional["revision"],
            chapter.provisional["closed_batch_id"]) == ("CLOSED", 1, 1)
    assert [(e.fate, e.batch_id, e.revision) for e in chapter.events] == [("revised", 1, 1)]


def test_a_copy_admitted_past_the_dedup_horizon_is_told_as_an_uncaught_duplicate(spark,
                                                                                 tmp_path):
    """The same event arrives again 18 s after its first copy, past a 5 s dedup horizon: the
    stream counts it again, and the replay counts it under uncaught_duplicates. The story
    must say so, not tell two events counted on time."""
    from dataclasses import replace

    from app.settings import load_settings
    from spark.replay import replay_day
    from spark.stream import BatchProcessor
    from tests.scenarios import ev
    from tests.test_replay_audit import _raw

    settings = load_settings(env={}, warehouse=str(tmp_path / "wh"), window="10s",
                             watermark_bound="1h", dedup_horizon="5s", shuffle_partitions=2)
    first = ev(1, 2, key="A", amount="3.00")
    again = replace(first, arrival_time=BASE + 20 * S, offset=20)
    processor = BatchProcessor.of(spark, settings, query_id="explain-uncaught")
    processor(_raw(spark, [first]), 0)
    processor(_raw(spark, [again]), 1)
    replay_day(spark, settings.replay_config(), date.fromisoformat(format_micros(BASE)[:10]))
    [chapter] = explain(spark, settings, "A", BASE + 1 * S).chapters
    assert [(e.event_id, e.fate, e.batch_id, e.uncaught_duplicate) for e in chapter.events] == [
        (first.event_id, "on_time", 0, False), (first.event_id, "on_time", 1, True)]
    assert chapter.provisional is not None and chapter.provisional["event_count"] == 2
    assert chapter.canonical is not None and chapter.canonical["event_count"] == 1
    lines = explain(spark, settings, "A", BASE + 1 * S).lines
    assert lines[0].endswith("2 events: 2 counted on time, 1 uncaught duplicate (admitted again)")
    assert sum("; an uncaught duplicate: an earlier copy" in line for line in lines) == 1
