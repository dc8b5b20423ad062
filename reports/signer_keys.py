"""Who owns which signing key: the administrator's signed registrations (``reckon keys``).

A sign-off's signature proves only that the holder of some key signed it; this registry says
whose key it is. Each registration (name, public key, scope) is signed by the administrator's
key, whose public half is pinned in the configuration (``signoff_admin_key``) outside the
warehouse, so a row written into the database by anyone else is not a registration. Scope
``self``: the key signs only as its name; ``workbench``: the workbench's service key, which
signs for the people it authenticated (docs/decisions/0006's limit stands). A lost or stolen
key is revoked (``revoke_key``): a row of scope ``revoked``, also signed by the administrator,
naming the last log seq the key may have signed; an entry it signs after that is not trusted.

Example: ``register_key(db, "ana", ana.public_text, admin=admin_key)``, then
``registered_keys(conn, admin_key.public_text)[ana.key_id].name == "ana"``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from reckon.errors import UsageError
from reckon.signing import key_id_of, load_public, verify_signature
from reports.db.engine import write_tx
from reports.db.models import SIGNER_KEYS, SIGNOFF_LOG
from reports.db.repository import ReportDB
from storage.signing_keys import SigningKey

__all__ = ["SCOPES", "Registration", "genuine", "register_key", "registered_keys", "registration_problems",
           "registrations", "revocations", "revoke_key"]

SCOPES = ("self", "workbench")


@dataclass(frozen=True)
class Registration:
    """One registered key: whose it is and what it may sign."""

    seq: int
    at: datetime
    name: str
    public_key: str
    key_id: str
    scope: str
    admin_key_id: str
    signature: str
    through_seq: int | None = None  # a revocation: the last log seq the key may have signed

    def payload(self) -> bytes:
        """The bytes the administrator signs: every field but the signature, canonical JSON."""
        fields = {"seq": self.seq, "at": self.at.astimezone(UTC).isoformat(),
                  "name": self.name, "public_key": self.public_key, "key_id": self.key_id,
                  "scope": self.scope, "admin_key_id": self.admin_key_id}
        if self.through_seq is not None:
            fields["through_seq"] = self.through_seq
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode("utf-8")


def register_key(db: ReportDB, name: str, public_key: str, *, admin: SigningKey,
                 scope: str = "self", now: datetime | None = None) -> Registration:
    """Record ``public_key`` as ``name``'s, signed with the administrator's key ``admin``."""
    if scope not in SCOPES:
        raise UsageError(f"--scope={scope!r} is not valid: one of {', '.join(SCOPES)}")
    who = name.strip()
    if not who:
        raise UsageError("name='' is not valid: the signer's account name")
    load_public(public_key)
    with write_tx(db.ready(), "signoff_log") as conn:
        return _signed_row(conn, admin, now, name=who, public_key=public_key.strip(),
                           key_id=key_id_of(public_key), scope=scope)


def revoke_key(db: ReportDB, key_id: str, *, admin: SigningKey,
               now: datetime | None = None) -> Registration:
    """Revoke a registered key from the log's current end on: entries it signed up to now
    stay trusted, any later one is not (a lost or stolen key). Taken under the log's write
    lock, so no append slips between the seq read and the revocation.

    Example: ``revoke_key(db, "0123456789abcdef", admin=admin_key).through_seq``."""
    with write_tx(db.ready(), "signoff_log") as conn:
        reg = conn.execute(sa.select(SIGNER_KEYS).where(SIGNER_KEYS.c.key_id == key_id.strip())
                           .order_by(SIGNER_KEYS.c.seq.desc()).limit(1)).first()
        if reg is None:
            raise UsageError(f"key id {key_id!r} is not valid: no registered key has it "
                             "(`reckon keys list` shows them)")
        if reg.scope == "revoked":
            raise UsageError(f"key {reg.key_id} ({reg.name}) is revoked already, from seq "
                             f"{int(reg.through_seq) + 1} on")
        last = conn.execute(sa.select(sa.func.max(SIGNOFF_LOG.c.seq))).scalar_one_or_none()
        return _signed_row(conn, admin, now, name=reg.name, public_key=reg.public_key,
                           key_id=reg.key_id, scope="revoked", through_seq=int(last or 0))


def _signed_row(conn: sa.Connection, admin: SigningKey, now: datetime | None,
                **fields: Any) -> Registration:
    """The next row of signer_keys with ``fields``, signed by ``admin``, inserted."""
    last = conn.execute(sa.select(sa.func.max(SIGNER_KEYS.c.seq))).scalar_one_or_none()
    draft = Registration(seq=int(last or 0) + 1, at=(now or datetime.now(UTC)),
                         admin_key_id=admin.key_id, signature="", **fields)
    done = Registration(**{**draft.__dict__, "signature": admin.sign(draft.payload())})
    conn.execute(sa.insert(SIGNER_KEYS).values(**done.__dict__))
    return done


def registrations(conn: sa.Connection) -> list[Registration]:
    """Every registration, in order, as stored (whoever signed it)."""
    rows = conn.execute(sa.select(SIGNER_KEYS).order_by(SIGNER_KEYS.c.seq)).all()
    return [Registration(seq=int(r.seq), at=r.at, name=r.name, public_key=r.public_key,
                         key_id=r.key_id, scope=r.scope, admin_key_id=r.admin_key_id,
                         signature=r.signature,
                         through_seq=None if r.through_seq is None else int(r.through_seq))
            for r in rows]


def genuine(reg: Registration, admin_key: str | None) -> bool:
    """Whether the pinned administrator key ``admin_key`` signed ``reg`` as it stands."""
    return bool(admin_key) and reg.key_id == key_id_of(reg.public_key) and \
        verify_signature(str(admin_key), reg.signature, reg.payload())


def registered_keys(conn: sa.Connection, admin_key: str | None) -> dict[str, Registration]:
    """key id -> its registration, for the registrations the administrator's key signed
    (revocations aside: ``revocations``)."""
    return {r.key_id: r for r in registrations(conn)
            if r.scope != "revoked" and genuine(r, admin_key)}


def revocations(conn: sa.Connection, admin_key: str | None) -> dict[str, int]:
    """key id -> the last log seq it may have signed, for the revocations the administrator's
    key signed (the earliest, if revoked twice)."""
    revoked: dict[str, int] = {}
    for r in registrations(conn):
        if r.scope == "revoked" and r.through_seq is not None and genuine(r, admin_key):
            revoked.setdefault(r.key_id, r.through_seq)
    return revoked


def registration_problems(conn: sa.Connection, admin_key: str | None) -> list[str]:
    """Every registration the pinned administrator key did not sign, one line each."""
    problems = []
    for reg in registrations(conn):
        if not genuine(reg, admin_key):
            problems.append(f"key registration {reg.seq} ({reg.name}, key {reg.key_id}) is not "
                            "signed by the administrator's key pinned in signoff_admin_key: "
                            "entries signed with that key are not trusted")
    return problems
