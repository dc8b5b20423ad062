"""Every file in a landing dir is read or reported (storage.landing).

Fast tier: which names are read, and what the stream says about the others. Spark tier, as
producers leave a landing dir: .ndjson, .jsonl and .json files are all read; a CSV, a gzip, a
file still being written under a hidden name, the generator's _manifest.json and a folder are
named with their reason and counted; an empty landing dir says "0 files to read"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.cli import main
from app.settings import load_settings
from reckon.reference import stream_outcome
from storage.landing import survey, unread_reason
from tests.scenarios import ev
from tests.streamkit import event_line

FILE_MTIME = 1_800_000_000  # one modification time for a whole drop


@pytest.mark.parametrize(("name", "read"), [
    ("events-000001.ndjson", True), ("a.jsonl", True), ("b.json", True),
    ("C.JSON", False), ("day.ndjson.gz", False), ("notes.txt", False), ("x.csv", False),
    (".events-2.ndjson", False), ("_manifest.json", False), ("events.ndjson.tmp", False),
])
def test_which_names_are_read(name: str, read: bool) -> None:
    assert (unread_reason(name) is None) == read


def test_a_survey_names_every_file_it_will_not_read(tmp_path: Path) -> None:
    for name in ("e1.ndjson", "e2.jsonl", "notes.txt", "day.ndjson.gz", "_manifest.json"):
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "older").mkdir()
    found = survey(tmp_path)
    assert found.event_files == 2
    assert [name for name, _ in found.unread] == ["_manifest.json", "day.ndjson.gz", "notes.txt",
                                                 "older"]
    text = found.describe()
    assert text.startswith(f"landing {tmp_path}: 2 event files (.ndjson, .jsonl, .json); "
                           "4 not read: _manifest.json (hidden: ")
    assert "day.ndjson.gz (compressed: reckon reads plain text; decompress it" in text
    assert "older (a folder: the landing dir is read one level deep)" in text


def test_an_empty_landing_dir_says_0_files(tmp_path: Path) -> None:
    assert survey(tmp_path).describe() == (
        f"landing {tmp_path}: 0 event files (.ndjson, .jsonl, .json), 0 files to read")


# ----------------------------------------------------------------------------- Spark tier


def test_the_stream_reads_every_event_extension_and_reports_the_rest(spark, tmp_path, capsys,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    landing, wh = tmp_path / "landing", tmp_path / "wh"
    landing.mkdir()
    files = {"a.ndjson": [ev(1, 1)], "b.jsonl": [ev(2, 2)], "c.json": [ev(3, 3)],
             "notes.txt": [ev(4, 4)], "d.ndjson.gz": [ev(5, 5)], ".e.ndjson": [ev(6, 6)],
             "_manifest.json": [ev(7, 7)]}
    for name, events in files.items():
        (landing / name).write_text("".join(event_line(e) + "\n" for e in events))
    (landing / "archive").mkdir()

    assert main(["stream", "--landing", str(landing), "--warehouse", str(wh),
                 "--available-now"]) == 0
    err = capsys.readouterr().err
    assert (f"[stream] landing {landing}: 3 event files (.ndjson, .jsonl, .json); 5 not read: "
            ".e.ndjson (hidden: ") in err
    for name in ("_manifest.json (hidden", "archive (a folder", "d.ndjson.gz (compressed",
                 "notes.txt (not an event file"):
        assert name in err
    read = {r.input_file.rsplit("/", 1)[-1] for r in
            spark.read.format("delta").load(str(wh / "event_log")).select("input_file")
            .distinct().collect()}
    assert read == {"a.ndjson", "b.jsonl", "c.json"}


def test_an_empty_landing_dir_streams_nothing_and_says_so(spark, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    landing = tmp_path / "landing"
    landing.mkdir()
    assert main(["stream", "--landing", str(landing), "--warehouse", str(tmp_path / "wh"),
                 "--available-now"]) == 0
    assert (f"[stream] landing {landing}: 0 event files (.ndjson, .jsonl, .json), 0 files to "
            "read") in capsys.readouterr().err


def test_files_with_one_mtime_are_streamed_in_name_order(spark, tmp_path, capsys, monkeypatch):
    """Nine one-line files with one modification time (a tar extraction), written in scrambled
    order, one file a micro-batch: each batch takes the next file by name, so the late events
    are the ones the name order makes late (docs/semantics.md's example)."""
    monkeypatch.chdir(tmp_path)
    landing, wh = tmp_path / "landing", tmp_path / "wh"
    landing.mkdir()
    events = [ev(t, i) for i, t in enumerate([1, 3, 7, 12, 15, 8, 22, 26, 4], start=1)]
    names = [f"events-{i:04d}.ndjson" for i in range(1, 10)]
    for i in (9, 2, 7, 4, 1, 6, 3, 8, 5):  # the order a producer happened to write them in
        (landing / names[i - 1]).write_text(event_line(events[i - 1]) + "\n")
        os.utime(landing / names[i - 1], (FILE_MTIME, FILE_MTIME))

    assert main(["stream", "--landing", str(landing), "--warehouse", str(wh),
                 "--max-files-per-trigger", "1", "--available-now"]) == 0
    log = spark.read.format("delta").load(str(wh / "event_log"))
    batch_of = {r.input_file: r.batch_id for r in log.select("input_file", "batch_id").collect()}
    assert batch_of == {f"file:{landing / name}": i for i, name in enumerate(names)}
    expected = stream_outcome([[e] for e in events],
                          load_settings(env={}, warehouse=str(wh)).event_time_rules())
    late = spark.read.format("delta").load(str(wh / "late_events")).select("event_id").collect()
    assert sorted(r.event_id for r in late) == sorted(r.event.event_id for r in expected.late)
    assert expected.late  # the order decides something
    assert {p.stat().st_mtime for p in landing.iterdir()} == {FILE_MTIME}  # landing untouched
    assert not list((wh / "_checkpoints" / "stream-landing" / "admitted" / "files").iterdir())


def test_a_link_a_fifo_and_a_socket_neither_stop_nor_feed_the_stream(spark, tmp_path, capsys,
                                                                     monkeypatch):
    """Issue 60 probe, as it was run: `landing/x.ndjson -> /etc/passwd` put the file's lines in
    quarantine; a FIFO named .ndjson stopped the stream's start."""
    import socket

    monkeypatch.chdir(tmp_path)
    landing, wh = tmp_path / "landing", tmp_path / "wh"
    landing.mkdir()
    (landing / "a.ndjson").write_text(event_line(ev(1, 1)) + "\n")
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    os.symlink(secret, landing / "x.ndjson")
    os.mkfifo(landing / "pipe.ndjson")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(landing / "sock.ndjson"))
    server.close()

    assert main(["stream", "--landing", str(landing), "--warehouse", str(wh),
                 "--available-now"]) == 0
    err = capsys.readouterr().err
    assert f"[stream] landing {landing}: 1 event file (.ndjson, .jsonl, .json); 3 not read: " in err
    for name in ("pipe.ndjson (a FIFO", "sock.ndjson (a socket", "x.ndjson (a symbolic link"):
        assert name in err
    read = {r.input_file.rsplit("/", 1)[-1] for r in
            spark.read.format("delta").load(str(wh / "event_log")).select("input_file")
            .distinct().collect()}
    assert read == {"a.ndjson"}
    quarantine = wh / "quarantine"
    if quarantine.exists():
        payloads = spark.read.format("delta").load(str(quarantine)).collect()
        assert not [r for r in payloads if "root:x:0:0" in str(r)]
