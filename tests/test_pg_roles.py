"""On a real PostgreSQL (``postgres`` tier), the database itself holds the sign-off rules
(migration 0006): people log in as their own roles, members of reckon_reconciler or
reckon_reviewer; the sign-off log is append-only for everyone; a sign-off is made by the
login role and never by the run's reconciler, even in raw SQL that bypasses reckon."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import sqlalchemy as sa

from reports.db.repository import ReportDB
from reports.review import SignoffRefused, append_signoff, read_log
from storage.signing_keys import DEFAULT_KEY_FILE
from tests.signers import ADMIN, append, enrol, key_of, verify
from tests.test_report_db import make_run

pytestmark = pytest.mark.postgres

# login roles (cluster-wide, so created once and reused by every fresh database)
RECONCILER, REVIEWER, BOTH = "rita_reconciles", "victor_reviews", "sam_does_both"
_MEMBERSHIP = {RECONCILER: "reckon_reconciler", REVIEWER: "reckon_reviewer",
               BOTH: "reckon_reconciler, reckon_reviewer"}


def _as(url: str, role: str) -> str:
    return sa.make_url(url).set(username=role).render_as_string(hide_password=False)


@pytest.fixture()
def owner_url(postgres_url: str) -> Iterator[str]:
    """A fresh database migrated by its owner (the server's superuser here, a deployment's
    admin role in production), with the three login roles."""
    from tests.pg_server import fresh_database

    with fresh_database(postgres_url) as url:
        with ReportDB(url) as owner:
            owner.migrate()  # creates the group roles, grants and triggers
            with owner.engine.begin() as conn:
                for role, groups in _MEMBERSHIP.items():
                    exists = conn.execute(sa.text("SELECT 1 FROM pg_roles WHERE rolname = :r"),
                                          {"r": role}).first()
                    if not exists:  # constant names: no user input in DDL
                        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN IN ROLE {groups}")
        yield url


def _refused(url: str, role: str, statement: str, *, first: str | None = None,
             **params: object) -> str:
    """Run ``statement`` as ``role`` (after ``first``, in the same transaction); return the
    database's refusal (it must refuse)."""
    engine = sa.create_engine(_as(url, role), poolclass=sa.NullPool)
    try:
        with pytest.raises(sa.exc.DBAPIError) as caught, engine.begin() as conn:
            if first:
                conn.execute(sa.text(first))
            conn.execute(sa.text(statement), params)
        assert getattr(caught.value.orig, "sqlstate", None) == "42501", caught.value
        return str(caught.value.orig).splitlines()[0]
    finally:
        engine.dispose()


def test_each_role_may_do_only_its_part(owner_url: str) -> None:
    with ReportDB(_as(owner_url, RECONCILER)) as rita:
        assert rita.principal() == RECONCILER
        rita.record_audit_run(make_run("run-1", reconciler=RECONCILER), [])
        with pytest.raises(sa.exc.DBAPIError, match="names victor_reviews as its reconciler"):
            rita.record_audit_run(make_run("run-2", reconciler=REVIEWER), [])
    with ReportDB(owner_url) as owner:  # the administrator registers the reviewer's key
        enrol(owner, REVIEWER)
    with ReportDB(_as(owner_url, REVIEWER)) as victor:
        assert victor.principal() == REVIEWER
        entry = append(victor, "run-1", REVIEWER, "approved", "ties out in EUR, JPY, KWD")
        assert entry.by == REVIEWER
        with pytest.raises(SignoffRefused, match="logged in as victor_reviews"):
            append_signoff(victor, "run-1", "carol", "approved", "signed in carol's name")
        assert verify(victor).ok
    # the reviewer cannot edit or delete the log, nor touch the runs
    assert "permission denied" in _refused(owner_url, REVIEWER,
                                           "UPDATE signoff_log SET decision = 'rejected'")
    assert "permission denied" in _refused(owner_url, REVIEWER, "DELETE FROM signoff_log")
    assert "permission denied" in _refused(owner_url, REVIEWER,
                                           "UPDATE audit_runs SET unexplained = 0")
    # the reconciler cannot write the log at all
    assert "permission denied" in _refused(
        owner_url, RECONCILER, "INSERT INTO signoff_log (seq, at, run_id, \"by\", decision, note, "
        "prev_hash, entry_hash) VALUES (9, now(), 'run-1', 'rita_reconciles', 'approved', "
        "'x', 'x', 'x')")
    # and for the owner too, the log only grows and a run's reconciler stays
    superuser = sa.make_url(owner_url).username or "postgres"
    for statement in ('UPDATE signoff_log SET "by" = \'mallory\'', "DELETE FROM signoff_log",
                      "TRUNCATE signoff_log CASCADE"):
        assert "append-only" in _refused(owner_url, superuser, statement)
    assert "stays so" in _refused(owner_url, superuser,
                                  "UPDATE audit_runs SET reconciler = 'someone_else'")
    with ReportDB(owner_url) as owner:
        assert [e.by for e in read_log(owner)] == [REVIEWER]


def test_one_person_in_both_roles_cannot_sign_their_own_run_even_in_raw_sql(
        owner_url: str) -> None:
    with ReportDB(_as(owner_url, BOTH)) as sam:
        sam.record_audit_run(make_run("run-1", reconciler=BOTH), [])
        with pytest.raises(SignoffRefused, match="four-eyes"):
            append_signoff(sam, "run-1", BOTH, "approved", "my own run")
    raw = ("INSERT INTO signoff_log (seq, at, run_id, \"by\", decision, note, prev_hash, "
           "entry_hash) VALUES (1, now(), 'run-1', :by, 'approved', 'raw', :zero, :zero)")
    assert "four-eyes" in _refused(owner_url, BOTH, raw, by=BOTH, zero="0" * 64)
    # a temporary table named audit_runs (searched first by default) does not hide the run
    assert "four-eyes" in _refused(
        owner_url, BOTH, raw, first="CREATE TEMP TABLE audit_runs (run_id text, reconciler text)",
        by=BOTH, zero="0" * 64)
    # in another's name, or as the group role after SET ROLE: the login role still decides
    assert "logged in as sam_does_both" in _refused(owner_url, BOTH, raw, by=REVIEWER,
                                                    zero="0" * 64)
    assert "logged in as sam_does_both" in _refused(
        owner_url, BOTH, raw, first="SET LOCAL ROLE reckon_reviewer", by="reckon_reviewer",
        zero="0" * 64)


def _signoff_cli(url: str, warehouse: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`reckon signoff` logged in by ``url``, with the reviewer's own key (in its home beside
    the warehouse, registered by the owner)."""
    home = warehouse.parent / "home"
    if not (home / DEFAULT_KEY_FILE).exists():
        key_of(REVIEWER).save(home / DEFAULT_KEY_FILE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    env.update(RECKON_REPORT_DB_URL=url, RECKON_WAREHOUSE=str(warehouse), HOME=str(home),
               RECKON_SIGNOFF_ADMIN_KEY=ADMIN.public_text)
    return subprocess.run([sys.executable, "-m", "app.cli", "signoff", *argv],
                          capture_output=True, text=True, timeout=300, check=False, env=env)


def test_reckon_signoff_signs_as_the_role_it_logged_in_as(owner_url: str,
                                                          tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    with ReportDB(_as(owner_url, RECONCILER)) as rita:
        rita.record_audit_run(replace(make_run("run-1", reconciler=RECONCILER),
                                      table_versions={}), [])
    with ReportDB(owner_url) as owner:
        enrol(owner, REVIEWER)
    note = ["--run", "run-1", "--note", "reviewed the three currencies"]
    # the reconciler: refused, one line
    own = _signoff_cli(_as(owner_url, RECONCILER), warehouse, *note)
    assert own.returncode == 2 and "four-eyes" in own.stderr and "Traceback" not in own.stderr
    # the reviewer naming someone else: refused
    lie = _signoff_cli(_as(owner_url, REVIEWER), warehouse, *note, "--by", "carol")
    assert lie.returncode == 2 and "signs as 'victor_reviews'" in lie.stderr
    # the reviewer: signed as the login role, whatever the OS account is
    signed = _signoff_cli(_as(owner_url, REVIEWER), warehouse, *note)
    assert signed.returncode == 0, signed.stderr
    assert "approved by victor_reviews" in signed.stdout
    with ReportDB(owner_url) as owner:
        assert [(e.run_id, e.by) for e in read_log(owner)] == [("run-1", REVIEWER)]
