"""Scale-out: the same `reckon stream -> replay -> audit` on a real Spark standalone cluster (a
master and two workers on loopback, tests/spark_cluster.py) and on the local master give the
same tables row for row and the same audit record.

Each command runs as its own driver process, exactly as a user or the DAG runs it; the test
session only reads the two warehouses afterwards. Executors live in other JVMs, so this checks
what local mode cannot: spark.jars shipped to executors, the same Python on the workers,
Delta commits and report-DB writes (breaks are written by executors) from remote tasks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest

from app.generate import GeneratorConfig, generate_landing
from reports.db.repository import ReportDB
from spark import tables as tb
from tests.spark_cluster import spark_cluster
from tests.stream_chaos import VOLATILE

pytestmark = [pytest.mark.slow, pytest.mark.soak]

DAY = date(2026, 1, 1)
# wall-clock columns (tests/stream_chaos.py) and the ids of replay and audit runs
IGNORED = {**VOLATILE, tb.CANONICAL_TOTALS: {"replay_id"},
           tb.RECONCILIATION: {"audit_run_id"}}
COMPARED = (tb.EVENT_LOG, tb.PROVISIONAL_DELTAS, tb.LATE_EVENTS, tb.CANONICAL_TOTALS,
            tb.RECONCILIATION)
# small executors and Delta snapshots: the machine has 2 cores
CLUSTER_CONF = ("spark.executor.memory=512m,spark.cores.max=2,"
                "spark.databricks.delta.snapshotPartitions=2")


def _env(master: str, extra_conf: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    env.update(RECKON_SPARK_MASTER=master, RECKON_SHUFFLE_PARTITIONS="2",
               RECKON_SPARK_DRIVER_MEMORY="1g", PYSPARK_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", TZ="UTC")
    if extra_conf:
        env["RECKON_EXTRA_SPARK_CONF"] = extra_conf
    return env


def _flow(landing: Path, warehouse: Path, env: dict[str, str], cwd: Path) -> dict[str, float]:
    """stream (one file per micro-batch) -> replay -> audit via the CLI; seconds per step."""
    steps = {
        "stream": ["--landing", str(landing), "--available-now", "--max-files-per-trigger", "1"],
        "replay": ["--date", DAY.isoformat()],
        "audit": ["--date", DAY.isoformat()],
    }
    took = {}
    for step, args in steps.items():
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "app.cli", step, "--warehouse",
                               str(warehouse), *args], env=env, cwd=cwd, capture_output=True,
                              text=True, timeout=900)
        took[step] = round(time.monotonic() - t0, 1)
        assert done.returncode == 0, (
            f"`reckon {step}` on {env['RECKON_SPARK_MASTER']} failed ({done.returncode}):\n"
            f"{done.stderr[-4000:]}")
    return took


def _rows(spark, warehouse: Path, name: str) -> list[tuple[str, ...]]:
    df = spark.read.format("delta").load(str(warehouse / name))
    keep = [c for c in df.columns if c not in IGNORED.get(name, set())]
    return sorted(tuple(str(v) for v in r) for r in df.select(*keep).collect())


def _audit_record(warehouse: Path) -> dict[str, object]:
    with ReportDB(f"sqlite:///{warehouse / 'reports' / 'reckon.db'}") as db:
        run = db.current_audit_run(DAY)
        assert run is not None, f"no current audit run for {DAY} in {warehouse}"
        breaks = [(b.window_start, b.key, b.currency, b.status, b.gap_amount,
                   b.residual_amount) for b in db.breaks(run.run_id)]
        return {"status_counts": run.status_counts, "rows": run.rows,
                "currencies": run.currencies,  # every figure, per currency
                "unexplained": run.unexplained, "breaks": breaks}


def test_cluster_and_local_master_give_the_same_tables(spark, tmp_path):
    landing = tmp_path / "landing"
    generate_landing(landing, GeneratorConfig(
        events=3000, partitions=3, keys=20, start="2026-01-01T12:00:00Z", rate=200.0,
        lines_per_file=1000, future_rate=0.0, duplicate_rate=0.02, malformed_rate=0.005,
        seed=5))
    on_cluster, local = tmp_path / "wh-cluster", tmp_path / "wh-local"
    t0 = time.monotonic()
    with spark_cluster(workers=2, cores=1, memory="1g") as cluster:
        started = round(time.monotonic() - t0, 1)
        cluster_took = _flow(landing, on_cluster, _env(cluster.master_url, CLUSTER_CONF),
                             tmp_path)
        state = cluster.state()
    # the work really ran on the cluster: one finished application per command, with executors
    apps = sorted(a["name"] for a in state.get("completedapps", []))
    assert apps == ["reckon-audit", "reckon-replay", "reckon-stream"], apps
    assert len([w for w in state["workers"] if w["state"] == "ALIVE"]) == 2

    local_took = _flow(landing, local, _env("local[2]"), tmp_path)
    print(f"\ncluster start {started}s, cluster flow {cluster_took}, local flow {local_took}")

    for name in COMPARED:
        got, want = _rows(spark, on_cluster, name), _rows(spark, local, name)
        assert got == want, (f"{name}: {len(got)} rows on the cluster, {len(want)} locally; "
                             f"only on cluster {sorted(set(got) - set(want))[:5]}, only local "
                             f"{sorted(set(want) - set(got))[:5]}")
    assert _rows(spark, local, tb.CANONICAL_TOTALS), "the replay wrote nothing: a vacuous check"
    assert _rows(spark, local, tb.LATE_EVENTS), "no late events: the flow exercised too little"
    assert _audit_record(on_cluster) == _audit_record(local)
