"""Break review and the hash-chained sign-off log: chaining, the four-eyes rule, tamper
detection (edit, delete, reorder, truncate), concurrent appends, and the CLI end to end."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa

from app.cli import main
from app.settings import load_settings
from reckon.errors import UsageError
from reports.db.models import SIGNOFF_LOG
from reports.db.repository import ReportDB
from reports.review import (
    GENESIS_HASH,
    SignoffRefused,
    compute_entry_hash,
    read_log,
)
from reports.review_state import review_states
from storage.sharing import os_principal
from tests.signers import append, enrol, enrol_reviewer, give_key, verify
from tests.test_report_db import DAY, T0, make_break, make_currency, make_run

LOG = SIGNOFF_LOG


@pytest.fixture()
def db(db_url: str) -> Iterator[ReportDB]:
    with ReportDB(db_url) as database:
        database.record_audit_run(make_run("run-1", reconciler="Alice"), [])
        yield database


def _signed(db: ReportDB, count: int) -> None:
    for i in range(count):
        append(db, "run-1", ["bob", "carol", "dave"][i % 3], "approved", f"note {i + 1}")


# ----------------------------------------------------------------------------- the chain


def test_entries_chain_by_sha256_of_canonical_json(db: ReportDB) -> None:
    first = append(db, "run-1", "  Bob ", "approved", "totals tie out")
    second = append(db, "run-1", "carol", "rejected", "k2 residual not explained ✓")
    assert (first.seq, second.seq) == (1, 2)
    assert first.prev_hash == GENESIS_HASH == "0" * 64
    assert second.prev_hash == first.entry_hash
    assert first.by == "Bob"  # trimmed
    payload = {"seq": 2, "at": second.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "run_id": "run-1",
               "by": "carol", "decision": "rejected", "note": "k2 residual not explained ✓",
               "prev_hash": first.entry_hash, "signed": second.signed}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert second.entry_hash == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    signed = json.loads(second.signed or "{}")  # what the entry signs: the run's own figures
    assert (signed["run_id"], signed["day"], sorted(signed["currencies"])) == (
        "run-1", DAY.isoformat(), ["EUR", "JPY", "KWD"])
    assert Decimal(signed["currencies"]["JPY"]["gap_total"]) == make_currency("JPY").gap_total
    assert read_log(db) == [first, second]  # stored exactly, `at` to the microsecond
    result = verify(db)
    assert result.ok and result.problems == []
    assert (result.entries, result.head_hash) == (2, second.entry_hash)


def test_empty_log_verifies(db: ReportDB) -> None:
    result = verify(db)
    assert (result.ok, result.entries, result.head_hash) == (True, 0, GENESIS_HASH)


def test_reconciler_cannot_sign_off_their_own_run(db: ReportDB) -> None:
    with pytest.raises(SignoffRefused, match=r"by='alice' may not sign off run 'run-1'.*"
                                             r"'Alice' reconciled it.*four-eyes"):
        append(db, "run-1", " alice ", "approved", "looks fine to me")
    assert read_log(db) == []


@pytest.mark.parametrize("disguise", ["\u0410lice", "\uff41\uff4c\uff49\uff43\uff45",
                                      "al\u200bice", "AL\u00adICE", "al\u0456ce",
                                      "a l i c e"])
def test_the_reconciler_in_disguise_is_still_the_reconciler(db: ReportDB, disguise) -> None:
    """A Cyrillic capital A, fullwidth letters, a zero-width space, a soft hyphen, a Ukrainian
    i, spaces: each looks like (or is) 'Alice', the run's reconciler."""
    with pytest.raises(SignoffRefused, match="four-eyes"):
        append(db, "run-1", disguise, "approved", "looks fine to me")
    assert read_log(db) == []


def test_a_different_person_may_sign(db: ReportDB) -> None:
    assert append(db, "run-1", "Alicia", "approved", "checked the EUR breaks").seq == 1


def test_unknown_run_and_bad_arguments_are_refused(db: ReportDB) -> None:
    with pytest.raises(SignoffRefused, match=r"run='run-404' is not valid: no audit run"):
        append(db, "run-404", "bob", "approved", "x")
    with pytest.raises(UsageError, match=r"decision='ok' is not valid: one of approved, rejected"):
        append(db, "run-1", "bob", "ok", "x")
    with pytest.raises(UsageError, match=r"note='  ' is not valid"):
        append(db, "run-1", "bob", "approved", "  ")
    with pytest.raises(UsageError, match=r"by='' is not valid"):
        append(db, "run-1", "", "approved", "x")
    assert read_log(db) == []


# ----------------------------------------------------------------------------- tampering


@contextlib.contextmanager
def _by_hand(db: ReportDB) -> Iterator[sa.Connection]:
    """A hand edit of the log, as a hostile administrator makes it: on PostgreSQL the log's
    triggers refuse edits (tests/test_pg_roles.py), so the superuser switches them off for
    the transaction first; verify-log must still see what was done."""
    with db.engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
        yield conn


def test_an_edited_note_is_detected_and_named(db: ReportDB) -> None:
    _signed(db, 3)
    with _by_hand(db) as conn:
        conn.execute(sa.update(LOG).where(LOG.c.seq == 2).values(note="nothing to see"))
    result = verify(db)
    assert not result.ok
    assert result.problems == [
        "seq 2: entry_hash does not match the entry's contents (the entry was edited after "
        "it was written)",
        "seq 2: its signature does not match its contents under carol's key (rewritten after "
        "it was signed)"]


def test_an_edit_with_a_recomputed_hash_breaks_the_next_link(db: ReportDB) -> None:
    _signed(db, 3)
    entry = read_log(db)[1]
    forged = entry.__class__(**{**entry.__dict__, "note": "forged", "entry_hash": ""})
    with _by_hand(db) as conn:
        conn.execute(sa.update(LOG).where(LOG.c.seq == 2).values(
            note="forged", entry_hash=forged.recomputed_hash()))
    problems = verify(db).problems  # the chain links, and carol's signature, no longer hold
    assert len(problems) == 2 and problems[0].startswith("seq 3: prev_hash")
    assert problems[1].startswith("seq 2: its signature does not match")


def test_a_deleted_middle_entry_is_detected(db: ReportDB) -> None:
    _signed(db, 3)
    with _by_hand(db) as conn:
        conn.execute(sa.delete(LOG).where(LOG.c.seq == 2))
    result = verify(db)
    assert not result.ok and result.entries == 2
    assert result.problems[0] == "seq 2 missing: seq 3 follows seq 1 (entry deleted?)"
    assert result.problems[1].startswith("seq 3: prev_hash")


def test_reordered_entries_are_detected(db: ReportDB) -> None:
    _signed(db, 4)
    with _by_hand(db) as conn:  # swap seq 2 and 3
        conn.execute(sa.update(LOG).where(LOG.c.seq == 2).values(seq=99))
        conn.execute(sa.update(LOG).where(LOG.c.seq == 3).values(seq=2))
        conn.execute(sa.update(LOG).where(LOG.c.seq == 99).values(seq=3))
    problems = verify(db).problems
    named = {p.split(":")[0] for p in problems}
    assert named == {"seq 2", "seq 3", "seq 4"}
    assert any("edited" in p for p in problems)


def test_truncation_is_detected_against_a_kept_head_hash(db: ReportDB) -> None:
    _signed(db, 3)
    head = verify(db).head_hash
    with _by_hand(db) as conn:
        conn.execute(sa.delete(LOG).where(LOG.c.seq == 3))
    assert verify(db).ok  # a chain alone cannot see a cut end...
    result = verify(db, expected_head=head)  # ...a head hash kept elsewhere can
    assert not result.ok and "no longer in the log" in result.problems[0]


# ----------------------------------------------------------------------------- breaks


def test_accepted_and_resolved_close_the_runs_open_breaks(db: ReportDB, db_url: str) -> None:
    db.write_breaks("run-1", [make_break("run-1", "k1", status="EXPLAINED", residual="0.00"),
                              make_break("run-1", "k2"),
                              make_break("run-1", "k3", minute=1, status="MISSING_IN_STREAM")],
                    now=T0)

    def review() -> dict[str, str]:
        return {b["key"]: b["review_status"] for b in db.list_breaks(DAY)}

    append(db, "run-1", "bob", "approved", "approved totals")
    assert review() == {"k1": "explained", "k2": "open", "k3": "open"}
    append(db, "run-1", "bob", "accepted", "k2 and k3 accepted as known issues")
    assert review() == {"k1": "explained", "k2": "accepted", "k3": "accepted"}

    # re-audit: accepted breaks stay accepted, a new one is open, and 'resolved' closes it
    db.record_audit_run(make_run("run-2", started_at=T0 + timedelta(days=1)), [])
    db.write_breaks("run-2", [make_break("run-2", "k2"), make_break("run-2", "k4", minute=3)])
    assert review() == {"k2": "accepted", "k4": "open"}
    append(db, "run-2", "carol", "resolved", "k4 fixed upstream")
    assert review() == {"k2": "accepted", "k4": "resolved"}
    assert [b["key"] for b in db.list_breaks(review_status="resolved")] == ["k4"]


def test_a_decision_covers_the_figures_it_was_made_on(db: ReportDB) -> None:
    """k2 accepted at a residual of 1.25; the next audit finds it at 5000.00, so the decision no
    longer covers it and it is open again; k3, unchanged, stays accepted; k4 changed status."""
    db.write_breaks("run-1", [make_break("run-1", "k2"), make_break("run-1", "k3", minute=1),
                              make_break("run-1", "k4", minute=2)], now=T0)
    append(db, "run-1", "bob", "accepted", "k2, k3, k4 accepted as known issues")
    db.record_audit_run(make_run("run-2", started_at=T0 + timedelta(days=1)), [])
    db.write_breaks("run-2", [make_break("run-2", "k2", residual="5000.00"),
                              make_break("run-2", "k3", minute=1),
                              make_break("run-2", "k4", minute=2, status="MISSING_IN_STREAM")])
    assert {b["key"]: b["review_status"] for b in db.list_breaks(DAY)} == {
        "k2": "open", "k3": "accepted", "k4": "open"}


def test_a_reviewer_reopens_their_rejection_in_the_chained_log(db: ReportDB) -> None:
    """'reopened' is a decision the log takes on either backend (migration 0010's check), chained
    like any other; it withdraws its reviewer's standing decision and closes no break."""
    from reckon.signoff import review_words

    db.write_breaks("run-1", [make_break("run-1", "k2")], now=T0)
    for by, decision in (("bob", "approved"), ("carol", "rejected"), ("carol", "reopened")):
        append(db, "run-1", by, decision, f"{by} {decision}")
    assert [e.decision for e in read_log(db)] == ["approved", "rejected", "reopened"]
    assert verify(db).ok
    assert review_words(review_states(db, ["run-1", "run-9"])["run-1"]) == (
        "Signed off: 1 of 1 approvals (bob)")
    assert [b["review_status"] for b in db.list_breaks(DAY)] == ["open"]
    with db.engine.begin() as conn, pytest.raises(sa.exc.IntegrityError):
        conn.execute(sa.insert(LOG).values(seq=9, at=T0, run_id="run-1", by="dave",
                                           decision="withdrawn", note="x", prev_hash="0" * 64,
                                           entry_hash="1" * 64))


def test_a_replaced_run_cannot_be_signed_off(db: ReportDB) -> None:
    """Decisions are made on the current figures: once run-2 replaced run-1 for its day, a
    decision on run-1 is refused, names run-2, and closes none of run-2's breaks."""
    db.write_breaks("run-1", [make_break("run-1", "k2")], now=T0)
    db.record_audit_run(make_run("run-2", started_at=T0 + timedelta(days=1)), [])
    db.write_breaks("run-2", [make_break("run-2", "k2")])
    with pytest.raises(SignoffRefused, match="replaced it; review and sign off the current "
                                             "run 'run-2'"):
        append(db, "run-1", "bob", "accepted", "accepting the old run")
    assert [b["review_status"] for b in db.list_breaks(DAY)] == ["open"]
    assert read_log(db) == []


def test_reviews_from_before_the_figures_were_kept_are_not_reopened(db_url: str) -> None:
    """A database migrated to 0001 holds an accepted review without figures; after the upgrade
    the next audit records its figures and keeps the decision (nothing to compare it with)."""
    from alembic import command

    from reports.db.engine import alembic_config
    from reports.db.models import BREAK_REVIEWS

    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0001_initial")
        # the columns 0001 has (no figures, no currency), typed as the models store them
        reviews_0001 = sa.Table("break_reviews", sa.MetaData(),
                                *(c.copy() for c in BREAK_REVIEWS.c
                                  if c.name in ("day", "window_start", "key", "review_status",
                                                "last_status", "first_seen_at",
                                                "last_seen_run_id", "updated_at")))
        conn.execute(sa.insert(reviews_0001).values(
            day=DAY, window_start=make_break("run-1", "k2").window_start, key="k2",
            review_status="accepted", last_status="UNEXPLAINED", first_seen_at=T0,
            last_seen_run_id="run-0", updated_at=T0))
    engine.dispose()
    with ReportDB(db_url) as upgraded:
        upgraded.record_audit_run(make_run("run-1"), [])
        # 0004 gave the old review currency '' (unknown): the same identity again
        upgraded.write_breaks("run-1", [make_break("run-1", "k2", residual="7.00",
                                                   currency="")])
        with upgraded.engine.connect() as conn:
            row = conn.execute(sa.select(BREAK_REVIEWS)).one()
    assert (row.review_status, row.last_residual_amount, row.last_seen_run_id,
            row.currency) == ("accepted", Decimal("7.00"), "run-1", "")


def test_concurrent_appends_keep_one_chain(db_url: str) -> None:
    with ReportDB(db_url) as setup:
        setup.record_audit_run(make_run("run-1"), [])
        for name in ("bob", "carol", "dave"):
            enrol(setup, name)
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def reviewer(name: str) -> None:
        try:
            with ReportDB(db_url) as database:
                database.migrate()
                barrier.wait()
                for i in range(6):
                    append(database, "run-1", name, "approved", f"{name} {i}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=reviewer, args=(n,)) for n in ("bob", "carol", "dave")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    with ReportDB(db_url) as database:
        result = verify(database)
        assert (result.ok, result.entries) == (True, 18)
        assert [e.seq for e in read_log(database)] == list(range(1, 19))


# ----------------------------------------------------------------------------- CLI


@pytest.fixture()
def cli_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp warehouse with one recorded run (reconciled by alice) and three breaks: acct-7's
    window breaks in EUR and in JPY (two breaks), acct-1's is explained."""
    return make_cli_warehouse(tmp_path, monkeypatch)


def make_cli_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """cli_warehouse's warehouse; this account signs with its own registered key (HOME is
    ``tmp_path/home``)."""
    monkeypatch.chdir(tmp_path)
    for name in ("RECKON_CONFIG", "RECKON_REPORT_DB_URL", "RECKON_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    wh = tmp_path / "wh"
    with ReportDB.from_settings(load_settings(env={}, warehouse=str(wh))) as database:
        # no Delta tables in this warehouse: a run that read none of them
        database.record_audit_run(replace(make_run("run-1", reconciler="alice"),
                                          table_versions={}), [])
        database.write_breaks("run-1", [make_break("run-1", "acct-7", residual="-12.34"),
                                        replace(make_break("run-1", "acct-7", residual="-1200",
                                                           currency="JPY"),
                                                provisional_amount=Decimal("3400"),
                                                canonical_amount=Decimal("2200"),
                                                gap_amount=Decimal("-1200")),
                                        make_break("run-1", "acct-1", status="EXPLAINED",
                                                   residual="0.00")],
                              now=T0.astimezone(UTC))
        give_key(tmp_path / "home", monkeypatch, database, os_principal())
    return wh


def test_cli_breaks_list_filters_by_currency_key_and_minimum_gap(
        cli_warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The three breaks: acct-7 EUR gap -1.25, acct-7 JPY gap -1200, acct-1 EUR gap -1.25.
    --min-gap is in each break's own currency and compares the gap's size (either sign)."""
    wh = str(cli_warehouse)

    def listed(*flags: str) -> list[tuple[str, str, str]]:
        assert main(["breaks", "list", "--warehouse", wh, "--json", *flags]) == 0
        return [(b["key"], b["currency"], b["gap_amount"])
                for b in json.loads(capsys.readouterr().out)]

    assert listed("--currency", "jpy") == [("acct-7", "JPY", "-1200")]
    assert listed("--key", "acct-1") == [("acct-1", "EUR", "-1.25")]
    assert listed("--key", "acct-7", "--currency", "EUR") == [("acct-7", "EUR", "-1.25")]
    assert listed("--min-gap", "1.25") == [("acct-1", "EUR", "-1.25"), ("acct-7", "EUR", "-1.25"),
                                           ("acct-7", "JPY", "-1200")]
    assert listed("--min-gap", "1.26") == [("acct-7", "JPY", "-1200")]
    assert listed("--min-gap", "1201") == []
    assert main(["breaks", "list", "--warehouse", wh, "--currency", "KWD"]) == 0
    assert capsys.readouterr().out == "no breaks in KWD in the current audit runs\n"
    for flags, said in ((["--min-gap", "-1"], "--min-gap='-1' is not valid"),
                        (["--min-gap", "1,000"], "--min-gap='1,000' is not valid"),
                        (["--min-gap", "nan"], "--min-gap='nan' is not valid"),
                        (["--currency", "XYZ"], "--currency='XYZ' is not valid"),
                        (["--key", " "], "--key=' ' is not valid")):
        assert main(["breaks", "list", "--warehouse", wh, *flags]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err, err


def test_cli_breaks_signoff_and_verify_log(cli_warehouse: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    wh = str(cli_warehouse)
    assert main(["breaks", "list", "--warehouse", wh, "--date", "2026-01-01"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["DAY", "WINDOW", "START", "KEY", "CURRENCY",
                                           "STATUS", "GAP", "RESIDUAL", "REVIEW", "AGE", "(d)",
                                           "RUN"]
    lines = {(line.split()[2], line.split()[3]): line.split() for line in out.splitlines()[2:5]}
    # each amount in its currency's own digits: EUR 2 places, JPY none (grouped)
    assert lines[("acct-7", "EUR")][4:7] == ["UNEXPLAINED", "-1.25", "-12.34"]
    assert lines[("acct-7", "JPY")][4:7] == ["UNEXPLAINED", "-1,200", "-1,200"]
    assert lines[("acct-1", "EUR")][4:7] == ["EXPLAINED", "-1.25", "0.00"]
    assert "3 breaks: 1 explained, 2 open" in out

    assert main(["breaks", "list", "--warehouse", wh, "--status", "open", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(b["key"], b["currency"], b["review_status"], b["residual_amount"],
             b["gap_amount"]) for b in listed] == [
        ("acct-7", "EUR", "open", "-12.34", "-1.25"), ("acct-7", "JPY", "open", "-1200",
                                                       "-1200")]
    assert listed[0]["window_start"] == "2026-01-01T00:00:00Z"

    assert main(["breaks", "list", "--warehouse", wh, "--status", "closed"]) == 2
    assert "--status='closed' is not valid" in capsys.readouterr().err

    # the signer is the account that runs the command: --by may not name anyone else
    me = os_principal()
    assert main(["signoff", "--warehouse", wh, "--run", "run-1", "--by", "Alice",
                 "--note", "all good"]) == 2
    assert f"--by='Alice' is not valid: this command signs as {me!r}" in \
        capsys.readouterr().err
    assert main(["signoff", "--warehouse", wh, "--run", "run-9", "--note", "x"]) == 2
    assert "run='run-9' is not valid" in capsys.readouterr().err

    assert main(["signoff", "--warehouse", wh, "--run", "run-1", "--by", me,
                 "--note", "acct-7 is a known fee", "--decision", "accepted"]) == 0
    assert f"run run-1 accepted by {me} (log seq 1" in capsys.readouterr().out
    assert main(["verify-log", "--warehouse", wh]) == 0
    assert capsys.readouterr().out.startswith("sign-off log OK: 1 entry, head hash ")
    assert main(["breaks", "list", "--warehouse", wh, "--status", "explained"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "1 break: 1 explained", f"run run-1: Signed off: 1 of 1 approvals ({me})"]
    assert main(["breaks", "list", "--warehouse", wh, "--status", "accepted", "--json"]) == 0
    assert [(b["key"], b["currency"]) for b in json.loads(capsys.readouterr().out)] == [
        ("acct-7", "EUR"), ("acct-7", "JPY")]
    assert main(["signoff", "--warehouse", wh, "--run", "run-1", "--note", "approved",
                 "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert (entry["seq"], entry["by"], entry["decision"], entry["run_id"]) == (
        2, me, "approved", "run-1")

    assert main(["verify-log", "--warehouse", wh]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sign-off log OK: 2 entries, head hash ")
    assert main(["verify-log", "--warehouse", wh, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "ok": True, "entries": 2, "head_hash": entry["entry_hash"], "problems": [], "legacy": 0,
        "runs": {"run-1": f"Signed off: 1 of 1 approvals ({me})"}}

    with ReportDB.from_settings(load_settings(env={}, warehouse=wh)) as database, \
            database.engine.begin() as conn:
        conn.execute(sa.update(LOG).where(LOG.c.seq == 1).values(by="mallory"))
    assert main(["verify-log", "--warehouse", wh]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "seq 1: entry_hash does not match" in out
    assert main(["verify-log", "--warehouse", wh, "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] is False and result["problems"][0].startswith(
        "seq 1: entry_hash does not match")


def test_cli_breaks_on_an_empty_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("RECKON_CONFIG", "RECKON_REPORT_DB_URL", "RECKON_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    # a warehouse that was never audited has no report DB: said, and nothing is created
    assert main(["breaks", "list", "--warehouse", str(tmp_path / "wh"),
                 "--date", "2026-01-01"]) == 2
    assert "no report database at " in capsys.readouterr().err
    assert not (tmp_path / "wh").exists()
    with ReportDB.from_settings(load_settings(env={}, warehouse=str(tmp_path / "wh"))) as db:
        db.migrate()  # an audited warehouse, but not on this day: not "no breaks"
    assert main(["breaks", "list", "--warehouse", str(tmp_path / "wh"),
                 "--date", "2026-01-01"]) == 2
    err = capsys.readouterr().err
    assert "--date='2026-01-01' is not valid: a day with an audit run" in err
    assert "run `reckon audit --date 2026-01-01` first" in err
    with ReportDB.from_settings(load_settings(env={}, warehouse=str(tmp_path / "wh"))) as db:
        db.record_audit_run(replace(make_run("run-1"), table_versions={}), [])  # a clean day
    assert main(["breaks", "list", "--warehouse", str(tmp_path / "wh"),
                 "--date", DAY.isoformat()]) == 0
    assert f"no breaks for {DAY} in the current audit runs" in capsys.readouterr().out
    assert main(["breaks", "list", "--warehouse", str(tmp_path / "wh"), "--date", "01/02"]) == 2
    assert "--date='01/02' is not valid" in capsys.readouterr().err


def test_a_re_audit_that_replaces_a_signed_off_run_is_flagged_until_signed_again(
        db: ReportDB) -> None:
    """The nightly lookback re-audits yesterday: its new run replaces the run finance signed
    off. The audit, the report and the log must say the day needs a new sign-off, and which
    figures changed, until someone signs the new run off."""
    from audits.audit_record import _replaced_signed_off_run
    from reports.context import _signoffs

    append(db, "run-1", "bob", "approved", "ties out")
    first = db.get_audit_run("run-1")
    assert first is not None
    assert _replaced_signed_off_run(db, DAY, "nightly", "run-1") is None
    assert _signoffs(db, first)[1] is None

    db.record_audit_run(make_run("run-2", started_at=T0 + timedelta(days=1), unexplained=2,
                                 currencies=(make_currency("EUR", gap_total=Decimal("-0.03")),
                                             make_currency("JPY"))), [])
    second = db.get_audit_run("run-2")
    assert second is not None
    assert _replaced_signed_off_run(db, DAY, "nightly", "run-2") == "run-1"
    own, prior = _signoffs(db, second)
    assert own == ()
    assert prior is not None and (prior.run_id, prior.decision, prior.by) == (
        "run-1", "approved", "bob")
    assert (prior.gap_totals, prior.unexplained) == (
        {"EUR": Decimal("-0.01"), "JPY": Decimal("1200"), "KWD": Decimal("0.125")}, 1)
    assert [e["run_id"] for e in db.signoffs_of_day(DAY)] == ["run-1"]

    append(db, "run-2", "carol", "rejected", "k2 moved")  # a rejection signs nothing
    assert _signoffs(db, second)[1] is not None
    append(db, "run-2", "carol", "approved", "re-checked")
    own, prior = _signoffs(db, second)
    assert [e.decision for e in own] == ["rejected", "approved"] and prior is None
    assert _replaced_signed_off_run(db, DAY, "nightly", "run-2") is None


def test_a_sign_off_waits_for_an_audit_replacing_its_run_and_is_then_refused(
        db: ReportDB) -> None:
    """An audit is recording a new run of the day (it holds audit_runs) while a reviewer signs
    the old run off: the sign-off must wait for the audit's commit, then see the run replaced,
    not append a decision to a run that stopped being current under it."""
    from reports.db.engine import write_tx
    from reports.db.models import AUDIT_RUNS

    started, outcome = threading.Event(), {}

    def sign() -> None:
        started.set()
        try:
            append(db, "run-1", "bob", "approved", "ties out")
            outcome["result"] = "appended"
        except SignoffRefused as exc:
            outcome["result"] = str(exc)

    with write_tx(db.ready(), "audit_runs") as conn:  # what record_audit_run holds
        conn.execute(sa.update(AUDIT_RUNS).where(AUDIT_RUNS.c.run_id == "run-1")
                     .values(is_current=False))
        signer = threading.Thread(target=sign)
        signer.start()
        started.wait(5)
        signer.join(1.0)
        assert signer.is_alive(), "the sign-off did not wait for the audit's transaction"
    signer.join(30)
    assert "a later audit of 2026-01-01 (nightly) replaced it" in outcome["result"]
    assert read_log(db) == []


def _tamper(wh: Path, *statements: str) -> None:
    """Edit the report DB by hand, as an insider with write access would."""
    engine = sa.create_engine(f"sqlite:///{wh / 'reports' / 'reckon.db'}")
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(sa.text(statement))
    engine.dispose()


def _rechain(wh: Path) -> None:
    """Recompute every entry's hash and link after an edit (the unkeyed chain allows it)."""
    engine = sa.create_engine(f"sqlite:///{wh / 'reports' / 'reckon.db'}")
    with engine.begin() as conn:
        prev = GENESIS_HASH
        for r in conn.execute(sa.select(SIGNOFF_LOG).order_by(SIGNOFF_LOG.c.seq)).all():
            digest = compute_entry_hash(seq=r.seq, at=r.at, run_id=r.run_id, by=r.by,
                                        decision=r.decision, note=r.note, prev_hash=prev,
                                        signed=r.signed)
            conn.execute(sa.update(SIGNOFF_LOG).where(SIGNOFF_LOG.c.seq == r.seq)
                         .values(prev_hash=prev, entry_hash=digest))
            prev = digest
    engine.dispose()


def _verify(wh: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["verify-log", "--warehouse", str(wh)])
    return code, capsys.readouterr().out


@pytest.fixture()
def signed_twice(cli_warehouse: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    wh = str(cli_warehouse)
    for decision in ("rejected", "approved"):
        assert main(["signoff", "--warehouse", wh, "--run", "run-1", "--note", "looked",
                     "--decision", decision]) == 0
    assert _verify(cli_warehouse, capsys)[0] == 0
    return cli_warehouse


@pytest.mark.parametrize("cut", ["seq = 2", "seq >= 1"])
def test_verify_log_detects_entries_removed_from_the_end(signed_twice, capsys, cut):
    _tamper(signed_twice, f"DELETE FROM signoff_log WHERE {cut}")
    code, out = _verify(signed_twice, capsys)
    assert code == 1
    assert "seq 2: anchored in _signoff_anchor.jsonl" in out and "gone from the log" in out


def test_verify_log_detects_a_recomputed_chain(signed_twice, capsys):
    """A rejection turned into an approval and a signer renamed, the chain recomputed."""
    _tamper(signed_twice, "UPDATE signoff_log SET decision = 'approved', by = 'dave' "
                          "WHERE seq = 1")
    _rechain(signed_twice)
    code, out = _verify(signed_twice, capsys)
    assert code == 1
    assert "seq 1: its hash is not the one anchored" in out
    assert "seq 2: its hash is not the one anchored" in out


def test_verify_log_detects_a_signed_figure_changed_afterwards(signed_twice, capsys):
    _tamper(signed_twice, "UPDATE audit_run_currencies SET gap_total = 0 "
                          "WHERE run_id = 'run-1' AND currency = 'EUR'",
            "UPDATE audit_runs SET unexplained = 0 WHERE run_id = 'run-1'")
    code, out = _verify(signed_twice, capsys)
    assert code == 1
    for seq in (1, 2):
        assert f"seq {seq}: run run-1's currencies, unexplained changed after this entry " \
               "signed them" in out


def test_the_reconciler_account_cannot_sign_and_another_account_can(cli_warehouse, capsys):
    """Four-eyes between real OS accounts: a run audited by this account is refused when this
    account signs it, whatever USER says, and accepted from the reviewer account."""
    from tests.accounts import REVIEWER, reckon_as_reviewer

    me = os_principal()
    with ReportDB.from_settings(load_settings(env={}, warehouse=str(cli_warehouse))) as db:
        db.record_audit_run(replace(make_run("run-2", day=DAY + timedelta(days=1),
                                             reconciler=me), table_versions={}), [])
        env = enrol_reviewer(db, cli_warehouse.parent)
    wh = str(cli_warehouse)
    assert main(["signoff", "--warehouse", wh, "--run", "run-2", "--note", "mine"]) == 2
    assert "four-eyes" in capsys.readouterr().err
    done = reckon_as_reviewer(cli_warehouse, "signoff", "--warehouse", wh, "--run", "run-2",
                              "--note", "checked by a second person", env=env)
    assert done.returncode == 0, done.stderr
    assert f"run run-2 approved by {REVIEWER} (log seq 1" in done.stdout
    claimed = reckon_as_reviewer(cli_warehouse, "signoff", "--warehouse", wh, "--run", "run-2",
                                 "--by", me, "--note", "pretending", env=env)
    assert claimed.returncode == 2
    assert f"this command signs as {REVIEWER!r}" in claimed.stderr
    assert main(["verify-log", "--warehouse", wh]) == 0
