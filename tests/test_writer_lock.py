"""One writer at a time (storage.writer_lock), between real processes: a second writer is
refused with the holder named; a killed holder's successor takes over at once; a lock file
deleted under a live writer stops it before its next write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest

from reckon.errors import ConcurrentWriterError, UsageError
from storage.writer_lock import WriterLock

HOLD = """
import sys, time
from pathlib import Path
from storage.writer_lock import WriterLock
with WriterLock.take(Path(sys.argv[1]), "stream", "reckon stream of landing"):
    print("holding", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path: Path):
    """A process holding the stream lock of ``tmp_path`` until it is killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == "holding\n"
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_second_writer_is_refused_naming_the_holder(tmp_path, holder):
    with (pytest.raises(ConcurrentWriterError) as refused,
          WriterLock.take(tmp_path, "stream", "reckon stream of kafka-events")):
        pytest.fail("took a lock another process holds")
    message = str(refused.value)
    assert message.startswith("reckon stream of kafka-events refused: reckon stream of "
                              f"landing (pid {holder.pid} on ")
    assert "wait for it to end" in message and "\n" not in message


def test_a_second_stream_is_refused_naming_source_warehouse_holder_and_what_to_do(
        tmp_path, holder):
    """It read "reckon stream of landing refused: reckon stream of landing (pid ...) is
    already writing stream of /tmp/x": "landing" was an internal name, "stream of" the scope."""
    from app.settings import load_settings
    from spark.sources import StreamSource
    from spark.stream import stream_lock

    landing = tmp_path / "in"
    landing.mkdir()
    settings = load_settings(env={}, warehouse=str(tmp_path))
    with (pytest.raises(ConcurrentWriterError) as refused,
          stream_lock(settings.warehouse_path, StreamSource(landing=str(landing)))):
        pytest.fail("took a lock another process holds")
    message = str(refused.value)
    assert message.startswith(f"reckon stream of landing folder {landing} refused: the "
                              f"warehouse {tmp_path} is already written by reckon stream of "
                              f"landing (pid {holder.pid} on host ")
    assert ", user " in message and ", since " in message and "\n" not in message
    assert message.endswith("One stream per warehouse: stop that stream, or give this one "
                            "another warehouse (--warehouse)")
    assert ConcurrentWriterError.exit_code == 4
    kafka = StreamSource(kafka_bootstrap="broker:9092", topic="events")
    assert kafka.describe() == "Kafka topic events at broker:9092"


def test_a_killed_holders_successor_takes_over_at_once(tmp_path, holder):
    os.killpg(holder.pid, signal.SIGKILL)  # no clean-up runs: the kernel releases the lock
    holder.wait()
    with WriterLock.take(tmp_path, "stream", "reckon stream of landing") as lock:
        lock.check()


def test_other_scopes_do_not_wait_for_each_other(tmp_path, holder):
    with (WriterLock.take(tmp_path, "replay-2026-01-01", "replay of 2026-01-01"),
          WriterLock.take(tmp_path, "replay-2026-01-02", "replay of 2026-01-02")):
        pass


def test_a_lock_file_deleted_under_a_writer_stops_it_before_its_next_write(tmp_path):
    with WriterLock.take(tmp_path, "stream", "reckon stream of landing") as lock:
        lock.check()
        lock.path.unlink()  # by hand: a second writer could lock a new file now
        with (WriterLock.take(tmp_path, "stream", "the second writer"),
              pytest.raises(ConcurrentWriterError, match="deleted or replaced")):
            lock.check()


def test_no_lock_is_taken_in_a_warehouse_that_does_not_exist(tmp_path):
    with (pytest.raises(UsageError, match="no warehouse at"),
          WriterLock.take(tmp_path / "typo", "audit-2026-01-01", "audit of 2026-01-01")):
        pass
    assert not (tmp_path / "typo").exists()


# ----------------------------------------------------------------------- Spark tier, CLI


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    env.update(RECKON_SHUFFLE_PARTITIONS="2", RECKON_SPARK_DRIVER_MEMORY="1g",
               RECKON_MAX_FILES_PER_TRIGGER="1", PYSPARK_PYTHON=sys.executable, TZ="UTC")
    return subprocess.Popen([sys.executable, "-m", "app.cli", *args], env=env, cwd=cwd,
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _race(args: list[str], cwd: Path) -> tuple[list[int], list[str]]:
    """Start two identical commands at once; their exit codes and last stderr lines."""
    procs = [_start(args, cwd) for _ in range(2)]
    codes, last_lines = [], []
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        codes.append(proc.returncode)
        last_lines.append((err.strip().splitlines() or [""])[-1])
    return codes, last_lines


def test_a_replay_refused_by_the_running_one_starts_no_spark(tmp_path: Path) -> None:
    """`reckon replay` takes the day's lock before it starts Spark: while another replay of
    the day holds it, the command is refused in one line and no JVM starts (Spark's start-up
    line never appears; a refused replay used to cost a JVM start). A replay of another day
    is not held up by it."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from storage.writer_lock import replay_lock

    warehouse = tmp_path / "wh"  # a warehouse the CLI accepts: a Delta table, made without Spark
    write_deltalake(str(warehouse / "event_log"), pa.table({"event_id": ["e1"]}))
    with replay_lock(warehouse, date(2026, 1, 1)):
        proc = _start(["replay", "--warehouse", str(warehouse), "--date", "2026-01-01"],
                      tmp_path)
        _, err = proc.communicate(timeout=120)
        with replay_lock(warehouse, date(2026, 1, 2)):
            pass  # another day's lock is free
    assert proc.returncode == 4, err
    assert err.strip().splitlines()[-1].startswith(
        "reckon replay: error: replay of 2026-01-01 refused: replay of 2026-01-01 (pid "), err
    assert "log4j" not in err and "SparkContext" not in err  # Spark never started


@pytest.mark.slow
def test_two_streams_and_two_replays_started_together(spark, tmp_path):
    """One wins, the other exits with one line and writes nothing; the tables equal a single
    run's. The landing is two batches of eight events and a late one: the second batch moves
    the watermark past [0, 10) (window 10 s, bound 3 s), so the last event is late: windows
    closed, a late row, a replayed day, as with more batches, which would only repeat that at
    seconds of CPU each in the winner's JVM and in the single run."""
    from spark.replay import replay_day
    from spark.sources import StreamSource
    from spark.stream import run_stream
    from tests.scenarios import ev
    from tests.stream_chaos import VOLATILE, table_snapshot
    from tests.streamkit import stream_settings, write_landing

    landing = tmp_path / "landing"
    write_landing(landing, [[ev(t, t + 1, key=f"m{t % 3}") for t in range(b * 10, b * 10 + 8)]
                            for b in range(2)] + [[ev(3, 60)]])
    raced, single = tmp_path / "raced", tmp_path / "single"

    codes, lines = _race(["stream", "--landing", str(landing), "--warehouse", str(raced),
                          "--available-now"], tmp_path)
    assert sorted(codes) == [0, 4], lines
    refused = lines[codes.index(4)]
    assert refused.startswith(f"reckon stream: error: reckon stream of landing folder "
                              f"{landing} refused: the warehouse {raced} is already written "
                              f"by reckon stream of landing folder {landing} (pid "), refused
    run_stream(spark, stream_settings(single), StreamSource(landing=str(landing)), on_batch=None)
    for name in VOLATILE:
        assert table_snapshot(spark, raced, name) == table_snapshot(spark, single, name), name

    day = "2026-01-01"
    codes, lines = _race(["replay", "--warehouse", str(raced), "--date", day], tmp_path)
    assert sorted(codes) == [0, 4], lines
    assert f"replay of {day} refused: replay of {day} (pid " in lines[codes.index(4)]
    replay_day(spark, stream_settings(single).replay_config(), date(2026, 1, 1))
    raced_rows, single_rows = ([r[:-1] for r in table_snapshot(spark, wh, "canonical_totals")]
                               for wh in (raced, single))  # without the replay_id
    assert raced_rows == single_rows and raced_rows
    assert spark.read.format("delta").load(str(raced / "replay_runs")).count() == 1


def test_a_stream_whose_lock_file_is_deleted_stops_in_one_line(spark, tmp_path):
    """Issue 60 probe: the stream stopped correctly but printed a 187-line trace."""
    from tests.scenarios import ev
    from tests.streamkit import write_landing

    landing, wh = tmp_path / "landing", tmp_path / "wh"
    write_landing(landing, [[ev(1, 1)]])
    stream = _start(["stream", "--landing", str(landing), "--warehouse", str(wh),
                     "--trigger", "1s"], tmp_path)
    committed = wh / "_checkpoints" / "stream-landing" / "commits" / "0"
    deadline = time.monotonic() + 240
    while not committed.exists():
        assert stream.poll() is None and time.monotonic() < deadline, stream.stderr
        time.sleep(0.5)
    (wh / "_locks" / "stream.lock").unlink()  # by hand
    write_landing(landing, [[ev(2, 2)]], start=1)  # the next batch
    _, err = stream.communicate(timeout=240)
    assert stream.returncode == 4, err
    assert "Traceback" not in err and "at org.apache" not in err and " ERROR " not in err, err
    ours = [line for line in err.splitlines() if line.startswith("reckon")]
    assert len(ours) == 1 and ours[0].startswith("reckon stream: error: ") and \
        "was deleted or replaced while this process held it" in ours[0], err
