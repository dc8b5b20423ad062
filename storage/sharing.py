"""A warehouse several OS accounts write: the ``shared_warehouse = "group"`` setting.

Like git's ``core.sharedRepository=group``: the reconciler and each reviewer sign as their
own OS account, and each must be able to append to the report database and the log's anchor
that the first of them created. With the setting, this process creates files group-writable
(its umask loses the group bits), the SQLite database is created 0664 (SQLite itself asks
for 0644), and Spark writes under Hadoop's umask 002 (spark.session: Hadoop sets each file's
mode itself); the warehouse's folders carry the group and its set-group-id bit (an
administrator's one-time ``chgrp -R G wh && chmod -R g+rwX wh && find wh -type d -exec chmod
g+s {} +``), so every new file belongs to the group.

Example: ``share_process("group")`` once at start; ``create_group_writable(db_file, "group")``
before SQLite opens a new database.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from pathlib import Path

__all__ = ["create_group_writable", "os_principal", "share_process"]


def share_process(mode: str) -> None:
    """Make files this process creates group-writable when ``mode`` is ``"group"``.

    >>> share_process("")  # the umask as it was
    """
    if mode == "group":
        os.umask(os.umask(0) & ~0o070)


def create_group_writable(path: Path, mode: str) -> None:
    """Create the empty file ``path`` group-writable when ``mode`` is ``"group"`` and it does
    not exist yet: SQLite creates a database 0644, which the group cannot write (it keeps an
    existing file's mode, and gives its journal the same).

    >>> create_group_writable(Path("/nonexistent/reckon.db"), "")  # the setting is off
    """
    if mode != "group" or path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:  # another account made it first
        return
    with contextlib.closing(os.fdopen(fd, "wb")):
        os.fchmod(fd, os.fstat(fd).st_mode | 0o060)  # whatever this process's umask says


def os_principal() -> str:
    """The account this process runs as, from the operating system (its effective uid), not
    from an environment variable anyone can set (``USER``, ``LOGNAME``): who an audit
    records as its reconciler and who a sign-off is made by."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # an account without a passwd entry (a container's arbitrary uid)
        return f"uid {uid}"
