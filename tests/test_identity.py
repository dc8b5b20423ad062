"""Names compared as the four-eyes rule must see them (reckon.identity)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cli import main
from app.settings import load_settings
from reckon.identity import identity_key, same_person
from reports.db.repository import ReportDB
from storage.sharing import os_principal
from tests.signers import give_key
from tests.test_report_db import DAY, make_run


@pytest.mark.parametrize("disguise", [
    "r\u043e\u043et",               # Cyrillic o
    "\uff52\uff4f\uff4f\uff54",     # fullwidth
    "ro\u200bot",                   # zero-width space
    "ROOT",                         # case
    " root\u00a0",                  # spaces, a no-break space
    "R\u039f\u039fT",               # Greek capital omicrons
    "r\u2060oot",                   # word joiner
])
def test_a_disguised_name_is_the_same_person(disguise: str) -> None:
    assert same_person("root", disguise)


@pytest.mark.parametrize(("a", "b"), [("alice", "bob"), ("alice", "alicia"), ("tom", "rom"),
                                      ("ann", "anna"), ("erin", "frank"), ("trent", "trend")])
def test_different_names_stay_different(a: str, b: str) -> None:
    assert not same_person(a, b)


def test_the_key_is_stable_and_visible() -> None:
    assert identity_key("Dave") == identity_key("dave") == "dave"
    assert identity_key("") == ""


@pytest.mark.parametrize(("a", "b"), [
    ("root", "r00t"), ("root", "R00T"), ("root", "r0Ot"), ("alice", "a1ice"), ("alice", "aIice"),
    ("alice", "a|ice"), ("lan", "Ian"), ("bill", "bi11"), ("Olga", "0lga"),
])
def test_digit_and_letter_look_alikes_are_one_person(a: str, b: str) -> None:
    """Issue 60 probe: an account named r00t (digit zero) signed root's run."""
    assert same_person(a, b) and same_person(b, a)


@pytest.mark.parametrize(("a", "b"), [("bob", "rob"), ("ian", "lan"), ("sam", "5am"),
                                      ("zoe", "2oe"), ("mike", "rnike"), ("root", "rot")])
def test_what_is_not_folded_stays_different(a: str, b: str) -> None:
    assert not same_person(a, b)


def _documented_fold(name: str) -> tuple[str, str]:
    """The docstring's table, written out: 0/O/o one letter; 1/l/|/capital I one letter."""
    table = str.maketrans({"0": "o", "1": "l", "|": "l"})
    return name.lower().translate(table), name.replace("I", "l").lower().translate(table)


@given(st.text("oO0lLI1|iIbr", max_size=4), st.text("oO0lLI1|iIbr", max_size=4))
def test_the_fold_is_exactly_the_documented_table(a: str, b: str) -> None:
    folded_a, shaped_a = _documented_fold(a)
    folded_b, shaped_b = _documented_fold(b)
    assert same_person(a, b) == (folded_a == folded_b or shaped_a == shaped_b)


def test_the_reconciler_cannot_sign_a_run_under_a_look_alike(tmp_path, monkeypatch, capsys):
    """The CLI, as the probe ran it: the run's reconciler and its signer are one account whose
    name differs by a digit for a letter; refused (four-eyes), while a run reconciled by a
    different name is signed."""
    me = os_principal()
    look_alike = me.replace("o", "0").replace("l", "1")
    if look_alike == me:
        pytest.skip(f"the account {me!r} has no o or l to disguise")
    monkeypatch.chdir(tmp_path)
    for name in ("RECKON_CONFIG", "RECKON_REPORT_DB_URL", "RECKON_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    wh = tmp_path / "wh"
    with ReportDB.from_settings(load_settings(env={}, warehouse=str(wh))) as db:
        for days, reconciler in enumerate((look_alike, "bob"), start=1):  # a day each
            db.record_audit_run(replace(make_run(f"run-{days}", reconciler=reconciler,
                                                 day=DAY + timedelta(days=days)),
                                        table_versions={}), [])
        give_key(tmp_path / "home", monkeypatch, db, me)
    assert main(["signoff", "--warehouse", str(wh), "--run", "run-1", "--note", "mine"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{look_alike!r} reconciled it" in err and "four-eyes" in err
    assert main(["signoff", "--warehouse", str(wh), "--run", "run-2", "--note", "checked"]) == 0
