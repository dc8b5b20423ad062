"""Chaos, small: scripts/chaos_stream.py with 3 SIGKILLs of a real `reckon stream` at random
mid-batch points, restarts from the checkpoint, then a row-for-row comparison of every stream
table with an uninterrupted run. (The 10-kill run and its output are in docs/reliability.md.)"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "chaos_stream.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chaos_stream", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["chaos_stream"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.soak
def test_three_random_kills_leave_the_same_tables(spark, tmp_path, capsys):
    chaos = _script()
    code = chaos.main(["--kills", "3", "--seed", "3", "--events", "1200",
                       "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    print(out)
    assert code == 0, out
    assert "VERDICT: EQUAL: 3 kills" in out
    landed = re.findall(r"^kill (\d)/3: after \d+ batches \+ [\d.]+s -> landed in batch (\d+)",
                        out, re.MULTILINE)
    assert [n for n, _ in landed] == ["1", "2", "3"], out
    # each restart made progress before the next kill: later and later batches
    batches = [int(b) for _, b in landed]
    assert all(a < b for a, b in itertools.pairwise(batches)), out


def test_kill_point_reads_torn_writes_from_the_delta_log(spark, tmp_path):
    """The kill report is evidence: a data file on disk that no commit added is reported as
    written-but-uncommitted for its table, a committed batch mark as committed."""
    from spark import tables as tb
    from storage import commits

    chaos = _script()
    wh = tmp_path / "wh"
    df = spark.createDataFrame([(1,)], "x INT")
    (df.write.format("delta").option("userMetadata", commits.batch_mark("a", tb.EVENT_LOG, 0))
     .save(str(wh / tb.EVENT_LOG)))
    before = {tb.EVENT_LOG: chaos.data_files(wh / tb.EVENT_LOG)}
    (wh / tb.EVENT_LOG / "part-99999-torn.snappy.parquet").write_bytes(b"PAR1")
    record = chaos.kill_point(wh, before, 1, 0, 0.5)
    assert record.landed_batch == 0
    assert record.committed == (tb.EVENT_LOG,)
    assert record.uncommitted == {tb.EVENT_LOG: 1}
    assert "inside a Delta write" in record.describe()
