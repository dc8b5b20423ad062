"""A warehouse several OS accounts write (issue 60, point 2; ``shared_warehouse = "group"``):
what Spark writes is group-writable too, so the next account's nightly step can add to it.

Hadoop sets each file's mode itself under its own umask (022: 0644 files, 0755 folders),
whatever the process's umask, so before the setting reached Spark a replay by the reconciler
left a day's folder the reviewer's account could not write into."""

from __future__ import annotations

import grp
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from tests.scenarios import SCENARIOS
from tests.streamkit import copy_warehouse

CASE = next(c for c in SCENARIOS if c.name.startswith("EUR, JPY and KWD"))
GROUP = grp.getgrnam("nogroup").gr_gid


def _share(warehouse: Path) -> None:
    """The administrator's one-time step the docs give: the group owns it, may write it, and
    every folder passes its group on (set-group-id)."""
    for root, _dirs, files in os.walk(warehouse):
        for path in [Path(root), *(Path(root) / f for f in files)]:
            os.chown(path, -1, GROUP)
            mode = path.stat().st_mode
            extra = stat.S_IRGRP | stat.S_IWGRP | (stat.S_IXGRP | stat.S_ISGID
                                                   if path.is_dir() else 0)
            os.chmod(path, stat.S_IMODE(mode) | extra)


def test_a_replay_on_a_group_shared_warehouse_writes_group_writable_files(
        streamed_scenario, tmp_path):
    warehouse = copy_warehouse(streamed_scenario(CASE.name).warehouse_path, tmp_path)
    _share(warehouse)
    started = time.time() - 1
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    env["RECKON_SHARED_WAREHOUSE"] = "group"
    done = subprocess.run([sys.executable, "-m", "app.cli", "replay", "--warehouse",
                           str(warehouse), "--date", "2026-01-01"], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    written = [p for table in ("canonical_totals", "replay_runs")
               for p in (warehouse / table).rglob("*") if p.stat().st_mtime >= started]
    assert any(p.suffix == ".parquet" for p in written), written
    not_shared = [f"{p} {stat.filemode(p.stat().st_mode)} gid {p.stat().st_gid}"
                  for p in written
                  if not p.stat().st_mode & stat.S_IWGRP or p.stat().st_gid != GROUP]
    assert not_shared == []
