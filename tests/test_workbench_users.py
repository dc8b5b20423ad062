"""``reckon users add`` as an operator meets it (fast tier, no Spark): the password asked on a
terminal, piped on standard input (``--password-stdin``, as ``docker login``) or named in the
environment, and a name that looks like an existing user's refused in one line (the
reckon.identity rule the four-eyes check uses). Each runs the real CLI: ``app.cli.main``,
or a child process on a pipe or a pseudo-terminal."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli import main
from reports.db.repository import ReportDB
from workbench.auth import find_user

PASSWORD = "correct horse battery staple"
ROOT = Path(__file__).resolve().parent.parent


def _reckon(args: list[str], **kwargs) -> subprocess.Popen:
    """``reckon ARGS`` in its own process, as a shell would start it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECKON_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())",
         *args], env=env, **kwargs)


def _user(wh: Path, name: str, password: str) -> object:
    with ReportDB(f"sqlite:///{wh / 'reports' / 'reckon.db'}") as db:
        return find_user(db, name, password)


def test_password_piped_on_standard_input(tmp_path: Path) -> None:
    """`printf 'pw\\n' | reckon users add bob --password-stdin`: the final line ending is not
    part of the password; bob logs in with it."""
    wh = tmp_path / "wh"
    child = _reckon(["users", "add", "bob", "--password-stdin", "--warehouse", str(wh)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True)
    out, err = child.communicate(PASSWORD + "\n", timeout=60)
    assert child.returncode == 0, err
    assert out == "user bob (reviewer) may log in to the workbench\n"
    assert _user(wh, "bob", PASSWORD) is not None
    assert _user(wh, "bob", PASSWORD + "\n") is None


def _read_until(fd: int, text: bytes, timeout: float = 60.0) -> bytes:
    """What the terminal shows up to and including ``text``."""
    seen, deadline = b"", time.monotonic() + timeout
    while text not in seen:
        left = deadline - time.monotonic()
        assert left > 0, seen
        if select.select([fd], [], [], left)[0]:
            try:
                seen += os.read(fd, 1024)
            except OSError:  # the child closed the terminal
                break
    return seen


def test_password_asked_twice_on_a_terminal_without_echo(tmp_path: Path) -> None:
    """On a terminal `reckon users add` asks (getpass: nothing echoed) and asks again."""
    wh = tmp_path / "wh"
    leader, follower = pty.openpty()
    child = _reckon(["users", "add", "bob", "--role", "auditor", "--warehouse", str(wh)],
                    stdin=follower, stdout=follower, stderr=follower, start_new_session=True)
    os.close(follower)
    try:
        _read_until(leader, b"password for bob: ")
        os.write(leader, PASSWORD.encode() + b"\n")
        _read_until(leader, b"again: ")
        os.write(leader, PASSWORD.encode() + b"\n")
        shown = _read_until(leader, b"may log in to the workbench")
        assert child.wait(timeout=60) == 0
    finally:
        os.close(leader)
        if child.poll() is None:
            child.kill()
    assert b"user bob (auditor) may log in" in shown and PASSWORD.encode() not in shown
    assert _user(wh, "bob", PASSWORD) is not None


@pytest.mark.parametrize(("stdin", "flags", "words"), [
    ("", ["--password-stdin"], "--password-stdin: standard input was empty"),
    ("one\ntwo\n", ["--password-stdin"], "more than one line"),
    (PASSWORD, ["--password-stdin", "--password-env", "PW"], "not both"),
    ("", [], "no terminal to ask the password on: give --password-stdin"),
    ("short\n", ["--password-stdin"], "the password is too short"),
])
def test_a_password_mistake_is_one_line_and_adds_nobody(tmp_path: Path, monkeypatch, capsys,
                                                        stdin: str, flags: list[str],
                                                        words: str) -> None:
    monkeypatch.setenv("PW", PASSWORD)
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))  # a pipe: not a terminal
    wh = tmp_path / "wh"
    assert main(["users", "add", "bob", *flags, "--warehouse", str(wh)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and words in err and "Traceback" not in err
    if (wh / "reports" / "reckon.db").exists():
        assert _user(wh, "bob", PASSWORD) is None


def test_a_look_alike_of_an_existing_user_is_refused_naming_them(tmp_path: Path,
                                                                 monkeypatch, capsys) -> None:
    """Cyrillic `r\\u043e\\u043et` next to `root` was a second user: the four-eyes rule takes
    them for one person, a reader of the log for two."""
    monkeypatch.setenv("PW", PASSWORD)
    add = ["--password-env", "PW", "--warehouse", str(tmp_path / "wh")]
    assert main(["users", "add", "root", *add]) == 0
    capsys.readouterr()
    for look_alike in ("r\u043e\u043et", "R00T", "\uff52\uff4f\uff4f\uff54", "ro\u200bot"):
        assert main(["users", "add", look_alike, *add]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, err
        assert f"user name {look_alike!a} looks like the existing user 'root'" in err
    assert main(["users", "add", "root", *add]) == 0  # the same name updates root
    assert main(["users", "add", "rob", *add]) == 0  # a different name is a different user
    capsys.readouterr()
    assert main(["users", "list", "--warehouse", str(tmp_path / "wh")]) == 0
    assert capsys.readouterr().out == "rob\treviewer\nroot\treviewer\n"
