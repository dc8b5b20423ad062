"""Spark tier: `reckon bound-whatif` gives the same answer on DuckDB (its default, no JVM) and on
``--engine spark``, byte for byte, text and ``--json``, through the real CLI (issue 58).

Warehouses the real stream wrote: the scenario where partition 1 idles and rejoins late
(expected partitions, an idle timeout, one late event: the per-partition curves and the
min rule), the worked example with allowed lateness 5 s, EUR, JPY and KWD on one key (tests/scenarios.py,
streamed once a session), and one of this module's own: two partitions, events around
midnight in EUR, JPY and KWD, a slow source ``sat`` with a bound of its own
(``watermark_inputs = source``), stragglers the stream put in late_events (who is late, amounts
per currency), so ``--per-source`` and the per-batch walk under bounds per input are compared
too.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from tests.scenarios import SCENARIOS

IDLE = next(c for c in SCENARIOS if c.name.startswith("partition 1 goes idle"))
GRACE = next(c for c in SCENARIOS if c.name.startswith("worked example, allowed lateness 5s"))
CURRENCIES = next(c for c in SCENARIOS if c.name.startswith("EUR, JPY and KWD"))
OWN_RULES = {"WINDOW": "10s", "WATERMARK_BOUND": "2s", "ALLOWED_LATENESS": "1s",
             "IDLE_TIMEOUT": "1h", "WATERMARK_INPUTS": "source",
             "WATERMARK_BOUND_BY_SOURCE": "sat=6s"}


@pytest.fixture(scope="module")
def sources_warehouse(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Two partitions, events around midnight in three currencies, a third from a slow
    source ``sat`` (up to 12 s later) with a bound of its own, stragglers late for certain;
    (warehouse, the day before midnight: the stragglers' day)."""
    from tests.streamkit import stream_settings
    from tests.test_replay_audit import DAY1, random_batches, run_batches

    rng = random.Random(58)
    stream = [[replace(e, source="sat", arrival_time=e.arrival_time + rng.randint(0, 12) * 10**6)
               if rng.random() < 0.35 else e for e in batch]
              for batch in random_batches(58, n=30, partitions=2, batches=3, stragglers=3)]
    wh = tmp_path_factory.mktemp("lateness-duck") / "wh"
    rules = {k.lower(): v for k, v in OWN_RULES.items() if v}
    run_batches(spark, stream_settings(wh, **rules), stream)
    return wh, DAY1.isoformat()


#: the settings' environment names of the scenarios' rules
_RULES = ("WINDOW", "WATERMARK_BOUND", "ALLOWED_LATENESS", "IDLE_TIMEOUT", "SLIDE",
          "EXPECTED_PARTITIONS", "WATERMARK_INPUTS", "WATERMARK_BOUND_BY_SOURCE")


def _env(monkeypatch: Any, tmp_path: Path, rules: dict[str, str]) -> None:
    """Each rule from the environment, every other one unset (its default)."""
    monkeypatch.chdir(tmp_path)  # no stray ./reckon.toml; the rules come from the environment
    monkeypatch.delenv("RECKON_CONFIG", raising=False)
    for name in _RULES:
        if name in rules:
            monkeypatch.setenv(f"RECKON_{name}", rules[name])
        else:
            monkeypatch.delenv(f"RECKON_{name}", raising=False)


def _scenario_env(rules: dict[str, object]) -> dict[str, str]:
    return {name.upper(): (",".join(map(str, value)) if isinstance(value, tuple) else str(value))
            for name, value in rules.items()}


def _lateness(capsys: Any, wh: Path, engine: str, *flags: str) -> tuple[int, str, str]:
    code = main(["bound-whatif", "--warehouse", str(wh), "--engine", engine, *flags])
    out = capsys.readouterr()
    return code, out.out, out.err


def _same_on_both(capsys: Any, wh: Path, *flags: str, text: bool = False) -> dict[str, Any]:
    """``--json`` on both engines, asserted equal (and the text too when ``text``); the
    DuckDB payload."""
    on_duck = _lateness(capsys, wh, "duckdb", *flags, "--json")
    assert on_duck == _lateness(capsys, wh, "spark", *flags, "--json"), flags
    assert on_duck[0] == 0, on_duck[2]
    if text:
        as_text = _lateness(capsys, wh, "duckdb", *flags)
        assert as_text == _lateness(capsys, wh, "spark", *flags), flags
    return json.loads(on_duck[1])


def test_lateness_is_the_same_on_duckdb_and_spark(spark, streamed_scenario, capsys,
                                                  monkeypatch, tmp_path):
    for case, flags in ((IDLE, ()), (GRACE, ("--bounds", "0s,1s,4s,13s", "--target", "0.9")),
                        (CURRENCIES, ())):
        _env(monkeypatch, tmp_path, _scenario_env(case.rules))
        wh = streamed_scenario(case.name).warehouse_path
        payload = _same_on_both(capsys, wh, "--date", "2026-01-01", *flags, text=case is IDLE)
        assert payload["events"] == sum(map(len, case.batches)) - len(case.quarantined)
        if case is IDLE:
            assert [p["partition"] for p in payload["partitions"]] == [0, 1]
            batch = payload["curves"][0]
            assert [p["dropped"] for p in batch["points"] if p["bound_seconds"] == 3.0] == [1]


def test_lateness_per_source_and_who_is_late_are_the_same_on_both(spark, sources_warehouse,
                                                                  capsys, monkeypatch,
                                                                  tmp_path):
    wh, day = sources_warehouse
    _env(monkeypatch, tmp_path, OWN_RULES)
    payload = _same_on_both(capsys, wh, "--date", day, text=True)
    late = {(a["dimension"], a["value"]): a for a in payload["attribution"]}
    assert late and {v for (d, v) in late if d == "currency"} <= {"EUR", "JPY", "KWD"}
    assert late[("partition", "0")]["late_amounts"].keys() == {"EUR", "JPY"}  # never added
    assert payload["curves"][0]["note"] is None  # the per-batch walk under bounds per source
    rec = _same_on_both(capsys, wh, "--date", day, "--per-source", "--target", "0.9")
    assert "sat" in [b["unit"] for b in rec["bounds"]] and rec["per_batch"]


def test_the_reports_bounds_per_source_are_sparks(spark, sources_warehouse):
    """The report's pieces read through DuckDB (reports/context.py) and the what-ifs the audit
    records (audits/day_whatif.py) on a day with a slow
    source of its own bound and three currencies: a bound per source beats the single one,
    per event and per batch, and every piece is what Spark computes
    (tests/test_report_render.py's oracle)."""
    from datetime import date

    from audits.day_whatif import day_whatif
    from tests.streamkit import stream_settings
    from tests.test_report_render import _assert_context_is_sparks

    wh, day = sources_warehouse
    settings = stream_settings(wh, **{k.lower(): v for k, v in OWN_RULES.items()})
    rec = day_whatif(settings.whatif_config(), date.fromisoformat(day)).per_source
    assert rec is not None and "sat" in [b.unit for b in rec.bounds]
    _assert_context_is_sparks(spark, settings, day=date.fromisoformat(day))


def test_lateness_mistakes_and_quiet_days_are_the_same_on_both(spark, streamed_scenario,
                                                               capsys, monkeypatch, tmp_path):
    _env(monkeypatch, tmp_path, _scenario_env(GRACE.rules))
    wh = streamed_scenario(GRACE.name).warehouse_path
    quiet = _same_on_both(capsys, wh, "--date", "2031-05-05")
    assert quiet == {"day": "2031-05-05", "events": 0,
                     "note": "no events on 2031-05-05: nothing to analyse"}
    for where, flags in ((wh, ["--date", "yesterday"]), (wh, ["--date", "2026-01-01",
                                                              "--target", "1.5"]),
                         (tmp_path / "nowhere", ["--date", "2026-01-01"]),
                         (tmp_path, ["--date", "2026-01-01"])):
        on_duck = _lateness(capsys, where, "duckdb", *flags)
        assert on_duck == _lateness(capsys, where, "spark", *flags), flags
        code, out, err = on_duck
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert err.startswith("reckon bound-whatif: error: "), err


def test_lateness_on_duckdb_starts_no_jvm(streamed_scenario, tmp_path):
    """The default engine in its own process: the analysis, and no pyspark imported."""
    import os
    import subprocess
    import sys

    wh = streamed_scenario(IDLE.name).warehouse_path
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent),
           **{f"RECKON_{k}": v for k, v in _scenario_env(IDLE.rules).items()}}
    probe = ("import sys; from app.cli import main; rc = main(['bound-whatif', '--warehouse', "
             f"{str(wh)!r}, '--date', '2026-01-01']); "
             "print('pyspark' in sys.modules); sys.exit(rc)")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("bound what-if of 2026-01-01: 8 events")
    assert run.stdout.splitlines()[-1] == "False"
