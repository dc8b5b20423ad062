"""Spark tier: `reckon explain` tells the same story on DuckDB (its default, no JVM) and on
``--engine spark``, byte for byte, text and ``--json``, through the real CLI.

Warehouses the real stream wrote (tests/scenarios.py, shared with tests/test_duck_spark.py):
the worked example with allowed lateness 5 s (events on time, one that revised a closed window, one
late event), EUR, JPY and KWD on one key (0-, 2- and 3-decimal currencies, quarantined lines
naming a currency), and a small stream of this module's own with a copy the stream caught as a
duplicate, one admitted past the dedup horizon and a replayed day (canonical totals).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from reckon.timeutil import format_micros
from tests.scenarios import BASE, SCENARIOS, S, ev

GRACE = next(c for c in SCENARIOS if c.name.startswith("worked example, allowed lateness 5s"))
CURRENCIES = next(c for c in SCENARIOS if c.name.startswith("EUR, JPY and KWD"))


def iso(seconds: int) -> str:
    return format_micros(BASE + seconds * S)


@pytest.fixture(scope="module")
def duplicates_warehouse(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Key A: event d1 twice in one batch (the stream flags the second copy), event u1 again
    18 s later past a 5 s dedup horizon (admitted twice); the day replayed."""
    from app.settings import load_settings
    from spark.replay import replay_day
    from spark.stream import BatchProcessor
    from tests.test_replay_audit import _raw

    wh = tmp_path_factory.mktemp("explain-dups") / "wh"
    settings = load_settings(env={}, warehouse=str(wh), window="10s", watermark_bound="1h",
                             dedup_horizon="5s", shuffle_partitions=2)
    caught, uncaught = ev(3, 4, key="A", amount="2.50"), ev(1, 2, key="A", amount="3.00")
    processor = BatchProcessor.of(spark, settings, query_id="explain-duck-dups")
    processor(_raw(spark, [uncaught, caught, replace(caught, offset=9)]), 0)
    processor(_raw(spark, [replace(uncaught, arrival_time=BASE + 20 * S, offset=20)]), 1)
    replay_day(spark, settings.replay_config(), date.fromisoformat(iso(0)[:10]))
    return wh


def _explain(capsys: Any, wh: Path, engine: str, *flags: str) -> tuple[int, str, str]:
    code = main(["explain", "--warehouse", str(wh), "--engine", engine, *flags])
    out = capsys.readouterr()
    return code, out.out, out.err


def _same_on_both(capsys: Any, wh: Path, *flags: str) -> str:
    """The command's ``--json`` on both engines, asserted equal (it holds every line the text
    prints, so the text is compared with it); the DuckDB text."""
    as_json = _explain(capsys, wh, "duckdb", *flags, "--json")
    assert as_json == _explain(capsys, wh, "spark", *flags, "--json"), flags
    code, text, err = _explain(capsys, wh, "duckdb", *flags)
    assert as_json[0] == 0 and code == 0, err
    assert text.splitlines() == json.loads(as_json[1])["lines"]
    return text


def test_explain_tells_the_same_story_on_duckdb_and_spark(spark, streamed_scenario, capsys,
                                                          duplicates_warehouse):
    allowed_lateness = streamed_scenario(GRACE.name).warehouse_path
    story = _same_on_both(capsys, allowed_lateness, "--key", "merchant-x", "--window", iso(6))
    assert "revised the closed window (revision 1)" in story and "late by 13.0 s" in story
    for at in (12, 600):  # a closed window, a quiet window of a busy key
        _same_on_both(capsys, allowed_lateness, "--key", "merchant-x", "--window", iso(at))

    money = streamed_scenario(CURRENCIES.name).warehouse_path
    story = _same_on_both(capsys, money, "--key", "m0", "--window", iso(5))
    assert "JPY 1,507" in story and "KWD 2.625" in story and "quarantined" in story
    assert "KWD 2.625" in _same_on_both(capsys, money, "--key", "m0", "--window", iso(5),
                                        "--currency", "kwd")

    story = _same_on_both(capsys, duplicates_warehouse, "--key", "A", "--window", iso(1))
    assert "duplicate of an earlier copy: counted once" in story
    assert "an uncaught duplicate" in story and "canonical: USD" in story


def test_explain_mistakes_are_the_same_one_line_on_both_engines(spark, streamed_scenario,
                                                                 capsys):
    wh = streamed_scenario(GRACE.name).warehouse_path
    for flags in (["--key", "nobody", "--window", iso(12)],            # unknown key
                  ["--key", "merchant-x", "--window", "2031-05-05T00:00:00Z"],  # no such day
                  ["--key", "merchant-x", "--window", "yesterday"],    # not a time
                  ["--key", "merchant-x", "--window", iso(12), "--currency", "XAU"]):
        on_duck = _explain(capsys, wh, "duckdb", *flags)
        assert on_duck == _explain(capsys, wh, "spark", *flags), flags
        code, out, err = on_duck
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert err.startswith("reckon explain: error: --"), err


def test_explain_on_duckdb_starts_no_jvm(streamed_scenario):
    """The default engine in its own process: the story, and no pyspark imported."""
    import subprocess
    import sys

    wh = streamed_scenario(GRACE.name).warehouse_path
    probe = ("import sys; from app.cli import main; rc = main(['explain', '--warehouse', "
             f"{str(wh)!r}, '--key', 'merchant-x', '--window', {iso(6)!r}]); "
             "print('pyspark' in sys.modules); sys.exit(rc)")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).parent.parent)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0].startswith(f"window [{iso(0)}, {iso(10)})")
    assert run.stdout.splitlines()[-1] == "False"
