"""Run a `reckon` command as another OS account, as a second reviewer would: the sign-off's
signer is the account that runs it (storage.sharing.os_principal), so four-eyes needs two.
Uses the system's `nobody` (uid 65534) through setpriv. The account signs with its own key,
in its own home (`reviewer_home`, mode 0700, the key 0600 and the account's), registered in
the warehouse's report database by the tests' administrator (tests/signers.py). By default
the warehouse is opened to everyone; ``shared_group`` instead runs the account as a member of
that group only, for a warehouse shared as `shared_warehouse = "group"` says."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

from storage.signing_keys import DEFAULT_KEY_FILE, SigningKey

REVIEWER_UID = 65534  # nobody
REVIEWER = pwd.getpwuid(REVIEWER_UID).pw_name


def _open_to_everyone(warehouse: Path) -> None:
    """Let the reviewer account reach and write the warehouse (its report DB, the anchor)."""
    for root, _dirs, files in os.walk(warehouse):
        os.chmod(root, 0o777)
        for name in files:
            os.chmod(Path(root) / name, 0o666)


def _reachable(path: Path) -> None:
    """Let the reviewer account pass through every folder above ``path``."""
    for folder in reversed(path.parents):
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            os.chmod(folder, mode | stat.S_IXOTH)


def reviewer_home(base: Path) -> tuple[Path, str]:
    """The reviewer's home under ``base`` with their private key, made once: the folder 0700
    and the key 0600, both the reviewer's, as `reckon keys init` leaves them. Returns the home
    and the key's public half (what the administrator registers)."""
    home = base / f"home-{REVIEWER}"
    key_path = home / DEFAULT_KEY_FILE
    if not key_path.exists():
        key = SigningKey.generate()
        key.save(key_path)
        for path in (home, key_path.parent, key_path):
            os.chown(path, REVIEWER_UID, REVIEWER_UID)
        os.chmod(home, 0o700)
        _PUBLIC[home] = key.public_text
    return home, _PUBLIC[home]


_PUBLIC: dict[Path, str] = {}


def reckon_as_reviewer(warehouse: Path, *argv: str, env: dict[str, str] | None = None,
                       shared_group: int | None = None) -> subprocess.CompletedProcess[str]:
    """`reckon ARGV` as the reviewer account, in the warehouse (its exit code, out, err).
    ``env``: RECKON_* settings the account's configuration holds (the pinned administrator
    key); ``shared_group``: run with that supplementary group instead of opening the
    warehouse to everyone."""
    home = reviewer_home(warehouse.parent)[0]
    _reachable(warehouse)
    if shared_group is None:
        _open_to_everyone(warehouse)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    clean.update(env or {})
    clean.update(HOME=str(home), USER="root", LOGNAME="root")  # names prove nothing
    groups = ["--clear-groups"] if shared_group is None else [f"--groups={shared_group}"]
    return subprocess.run(
        ["setpriv", f"--reuid={REVIEWER_UID}", f"--regid={REVIEWER_UID}", *groups,
         sys.executable, "-m", "app.cli", *argv], cwd=warehouse, env=clean,
        capture_output=True, text=True, timeout=300, check=False)
