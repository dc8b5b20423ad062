"""``reckon keys init | register | list``: each signer's own key, registered by the administrator.

``init`` makes this account's key pair (the private key 0600 under its home) and prints the
public key; ``register NAME --public-key K`` is the administrator's: it records K as NAME's,
signed with the administrator's own key, which must be the one pinned in
``signoff_admin_key``; ``list`` shows the registrations and whether the pinned key signed
each. Example::

    reckon keys init                      # as ana: prints ed25519:...
    reckon keys register ana --public-key ed25519:...   # as the administrator
"""

from __future__ import annotations

import argparse

from reckon.config import Settings
from reckon.errors import UsageError, invalid
from storage.signing_keys import SigningKey, key_file

__all__ = ["cmd_keys"]


def cmd_keys(args: argparse.Namespace, settings: Settings) -> int:
    """Dispatch ``reckon keys ACTION``."""
    if args.action == "init":
        return _init(args, settings)
    if args.action == "register":
        return _register(args, settings)
    if args.action == "revoke":
        return _revoke(args, settings)
    return _list(settings)


def _init(args: argparse.Namespace, settings: Settings) -> int:
    path = key_file(args.key_file or settings.signing_key)
    key = SigningKey.generate()
    key.save(path)
    print(f"signing key written to {path} (mode 0600: only this account can read it)")
    print(f"public key: {key.public_text}")
    print(f"key id: {key.key_id}")
    print("next: the administrator registers it (`reckon keys register NAME --public-key "
          f"{key.public_text}`)")
    return 0


def _register(args: argparse.Namespace, settings: Settings) -> int:
    from reports.db.repository import ReportDB
    from reports.signer_keys import register_key

    if not args.name or not args.public_key:
        raise invalid("register", args.name, "NAME --public-key KEY (the key `reckon keys "
                      "init` printed for NAME)")
    admin = _administrator(settings)
    with ReportDB.from_settings(settings) as db:
        reg = register_key(db, args.name, args.public_key, admin=admin, scope=args.scope)
    print(f"registered key {reg.key_id} for {reg.name} (scope {reg.scope}, registration "
          f"{reg.seq}, signed by the administrator's key {reg.admin_key_id})")
    return 0


def _administrator(settings: Settings) -> SigningKey:
    """This account's key, refused unless it is the administrator's pinned one."""
    admin = SigningKey.load(key_file(settings.signing_key))
    if admin.public_text != settings.signoff_admin_key.strip():
        raise UsageError(f"your key {admin.key_id} is not the administrator's key pinned in "
                         "signoff_admin_key: only the administrator registers and revokes "
                         f"keys (set signoff_admin_key = \"{admin.public_text}\" if you are)")
    return admin


def _revoke(args: argparse.Namespace, settings: Settings) -> int:
    from reports.db.repository import ReportDB
    from reports.signer_keys import revoke_key

    if not args.name:
        raise invalid("revoke", args.name, "KEY_ID (the key id `reckon keys list` shows)")
    admin = _administrator(settings)
    with ReportDB.from_settings(settings) as db:
        reg = revoke_key(db, args.name, admin=admin)
    print(f"revoked key {reg.key_id} of {reg.name}: entries it signed up to seq "
          f"{reg.through_seq} stand, any later one fails verify-log")
    return 0


def _list(settings: Settings) -> int:
    from reports.db.repository import ReportDB
    from reports.signer_keys import genuine, registrations

    with ReportDB.from_settings(settings) as db, db.ready().connect() as conn:
        rows = registrations(conn)
    for reg in rows:
        trust = ("signed by the pinned administrator key"
                 if genuine(reg, settings.signoff_admin_key or None)
                 else "NOT signed by the pinned administrator key")
        what = (f"revoked after log seq {reg.through_seq}" if reg.scope == "revoked"
                else f"scope {reg.scope}")
        print(f"{reg.seq}  {reg.name}  {reg.key_id}  {what}  {trust}")
    if not rows:
        print("no signing keys registered (`reckon keys register NAME --public-key KEY`)")
    return 0
