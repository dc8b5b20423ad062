"""A real, throw-away PostgreSQL server on loopback for the ``postgres`` test tier.

Uses the Debian ``postgresql`` package's binaries (``make setup-test`` installs them): a temp
data directory, ``initdb`` with trust authentication (loopback only), ``pg_ctl start`` on
127.0.0.1 with a free port and the unix socket inside the temp directory, database ``reckon``.
PostgreSQL refuses to run as root, so as root every server binary runs as the ``postgres`` OS
user (``runuser``). Durability is switched off (fsync, synchronous_commit): tests only.

    with postgres_server() as url:   # postgresql+psycopg://postgres@127.0.0.1:PORT/reckon
        ...
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "PostgresNotInstalledError",
    "find_pg_bin",
    "fresh_database",
    "postgres_server",
]

_SETUP_HINT = "run `make setup-test` (installs the Debian package `postgresql`)"


class PostgresNotInstalledError(RuntimeError):
    """The PostgreSQL server binaries are missing: the postgres tier cannot run."""


def find_pg_bin() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding initdb, pg_ctl and createdb."""
    candidates = []
    for path in Path("/usr/lib/postgresql").glob("*/bin"):
        if all((path / tool).is_file() for tool in ("initdb", "pg_ctl", "createdb")):
            version = re.match(r"\d+", path.parent.name)
            candidates.append((int(version.group()) if version else 0, path))
    if not candidates:
        raise PostgresNotInstalledError(
            f"PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin: {_SETUP_HINT}")
    return max(candidates)[1]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres(argv: list[str]) -> list[str]:
    """Prefix a command so that it runs as the ``postgres`` OS user when we are root."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {' '.join(argv)}\n"
                           f"{proc.stdout}\n{proc.stderr}")


@contextlib.contextmanager
def postgres_server(database: str = "reckon") -> Iterator[str]:
    """Start a private PostgreSQL on 127.0.0.1; yield its SQLAlchemy URL; stop it and delete
    its data directory on exit (also after an error)."""
    bin_dir = find_pg_bin()
    root = Path(tempfile.mkdtemp(prefix="reckon-pg-"))
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(root, entry.pw_uid, entry.pw_gid)
    root.chmod(0o700)
    data, sock_dir, log = root / "data", root / "sock", root / "server.log"
    started = False
    try:
        _run(_as_postgres(["mkdir", "-p", str(sock_dir)]), "mkdir socket dir")
        _run(_as_postgres([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                           "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"]), "initdb")
        port = 0
        for _attempt in range(3):  # the free port can be taken between probe and bind
            port = _free_port()
            options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {sock_dir} "
                       "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                       "-c shared_buffers=32MB -c max_connections=60")
            proc = subprocess.run(
                _as_postgres([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w",
                              "-t", "60", "-o", options, "start"]),
                capture_output=True, text=True, check=False, timeout=120)
            if proc.returncode == 0:
                started = True
                break
        if not started:
            text = log.read_text() if log.exists() else ""
            raise RuntimeError(f"PostgreSQL did not start (port {port}):\n{text[-2000:]}")
        _run([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
              database], "createdb")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}"
    finally:
        if started:
            subprocess.run(_as_postgres([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast",
                                         "-w", "stop"]),
                           capture_output=True, check=False, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new empty database on the server of ``server_url`` for one test; dropped afterwards
    (``WITH (FORCE)`` ends connections a test left open)."""
    import sqlalchemy as sa

    name = "t_" + uuid.uuid4().hex[:16]
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    quoted = admin.dialect.identifier_preparer.quote(name)  # generated name, not user input
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql("CREATE DATABASE " + quoted)
        url = sa.make_url(server_url).set(database=name)
        yield url.render_as_string(hide_password=False)
        with admin.connect() as conn:
            conn.exec_driver_sql("DROP DATABASE IF EXISTS " + quoted + " WITH (FORCE)")
    finally:
        admin.dispose()
