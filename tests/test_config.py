"""Fast tier: configuration layering and validation."""

from __future__ import annotations

from decimal import Decimal

import pytest

from reckon.config import load_settings
from reckon.errors import ConfigError


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
    assert (s.lateness, s.window, s.amount_max) == ("7s", "30s", Decimal("50.00"))
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
    ("lateness", "-1s", "lateness"),
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

    from reckon.config import PROJECT_ROOT, Settings

    example = PROJECT_ROOT / "reckon.example.toml"
    keys = set(tomllib.loads(example.read_text())["reckon"])
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
