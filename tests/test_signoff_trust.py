"""Issue 60's sign-off probes (points 1, 2 and 4), run as they were run: a signer who can write
the warehouse and the SQLite report database forges, erases or rewrites sign-offs; two OS
accounts sign on one warehouse; a signed run's breaks and report are edited afterwards.
Each is caught by `reckon verify-log` (the real CLI), by the signers' own keys, by the head
published outside the warehouse, or by the signed breaks digest and report bytes."""

from __future__ import annotations

import contextlib
import grp
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from app.cli import main
from app.settings import load_settings
from reports.db.models import SIGNOFF_LOG
from reports.db.repository import ReportDB
from reports.records import ReportRecord
from reports.review import (
    ANCHOR_NAME,
    SignoffRefused,
    append_signoff,
    compute_entry_hash,
    read_log,
)
from storage.sharing import os_principal
from tests.accounts import REVIEWER, reckon_as_reviewer
from tests.signers import enrol_reviewer, key_of
from tests.test_report_db import DAY, make_run
from tests.test_review import _rechain, _tamper, make_cli_warehouse

ME = os_principal()


@pytest.fixture()
def cli_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tests/test_review.py's warehouse: one run reconciled by alice, three breaks; this
    account signs with its own registered key."""
    return make_cli_warehouse(tmp_path, monkeypatch)


def _db(wh: Path) -> ReportDB:
    return ReportDB.from_settings(load_settings(env={}, warehouse=str(wh)))


def _verify(wh: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str]:
    code = main(["verify-log", "--warehouse", str(wh), *flags])
    return code, capsys.readouterr().out


def _sign(wh: Path, capsys: pytest.CaptureFixture[str], decision: str = "approved",
          run: str = "run-1") -> dict[str, object]:
    assert main(["signoff", "--warehouse", str(wh), "--run", run, "--note", "looked",
                 "--decision", decision, "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


@pytest.fixture()
def heads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file outside the warehouse each sign-off publishes the log's head to."""
    path = tmp_path / "published" / "heads.jsonl"
    monkeypatch.setenv("RECKON_SIGNOFF_HEADS", str(path))
    return path


# ----------------------------------------------------------------------- point 1: forgery


def test_a_sign_off_forged_in_anothers_name_is_caught(cli_warehouse: Path, capsys) -> None:
    """The reconciler (this account) appends an approval of their own run in bob's name:
    through the library without a key, with their own key (refused), and as a row signed
    with their own key written straight into the database. verify-log names each."""
    with _db(cli_warehouse) as db:
        db.record_audit_run(replace(make_run("run-2", day=DAY + timedelta(days=1),
                                             reconciler=ME), table_versions={}), [])
        append_signoff(db, "run-2", "bob", "approved", "forged", warehouse=cli_warehouse)
    code, out = _verify(cli_warehouse, capsys)
    assert code == 1 and "seq 1: not signed by any key" in out and "bob's name" in out, out

    with _db(cli_warehouse) as db, pytest.raises(SignoffRefused, match=f"is {ME}'s, not bob's"):
        append_signoff(db, "run-2", "bob", "approved", "forged", signer=key_of(ME))
    own = key_of(ME)
    at = datetime(2026, 1, 3, tzinfo=UTC)
    prev = read_log(_db(cli_warehouse))[-1].entry_hash
    digest = compute_entry_hash(seq=2, at=at, run_id="run-2", by="bob", decision="approved",
                                note="forged", prev_hash=prev)
    with _db(cli_warehouse) as db, db.engine.begin() as conn:
        conn.execute(sa.insert(SIGNOFF_LOG).values(
            seq=2, at=at, run_id="run-2", by="bob", decision="approved", note="forged",
            prev_hash=prev, entry_hash=digest, key_id=own.key_id,
            signature=own.sign(digest.encode())))
    code, out = _verify(cli_warehouse, capsys)
    assert code == 1
    assert f"seq 2: names bob as its signer but was signed with {ME}'s key" in out, out


def test_erasing_every_entry_and_the_anchor_is_caught_by_the_published_head(
        cli_warehouse: Path, heads: Path, capsys) -> None:
    _sign(cli_warehouse, capsys, "rejected")
    head = str(_sign(cli_warehouse, capsys)["entry_hash"])
    assert json.loads(heads.read_text().splitlines()[-1])["entry_hash"] == head
    _tamper(cli_warehouse, "DELETE FROM signoff_log")
    (cli_warehouse / ANCHOR_NAME).unlink()

    code, out = _verify(cli_warehouse, capsys)  # checked against signoff_heads' last line
    assert code == 1 and f"head hash {head[:16]}... recorded earlier is no longer" in out, out
    heads.unlink()  # the verifier holds the head from a report or a notification instead
    code, out = _verify(cli_warehouse, capsys, "--expect-head", head)
    assert code == 1 and "no longer in the log" in out, out


def test_an_approval_rewritten_rechained_and_reanchored_is_caught(cli_warehouse: Path,
                                                                  capsys) -> None:
    """A rejection turned into an approval, every hash and link recomputed and the anchor
    rewritten to match: the signer's signature no longer holds."""
    _sign(cli_warehouse, capsys, "rejected")
    _sign(cli_warehouse, capsys, "reopened")
    _tamper(cli_warehouse, "UPDATE signoff_log SET decision = 'approved' WHERE seq = 1")
    _rechain(cli_warehouse)
    with _db(cli_warehouse) as db:
        lines = [json.dumps({"seq": e.seq, "entry_hash": e.entry_hash, "at": "x"})
                 for e in read_log(db)]
    (cli_warehouse / ANCHOR_NAME).write_text("\n".join(lines) + "\n")
    code, out = _verify(cli_warehouse, capsys)
    assert code == 1
    for seq in (1, 2):
        assert f"seq {seq}: its signature does not match its contents under {ME}'s key" in out


def test_a_signer_rewriting_their_own_last_entry_is_caught_by_the_published_head(
        cli_warehouse: Path, heads: Path, capsys) -> None:
    """The one rewrite a key allows: its holder re-signs their own last entry. The head
    published before it (signoff_heads) is what no longer matches."""
    head = str(_sign(cli_warehouse, capsys, "rejected")["entry_hash"])
    own = key_of(ME)
    with _db(cli_warehouse) as db:
        e = read_log(db)[0]
        digest = compute_entry_hash(seq=1, at=e.at, run_id=e.run_id, by=e.by,
                                    decision="approved", note=e.note, prev_hash=e.prev_hash,
                                    signed=e.signed)
        with db.engine.begin() as conn:
            conn.execute(sa.update(SIGNOFF_LOG).values(decision="approved", entry_hash=digest,
                                                       signature=own.sign(digest.encode())))
    (cli_warehouse / ANCHOR_NAME).write_text(json.dumps({"seq": 1, "entry_hash": digest}))
    code, out = _verify(cli_warehouse, capsys)
    assert code == 1 and f"head hash {head[:16]}... recorded earlier" in out, out


def test_a_key_registered_by_someone_other_than_the_administrator_is_not_trusted(
        cli_warehouse: Path, capsys) -> None:
    """A signer who writes the database registers a key of their own for bob: the pinned
    administrator key did not sign it, so neither the registration nor bob's entry counts."""
    from reports.signer_keys import register_key
    from storage.signing_keys import SigningKey

    mallory = SigningKey.generate()
    with _db(cli_warehouse) as db:
        register_key(db, "bob", key_of("bob").public_text, admin=mallory)
        append_signoff(db, "run-1", "bob", "approved", "forged", signer=key_of("bob"))
    code, out = _verify(cli_warehouse, capsys)
    assert code == 1
    assert "(bob, key " in out and "is not signed by the administrator's key" in out
    assert "seq 1: signed with key" in out and "never registered" in out


def test_legacy_unsigned_entries_are_reported_as_legacy_never_trusted_silently(
        cli_warehouse: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """An old warehouse's entries (before migration 0012) carry no signature: verify-log
    fails, in one line for the lot, until the administrator names the last of them."""
    with _db(cli_warehouse) as db:
        for decision in ("rejected", "reopened"):
            append_signoff(db, "run-1", ME, decision, "before keys", warehouse=cli_warehouse)
    code, out = _verify(cli_warehouse, capsys)
    assert code == 1 and "seq 1 to 2: not signed by any key" in out
    assert out.count("not signed") == 1, out
    monkeypatch.setenv("RECKON_SIGNOFF_LEGACY_THROUGH", "1")
    code, out = _verify(cli_warehouse, capsys)
    assert code == 1 and "seq 2: not signed by any key" in out
    monkeypatch.setenv("RECKON_SIGNOFF_LEGACY_THROUGH", "2")
    _sign(cli_warehouse, capsys)
    code, out = _verify(cli_warehouse, capsys)
    assert code == 0, out
    assert "2 entries are unsigned legacy (seq 1 to 2, written before signing keys)" in out
    with _db(cli_warehouse) as db:  # an unsigned entry after the cut is still refused
        append_signoff(db, "run-1", "bob", "approved", "forged")
    code, out = _verify(cli_warehouse, capsys)
    assert code == 1 and "seq 4: not signed by any key" in out and "bob's name" in out


def test_reckon_keys_init_register_and_list(tmp_path: Path, monkeypatch, capsys) -> None:
    """The key's lifecycle through the CLI: init writes a 0600 key, only the pinned
    administrator may register, list says whose key the administrator signed."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main(["keys", "init"]) == 0
    out = capsys.readouterr().out
    path = tmp_path / "home" / ".reckon" / "signing_key.pem"
    assert oct(path.stat().st_mode & 0o777) == "0o600" and f"written to {path}" in out
    public = out.split("public key: ")[1].split()[0]
    assert main(["keys", "init"]) == 2 and "already holds a signing key" in \
        capsys.readouterr().err
    wh = str(tmp_path / "wh")
    assert main(["keys", "register", "ana", "--public-key", public, "--warehouse", wh]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not the administrator's key pinned in signoff_admin_key" in err
    monkeypatch.setenv("RECKON_SIGNOFF_ADMIN_KEY", public)  # this account is the administrator
    assert main(["keys", "register", "ana", "--public-key", public, "--warehouse", wh]) == 0
    assert "registered key" in capsys.readouterr().out
    assert main(["keys", "list", "--warehouse", wh]) == 0
    out = capsys.readouterr().out
    assert "ana" in out and "signed by the pinned administrator" in out
    os.chmod(path, 0o644)
    assert main(["signoff", "--warehouse", wh, "--run", "r", "--note", "n"]) == 2
    assert "is readable by others" in capsys.readouterr().err


def test_a_revoked_key_signs_nothing_after_its_revocation(cli_warehouse: Path, tmp_path: Path,
                                                         monkeypatch, capsys) -> None:
    """A lost key: the administrator revokes it (`reckon keys revoke`); what it signed before
    stands, a new sign-off with it is refused, and an entry it signs afterwards, written
    straight into the database, is named."""
    from storage.signing_keys import DEFAULT_KEY_FILE
    from tests.signers import ADMIN

    _sign(cli_warehouse, capsys, "rejected")
    own = key_of(ME)
    home = tmp_path / "home"
    (home / DEFAULT_KEY_FILE).rename(home / "mine.pem")  # the administrator's key, for a moment
    ADMIN.save(home / DEFAULT_KEY_FILE)
    assert main(["keys", "revoke", own.key_id, "--warehouse", str(cli_warehouse)]) == 0
    assert f"revoked key {own.key_id} of {ME}: entries it signed up to seq 1 stand" in \
        capsys.readouterr().out
    (home / DEFAULT_KEY_FILE).unlink()
    (home / "mine.pem").rename(home / DEFAULT_KEY_FILE)
    assert main(["signoff", "--warehouse", str(cli_warehouse), "--run", "run-1",
                 "--note", "n"]) == 2
    assert f"your signing key {own.key_id} was revoked" in capsys.readouterr().err
    assert _verify(cli_warehouse, capsys)[0] == 0  # seq 1 was signed before: it stands
    with _db(cli_warehouse) as db:
        e = read_log(db)[0]
        at = e.at + timedelta(seconds=1)
        digest = compute_entry_hash(seq=2, at=at, run_id="run-1", by=ME, decision="approved",
                                    note="with a stolen key", prev_hash=e.entry_hash)
        with db.engine.begin() as conn:
            conn.execute(sa.insert(SIGNOFF_LOG).values(
                seq=2, at=at, run_id="run-1", by=ME, decision="approved",
                note="with a stolen key", prev_hash=e.entry_hash, entry_hash=digest,
                key_id=own.key_id, signature=own.sign(digest.encode())))
    code, out = _verify(cli_warehouse, capsys)
    assert code == 1
    assert f"seq 2: signed with {ME}'s key {own.key_id}, which was revoked after seq 1" in out


# ------------------------------------------------------- point 4: edits after the sign-off


def test_a_breaks_row_edited_with_sqlite3_after_sign_off_is_named(cli_warehouse: Path,
                                                                  capsys) -> None:
    _sign(cli_warehouse, capsys)
    subprocess.run(["sqlite3", str(cli_warehouse / "reports" / "reckon.db"),
                    "UPDATE breaks SET gap_amount = '0.00' WHERE key = 'acct-1'"], check=True)
    code, out = _verify(cli_warehouse, capsys)
    assert code == 1
    assert "seq 1: run run-1's breaks rows (their SHA-256) changed after this entry signed " \
           "them" in out, out


def _rendered(wh: Path) -> Path:
    """run-1's report.html in the warehouse's report folder, recorded with its SHA-256 as
    `reckon report` records it."""
    html = wh / "reports" / DAY.isoformat() / "report.html"
    html.parent.mkdir(parents=True)
    html.write_bytes(b"<html>EUR gap -1.25</html>")
    with _db(wh) as db:
        db.record_report(ReportRecord(day=DAY, audit_run_id="run-1", created_at=datetime.now(UTC),
                                      html_path=str(html), pdf_path=str(html.with_suffix(".pdf")),
                                      sha256=hashlib.sha256(html.read_bytes()).hexdigest()))
    return html


def test_the_head_delivered_with_the_report_catches_a_later_erasure(cli_warehouse: Path,
                                                                   capsys) -> None:
    """The approval record beside the report (what goes out with it) carries the log's
    head; a verifier holding it sees the log erased afterwards."""
    html = _rendered(cli_warehouse)
    head = str(_sign(cli_warehouse, capsys)["entry_hash"])
    record = json.loads((html.parent / "approval.json").read_text())
    assert record["log_head"] == head
    assert head in (html.parent / "approval.html").read_text()
    _tamper(cli_warehouse, "DELETE FROM signoff_log")
    (cli_warehouse / ANCHOR_NAME).unlink()
    assert _verify(cli_warehouse, capsys)[0] == 0  # nothing inside the warehouse can tell
    code, out = _verify(cli_warehouse, capsys, "--expect-head", record["log_head"])
    assert code == 1 and "no longer in the log" in out, out


def test_a_report_html_edited_after_sign_off_is_named(cli_warehouse: Path, capsys) -> None:
    html = _rendered(cli_warehouse)
    _sign(cli_warehouse, capsys)
    assert _verify(cli_warehouse, capsys)[0] == 0
    html.write_bytes(b"<html>EUR gap 0.00</html>")
    code, out = _verify(cli_warehouse, capsys)
    assert code == 1
    lines = [line for line in out.splitlines() if str(html) in line]
    assert len(lines) == 1 and "seq 1: run run-1's report" in lines[0] and \
        "was edited after this entry signed it" in lines[0], out


# ---------------------------------------------------------- point 2: two OS accounts


@contextlib.contextmanager
def _umask_kept() -> Iterator[None]:
    """`reckon` sets this process's umask (shared_warehouse); the tests after must not see it."""
    old = os.umask(0o022)
    os.umask(old)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture()
def shared_wh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, int]]:
    """A warehouse given to a group once, as docs/reliability.md says (chgrp, g+rwXs), with
    one run reconciled by alice; this account signs with its own key."""
    monkeypatch.chdir(tmp_path)
    for name in ("RECKON_CONFIG", "RECKON_REPORT_DB_URL", "RECKON_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    gid = grp.getgrnam("users").gr_gid
    wh = tmp_path / "wh"
    wh.mkdir()
    os.chown(wh, -1, gid)
    os.chmod(wh, 0o2775)
    with _umask_kept():
        os.umask(0o022)  # the signers' default: files 0644 unless the setting says otherwise
        yield wh, gid


def _first_signature(wh: Path, capsys, monkeypatch, shared: str) -> dict[str, str]:
    from tests.signers import give_key

    monkeypatch.setenv("RECKON_SHARED_WAREHOUSE", shared)
    settings = load_settings(warehouse=str(wh))
    os.umask(0o022 if not shared else 0o002)
    with ReportDB.from_settings(settings) as db:
        db.record_audit_run(replace(make_run("run-1", reconciler="alice"), table_versions={}),
                            [])
        give_key(wh.parent / "home", monkeypatch, db, ME)
        env = enrol_reviewer(db, wh.parent)
    _sign(wh, capsys, "rejected")
    return {**env, "RECKON_SHARED_WAREHOUSE": shared}


def test_two_os_accounts_sign_on_one_group_shared_warehouse(shared_wh, capsys,
                                                            monkeypatch) -> None:
    wh, gid = shared_wh
    env = _first_signature(wh, capsys, monkeypatch, "group")
    assert oct((wh / ANCHOR_NAME).stat().st_mode & 0o777) == "0o664"
    assert (wh / ANCHOR_NAME).stat().st_gid == gid
    done = reckon_as_reviewer(wh, "signoff", "--warehouse", str(wh), "--run", "run-1",
                              "--note", "second pair of eyes", env=env, shared_group=gid)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert f"approved by {REVIEWER} (log seq 2" in done.stdout
    anchored = [json.loads(line)["seq"] for line in (wh / ANCHOR_NAME).read_text().splitlines()]
    assert anchored == [1, 2]
    code, out = _verify(wh, capsys)
    assert code == 0 and out.startswith("sign-off log OK: 2 entries"), out


def test_a_second_account_that_may_not_write_is_told_in_one_line(shared_wh, capsys,
                                                                 monkeypatch) -> None:
    """Without the setting, the first signer's files are 0644: the second account's
    sign-off is refused before anything is written, in one line naming the file and the fix."""
    wh, gid = shared_wh
    env = _first_signature(wh, capsys, monkeypatch, "")
    os.chmod(wh / "reports" / "reckon.db", 0o664)  # the database shared by hand, not the anchor
    os.chmod(wh / "reports", 0o2775)
    done = reckon_as_reviewer(wh, "signoff", "--warehouse", str(wh), "--run", "run-1",
                              "--note", "second pair of eyes", env=env, shared_group=gid)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"cannot write {wh / ANCHOR_NAME}" in done.stderr
    assert 'shared_warehouse = "group"' in done.stderr and "chmod -R g+rwX" in done.stderr
    os.chmod(wh / ANCHOR_NAME, 0o664)  # now the anchor is shared and the database is not
    os.chmod(wh / "reports" / "reckon.db", 0o644)
    done = reckon_as_reviewer(wh, "signoff", "--warehouse", str(wh), "--run", "run-1",
                              "--note", "again", env=env, shared_group=gid)
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert "cannot write" in done.stderr and "reckon.db" in done.stderr
    code, out = _verify(wh, capsys)  # nothing half-written: one entry, anchored
    assert code == 0 and out.startswith("sign-off log OK: 1 entry"), out
