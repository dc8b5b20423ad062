"""The warehouse keeps its event-time spec (reckon.spec, storage.spec_log, spark.spec).

Fast tier: which values give way to the warehouse's and which are refused, and what a refusal
says. Spark tier, through the CLI as a user runs it: a stream with 60 s windows and a 5 s bound,
then replay and audit with no flags, agree (no UNEXPLAINED row); a conflicting RECKON_WINDOW is
refused naming both values; a lateness change mid-stream is refused without --change-spec,
recorded with it (batch and watermark), and the day that spans it audits clean, checks pass
and its report shows both versions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.cli import main
from app.settings import load_settings
from reckon.errors import UsageError
from reckon.spec import changed_spec, describe_change, resolve, spec_of
from reckon.timeutil import from_micros
from reckon.vocabulary import to_stored
from storage.spec_log import recorded_versions, rules_in_force
from tests.scenarios import BASE, ev
from tests.streamkit import write_landing

RECORDED = spec_of(load_settings(env={}, window="60s", watermark_bound="5s"))


# ------------------------------------------------------------------------------ fast tier


def test_defaults_give_way_to_the_warehouse_spec() -> None:
    settings = resolve(load_settings(env={}), RECORDED, "replay")
    assert (settings.window, settings.watermark_bound, settings.allowed_lateness) == ("1m", "5s", "0s")
    assert settings.origin("window") == "the warehouse"
    # resolving again is harmless: the warehouse's values never disagree with themselves
    assert resolve(settings, RECORDED, "audit").window == "1m"


def test_a_given_value_equal_to_the_warehouse_one_is_not_a_conflict() -> None:
    assert resolve(load_settings(env={}, window="1m"), RECORDED, "replay").window == "1m"


@pytest.mark.parametrize(("env", "overrides", "origin"), [
    ({"RECKON_WINDOW": "10s"}, {}, "RECKON_WINDOW"),
    ({}, {"window": "10s"}, "--window"),
])
def test_a_given_value_that_disagrees_is_refused_naming_both(env, overrides, origin) -> None:
    with pytest.raises(UsageError) as caught:
        resolve(load_settings(env=env, **overrides), RECORDED, "audit")
    assert str(caught.value) == (
        f"audit: the warehouse's event-time spec has window=1m, but {origin} gives 10s: drop "
        f"{origin} (every step takes the warehouse's spec), or stream into a new warehouse to "
        "window events differently")


def test_a_config_file_is_named_as_the_origin(tmp_path: Path) -> None:
    config = tmp_path / "reckon.toml"
    config.write_text('[reckon]\nlateness = "2s"\n')
    with pytest.raises(UsageError, match=r"watermark_bound=5s, but \[reckon\] lateness in .*reckon"
                                         r"\.toml' gives 2s: .* --change-spec"):
        resolve(load_settings(config, env={}), RECORDED, "stream")


def test_no_recorded_spec_leaves_the_settings_as_given() -> None:
    assert resolve(load_settings(env={}, window="5s"), None, "replay").window == "5s"


def test_a_change_may_move_when_windows_are_final_never_what_they_hold() -> None:
    new = changed_spec(RECORDED, load_settings(env={}, watermark_bound="2s", allowed_lateness="5s"))
    assert (new["watermark_bound"], new["allowed_lateness"], new["window"]) == ("2s", "5s", "1m")
    assert describe_change(RECORDED, new) == ("watermark_bound 5s -> 2s, "
                                              "allowed_lateness 0s -> 5s")
    with pytest.raises(UsageError, match=r"window=1m, but --window gives 30s: only the "
                                         r"watermark bound.*new warehouse to window events"):
        changed_spec(RECORDED, load_settings(env={}, window="30s", watermark_bound="2s"))
    with pytest.raises(UsageError, match="nothing to change"):
        changed_spec(RECORDED, load_settings(env={}, watermark_bound="5s"))


def test_a_changed_spec_is_told_in_the_names_a_person_sets() -> None:
    """The warehouse records the settings' first names; the flags, config and README say
    watermark_bound and allowed_lateness, so every line a person reads does too."""
    new = changed_spec(RECORDED, load_settings(env={}, watermark_bound="2s",
                                               allowed_lateness="5s"))
    recorded = to_stored(new)  # what spark.spec writes: the recorded keys stay
    assert (recorded["lateness"], recorded["grace"]) == ("2s", "5s")  # vocabulary: keep
    line = describe_change(RECORDED, new)
    assert line == "watermark_bound 5s -> 2s, allowed_lateness 0s -> 5s"
    assert describe_change(to_stored(RECORDED), recorded) == line
    bare = line.replace("allowed_lateness", "")
    assert not re.search(r"\b(lateness|grace)\b", bare)  # vocabulary: keep
    with pytest.raises(UsageError, match=r"^stream: the warehouse's event-time spec has "
                                         r"watermark_bound=5s, but --watermark-bound gives 2s"):
        resolve(load_settings(env={}, watermark_bound="2s"), RECORDED, "stream")


def test_a_change_recorded_in_the_first_names_reads_in_the_new_ones(tmp_path: Path) -> None:
    """A warehouse whose version 2 was recorded as ``lateness 5s -> 2s`` (before the
    renaming) still opens, reads in the new names, and its report line names
    watermark_bound; a version keyed by the new names after one keyed by the old (a later
    writer) tells only what changed."""
    log = tmp_path / "event_time_spec" / "_delta_log"
    log.mkdir(parents=True)
    old = to_stored(RECORDED)
    assert "lateness" in old and "watermark_bound" not in old  # vocabulary: keep
    second_spec = {**old, "lateness": "2s"}  # vocabulary: keep
    third_spec = {**RECORDED, "watermark_bound": "2s", "allowed_lateness": "1s"}
    for version, (spec, change) in enumerate([(old, "first start"),
                                              (second_spec, "lateness 5s -> 2s"),
                                              (third_spec, "grace 0s -> 1s")]):
        meta = {"reckon_spec": {"spec_version": version + 1, "spec": spec, "change": change,
                                "after_batch_id": None if version == 0 else 2,
                                "after_watermark": None, "recorded_at": "2026-01-01T00:00:00Z",
                                "recorded_by": "ops"}}
        (log / f"{version:020d}.json").write_text(
            json.dumps({"commitInfo": {"userMetadata": json.dumps(meta)}}) + "\n")
    first, second, third = recorded_versions(tmp_path)
    assert (first.change, second.change, third.change) == (
        "first start", "watermark_bound 5s -> 2s", "allowed_lateness 0s -> 1s")
    assert first.spec == RECORDED and second.spec == {**RECORDED, "watermark_bound": "2s"}
    assert second.describe().startswith("version 2 (watermark_bound 5s -> 2s) from after batch 2")
    rules = rules_in_force(tmp_path, version=2)
    assert (rules.watermark.watermark_bound, rules.allowed_lateness, rules.windows.size) == (
        2_000_000, 0, 60_000_000)
    assert rules_in_force(tmp_path).allowed_lateness == 1_000_000


# ----------------------------------------------------------------------------- Spark tier

DAY = from_micros(BASE).date().isoformat()
BEFORE = [[ev(5, 5), ev(20, 20)], [ev(50, 50), ev(70, 71)], [ev(10, 80), ev(100, 100)]]
AFTER = [[ev(125, 125)], [ev(65, 130), ev(180, 180)]]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture()
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("RECKON_CONFIG", "RECKON_WINDOW", "RECKON_LATENESS", "RECKON_WATERMARK_BOUND",
                 "RECKON_WAREHOUSE",
                 "RECKON_REPORT_DB_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _stream(capsys, landing: Path, wh: Path, *flags: str) -> tuple[int, str, str]:
    return _run(capsys, "stream", "--landing", str(landing), "--warehouse", str(wh),
                "--available-now", "--max-files-per-trigger", "1", *flags)


def test_replay_and_audit_take_the_spec_the_stream_recorded(spark, clean_env, capsys,
                                                            monkeypatch):
    landing, wh = clean_env / "landing", clean_env / "wh"
    write_landing(landing, BEFORE)
    code, _, err = _stream(capsys, landing, wh, "--window", "60s", "--lateness", "5s")
    assert code == 0, err
    for step in ("replay", "audit"):
        code, _, err = _run(capsys, step, "--warehouse", str(wh), "--date", DAY)
        assert code == 0, err
    statuses = {r.status for r in spark.read.format("delta").load(str(wh / "reconciliation"))
                .select("status").distinct().collect()}
    assert statuses == {"MATCHED", "EXPLAINED"}  # the late event explains its window's gap
    [run] = spark.read.format("delta").load(str(wh / "replay_runs")).collect()
    assert json.loads(run.rules_json)["window"] == "1m"

    monkeypatch.setenv("RECKON_WINDOW", "10s")
    code, out, err = _run(capsys, "audit", "--warehouse", str(wh), "--date", DAY)
    assert (code, out) == (2, "")
    assert err == ("reckon audit: error: audit: the warehouse's event-time spec has window=1m, "
                   "but RECKON_WINDOW gives 10s: drop RECKON_WINDOW (every step takes the "
                   "warehouse's spec), or stream into a new warehouse to window events "
                   "differently\n")


def test_a_lateness_change_is_an_explicit_recorded_act(spark, clean_env, capsys, tmp_path):
    landing, wh = clean_env / "landing", clean_env / "wh"
    write_landing(landing, BEFORE)
    assert _stream(capsys, landing, wh, "--window", "60s", "--lateness", "5s")[0] == 0
    write_landing(landing, AFTER, start=len(BEFORE))

    code, _, err = _stream(capsys, landing, wh, "--lateness", "2s")
    assert code == 2 and "watermark_bound=5s, but --lateness gives 2s" in err
    assert "restart the stream with --change-spec" in err
    code, _, err = _stream(capsys, landing, wh, "--change-spec", "--window", "30s")
    assert code == 2 and "stream into a new warehouse to window events differently" in err

    code, _, err = _stream(capsys, landing, wh, "--change-spec", "--lateness", "2s")
    assert code == 0, err
    assert "event-time spec version 2: watermark_bound 5s -> 2s, from the batch after 2" in err
    # the start-up line shows what the stream runs with: the recorded 1m windows, not 10s
    assert "tumbling 1m windows, watermark bound 2s per partition" in err
    versions = (spark.read.format("delta").load(str(wh / "event_time_spec"))
                .orderBy("spec_version").collect())
    assert [(v.spec_version, v.change, v.after_batch_id) for v in versions] == [
        (1, "first start", None), (2, "watermark_bound 5s -> 2s", 2)]
    assert json.loads(versions[1].origins_json) == {"lateness": "--lateness"}
    progress = spark.read.format("delta").load(str(wh / "watermark_progress"))
    lateness = {r.batch_id: json.loads(r.rules_json)["lateness"] for r in progress.collect()}
    assert lateness == {0: "5s", 1: "5s", 2: "5s", 3: "2s", 4: "2s"}

    # a restart with no flags goes on with version 2
    assert _stream(capsys, landing, wh)[0] == 0
    for step in ("replay", "audit", "check"):
        code, out, err = _run(capsys, step, "--warehouse", str(wh), "--date", DAY)
        assert code == 0, (step, out, err)
    late = spark.read.format("delta").load(str(wh / "late_events")).count()
    assert late == 2
    statuses = {r.status for r in spark.read.format("delta").load(str(wh / "reconciliation"))
                .select("status").distinct().collect()}
    assert "UNEXPLAINED" not in statuses and "EXPLAINED" in statuses

    code, _, err = _run(capsys, "report", "--warehouse", str(wh), "--date", DAY, "--out",
                        str(tmp_path / "report"))
    assert code == 0, err
    html = (tmp_path / "report" / "report.html").read_text()
    assert 'id="spec-versions"' in html
    assert "version 1 (first start)" in html
    assert "version 2 (watermark_bound 5s -&gt; 2s) from after batch 2" in html


def test_a_spec_recorded_before_bounds_per_input_means_one_bound() -> None:
    """Every warehouse recorded before issue 41 has no bounds per input: it opens, and runs
    with one bound for every partition; a default spec records exactly what it used to."""
    assert "watermark_inputs" not in RECORDED
    settings = resolve(load_settings(env={}), RECORDED, "stream")
    policy = settings.event_time_rules().watermark
    assert not policy.by_source and policy.uniform and policy.watermark_bound == 5_000_000
    # asking for the default explicitly is no conflict with an old spec
    assert resolve(load_settings(env={"RECKON_WATERMARK_INPUTS": "partition"}), RECORDED,
                   "audit").watermark_inputs == "partition"


def test_bounds_per_input_are_recorded_and_a_change_of_them_is_explicit() -> None:
    given = load_settings(env={}, window="60s", watermark_bound="5s", watermark_inputs="source",
                          watermark_bound_by_source="sat=10000ms")
    recorded = spec_of(given)
    assert recorded["watermark_inputs"] == "source"
    assert recorded["watermark_bound_by_source"] == {"sat": "10s"}
    assert resolve(load_settings(env={}), recorded, "audit").event_time_rules(
        ).watermark.bound((0, "sat")) == 10_000_000
    with pytest.raises(UsageError, match=r"watermark_bound_by_source=sat=10s, but "
                                         r"--watermark-bound-by-source gives sat=30s: .*"
                                         r"--change-spec"):
        resolve(load_settings(env={}, watermark_bound_by_source="sat=30s"), recorded, "audit")
    new = changed_spec(recorded, load_settings(env={}, watermark_bound_by_source="sat=30s"))
    assert describe_change(recorded, new) == "watermark_bound_by_source sat=10s -> sat=30s"
    back = changed_spec(recorded, load_settings(env={}, watermark_inputs="partition",
                                                watermark_bound_by_source="none"))
    assert describe_change(recorded, back) == ("watermark_inputs source -> partition, "
                                               "watermark_bound_by_source sat=10s -> {} (none)")
    # an old spec changed to bounds by partition
    old = changed_spec(RECORDED, load_settings(env={}, watermark_bound_by_partition="2=9s"))
    assert describe_change(RECORDED, old) == (
        "watermark_bound_by_partition {} (none) -> 2=9s")


@pytest.mark.spark
def test_a_bound_for_a_source_the_stream_never_saw_is_a_warning_at_its_start(spark, clean_env,
                                                                            capsys):
    """Sources "sat" and "http" streamed with inputs by source; restarted with
    ``--change-spec --watermark-bound-by-source Sat=5s`` (a capital S): the change keeps
    http's bound (a map names bounds of some sources) and the start says, in one warning
    line, that no input "Sat" was ever seen, naming those that were."""
    from dataclasses import replace

    landing, wh = clean_env / "landing", clean_env / "wh"
    write_landing(landing, [[replace(ev(5, 5), source="sat"), replace(ev(6, 6), source="http")]])
    code, _, err = _stream(capsys, landing, wh, "--watermark-bound-by-source", "http=8s",
                           "--watermark-bound", "0s")
    assert code == 0, err
    assert "never seen" not in err  # a new warehouse has seen nothing: nothing to say
    code, _, err = _stream(capsys, landing, wh, "--change-spec",
                           "--watermark-bound-by-source", "Sat=5s")
    assert code == 0, err
    assert "watermark_bound_by_source http=8s -> Sat=5s,http=8s" in err
    [warning] = [line for line in err.splitlines() if "never seen" in line]
    assert warning == ("[stream] warning: bounds for inputs never seen in this warehouse: "
                       "source 'Sat' (seen: http, sat): a misspelt name? a bound applies to "
                       "the events' source and partition exactly")
