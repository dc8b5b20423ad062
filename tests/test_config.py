"""Fast tier: configuration layering and validation."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.settings import load_settings
from reckon.errors import ConfigError, UsageError


def test_defaults_run_on_a_laptop(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings(env={})
    assert s.spark_master == "local[*]"
    assert s.report_db.startswith("sqlite:///") and s.report_db.endswith("reports/reckon.db")
    assert s.event_time_rules().windows.size == 10_000_000


def test_file_then_environment_then_overrides(tmp_path):
    cfg = tmp_path / "reckon.toml"
    cfg.write_text('[reckon]\nlateness = "5s"\nwindow = "1m"\namount_max = "50.00"\n')
    s = load_settings(cfg, env={"RECKON_LATENESS": "7s", "RECKON_EXPECTED_PARTITIONS": "0,1,2"},
                      window="30s")
    assert (s.watermark_bound, s.window, s.amount_max) == ("7s", "30s", Decimal("50.00"))
    assert s.expected_partitions == (0, 1, 2)


def test_unknown_key_names_the_known_ones(tmp_path):
    cfg = tmp_path / "reckon.toml"
    cfg.write_text('[reckon]\nlatenes = "5s"\n')
    with pytest.raises(ConfigError, match=r"unknown setting 'latenes'.*lateness"):
        load_settings(cfg, env={})


def test_money_as_float_is_refused(tmp_path):
    cfg = tmp_path / "reckon.toml"
    cfg.write_text("[reckon]\namount_max = 50.1\n")
    with pytest.raises(ConfigError, match="floats are not exact"):
        load_settings(cfg, env={})


@pytest.mark.parametrize("key,value,match", [
    ("window", "ten seconds", "window"),
    ("slide", "3s", "slide"),
    ("idle_timeout", "0s", "idle_timeout"),
    ("watermark_bound", "-1s", "watermark_bound"),
    ("allowed_lateness", "-1s", "allowed_lateness"),
])
def test_invalid_event_time_settings_fail_at_start_up(key, value, match):
    with pytest.raises(Exception, match=match):
        load_settings(env={}, **{key: value})


def test_public_dict_hides_database_password():
    s = load_settings(env={}, report_db_url="postgresql+psycopg://reckon:s3cret@db:5432/reckon")
    assert "s3cret" not in str(s.public_dict())


def test_the_example_file_lists_every_setting_with_its_default(tmp_path, monkeypatch):
    """reckon.example.toml is documentation users copy: it must stay complete and true."""
    import dataclasses
    import tomllib

    from reckon.config import DEPRECATED_SETTINGS, PROJECT_ROOT, Settings

    example = PROJECT_ROOT / "reckon.example.toml"
    keys = set(tomllib.loads(example.read_text())["reckon"])
    assert not keys & set(DEPRECATED_SETTINGS)  # the names now, never the deprecated ones
    assert keys == {f.name for f in dataclasses.fields(Settings)} - {"origins"}
    monkeypatch.chdir(tmp_path)
    # the example's relative jars_dir means <project>/.cache/jars, the absolute default
    loaded = load_settings(example, env={}, jars_dir=Settings().jars_dir)
    assert loaded == Settings()


def test_a_spark_setting_whose_value_holds_a_comma_is_written_as_json():
    env = {"RECKON_EXTRA_SPARK_CONF": '{"spark.sql.extensions": "a.B,c.D", "spark.x": "1"}'}
    assert load_settings(env=env).extra_spark_conf == {"spark.sql.extensions": "a.B,c.D",
                                                       "spark.x": "1"}
    assert load_settings(env={"RECKON_EXTRA_SPARK_CONF": "spark.a=1, spark.b=x"}
                         ).extra_spark_conf == {"spark.a": "1", "spark.b": "x"}
    with pytest.raises(ConfigError, match="or a JSON object when a value holds a comma"):
        load_settings(env={"RECKON_EXTRA_SPARK_CONF": "spark.sql.extensions=a.B,c.D"})
    with pytest.raises(ConfigError, match="is not a valid JSON object"):
        load_settings(env={"RECKON_EXTRA_SPARK_CONF": '{"spark.a": 1'})


@pytest.mark.parametrize("url", ["s3a://lake/reckon", "abfss://c@acct.dfs.core.windows.net/wh",
                                 "hdfs://nn:8020/reckon"])
def test_a_warehouse_url_is_refused_with_what_to_write_instead(url):
    # as a path it would become ./s3a:/lake/reckon, a local directory on every machine
    with pytest.raises(ConfigError, match=r"filesystem path .* not a \w+:// URL"):
        load_settings(env={"RECKON_WAREHOUSE": url})


def test_a_file_url_warehouse_is_its_path(tmp_path):
    s = load_settings(env={}, warehouse=f"file://{tmp_path}/wh")
    assert s.warehouse_path == tmp_path / "wh"
    assert s.report_db == f"sqlite:///{tmp_path / 'wh' / 'reports' / 'reckon.db'}"


def test_a_min_event_time_before_the_epoch_is_refused():
    # Spark's remainder truncates below zero where Python's floors: windows would differ
    with pytest.raises(ConfigError, match="before 1970-01-01"):
        load_settings(env={}, min_event_time="1960-01-01T00:00:00Z")
    assert load_settings(env={}, min_event_time="1970-01-01T00:00:00Z").min_event_time


# ------------------------------------------------- clear names for the bound and allowed lateness


@pytest.fixture()
def fresh_warnings(monkeypatch):
    """Each deprecated name warns once per process; every test here starts with none given."""
    import app.settings

    monkeypatch.setattr(app.settings, "_WARNED", set())


def _toml(tmp_path, body: str):
    path = tmp_path / "reckon.toml"
    path.write_text("[reckon]\n" + body)
    return path


def test_the_clear_names_set_the_bound_and_the_allowed_lateness(tmp_path, capsys, fresh_warnings):
    from app.cli import _settings, build_parser

    by_file = load_settings(_toml(tmp_path, 'watermark_bound = "4s"\nallowed_lateness = "2s"\n'),
                            env={})
    by_env = load_settings(env={"RECKON_WATERMARK_BOUND": "4s", "RECKON_ALLOWED_LATENESS": "2s"})
    args = build_parser().parse_args(["--config", str(tmp_path / "none.toml"), "stream",
                                      "--landing", "l", "--watermark-bound", "4s",
                                      "--allowed-lateness", "2s"])
    args.config = None
    by_flag = _settings(args)
    for s in (by_file, by_env, by_flag):
        rules = s.event_time_rules()
        assert (rules.watermark.watermark_bound, rules.allowed_lateness) == (4_000_000, 2_000_000)
    assert by_env.origin("watermark_bound") == "RECKON_WATERMARK_BOUND"
    assert by_file.origin("allowed_lateness") == (
        f"[reckon] allowed_lateness in {str(tmp_path / 'reckon.toml')!r}")
    assert by_flag.origin("watermark_bound") == "--watermark-bound"
    assert capsys.readouterr().err == ""  # the clear names never warn


def test_the_old_names_still_work_and_warn_once(tmp_path, capsys, fresh_warnings):
    from app.cli import _settings, build_parser

    by_env = load_settings(env={"RECKON_LATENESS": "4s", "RECKON_GRACE": "2s"})
    load_settings(env={"RECKON_LATENESS": "4s"})  # read again in the same run: no second line
    assert (by_env.watermark_bound, by_env.allowed_lateness) == ("4s", "2s")
    assert by_env.origin("watermark_bound") == "RECKON_LATENESS"
    assert capsys.readouterr().err.splitlines() == [
        "reckon: warning: RECKON_LATENESS is deprecated, use RECKON_WATERMARK_BOUND",
        "reckon: warning: RECKON_GRACE is deprecated, use RECKON_ALLOWED_LATENESS"]

    by_file = load_settings(_toml(tmp_path, 'lateness = "5s"\n'), env={})
    assert by_file.watermark_bound == "5s"
    assert capsys.readouterr().err == (
        f"reckon: warning: [reckon] lateness in {str(tmp_path / 'reckon.toml')!r} is deprecated, "
        "use [reckon] watermark_bound\n")

    args = build_parser().parse_args(["stream", "--landing", "l", "--lateness", "6s",
                                      "--grace", "1s"])
    by_flag = _settings(args)
    assert (by_flag.watermark_bound, by_flag.allowed_lateness) == ("6s", "1s")
    assert by_flag.origin("watermark_bound") == "--lateness"  # a refusal names the flag typed
    assert capsys.readouterr().err.splitlines() == [
        "reckon: warning: --lateness is deprecated, use --watermark-bound",
        "reckon: warning: --grace is deprecated, use --allowed-lateness"]


def test_a_python_callers_old_keyword_works_with_a_deprecation_warning():
    """A keyword by a setting's first name (reckon.vocabulary.DEPRECATED_SETTINGS) to
    ``load_settings`` or ``settings_of``: a script written before the rename runs, told what
    to write instead, on its own line."""
    from reckon.config import settings_of

    with pytest.warns(DeprecationWarning, match="^lateness= is deprecated, use watermark_bound=$"
                      ) as caught:
        s = load_settings(env={}, lateness="5s")  # vocabulary: keep
    assert s.watermark_bound == "5s" and s.origin("watermark_bound") == "--watermark-bound"
    assert caught[0].filename == __file__
    with pytest.warns(DeprecationWarning,
                      match="^grace= is deprecated, use allowed_lateness=$"):  # vocabulary: keep
        assert settings_of(grace="2s").allowed_lateness == "2s"  # vocabulary: keep
    with pytest.raises(ConfigError, match="give only allowed_lateness="):
        settings_of(grace="2s", allowed_lateness="2s")  # vocabulary: keep


def test_both_names_of_one_setting_are_a_one_line_error(tmp_path, capsys, monkeypatch,
                                                        fresh_warnings):
    from app.cli import main

    with pytest.raises(ConfigError, match="^RECKON_WATERMARK_BOUND and RECKON_LATENESS set the "
                       r"same setting \(RECKON_LATENESS is its deprecated name\): give only "
                       "RECKON_WATERMARK_BOUND$"):
        load_settings(env={"RECKON_LATENESS": "3s", "RECKON_WATERMARK_BOUND": "3s"})
    with pytest.raises(ConfigError, match=r"^\[reckon\] allowed_lateness and "
                       r"\[reckon\] grace in "  # vocabulary: keep
                       r"'.*reckon\.toml' set the same setting"):
        load_settings(_toml(tmp_path, 'grace = "1s"\nallowed_lateness = "1s"\n'), env={})

    monkeypatch.chdir(tmp_path)
    for name in ("RECKON_CONFIG", "RECKON_LATENESS", "RECKON_WATERMARK_BOUND"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "reckon.toml").unlink()
    assert capsys.readouterr().err == ""  # refused before any warning
    code = main(["stream", "--landing", "l", "--grace", "1s", "--allowed-lateness", "1s"])
    assert code == 2
    assert capsys.readouterr().err == (
        "reckon stream: error: --allowed-lateness and --grace set the same setting (--grace is "
        "its deprecated name): give only --allowed-lateness\n")


def test_bounds_per_input_come_from_the_file_the_environment_or_the_flags(tmp_path):
    from app.cli import _settings, build_parser

    by_file = load_settings(_toml(tmp_path, 'watermark_inputs = "source"\n'
                                            'watermark_bound_by_partition = { 0 = "5s" }\n'
                                            'watermark_bound_by_source = { sat = "10s" }\n'),
                            env={})
    by_env = load_settings(env={"RECKON_WATERMARK_INPUTS": "source",
                                "RECKON_WATERMARK_BOUND_BY_PARTITION": "0=5s",
                                "RECKON_WATERMARK_BOUND_BY_SOURCE": "sat=10s"})
    args = build_parser().parse_args(["stream", "--landing", "l", "--watermark-inputs", "source",
                                      "--watermark-bound-by-partition", "0=5s",
                                      "--watermark-bound-by-source", "sat=10s"])
    for s in (by_file, by_env, _settings(args)):
        policy = s.event_time_rules().watermark
        assert policy.by_source
        assert (policy.bound((0, "radar")), policy.bound((0, "sat")), policy.bound((1, "x"))
                ) == (5_000_000, 10_000_000, 3_000_000)
    assert load_settings(env={}).event_time_rules().watermark.uniform


@pytest.mark.parametrize(("env", "match"), [
    ({"RECKON_WATERMARK_INPUTS": "topic"},
     r"^watermark_inputs='topic' is not valid: write \"partition\""),
    ({"RECKON_WATERMARK_BOUND_BY_SOURCE": "sat=10s", "RECKON_WATERMARK_INPUTS": "partition"},
     r"^watermark bounds by source need watermark_inputs = \"source\""),
    ({"RECKON_WATERMARK_BOUND_BY_PARTITION": "p1=5s"},
     r"^watermark_bound_by_partition: 'p1' is not a partition number"),
    ({"RECKON_WATERMARK_BOUND_BY_PARTITION": "1=soon"}, r"watermark bound of partition 1"),
    ({"RECKON_WATERMARK_BOUND_BY_PARTITION": "1"},
     r"'1' has no '=': write NAME=DURATION pairs separated by commas, e.g. 0=5s,3=30s$"),
])
def test_a_wrong_bound_per_input_is_one_line_naming_it(env, match):
    with pytest.raises((ConfigError, UsageError), match=match) as caught:
        load_settings(env=env)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("var", "meant"), [
    ("RECKON_WATERMARK_BOUND_BY_SORCE", "RECKON_WATERMARK_BOUND_BY_SOURCE"),
    ("RECKON_WATERMARK_INPUT", "RECKON_WATERMARK_INPUTS"),
    ("RECKON_WATERMARK_BOUNDS", "RECKON_WATERMARK_BOUND"),
])
def test_a_misspelt_environment_setting_is_one_line_naming_the_setting(var, meant):
    """A typo in a RECKON_* name is refused, as a typo in the file is: ignored, it would
    leave the stream on the default bound and record that in the warehouse's spec."""
    with pytest.raises(ConfigError) as caught:
        load_settings(env={var: "sat=10s"})
    assert str(caught.value) == f"{var} is not a setting: did you mean {meant}? (rename or unset it)"


def test_other_tools_reckon_variables_are_left_alone():
    """RECKON_* names the DAG, the bench and the profiler read are not settings, nor near one."""
    env = {"RECKON_CONFIG": "", "RECKON_DB_PASSWORD": "x", "RECKON_AIRFLOW_RETRIES": "2",
           "RECKON_PROFILE": "1",
           "RECKON_VENV": "x", "RECKON_EXECUTOR_PYTHON": "x", "RECKON_CACHE": "x"}
    assert load_settings(env=env).watermark_inputs == ""


def test_the_engines_configs_carry_the_settings_they_are_built_from(tmp_path):
    """What the engines are handed instead of Settings (reckon/engine_config.py) is built from
    the settings once, holds their values, and cannot be changed on the way in."""
    import dataclasses

    from reckon.reconcile import Tolerance

    s = load_settings(env={}, warehouse=str(tmp_path / "wh"), window="1m", watermark_bound="5s",
                      tolerance_abs="0.01", allow_unexplained=True, currencies="EUR,JPY",
                      amount_max="500.00", target_completeness="0.99")
    audit, check, whatif = s.audit_config(), s.check_config(), s.whatif_config()
    assert audit.warehouse == check.warehouse == whatif.warehouse == s.warehouse_path
    assert audit.rules == check.rules == whatif.rules == s.event_time_rules()
    assert audit.tolerance == check.tolerance == Tolerance(Decimal("0.01"), Decimal("0"))
    assert (check.allow_unexplained, check.currencies, check.amount_max) == (
        True, ("EUR", "JPY"), Decimal("500.00"))
    assert whatif.target == Decimal("0.99")
    for config in (audit, check, whatif):
        with pytest.raises(dataclasses.FrozenInstanceError):
            config.warehouse = tmp_path  # type: ignore[misc]


def test_the_spark_engines_configs_carry_the_settings_they_are_built_from(tmp_path):
    """The replay's, the wait's, the compaction's, the source's, the check run's and the
    report's values (reckon/engine_config.py) hold the settings they are built from; the
    report shows the database URL without its password."""
    s = load_settings(env={}, warehouse=str(tmp_path / "wh"), window="1m", kafka_topic="t",
                      replay_broadcast_ids=7, event_log_compact_every=3,
                      max_files_per_trigger=2, max_offsets_per_trigger=9,
                      report_db_url="postgresql+psycopg://u:secret@h:5432/r")
    replay, progress = s.replay_config(), s.progress_config()
    assert replay.warehouse == progress.warehouse == s.warehouse_path
    assert replay.rules == progress.rules == s.event_time_rules()
    assert (replay.kafka_topic, replay.broadcast_ids, replay.parse) == ("t", 7, s.parse_config())
    assert s.compaction_config().stream_compact_every == 3
    assert (s.trigger_limits().max_files, s.trigger_limits().max_offsets) == (2, 9)
    run = s.check_run_config()
    assert (run.checks, run.replay) == (s.check_config(), replay)
    report = s.report_config()
    assert report.whatif == s.whatif_config() and report.report_db == s.report_db
    assert dict(report.shown)["report_db_url"] == "postgresql+psycopg://u:***@h:5432/r"
    assert dict(report.shown)["window"] == "1m"


@pytest.mark.parametrize("override", [
    {"amount_min": "1.00"}, {"amount_max": "10.00"}, {"currencies": "USD"},
    {"min_event_time": "2020-01-01T00:00:00Z"}, {"max_clock_skew": "1m"}])
def test_every_setting_the_parse_reads_changes_the_key_of_its_cached_columns(override):
    """The parse caches its columns under its ParseConfig (spark/parse.py): every setting its
    rules read must change that key, or a changed rule would meet columns built for the old
    one."""
    base = load_settings(env={})
    changed = base.with_overrides(**override).parse_config()
    assert changed != base.parse_config()
    assert len({base.parse_config(), changed}) == 2
    assert base.with_overrides(window="1m").parse_config() == base.parse_config()


def test_check_in_memory_rows_reaches_the_check_and_refuses_a_negative_bound():
    settings = load_settings(env={"RECKON_CHECK_IN_MEMORY_ROWS": "0"})
    assert settings.check_run_config().in_memory_rows == 0  # 0: every table on Spark
    assert load_settings(env={}).check_run_config().in_memory_rows == 200_000
    with pytest.raises(ConfigError, match=r"^check_in_memory_rows=-1 must be >= 0 \(0: every "
                                          r"table is validated on Spark\)$"):
        load_settings(env={}, check_in_memory_rows=-1)


def test_check_without_jvm_max_rows_defaults_to_small_days_and_refuses_a_negative_bound():
    assert load_settings(env={}).check_without_jvm_max_rows == 200_000
    env = {"RECKON_CHECK_WITHOUT_JVM_MAX_ROWS": "0"}
    assert load_settings(env=env).check_without_jvm_max_rows == 0  # 0: always Spark
    with pytest.raises(ConfigError, match=r"^check_without_jvm_max_rows=-1 must be >= 0 \(0: "
                                          r"every check starts Spark\)$"):
        load_settings(env={}, check_without_jvm_max_rows=-1)
