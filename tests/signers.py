"""Signing keys for the tests: one administrator and one key per signer's name, registered in
each report database the first time that name signs there (reckon.signing,
reports.signer_keys). ``append`` and ``verify`` are reports.review's own functions with the
signer's key and the pinned administrator key filled in, as the CLI and the workbench fill
them in; an unsigned append (the library without a key) is what verify-log must refuse.

Example: ``append(db, "run-1", "bob", "approved", "ok")`` then ``verify(db).ok``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reports.db.repository import ReportDB
from reports.review import (
    LogTrust,
    LogVerification,
    SignoffEntry,
    append_signoff,
    verify_log,
)
from reports.signer_keys import register_key, registrations
from storage.signing_keys import DEFAULT_KEY_FILE, SigningKey

ADMIN = SigningKey.generate()
_KEYS: dict[str, SigningKey] = {}


def key_of(name: str) -> SigningKey:
    """The one key of ``name`` (trimmed) for the whole test session."""
    return _KEYS.setdefault(name.strip(), SigningKey.generate())


def enrol(db: ReportDB, name: str, scope: str = "self") -> SigningKey:
    """``name``'s key, registered in ``db`` by the administrator unless it already is."""
    key = key_of(name)
    with db.ready().connect() as conn:
        known = {r.key_id for r in registrations(conn)}
    if key.key_id not in known:
        register_key(db, name.strip(), key.public_text, admin=ADMIN, scope=scope)
    return key


def append(db: ReportDB, run_id: str, by: str, *args: Any, **kwargs: Any) -> SignoffEntry:
    """reports.review.append_signoff, signed with ``by``'s own registered key."""
    kwargs.setdefault("signer", enrol(db, by) if by.strip() else None)
    return append_signoff(db, run_id, by, *args, **kwargs)


def verify(db: ReportDB, *args: Any, **kwargs: Any) -> LogVerification:
    """reports.review.verify_log with the administrator's key pinned."""
    kwargs.setdefault("admin_key", ADMIN.public_text)
    return verify_log(db, *args, **kwargs)


def enrol_reviewer(db: ReportDB, base: Path) -> dict[str, str]:
    """The reviewer account of tests/accounts.py, its key made in its home under ``base`` and
    registered in ``db``; returns the environment its configuration holds (the pinned
    administrator key), for ``reckon_as_reviewer(..., env=...)``."""
    from tests.accounts import REVIEWER, reviewer_home

    public = reviewer_home(base)[1]
    with db.ready().connect() as conn:
        known = {r.public_key for r in registrations(conn)}
    if public not in known:
        register_key(db, REVIEWER, public, admin=ADMIN)
    return {"RECKON_SIGNOFF_ADMIN_KEY": ADMIN.public_text}


def give_key(home: Path, monkeypatch: pytest.MonkeyPatch, db: ReportDB, name: str) -> SigningKey:
    """This process's account gets ``name``'s key in ``home`` (HOME set to it, the key file
    0600 as `reckon keys init` writes it), registered in ``db``; the administrator's public
    key is pinned in the environment (RECKON_SIGNOFF_ADMIN_KEY), as the configuration pins it."""
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RECKON_SIGNOFF_ADMIN_KEY", ADMIN.public_text)
    key = key_of(name)
    path = home / DEFAULT_KEY_FILE
    if not path.exists():
        key.save(path)
    enrol(db, name)
    return key


def workbench_trust(db: ReportDB) -> LogTrust:
    """What `reckon workbench` hands its app: its own key, registered with scope workbench
    (it signs for the people it authenticated), and the pinned administrator key."""
    return LogTrust(signer=enrol(db, "workbench", scope="workbench"),
                    admin_key=ADMIN.public_text)
