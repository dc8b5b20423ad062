"""Run a `reckon` command as another OS account, as a second reviewer would: the sign-off's
signer is the account that runs it (reckon.identity.os_principal), so four-eyes needs two.
Uses the system's `nobody` (uid 65534) through setpriv; the warehouse is opened to it."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

REVIEWER_UID = 65534  # nobody
REVIEWER = pwd.getpwuid(REVIEWER_UID).pw_name


def _open_to_everyone(warehouse: Path) -> None:
    """Let the reviewer account reach and write the warehouse (its report DB, the anchor)."""
    for folder in reversed(warehouse.parents):
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            os.chmod(folder, mode | stat.S_IXOTH)
    for root, _dirs, files in os.walk(warehouse):
        os.chmod(root, 0o777)
        for name in files:
            os.chmod(Path(root) / name, 0o666)


def reckon_as_reviewer(warehouse: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`reckon ARGV` as the reviewer account, in the warehouse (its exit code, out, err)."""
    _open_to_everyone(warehouse)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    env.update(HOME=str(warehouse), USER="root", LOGNAME="root")  # names prove nothing
    return subprocess.run(
        ["setpriv", f"--reuid={REVIEWER_UID}", f"--regid={REVIEWER_UID}", "--clear-groups",
         sys.executable, "-m", "reckon.cli", *argv], cwd=warehouse, env=env,
        capture_output=True, text=True, timeout=300, check=False)
