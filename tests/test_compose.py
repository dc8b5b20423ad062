"""Fast tier: docker-compose.yml is a coherent stack (no Docker engine needed).

Checks what breaks a stack only at ``docker compose up`` time, or worse, at 3 a.m.: floating
image tags, dependencies on services without a healthcheck, RECKON_* variables that no
setting reads, endpoints that point at the wrong service or port, undeclared volumes, DAGs
not mounted, secrets written into the file.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from reckon.config import PROJECT_ROOT, Settings

COMPOSE = PROJECT_ROOT / "docker-compose.yml"
AIRFLOW_SERVICES = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
                    "airflow-triggerer")
_INTERPOLATED = re.compile(r"^\$\{[A-Z0-9_]+(:?[-?][^}]*)?\}$")
_SECRET_NAME = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|_KEY$", re.IGNORECASE)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict]:
    return compose["services"]


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _depends(service: dict) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in deps.items()}


def _resolved(value: str) -> str:
    """Compose interpolation with dummy values: ``${VAR:-d}`` -> d, ``${VAR:?m}`` -> x."""
    return re.sub(r"\$\{[A-Z0-9_]+(?::?-([^}]*)|:?\?[^}]*)?\}",
                  lambda m: m.group(1) if m.group(1) is not None else "x", value)


def _container_port(mapping: str) -> int:
    return int(str(mapping).split(":")[-1].split("/")[0])


def test_the_stack_has_every_service_the_architecture_names(services):
    names = set(services)
    assert {"spark-master", "kafka", "postgres", *AIRFLOW_SERVICES} <= names
    workers = [n for n, s in services.items()
               if "org.apache.spark.deploy.worker.Worker" in str(s.get("command"))]
    assert len(workers) == 2, workers
    assert "minio" in names


def test_every_image_is_pinned_to_a_version(services):
    for name, service in services.items():
        image = service.get("image")
        assert image or service.get("build"), f"{name}: neither image nor build"
        if image and not service.get("build"):
            repo, _, tag = image.rpartition(":")
            assert repo and "/" not in tag, f"{name}: image {image!r} has no tag"
            assert tag != "latest" and re.search(r"\d+\.\d+|\d{4}-\d{2}-\d{2}", tag), \
                f"{name}: image {image!r} is not pinned to a version"


def test_the_spark_images_match_the_pinned_pyspark(services):
    import importlib.metadata

    pyspark = importlib.metadata.version("pyspark")
    master = services["spark-master"]["image"]
    assert master.startswith(f"apache/spark:{pyspark}-"), (master, pyspark)
    assert services["kafka"]["image"].startswith("apache/kafka:4.1.")


def test_every_dependency_has_a_healthcheck_or_is_a_one_shot(services):
    for name, service in services.items():
        for dep, condition in _depends(service).items():
            assert dep in services, f"{name} depends on unknown service {dep!r}"
            target = services[dep]
            if condition == "service_completed_successfully":
                assert target.get("restart") == "no", f"{dep} is a one-shot: restart 'no'"
            else:
                assert condition == "service_healthy", \
                    f"{name} -> {dep}: condition {condition!r} does not wait for readiness"
                assert target.get("healthcheck", {}).get("test"), f"{dep} has no healthcheck"


def test_reckon_variables_are_real_settings(services, compose):
    # a setting's name now: a deprecated one (DEPRECATED_SETTINGS) would warn on every start
    known = {"RECKON_" + f.name.upper() for f in dataclasses.fields(Settings)}
    text = COMPOSE.read_text()
    used = set(re.findall(r"\bRECKON_[A-Z0-9_]+\b", text))
    # the postgres container's init script reads the report role's password; not a setting
    used -= {"RECKON_DB_PASSWORD"}
    assert used, "the stack configures nothing through RECKON_*"
    assert used <= known, f"not Settings fields: {sorted(used - known)}"


def test_reckon_settings_in_the_stack_load(services):
    from app.settings import load_settings

    for name in ("reckon-stream", *AIRFLOW_SERVICES):
        env = {k: _resolved(v) for k, v in _env(services[name]).items() if k.startswith("RECKON_")}
        settings = load_settings(env=env)  # raises ConfigError on a bad value
        assert settings.spark_master == "spark://spark-master:7077"
        assert settings.expected_partitions == (0, 1, 2)


def test_endpoints_point_at_the_right_services(services):
    master_cmd = [str(x) for x in services["spark-master"]["command"]]
    master_port = master_cmd[master_cmd.index("--port") + 1]
    kafka_env = _env(services["kafka"])
    advertised = dict(item.split("://", 1)[::-1] for item in
                      kafka_env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    internal = kafka_env["KAFKA_INTER_BROKER_LISTENER_NAME"]
    internal_addr = next(addr for addr, lname in advertised.items() if lname == internal)
    for name, service in services.items():
        env = _env(service)
        if "RECKON_SPARK_MASTER" in env:
            assert env["RECKON_SPARK_MASTER"] == f"spark://spark-master:{master_port}", name
        if "RECKON_KAFKA_BOOTSTRAP" in env:
            assert env["RECKON_KAFKA_BOOTSTRAP"] == internal_addr == "kafka:29092", name
        if "RECKON_REPORT_DB_URL" in env:
            url = urlsplit(_resolved(env["RECKON_REPORT_DB_URL"]))
            assert url.scheme == "postgresql+psycopg", name
            assert (url.hostname, url.port, url.path) == ("postgres", 5432, "/reckon"), name
        if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in env:
            url = urlsplit(_resolved(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]))
            assert (url.hostname, url.port, url.path) == ("postgres", 5432, "/airflow"), name
    # workers join the master the stream and the DAG tasks submit to
    for name, service in services.items():
        if "deploy.worker.Worker" in str(service.get("command")):
            assert f"spark://spark-master:{master_port}" in str(service["command"]), name
    # the topic the stream reads is the one kafka-init creates, with the expected partitions
    init = [str(x) for x in services["kafka-init"]["command"]]
    stream_env = _env(services["reckon-stream"])
    assert init[init.index("--topic") + 1] == stream_env["RECKON_KAFKA_TOPIC"]
    partitions = int(init[init.index("--partitions") + 1])
    assert stream_env["RECKON_EXPECTED_PARTITIONS"] == ",".join(map(str, range(partitions)))
    assert "kafka:29092" in init


def test_published_ports_bind_loopback_and_do_not_collide(services):
    seen: dict[str, str] = {}
    for name, service in services.items():
        for mapping in service.get("ports", []):
            parts = str(mapping).split(":")
            assert len(parts) == 3 and parts[0] == "127.0.0.1", \
                f"{name}: port {mapping!r} must bind 127.0.0.1 explicitly"
            assert parts[1] not in seen, f"host port {parts[1]} used by {seen.get(parts[1])}"
            seen[parts[1]] = name
    assert _container_port(services["airflow-apiserver"]["ports"][0]) == 8080


def test_named_volumes_are_declared_and_the_warehouse_is_shared(services, compose):
    declared = set(compose.get("volumes") or {})
    used: set[str] = set()
    for name, service in services.items():
        for vol in service.get("volumes", []):
            source = str(vol).split(":")[0]
            if source.startswith((".", "/")):
                assert (PROJECT_ROOT / source).exists(), f"{name}: bind source {source} missing"
            else:
                assert source in declared, f"{name}: volume {source!r} is not declared"
                used.add(source)
    assert declared == used, f"declared but unused volumes: {sorted(declared - used)}"
    warehouse = {_env(s).get("RECKON_WAREHOUSE") for s in services.values()} - {None}
    assert warehouse == {"/data/warehouse"}
    for name, service in services.items():
        if _env(service).get("RECKON_WAREHOUSE") or "deploy.worker.Worker" in str(
                service.get("command")):
            assert "warehouse:/data/warehouse" in service.get("volumes", []), \
                f"{name} writes Delta files but does not mount the shared warehouse"


def test_dags_are_mounted_into_every_airflow_service(services):
    for name in AIRFLOW_SERVICES:
        service = services[name]
        mounts = {str(v).split(":")[0]: str(v).split(":")[1] for v in service["volumes"]}
        assert mounts.get("./dags") == _env(service)["AIRFLOW__CORE__DAGS_FOLDER"], name
        assert service.get("build") or service["image"].startswith("reckon:"), \
            f"{name} must run the image with the reckon package installed"
    assert any((PROJECT_ROOT / "dags").glob("*.py"))


def test_no_plaintext_secrets(services):
    for name, service in services.items():
        for key, value in _env(service).items():
            if _SECRET_NAME.search(key):
                assert _INTERPOLATED.match(value), f"{name}: {key} is not taken from ${{VAR}}"
                assert ":?" in value or key.endswith("_USER"), \
                    f"{name}: {key} must fail when unset (${{VAR:?message}})"
            creds = re.match(r"^[a-z0-9+]+://[^:/@]+:(.*)@[^@]+$", value)
            if creds:
                password = creds.group(1)
                assert _INTERPOLATED.match(password) and ":?" in password, \
                    f"{name}: {key} embeds a password that is not ${{VAR:?...}}"


def test_the_image_fetches_the_same_spark_jars_as_setup():
    setup = (PROJECT_ROOT / "scripts" / "setup.sh").read_text()
    dockerfile = (PROJECT_ROOT / "docker" / "reckon" / "Dockerfile").read_text()
    from_setup = re.search(r'fetch_jars spark \S+ \\\s*"([^"]+)"', setup)
    from_docker = re.search(r"ARG SPARK_JARS=(\S+)", dockerfile)
    assert from_setup and from_docker
    assert sorted(from_docker.group(1).split(",")) == sorted(from_setup.group(1).split(","))


def test_the_postgres_init_script_creates_both_databases():
    script = (PROJECT_ROOT / "docker" / "postgres" / "init-databases.sh").read_text()
    for db in ("reckon", "airflow"):
        assert f"CREATE DATABASE {db} OWNER {db};" in script
    assert not re.search(r"PASSWORD '[^']", script), "a password literal in the init script"
    assert Path(PROJECT_ROOT / "docker" / "postgres" / "init-databases.sh").stat().st_mode & 0o111


def test_the_readme_names_every_secret_compose_requires():
    """`docker compose up` stops at the first ``${VAR:?...}`` left unset: the README's
    instructions must name every one of them."""
    required = set(re.findall(r"\$\{([A-Z0-9_]+):\?", COMPOSE.read_text()))
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert required >= {"POSTGRES_PASSWORD", "RECKON_DB_PASSWORD", "MINIO_ROOT_PASSWORD"}
    assert {name for name in required if f"`{name}`" not in readme} == set()


def test_airflow_runs_a_few_workers_not_the_default_32(services):
    """LocalExecutor forks `parallelism` worker processes at start; Airflow's default of 32
    is far more than a few Spark tasks at a time can use."""
    for name in AIRFLOW_SERVICES:
        env = _env(services[name])
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor", name
        assert 1 <= int(env["AIRFLOW__CORE__PARALLELISM"]) <= 8, name


def test_the_workbench_serves_as_its_own_role_after_the_schema_is_migrated(services):
    """Issue 42: docker-compose starts the reviewer's workbench in production."""
    workbench, migrate = services["reckon-workbench"], services["reckon-migrate"]
    assert "reckon workbench --host 0.0.0.0 --port 8088" in str(workbench["command"])
    assert workbench["ports"] == ["127.0.0.1:8088:8088"]
    assert workbench["depends_on"]["reckon-migrate"]["condition"] == \
        "service_completed_successfully"
    assert migrate["restart"] == "no" and "healthcheck" in workbench
    env = _env(workbench)
    # not the owner: the database's triggers check whom the workbench signs for (0007)
    assert urlsplit(_resolved(env["RECKON_REPORT_DB_URL"])).username == "workbench"
    assert _INTERPOLATED.match(env["WORKBENCH_SECRET_KEY"])  # one key for every replica


def test_the_image_copies_every_package_the_project_installs():
    """A package pyproject.toml installs but the image never copies is an ImportError in the
    container's first task (the app and storage layers were once new folders)."""
    pyproject = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = sorted(pattern.rstrip("*") for pattern in include)
    dockerfile = (PROJECT_ROOT / "docker" / "reckon" / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY --chown=\S+ (\w+)/ \1/$", dockerfile, re.M))
    assert "app" in packages and "storage" in packages
    assert [p for p in packages if p not in copied] == []
