"""Landing admission (storage.admission): what lands is admitted in file-name order, with
modification times strictly increasing in that order, whatever the files' own times."""

from __future__ import annotations

import itertools
import json
import os
import socket
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from storage.admission import LandedFile, LandingAdmitter, admission_plan
from storage.landing import SYMLINK_REASON, survey

MTIME = 1_800_000_000  # seconds


def _drop(folder: Path, names: list[str], mtime: int = MTIME) -> None:
    """Files as a tar extraction leaves them: written in any order, one modification time."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(json.dumps({"file": name}) + "\n")
        os.utime(folder / name, (mtime, mtime))


def _spark_order(files_dir: Path) -> list[str]:
    """The order Spark's file source takes files in: by modification time (ms)."""
    return [e.name for e in sorted(os.scandir(files_dir),
                                   key=lambda e: e.stat().st_mtime_ns // 1_000_000)
            if not e.name.startswith(".")]


landed_files = st.lists(
    st.builds(LandedFile, name=st.text("abc0123", min_size=1, max_size=4).map(lambda s: s + ".ndjson"),
              mtime_ms=st.integers(0, 50), size=st.integers(0, 9)),
    max_size=12, unique_by=lambda f: f.name)


@given(landed_files, st.integers(-1, 60), st.sets(st.text("abc0123", min_size=1, max_size=4)
                                                  .map(lambda s: s + ".ndjson")))
def test_a_plan_admits_new_files_in_name_order_with_rising_times(landed, last, admitted):
    plan = admission_plan(landed, admitted, last)
    new = sorted(f.name for f in landed if f.name not in admitted)
    assert [a.name for a in plan] == new
    times = [last] + [a.mtime_ms for a in plan]
    assert all(earlier < later for earlier, later in itertools.pairwise(times))
    own = {f.name: f.mtime_ms for f in landed}
    for a in plan:  # never earlier than the file's own time; kept when it fits
        assert a.mtime_ms >= own[a.name]
        assert a.keeps_own_time == (a.mtime_ms == own[a.name])


def test_a_bulk_drop_with_one_mtime_is_admitted_in_name_order(tmp_path: Path) -> None:
    names = [f"events-{i:04d}.ndjson" for i in (7, 1, 9, 3, 2, 8, 4, 6, 5)]
    _drop(tmp_path / "landing", names)
    admitter = LandingAdmitter(tmp_path / "landing", tmp_path / "cp" / "admitted")
    assert admitter.admit() == 9
    assert _spark_order(admitter.files_dir) == sorted(names)
    # the landing dir is left as the producer left it
    assert {p.stat().st_mtime for p in (tmp_path / "landing").iterdir()} == {MTIME}
    assert admitter.admit() == 0


def test_a_later_file_is_admitted_later_whatever_its_name(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    _drop(landing, ["b.ndjson", "c.ndjson"])
    admitter = LandingAdmitter(landing, tmp_path / "admitted")
    admitter.admit()
    _drop(landing, ["a.ndjson"], mtime=MTIME - 100)  # an older time and an earlier name
    assert admitter.admit() == 1
    assert _spark_order(admitter.files_dir) == ["b.ndjson", "c.ndjson", "a.ndjson"]


def test_only_event_files_are_admitted(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    _drop(landing, ["a.jsonl", "b.json", "c.ndjson", "d.csv", "e.ndjson.gz", ".f.ndjson",
                    "_manifest.json"])
    admitter = LandingAdmitter(landing, tmp_path / "admitted")
    assert admitter.admit() == 3
    assert sorted(os.listdir(admitter.files_dir)) == ["a.jsonl", "b.json", "c.ndjson"]


def test_a_file_whose_own_time_fits_is_linked_not_copied(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    for i, name in enumerate(["a.ndjson", "b.ndjson"]):
        _drop(landing, [name], mtime=MTIME + i)
    _drop(landing, ["c.ndjson"], mtime=MTIME)  # older than b: admitted after it, as a copy
    admitter = LandingAdmitter(landing, tmp_path / "admitted")
    admitter.admit()
    inode = {name: (admitter.files_dir / name).stat().st_ino for name in ("a.ndjson", "b.ndjson", "c.ndjson")}
    assert inode["a.ndjson"] == (landing / "a.ndjson").stat().st_ino
    assert inode["b.ndjson"] == (landing / "b.ndjson").stat().st_ino
    assert inode["c.ndjson"] != (landing / "c.ndjson").stat().st_ino
    assert (admitter.files_dir / "c.ndjson").read_text() == (landing / "c.ndjson").read_text()
    assert (landing / "c.ndjson").stat().st_mtime == MTIME
    assert _spark_order(admitter.files_dir) == ["a.ndjson", "b.ndjson", "c.ndjson"]


def test_a_restart_admits_nothing_twice_and_keeps_the_order(tmp_path: Path) -> None:
    landing, state = tmp_path / "landing", tmp_path / "admitted"
    _drop(landing, ["a.ndjson", "b.ndjson"])
    first = LandingAdmitter(landing, state)
    first.admit()
    for name in ("a.ndjson", "b.ndjson"):  # Spark read and deleted them (cleanSource)
        (first.files_dir / name).unlink()
    _drop(landing, ["c.ndjson"])
    again = LandingAdmitter(landing, state)
    assert again.admit() == 1
    assert os.listdir(again.files_dir) == ["c.ndjson"]
    log = [json.loads(line) for line in (state / "log.jsonl").read_text().splitlines()]
    assert [e["name"] for e in log] == ["a.ndjson", "b.ndjson", "c.ndjson"]
    assert [e["mtime_ms"] for e in log] == sorted({e["mtime_ms"] for e in log})


def test_a_file_placed_but_not_logged_before_a_crash_counts_as_admitted(tmp_path: Path) -> None:
    landing, state = tmp_path / "landing", tmp_path / "admitted"
    _drop(landing, ["a.ndjson", "b.ndjson"])
    LandingAdmitter(landing, state).admit()
    log = state / "log.jsonl"
    log.write_text(log.read_text().splitlines()[0] + "\n")  # b's line lost in the crash
    (state / "files" / ".c.ndjson.admitting").write_text("half")  # a copy cut short
    again = LandingAdmitter(landing, state)
    assert again.admit() == 0
    assert not (state / "files" / ".c.ndjson.admitting").exists()
    assert [json.loads(line)["name"] for line in log.read_text().splitlines()] == [
        "a.ndjson", "b.ndjson"]


def test_a_file_that_grows_after_admission_is_reported_once(tmp_path: Path, capsys) -> None:
    landing = tmp_path / "landing"
    _drop(landing, ["a.ndjson"])
    admitter = LandingAdmitter(landing, tmp_path / "admitted")
    admitter.admit()
    os.unlink(admitter.files_dir / "a.ndjson")  # read and cleaned
    with (landing / "a.ndjson").open("a") as f:
        f.write('{"more": 1}\n')
    assert admitter.admit() == 0
    admitter.admit()
    err = capsys.readouterr().err
    assert err.count("a.ndjson changed after it was admitted (21 bytes then, 33 now): each file "
                     "is read once, so what changed after its batch read it is not read") == 1
    assert "rename it when complete" in err


def _hostile_landing(tmp_path: Path) -> Path:
    """A landing dir holding one event file and every kind of entry that is not one: a link
    to a file outside (/etc/passwd's stand-in), a link to an event file inside, a FIFO, a unix
    socket, all named as event files."""
    landing = tmp_path / "landing"
    _drop(landing, ["good.ndjson"])
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    os.symlink(secret, landing / "x.ndjson")
    os.symlink(landing / "good.ndjson", landing / "inside.ndjson")
    os.mkfifo(landing / "pipe.ndjson")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(landing / "sock.ndjson"))
    server.close()
    return landing


def test_admission_reads_regular_files_only(tmp_path: Path, capsys) -> None:
    """Issue 60 probe: a link to /etc/passwd put its lines in quarantine, a FIFO named .ndjson
    stopped the stream's start (SpecialFileError) or was read as 0 rows unreported."""
    landing = _hostile_landing(tmp_path)
    admitter = LandingAdmitter(landing, tmp_path / "cp" / "admitted")
    assert admitter.admit() == 1  # returns: the FIFO blocks nothing
    assert os.listdir(admitter.files_dir) == ["good.ndjson"]
    assert (admitter.files_dir / "good.ndjson").read_text() == '{"file": "good.ndjson"}\n'
    found = survey(landing)  # the stream's start line, and each batch's, say why
    assert found.event_files == 1
    assert dict(found.unread) == {
        "inside.ndjson": SYMLINK_REASON, "x.ndjson": SYMLINK_REASON,
        "pipe.ndjson": "a FIFO: reckon reads regular files only (a FIFO blocks the reader "
                       "until written)",
        "sock.ndjson": "a socket: reckon reads regular files only"}
    assert "4 not read: inside.ndjson (a symbolic link: " in found.describe()


def test_a_file_swapped_for_a_link_after_the_listing_is_not_read(tmp_path: Path,
                                                                capsys) -> None:
    landing = tmp_path / "landing"
    _drop(landing, ["a.ndjson", "b.ndjson"])
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0\n")
    admitter = LandingAdmitter(landing, tmp_path / "admitted")
    listing = admitter._listing()
    (landing / "a.ndjson").unlink()
    os.symlink(secret, landing / "a.ndjson")  # between the look and the read
    (landing / "b.ndjson").unlink()
    os.mkfifo(landing / "b.ndjson")
    for a in admission_plan(listing, set(), 0):
        assert admitter._place(a) is False
    assert os.listdir(admitter.files_dir) == []
    err = capsys.readouterr().err
    assert f"[stream] landing {landing}: a.ndjson is not a regular file (a symbolic link" in err
    assert f"[stream] landing {landing}: b.ndjson is not a regular file (a FIFO" in err
