"""``reckon workbench`` (serve the web app) and ``reckon users add|list|disable|revoke`` (its
users and their sessions).

Example:
    $ reckon users add bob --role reviewer        # asks for the password twice
    $ pass show wb/bob | reckon users add bob --password-stdin   # a script, as docker login
    $ reckon users revoke bob                     # log bob out everywhere, now
    $ reckon workbench --port 8088                # http://127.0.0.1:8088
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

import sqlalchemy as sa

from reckon.config import Settings
from reckon.errors import UsageError, invalid
from reports.db.engine import write_tx
from reports.db.models import WORKBENCH_USERS
from reports.db.repository import ReportDB
from reports.review import LogTrust
from workbench.auth import User, end_sessions, load_secret, put_user

__all__ = ["cmd_users", "cmd_workbench"]


def _password(args: argparse.Namespace) -> str:
    """From ``--password-stdin`` (a pipe, as ``docker login`` takes it), ``--password-env VAR``
    (compose), or asked twice on the terminal; one way only.

    Example: ``printf 'a long passphrase\\n' | reckon users add bob --password-stdin``: the
    final line ending is not part of the password."""
    if args.password_stdin and args.password_env:
        raise UsageError("give the password one way: --password-stdin or --password-env, "
                         "not both")
    if args.password_stdin:
        return _password_from_stdin()
    if args.password_env:
        value = os.environ.get(args.password_env)
        if not value:
            raise UsageError(f"--password-env {args.password_env}: that variable is not set")
        return value
    if not sys.stdin.isatty():
        raise UsageError("no terminal to ask the password on: give --password-stdin (and pipe "
                         "it in) or --password-env VAR")
    first = getpass.getpass(f"password for {args.name}: ")
    if first != getpass.getpass("again: "):
        raise UsageError("the two passwords differ: nothing was changed")
    return first


def _password_from_stdin() -> str:
    """The password piped in: everything up to end of input, less one final line ending
    (``echo`` adds it); a second line is a mistake (two passwords, or a file of them)."""
    text = sys.stdin.read()
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise UsageError("--password-stdin: standard input was empty: pipe the password in")
    if "\n" in text or "\r" in text:
        raise UsageError("--password-stdin: standard input has more than one line: give "
                         "the password alone on one line")
    return text


def cmd_users(args: argparse.Namespace, settings: Settings) -> int:
    """``reckon users add NAME --role R`` / ``list`` / ``disable NAME`` / ``revoke NAME``.
    Disabling a user ends their sessions too; revoking ends them and keeps the user."""
    if args.action != "list" and not args.name:  # it said "NAME=None is not valid"
        raise UsageError(f"users {args.action} needs the user's NAME")
    with ReportDB.from_settings(settings) as db:
        t = WORKBENCH_USERS
        if args.action == "add":
            user, before = put_user(db, args.name, args.role, _password(args))
            print(_added(user, before))
        elif args.action == "disable":
            with write_tx(db.ready()) as conn:
                done = conn.execute(sa.update(t).where(t.c.name == args.name)
                                    .values(enabled=False)).rowcount
            if not done:
                raise invalid("NAME", args.name, "an existing workbench user")
            ended = end_sessions(db, args.name)
            print(f"user {args.name} is disabled; {_sessions(ended)} ended")
        elif args.action == "revoke":
            with db.ready().connect() as conn:
                known = conn.execute(sa.select(t.c.name).where(t.c.name == args.name)).first()
            if known is None:
                raise invalid("NAME", args.name, "an existing workbench user")
            ended = end_sessions(db, args.name)
            print(f"{_sessions(ended)} of {args.name} ended: they log in again to go on")
        else:
            with db.ready().connect() as conn:
                for row in conn.execute(sa.select(t).order_by(t.c.name)):
                    state = "" if row.enabled else " (disabled)"
                    print(f"{row.name}\t{row.role}{state}")
    return 0


def _added(user: User, before: User | None) -> str:
    """What ``reckon users add`` did: created the user, or updated an existing one.

    Example: ``user bob updated: new password, role reviewer (was auditor), enabled again;
    their open sessions ended``."""
    if before is None:
        return f"user {user.name} ({user.role}) may log in to the workbench"
    role = (f"role {user.role} (unchanged)" if before.role == user.role
            else f"role {user.role} (was {before.role})")
    again = "" if before.enabled else ", enabled again"
    return (f"user {user.name} updated: new password, {role}{again}; their open sessions "
            "ended")


def _sessions(n: int) -> str:
    return f"{n} open session" + ("" if n == 1 else "s")


def cmd_workbench(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the workbench on ``--host``:``--port`` until interrupted."""
    from workbench.app import create_app
    from workbench.server import serve

    if not 0 < args.port < 65536:
        raise invalid("--port", args.port, "a TCP port (1 to 65535)")
    _refuse_a_missing_sqlite_file(settings)
    db = ReportDB.from_settings(settings)
    db.migrate()
    warehouse = settings.warehouse_path
    secret = load_secret(warehouse / "reports" / "_workbench_secret")
    app = create_app(db, secret=secret, warehouse=warehouse if warehouse.is_dir() else None,
                     secure_cookies=args.secure_cookies,
                     required_approvers=settings.required_approvers,
                     material_gap=settings.material_thresholds(), trust=_trust(settings))
    serve(app, args.host, args.port, ready=lambda: print(
        f"reckon workbench on http://{args.host}:{args.port} (report database "
        f"{settings.public_dict()['report_db_url']}); Ctrl-C stops it", flush=True))
    return 0


def _trust(settings: Settings) -> LogTrust:
    """The workbench's signing key (the signing_key setting of the account it runs as; none:
    it serves pages but refuses each decision, saying how to make and register one) and what
    verify-log checks."""
    from storage.signing_keys import SigningKey, key_file

    path = key_file(settings.signing_key)
    signer = SigningKey.load(path) if path.exists() else None  # none: each action says so
    heads = Path(settings.signoff_heads).expanduser() if settings.signoff_heads else None
    return LogTrust(signer=signer, admin_key=settings.signoff_admin_key or None,
                    legacy_through=settings.signoff_legacy_through, heads=heads)


def _refuse_a_missing_sqlite_file(settings: Settings) -> None:
    """A SQLite report database that does not exist yet is a wrong ``--warehouse`` (or a
    workbench started before ``reckon users add``): serving it would create it empty, with
    nobody able to log in.

    Example: ``reckon workbench --warehouse ./warehous`` -> ``--warehouse ./warehous: no
    report database at .../warehous/reports/reckon.db ...``"""
    url = sa.make_url(settings.report_db)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return
    if not Path(url.database).expanduser().is_file():
        where = ("RECKON_REPORT_DB_URL" if settings.report_db_url
                 else f"--warehouse {settings.warehouse}")
        raise UsageError(f"{where}: no report database at {url.database}: give the warehouse "
                         "an audit wrote (`reckon demo` makes one), and add the workbench's "
                         "users there first (`reckon users add NAME --role R`)")
