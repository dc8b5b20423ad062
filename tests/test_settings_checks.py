"""Every setting is checked once, where settings are read (reckon/config.py), and a mistake is
one line through the CLI: exit 2, what was wrong and what to write instead, no traceback. A
bounds map names bounds of some inputs: ``--change-spec`` merges it into the warehouse's
(storage/spec_log.py ``settings_for``), ``sat=`` removes one, ``none`` all. Fast tier: the
warehouse's recorded spec is written as its Delta commit file, no Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cli import main
from app.settings import load_settings
from reckon.spec import merged_bounds, rules_of, spec_of, unseen_bounds, with_spec
from reckon.vocabulary import to_stored
from storage.spec_log import settings_for

RECORDED = {"window": "10s", "lateness": "3s", "grace": "0s", "idle_timeout": "1m",
            "max_clock_skew": "5m", "dedup_horizon": "1h", "expected_partitions": [0, 1],
            "watermark_inputs": "source",
            "watermark_bound_by_source": {"http": "30s", "sat": "10s"}}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No RECKON_* from the caller's shell, no reckon.toml from the working directory."""
    import os

    for var in [v for v in os.environ if v.startswith("RECKON_")]:
        monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)


def recorded_warehouse(wh: Path, spec: dict) -> Path:
    """A warehouse whose event_time_spec holds ``spec`` as version 1 (the commit file a
    stream's first start writes, read by storage.spec_log without Spark)."""
    log = wh / "event_time_spec" / "_delta_log"
    log.mkdir(parents=True)
    meta = {"reckon_spec": {"spec_version": 1, "spec": spec, "change": "first start",
                            "after_batch_id": None, "after_watermark": None,
                            "recorded_at": "2026-01-01T00:00:00Z", "recorded_by": "t"}}
    (log / f"{0:020d}.json").write_text(
        json.dumps({"commitInfo": {"userMetadata": json.dumps(meta)}}) + "\n")
    return wh


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run ``reckon argv``: exit 2 and exactly one line on stderr (returned), no traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def audit(tmp_path: Path) -> list[str]:
    return ["audit", "--warehouse", str(tmp_path / "wh"), "--date", "2026-01-01"]


@pytest.mark.parametrize(("value", "said"), [
    ("sat=1s,sat=5s", "watermark_bound_by_source: 'sat' is given twice (sat=1s, sat=5s): give "
                      "each once, e.g. sat=10s,http=30s"),
    ("=5s", "a bound without a name: write each as NAME=DURATION, e.g. sat=10s,http=30s"),
    ("sat:10s", "'sat:10s' has no '=': write NAME=DURATION pairs separated by commas, e.g. "
                "sat=10s,http=30s"),
    ('{"sat": "1s", "sat": "5s"}', "'sat' is given twice"),
])
def test_a_wrong_bounds_by_source_is_one_line(capsys, monkeypatch, tmp_path, value, said):
    monkeypatch.setenv("RECKON_WATERMARK_BOUND_BY_SOURCE", value)
    assert said in one_line_error(capsys, audit(tmp_path))


@pytest.mark.parametrize("value", ["-1=5s", "x=5s", "1.5=5s"])
def test_a_partition_bound_names_a_partition_number(capsys, monkeypatch, tmp_path, value):
    monkeypatch.setenv("RECKON_WATERMARK_BOUND_BY_PARTITION", value)
    err = one_line_error(capsys, audit(tmp_path))
    assert "is not a partition number (a number >= 0; write 0=5s,3=30s)" in err
    assert repr(value.split("=")[0]) in err


@pytest.mark.parametrize(("var", "said"), [
    ("RECKON_BOUND_BY_SOURCE", "RECKON_BOUND_BY_SOURCE is not a setting: did you mean "
                               "RECKON_WATERMARK_BOUND_BY_SOURCE? (rename or unset it)"),
    ("RECKON_FROBNICATE", "RECKON_FROBNICATE is not a setting (rename or unset it); "
                          "reckon.example.toml lists every setting"),
])
def test_an_unknown_reckon_variable_is_refused(capsys, monkeypatch, tmp_path, var, said):
    monkeypatch.setenv(var, "sat=10s")
    assert said in one_line_error(capsys, audit(tmp_path))


def test_the_benchmarks_own_variable_is_not_taken_for_a_misspelt_setting(monkeypatch, tmp_path):
    """``python -m bench --only postmortem`` reads RECKON_BENCH_POSTMORTEM_WAREHOUSE and runs
    ``reckon sql`` under it: neither may refuse it as a misspelt setting."""
    from app.settings import load_settings

    monkeypatch.setenv("RECKON_BENCH_POSTMORTEM_WAREHOUSE", str(tmp_path))
    assert load_settings(warehouse=str(tmp_path)).warehouse_path == tmp_path


@pytest.mark.parametrize(("toml", "said"), [
    ('[reckon]\nwatermark_bond = "5s"\n', "unknown setting 'watermark_bond' in "),
    ('[reckon]\nwindow = "10s"\n[reckn]\nwindow = "1m"\n', "[reckn] is not a table reckon "
                                                           "reads: did you mean [reckon]?"),
    ('[reckon]\nframble = 1\n', "reckon.example.toml lists every setting"),
    ('[reckon]\nwatermark_bound_by_source = { sat = "10s" }\n'
     '[watermark_bound_by_source]\nhttp = "30s"\n',
     "sets watermark_bound_by_source twice, in [reckon] and as [watermark_bound_by_source]: "
     "keep one"),
])
def test_an_unknown_key_or_table_in_the_file_is_refused(capsys, tmp_path, toml, said):
    (tmp_path / "reckon.toml").write_text(toml)
    err = one_line_error(capsys, audit(tmp_path))
    assert said in err
    if "watermark_bond" in toml:
        assert err.endswith("did you mean watermark_bound?")


def test_a_bounds_table_after_reckon_is_that_setting(tmp_path):
    """TOML ends ``[reckon]`` at the next table: ``[watermark_bound_by_source]`` written
    after it is what its reader meant, the bounds by source (it used to be ignored, and the
    one-bound spec recorded). The example file's empty map in [reckon] gives way to it."""
    (tmp_path / "reckon.toml").write_text(
        '[reckon]\nwatermark_bound = "3s"\nwatermark_bound_by_source = {}\n'
        '[watermark_bound_by_source]\nsat = "10s"\n')
    policy = load_settings(env={}).event_time_rules().watermark
    assert policy.by_source and policy.bound((0, "sat")) == 10_000_000
    assert policy.bound((0, "http")) == 3_000_000


def test_change_spec_merges_a_bounds_map_and_removes_what_is_named(tmp_path):
    """``--watermark-bound-by-source sat=2s`` changes sat's bound and keeps http's, as its
    help says; ``sat=`` removes sat's; ``none`` every one (then inputs may go back to
    partitions). A given map that the merge leaves as recorded is no disagreement."""
    wh = str(recorded_warehouse(tmp_path / "wh", RECORDED))

    def changed(**given: str) -> dict[str, str]:
        return dict(settings_for(load_settings(env={}, warehouse=wh, **given), "stream",
                                 change=True).event_time_rules().to_config().get(
            "watermark_bound_by_source", {}))

    assert changed(watermark_bound_by_source="sat=2s") == {"http": "30s", "sat": "2s"}
    assert changed(watermark_bound_by_source="sat=") == {"http": "30s"}
    assert changed(watermark_bound_by_source="none", watermark_inputs="partition") == {}
    same = settings_for(load_settings(env={}, warehouse=wh, watermark_bound_by_source="sat=10s"),
                        "audit")
    assert same.event_time_rules().watermark.bound((0, "http")) == 30_000_000


def test_going_back_to_inputs_by_partition_says_to_clear_the_map(capsys, tmp_path):
    """Refused before Spark starts (no JVM, one line), naming the recorded map and both ways
    to clear it."""
    wh = recorded_warehouse(tmp_path / "wh", RECORDED)
    (tmp_path / "landing").mkdir()
    err = one_line_error(capsys, ["stream", "--landing", str(tmp_path / "landing"),
                                  "--warehouse", str(wh), "--change-spec",
                                  "--watermark-inputs", "partition"])
    assert err.endswith("the warehouse's spec has watermark_bound_by_source=http=30s,sat=10s, "
                        "which only inputs by source use: clear them in the same change with "
                        "--watermark-bound-by-source none (or remove each: http=,sat=)")


def test_the_help_says_how_a_bounds_map_changes(capsys):
    with pytest.raises(SystemExit):
        main(["stream", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "with --change-spec they change only the sources named (sat= removes sat's bound, " \
           "none removes them all)" in text


def test_a_bound_for_an_input_never_seen_is_one_warning_line():
    """``Sat`` is not ``sat``, partition 7 is not among 0-1: each named, with what was seen;
    inputs not seen at all (a new warehouse) say nothing."""
    policy = load_settings(env={}, watermark_bound_by_source="Sat=5s,http=5s",
                           watermark_bound_by_partition="7=5s").event_time_rules().watermark
    line = unseen_bounds(policy, [0, 1], ["http", "sat"], "in this warehouse")
    assert line == ("warning: bounds for inputs never seen in this warehouse: source 'Sat' "
                    "(seen: http, sat), partition 7 (seen: 0, 1): a misspelt name? a bound "
                    "applies to the events' source and partition exactly")
    assert unseen_bounds(policy, [], [], "in this warehouse") is None
    assert unseen_bounds(policy, [0, 1, 7], ["Sat", "http"], "on 2026-01-01") is None


# ------------------------------------------------------------------ the pure rules, by property

_names = st.sampled_from(["sat", "http", "radar", "Sat"])
_bounds = st.dictionaries(_names, st.sampled_from(["0s", "2s", "10s", "1m"]), max_size=4)


@given(recorded=_bounds, given_=_bounds, removed=st.lists(_names, max_size=3))
def test_a_merged_map_keeps_what_it_does_not_name(recorded, given_, removed):
    """Merging changes exactly the named sources: the given ones take their bound, ``k=``
    removes k, every other recorded bound stays; ``none`` first leaves only the given."""
    change = {**given_, **dict.fromkeys(removed, "")}
    out = merged_bounds(recorded, change)
    for key in set(recorded) | set(change):
        if key in change:
            assert out.get(key) == (change[key] or None)
        else:
            assert out[key] == recorded[key]
    assert merged_bounds(recorded, {"*": "", **given_}) == dict(sorted(given_.items()))
    assert merged_bounds(out, change) == out  # applying a change twice is applying it once


@given(bounds=_bounds, window=st.sampled_from(["10s", "1m"]),
       bound=st.sampled_from(["0s", "3s", "1m"]), allowed_lateness=st.sampled_from(["0s", "5s"]))
def test_a_spec_means_the_same_rules_to_settings_and_to_a_reader_of_rules(bounds, window,
                                                                           bound, allowed_lateness):
    """The one reading of a recorded spec: the settings a step runs with (``with_spec``) and
    the rules an engine reads it as (``rules_of``, e.g. explain's) agree, bounds per source
    included, whatever the base they start from; a spec without bounds means one bound."""
    recorded = spec_of(load_settings(env={}, window=window, watermark_bound=bound, allowed_lateness=allowed_lateness,
                                     watermark_bound_by_source=bounds or None))
    for base in (load_settings(env={}),
                 load_settings(env={}, watermark_bound_by_source="other=9s")):
        assert with_spec(base, recorded).event_time_rules() == rules_of(
            recorded, base.event_time_rules())
    assert rules_of(recorded).to_config() == recorded | rules_of(recorded).to_config()
    # the same spec recorded by the first names (every warehouse: EventTimeRules.to_record)
    old = to_stored(recorded)
    assert rules_of(old) == rules_of(recorded)
    assert with_spec(load_settings(env={}), old) == with_spec(load_settings(env={}), recorded)
