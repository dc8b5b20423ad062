"""Shared fixtures. One SparkSession for the whole test session (few shuffle partitions, no
UI); a fresh temporary warehouse per test. Tests that use the ``spark`` fixture are marked
``spark`` automatically and run after the fast tier."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.cpu_profile"]

#: Hypothesis fails an example that takes over 200 ms by default: a timing assertion, and on a
#: shared two-core machine running a Spark test beside it a pure example can take longer
#: (tests/test_admission.py failed so under load). The properties are what is tested.
settings.register_profile("reckon", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("reckon")

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("TZ", "UTC")

#: The JVMs a test starts in a subprocess (a CLI command, an Airflow task, a second stream) live
#: seconds to a minute on a few rows, and the default tiered JIT spends a third of their CPU in
#: C2 compiles that never pay back: C1 alone does the same work for less CPU (a replay of the
#: demo day: 46 -> 30 CPU-seconds; measured in the suite with --cpu-profile, a stream stopped by
#: its deleted lock 47 -> 22, two streams and two replays at once 208 -> 188, whose longer
#: batches give C2's faster code time to pay). The code cache must keep the tiered size: at
#: C1's default 48 MB Spark fills it, and the JVM then stops compiling and fails method
#: handles (InternalError: linkToVirtual). The parallel collector instead of G1: a few-second
#: JVM gains nothing from G1's concurrent work (a start plus a small Delta write, MERGE and
#: read, the probe in bench/CHANGELOG.md: 26.0 -> 24.2 CPU s, medians of three, alternated).
#: Only the JIT and the collector differ; what runs is the same. The session's own JVM (the
#: ``spark`` fixture) lives for the whole run and keeps the defaults.
SHORT_LIVED_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m "
                           "-XX:+UseParallelGC")
os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_LIVED_JVM_OPTIONS)


#: The session's own JVM runs Spark's expressions interpreted, not as generated Java
#: (spark.execution_mode, which the nightly steps also use on a small day). A test's batches
#: hold a few rows, and Spark generates (and strips with regular expressions) the source of
#: every stage and of each task's projections before its cache can find the compiled class:
#: a fifth of the session JVM's samples (JFR, tests/test_explain.py and test_spec.py), and
#: 220 -> 185 CPU s for those two files. Spark keeps both paths equal by contract and runs its
#: own suites in both; reckon's generated path stays covered where a user meets it: the
#: stream processes a test starts run with the product's defaults, a nightly step over a
#: bigger day generates code, and tests/test_stream_codegen.py turns code generation back on
#: for its own session.
from spark.execution_mode import INTERPRETED_EXPRESSIONS  # noqa: E402


@pytest.fixture(scope="session")
def spark_settings(tmp_path_factory: pytest.TempPathFactory):
    from app.settings import load_settings

    base = tmp_path_factory.mktemp("spark-session")
    return load_settings(env={}, warehouse=str(base / "wh"), shuffle_partitions=2,
                         spark_driver_memory="3g", extra_spark_conf=INTERPRETED_EXPRESSIONS)


@pytest.fixture(scope="session")
def spark(spark_settings) -> Iterator[object]:
    from spark.session import get_spark

    short_lived = os.environ.get("SPARK_SUBMIT_OPTS") == SHORT_LIVED_JVM_OPTIONS
    if short_lived:  # this JVM lives as long as the test session: the default JIT
        del os.environ["SPARK_SUBMIT_OPTS"]
    try:
        session = get_spark(spark_settings, app_name="reckon-tests")
    finally:
        if short_lived:
            os.environ["SPARK_SUBMIT_OPTS"] = SHORT_LIVED_JVM_OPTIONS
    yield session
    session.stop()


def _scenarios_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where this session's streamed scenarios live. Under pytest-xdist, the folder every
    worker's temporary folder is in (one per session, the controller's): a scenario is then
    streamed once per session, not once per worker (~5 CPU s a micro-batch). Alone, this
    process's own temporary folder."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "scenarios"
    root.mkdir(exist_ok=True)
    return root


@contextlib.contextmanager
def _exclusive(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_file`` (flock, released when the file is closed):
    the workers of one session build a scenario one at a time, the second waits for it."""
    import fcntl

    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def streamed_scenario(spark, tmp_path_factory: pytest.TempPathFactory):
    """``get(name)``: the settings of a warehouse that the real streaming job produced from the
    semantics scenario ``name`` (tests/scenarios.py). Each scenario is streamed at most once per
    session, by whichever worker needs it first (``_scenarios_root``); tests only read it, or
    ``copy_warehouse`` it to write."""
    import hashlib

    from spark.sources import StreamSource
    from spark.stream import run_stream
    from tests.scenarios import SCENARIOS
    from tests.streamkit import stream_settings, write_landing

    root = _scenarios_root(tmp_path_factory)

    def get(name: str):
        case = next(c for c in SCENARIOS if c.name == name)
        folder = root / hashlib.sha1(name.encode()).hexdigest()[:12]
        settings = stream_settings(folder / "wh", **case.rules)
        with _exclusive(root / f"{folder.name}.lock"):
            if not (folder / "streamed").exists():  # not yet, or a build that failed midway
                shutil.rmtree(folder, ignore_errors=True)
                write_landing(folder / "landing", case.batches)
                run_stream(spark, settings, StreamSource(landing=str(folder / "landing")),
                           on_batch=None)
                (folder / "streamed").touch()
        return settings

    return get


@pytest.fixture()
def warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "warehouse"
    path.mkdir()
    return path


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module-scoped fixture (a streamed warehouse, a DAG folder):
    such a module's tests stay on one worker, so the fixture is built once, not once a
    worker."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(d.scope == "module" for name in getattr(item, "fixturenames", ())
               for d in defs.get(name, ()))


def _run_order(item: pytest.Item) -> tuple[int, int]:
    """The fast tier first, then the Spark tier with its slow tests first: under
    ``pytest -n 2`` (``make test``) the long tests start at once on both workers and the many
    short ones fill in behind them, instead of one long test starting last. Stable within
    each rank."""
    if not item.get_closest_marker("spark"):
        return (0, 0)
    return (1, 0 if item.get_closest_marker("slow") else 1)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (it names each test by its group)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    spark_marker = pytest.mark.spark
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(spark_marker)
        if _shares_a_module_fixture(item):  # read by ``--dist loadgroup`` (pytest-xdist)
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    items.sort(key=_run_order)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A private PostgreSQL server on loopback for the whole session (tests/pg_server.py).
    Missing binaries fail the test with the fix, never skip silently."""
    from tests.pg_server import PostgresNotInstalledError, find_pg_bin, postgres_server

    try:
        find_pg_bin()
    except PostgresNotInstalledError as exc:
        pytest.fail(str(exc), pytrace=False)
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[object]:
    """One real KRaft broker on loopback for the session (tests/kafka_broker.py); each test
    uses its own topics. Missing broker jars fail the test with the fix (`make setup`)."""
    from reckon.errors import ConfigError
    from tests.kafka_broker import broker_jars
    from tests.kafka_broker import kafka_broker as start_broker

    try:
        broker_jars()
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)
    with start_broker() as broker:
        yield broker


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A report-database URL, once per backend: a SQLite file, and a fresh database on the
    session's real PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'reckon.db'}"
    else:
        from tests.pg_server import fresh_database

        with fresh_database(request.getfixturevalue("postgres_url")) as url:
            yield url
