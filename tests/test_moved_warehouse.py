"""A warehouse copied or restored elsewhere keeps working (issue 56).

The report database used to store absolute paths, so on a copy (``cp -a wh wh2``) a re-audit
looked for the signed report under the old place and kept no ``signed/`` copy. Paths inside
the warehouse are now stored relative to it (reports.db.repository.ReportDB) and older
absolute ones were made relative by migration 0011.
"""

from __future__ import annotations

import hashlib
import subprocess
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from app.cli import main
from reports.db.repository import ReportDB

DAY = date(2026, 1, 1)


@pytest.fixture()
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("RECKON_CONFIG", "RECKON_REPORT_DB_URL", "RECKON_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, (argv, out.out, out.err)
    return out.out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.spark
def test_a_copied_warehouse_re_audits_keeps_the_signed_copy_and_verifies_its_log(
        spark, streamed_scenario, clean_env, capsys, monkeypatch):
    """As a user meets it: a day audited, reported and signed off; the warehouse is copied
    with ``cp -a`` and the original moved away (nothing can read it any more); on the copy the
    day is re-audited and re-rendered. The signed report is kept in ``signed/<run>/`` with the
    SHA-256 that was signed, the workbench's link leads to the copy's report, and
    ``reckon verify-log`` says OK."""
    from app.settings import load_settings
    from tests.signers import ADMIN, append
    from tests.streamkit import copy_warehouse
    from workbench import queries

    streamed = streamed_scenario("worked example, allowed lateness 0").warehouse_path
    wh = copy_warehouse(streamed, clean_env)
    day = DAY.isoformat()
    for step in ("replay", "audit"):
        _cli(capsys, step, "--warehouse", str(wh), "--date", day)
    # into the warehouse's own report folder, as the nightly DAG renders it
    _cli(capsys, "report", "--warehouse", str(wh), "--date", day, "--out",
         str(wh / "reports" / day))
    with ReportDB.from_settings(load_settings(env={}, warehouse=str(wh))) as db:
        run = db.current_audit_run(DAY)
        assert run is not None
        append(db, run.run_id, "bob", "approved", "ties out", warehouse=wh.resolve())
        signed = db.current_report(DAY)
    assert signed is not None
    folder = Path(signed.html_path).parent
    assert folder == wh.resolve() / "reports" / day

    copy = clean_env / "restored" / "wh2"
    copy.parent.mkdir()
    subprocess.run(["cp", "-a", str(wh), str(copy)], check=True)
    wh.rename(clean_env / "wh-moved-away")  # nothing may read the original silently

    _cli(capsys, "audit", "--warehouse", str(copy), "--date", day)
    _cli(capsys, "report", "--warehouse", str(copy), "--date", day, "--out",
         str(copy / "reports" / day))
    kept = copy.resolve() / "reports" / day / "signed" / run.run_id / "report.html"
    assert kept.is_file(), sorted(str(p) for p in (copy / "reports" / day).rglob("*"))
    assert _sha256(kept) == signed.sha256
    with ReportDB.from_settings(load_settings(env={}, warehouse=str(copy))) as db:
        recorded = db.report_at(str(kept))
        assert recorded is not None and recorded.sha256 == signed.sha256
        assert recorded.audit_run_id == run.run_id
        now = queries.run_of_day(db, DAY)
        assert now is not None and now["run_id"] != run.run_id
        assert now["report_path"] == str(copy.resolve() / "reports" / day / "report.html")
    monkeypatch.setenv("RECKON_SIGNOFF_ADMIN_KEY", ADMIN.public_text)  # bob's key's registrar
    out = _cli(capsys, "verify-log", "--warehouse", str(copy))
    assert out.startswith("sign-off log OK: 1 entry"), out


def test_old_absolute_paths_are_made_relative_and_read_on_the_restored_warehouse(
        db_url: str, tmp_path: Path) -> None:
    """Migration 0011 on a database recorded before (absolute paths of a warehouse at /old):
    the warehouse's own files become relative and resolve against the warehouse a command
    runs on; a report written with ``--out`` elsewhere keeps its path."""
    from alembic import command

    from reports.db.engine import alembic_config

    engine = sa.create_engine(db_url)
    at = datetime(2026, 1, 2, 4, tzinfo=UTC)
    if engine.dialect.name != "postgresql":
        at = at.replace(tzinfo=None)
    old = "/old/place/wh/reports"
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0009_workbench_sessions")
        meta = sa.MetaData()
        reports, checks = (sa.Table(n, meta, autoload_with=conn)
                           for n in ("reports", "check_runs"))
        for i, (html, run) in enumerate([(f"{old}/2026-01-01/report.html", "run-1"),
                                          ("/tmp/mailed/report.html", "run-2")]):
            folder = html.rsplit("/", 1)[0]
            conn.execute(sa.insert(reports).values(
                id=i + 1, day=DAY, audit_run_id=run, created_at=at, html_path=html,
                pdf_path=f"{folder}/report.pdf", csv_paths=[f"{folder}/summary.csv"],
                sha256="ab" * 32))
        conn.execute(sa.insert(checks).values(
            run_id="chk-1", day=DAY, started_at=at, duration_seconds=1.0, success=True,
            blocking_failures=0, warnings=0, suites=7, expectations=40,
            data_docs_path=f"{old}/data_docs/index.html", table_versions={},
            is_current=True, recorded_at=at))
    engine.dispose()
    restored = tmp_path / "wh2"
    with ReportDB(db_url, restored) as db:
        report = db.report_at(str(restored / "reports" / "2026-01-01" / "report.html"))
        assert report is not None and report.audit_run_id == "run-1"
        assert (report.pdf_path, report.csv_paths) == (
            str(restored / "reports/2026-01-01/report.pdf"),
            [str(restored / "reports/2026-01-01/summary.csv")])
        mailed = db.report_at("/tmp/mailed/report.html")
        assert mailed is not None and mailed.csv_paths == ["/tmp/mailed/summary.csv"]
        check = db.current_check_run(DAY)
        assert check is not None
        assert check.data_docs_path == str(restored / "reports/data_docs/index.html")
        assert (check.verdict, check.suite_verdicts) == ("", {})  # recorded before verdicts
        with db.ready().connect() as conn:
            stored = conn.execute(sa.select(reports.c.html_path).order_by(reports.c.id)).all()
        assert [r.html_path for r in stored] == ["reports/2026-01-01/report.html",
                                                 "/tmp/mailed/report.html"]


def test_paths_inside_the_warehouse_are_stored_relative_and_others_as_given(
        tmp_path: Path) -> None:
    from reports.records import ReportRecord

    wh = tmp_path / "wh"
    url = f"sqlite:///{tmp_path / 'reckon.db'}"
    inside = wh / "reports" / "2026-01-01"
    rec = ReportRecord(day=DAY, audit_run_id="run-1", created_at=datetime(2026, 1, 2, tzinfo=UTC),
                       html_path=str(inside / "report.html"), pdf_path=str(inside / "report.pdf"),
                       csv_paths=[str(inside / "summary.csv"), "/elsewhere/x.csv"],
                       sha256="cd" * 32)
    with ReportDB(url, wh) as db:
        db.record_report(rec)
        with db.ready().connect() as conn:
            row = conn.execute(sa.text("SELECT html_path, csv_paths FROM reports")).one()
    assert row.html_path == "reports/2026-01-01/report.html"
    assert '"reports/2026-01-01/summary.csv"' in row.csv_paths and "/elsewhere/x.csv" in row.csv_paths
    with ReportDB(url, tmp_path / "wh2") as moved:
        found = moved.current_report(DAY)
    assert found is not None
    assert found.html_path == str(tmp_path / "wh2" / "reports/2026-01-01/report.html")
    assert found.csv_paths == [str(tmp_path / "wh2/reports/2026-01-01/summary.csv"),
                               "/elsewhere/x.csv"]


def _stream_line(event_id: str, second: int) -> str:
    import json

    return json.dumps({"event_id": event_id, "key": "k", "amount": "1.00", "currency": "USD",
                       "event_time": f"2026-01-01T00:00:{second:02d}Z", "source": "pos",
                       "arrival_time": f"2026-01-01T00:00:{second + 1:02d}Z"}) + "\n"


@pytest.mark.spark
def test_a_copied_warehouse_resumes_its_stream_through_reckon_stream(spark, clean_env, capsys):
    """Issue 60, point 8, as a user meets it: a stream's warehouse is copied with ``cp -a``
    (its checkpoint inside) and the original moved away; a file lands; ``reckon stream`` on
    the copy resumes (it failed with Spark's ``Wrong basePath``: the checkpoint named the old
    place), reads only the new file and says in one line where the checkpoint came from."""
    import os

    from app.settings import load_settings
    from spark import tables as tb
    from spark.sources import StreamSource
    from spark.stream import run_stream

    landing, wh = clean_env / "landing", clean_env / "old place" / "wh"
    landing.mkdir()
    (landing / "a.ndjson").write_text(_stream_line("m1", 1))
    os.utime(landing / "a.ndjson", (1_767_225_630, 1_767_225_630))
    run_stream(spark, load_settings(env={}, warehouse=str(wh), shuffle_partitions=2),
               StreamSource(landing=str(landing)), on_batch=None)

    copy = clean_env / "restored" / "wh"
    copy.parent.mkdir()
    subprocess.run(["cp", "-a", str(wh), str(copy)], check=True)
    wh.rename(clean_env / "old place" / "moved-away")
    (landing / "b.ndjson").write_text(_stream_line("m2", 5))
    os.utime(landing / "b.ndjson", (1_767_225_640, 1_767_225_640))

    code = main(["stream", "--landing", str(landing), "--warehouse", str(copy),
                 "--available-now"])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    cp = copy.resolve() / "_checkpoints" / "stream-landing"
    assert (f"[stream] checkpoint {cp} was copied from "
            f"{wh.resolve() / '_checkpoints' / 'stream-landing'}: resuming here") in out.err
    log = tb.read_table(spark, copy, tb.EVENT_LOG).collect()
    assert sorted((r.event_id, r.batch_id) for r in log) == [("m1", 0), ("m2", 1)]
    # every path the checkpoint records is the copy's (the new batch's too)
    recorded = [line for f in sorted((cp / "sources" / "0").glob("[0-9]*"))
                for line in f.read_text().splitlines()[1:]]
    assert len(recorded) == 2 and all(str(cp).replace(" ", "%20") in r for r in recorded)


def test_relocating_a_checkpoint_rewrites_only_its_own_paths(tmp_path: Path) -> None:
    """The rewrite itself, on a checkpoint's files as Spark 4.1 writes them: the source log's
    file URIs (quoted: a space is %20) and the state operator's schema paths move to the new
    place, a path outside the checkpoint stays, the stale checksums go; a second run changes
    nothing; a checkpoint pieced together from two places is refused in one line."""
    from reckon.errors import UsageError
    from spark.checkpoint_paths import relocate_checkpoint

    old = "/data/old wh/_checkpoints/stream-landing"
    cp = tmp_path / "new wh" / "cp"
    (cp / "sources" / "0").mkdir(parents=True)
    (cp / "state" / "0" / "_metadata" / "v2").mkdir(parents=True)
    q = old.replace(" ", "%20")
    (cp / "sources" / "0" / "0").write_text(
        "v1\n" + f'{{"path":"file://{q}/admitted/files/a%20b.ndjson","timestamp":1,"batchId":0}}')
    (cp / "sources" / "0" / ".0.crc").write_bytes(b"stale")
    (cp / "sources" / "0" / "1").write_text(
        "v1\n" + '{"path":"file:///elsewhere/x.ndjson","timestamp":2,"batchId":1}')
    meta = {"operatorInfo": {"operatorId": 0}, "stateStoreInfo": [{"stateSchemaFilePaths": [
        f"file:{q}/state/0/_stateSchema/default/0_abc"]}]}
    import json
    (cp / "state" / "0" / "_metadata" / "v2" / "0").write_text("v2\n" + json.dumps(meta))

    moved = relocate_checkpoint(cp)
    assert moved is not None and (moved.old, moved.files) == (old, 2)
    new = str(cp.resolve()).replace(" ", "%20")
    first = (cp / "sources" / "0" / "0").read_text().splitlines()
    assert first[0] == "v1"
    assert json.loads(first[1]) == {"path": f"file://{new}/admitted/files/a%20b.ndjson",
                                    "timestamp": 1, "batchId": 0}
    assert not (cp / "sources" / "0" / ".0.crc").exists()
    assert "file:///elsewhere/x.ndjson" in (cp / "sources" / "0" / "1").read_text()
    state = json.loads((cp / "state/0/_metadata/v2/0").read_text().splitlines()[1])
    assert state["stateStoreInfo"][0]["stateSchemaFilePaths"] == [
        f"file:{new}/state/0/_stateSchema/default/0_abc"]
    assert relocate_checkpoint(cp) is None  # done: nothing names another place

    (cp / "sources" / "0" / "2").write_text(
        "v1\n" + '{"path":"file:///third/cp/admitted/files/c.ndjson","timestamp":3,"batchId":2}')
    (cp / "sources" / "0" / "3").write_text(
        "v1\n" + '{"path":"file:///fourth/cp/admitted/files/d.ndjson","timestamp":4,"batchId":3}')
    with pytest.raises(UsageError, match="records paths under 2 other locations"):
        relocate_checkpoint(cp)
