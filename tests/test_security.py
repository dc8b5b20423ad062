"""Security basics, fast tier (no Spark):

- no secrets in the repository: tracked (and new, not ignored) files hold no password-like
  literal, credential in a URL or private key, except ``${VAR}`` interpolations, placeholders
  (``...``) and throwaway values in tests/;
- the report database's SQL is built from SQLAlchemy constructs with bound parameters: no
  f-string, ``%`` or ``.format`` text reaches ``text()``, ``execute()`` or ``exec_driver_sql()``;
- `reckon sql` is read-only (DDL/DML refusal: tests/test_sql.py) and must not read files outside
  the warehouse through path identifiers (``csv.`/etc/passwd```) or file-reading functions;
- `reckon generate --out` writes where the user says and refuses to overwrite event files.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from app.cli import main
from reckon.errors import UsageError
from reckon.sql_guard import check_read_only

ROOT = Path(__file__).resolve().parent.parent

# ----------------------------------------------------------------------------- secrets

_NAME = (r"[\w.-]*(?:password|passwd|secret|token|api[_-]?key|private[_-]?key|fernet[_-]?key"
         r"|access[_-]?key)[\w.-]*")
_ASSIGN = re.compile(rf"""(?i)(?P<name>\b{_NAME})['"]?\s*(?P<sep>[:=])\s*(?P<q>['"]?)"""
                     r"""(?P<value>[^'"\s#,;)}]*)""")
_URL_CREDS = re.compile(r"""[a-z][a-z0-9+.-]*://[^/\s:@'"]+:(?P<value>[^@\s'"/]+)@""")
_KEYS = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----|\bAKIA[0-9A-Z]{16}\b|\bghp_[A-Za-z0-9]{30,}"
                   r"|\bxox[bpas]-[A-Za-z0-9-]{10,}")
_PLACEHOLDERS = {"", "...", "***", "none", "null", "true", "false", "changeit-in-env"}


def _is_placeholder(value: str) -> bool:
    v = value.strip().lower()
    return v in _PLACEHOLDERS or v.startswith(("$", "<", "?")) or set(v) <= {".", "*", "x"}


def secret_findings(path: str, text: str) -> list[str]:
    """Lines of ``text`` (the file ``path``) that look like a committed secret."""
    if path.startswith("tests/"):  # throwaway values for servers the tests start themselves
        return []
    python = path.endswith(".py")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for m in _ASSIGN.finditer(line):
            if line[max(0, m.start() - 2):m.start()] == "${":  # inside ${NAME:?...}
                continue
            if m["sep"] == ":" and m["q"] and re.match(r":\s*'\w+'", line[m.start("sep"):]) \
                    and "PASSWORD :'" in line.upper():  # psql variable  PASSWORD :'var'
                continue
            if python and not m["q"]:  # an expression, not a literal
                continue
            if not _is_placeholder(m["value"]):
                found.append(f"{path}:{number}: {m['name']} = {m['value'][:4]}...")
        for m in _URL_CREDS.finditer(line):
            if not _is_placeholder(m["value"]):
                found.append(f"{path}:{number}: credentials in a URL")
        if _KEYS.search(line):
            found.append(f"{path}:{number}: a private key or access token")
    return found


def _repository_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if (ROOT / f).is_file()]


def test_secret_scanner_flags_literals_and_passes_interpolations():
    assert secret_findings("x.py", 'db_password = "hunter2"')
    assert secret_findings("x.py", 'connect(password="hunter2")')
    assert secret_findings("docker-compose.yml", "  POSTGRES_PASSWORD: hunter2")
    assert secret_findings("reckon.toml", 'report_db_url = "postgresql+psycopg://u:hunter2@h/db"')
    assert secret_findings("a.sh", "-----BEGIN RSA PRIVATE KEY-----")
    assert not secret_findings("docker-compose.yml", "  POSTGRES_PASSWORD: ${POSTGRES_PASSWORD:?set}")
    assert not secret_findings("x.yml", "url: postgresql://reckon:${RECKON_DB_PASSWORD}@pg/db")
    assert not secret_findings("README.md", "export POSTGRES_PASSWORD=... docker compose up")
    assert not secret_findings("x.py", "password = os.environ['DB_PASSWORD']")
    assert not secret_findings("init.sh", "CREATE ROLE r LOGIN PASSWORD :'reckon_pw';")
    assert not secret_findings("tests/pg_server.py", 'password = "throwaway"')


def test_no_secrets_in_the_repository():
    files = _repository_files()
    assert len(files) > 50 and "docker-compose.yml" in files
    findings = []
    for path in files:
        try:
            text = (ROOT / path).read_text()
        except UnicodeDecodeError:  # binary files (fonts, images)
            continue
        findings += secret_findings(path, text)
    assert findings == [], "possible secrets committed:\n" + "\n".join(findings)


# ----------------------------------------------------------------------------- report DB SQL

_SQL_SINKS = {"text", "execute", "exec_driver_sql", "executescript"}


def _built_string(node: ast.AST) -> bool:
    """An f-string, a % or + over strings, or a .format() call: text built from values."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
        return any(isinstance(n, ast.Constant | ast.JoinedStr) and
                   isinstance(getattr(n, "value", ""), str) for n in (node.left, node.right))
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format")


def sql_injection_risks(source: str, path: str = "<src>") -> tuple[list[str], int]:
    """(calls that pass built text to a SQL sink, number of SQL sink calls seen)."""
    risks, sinks = [], 0
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in _SQL_SINKS:
            continue
        sinks += 1
        first = node.args[0]
        if _built_string(first) or (name == "text" and not (
                isinstance(first, ast.Constant) and isinstance(first.value, str))):
            risks.append(f"{path}:{node.lineno}: {name}() gets text built at run time")
    return risks, sinks


def test_sql_scanner_flags_built_text():
    assert sql_injection_risks('sa.text(f"SELECT * FROM t WHERE id = {x}")')[0]
    assert sql_injection_risks('conn.execute("DELETE FROM t WHERE k = %s" % k)')[0]
    assert sql_injection_risks('conn.exec_driver_sql("SELECT {}".format(v))')[0]
    assert sql_injection_risks("sa.text(query)")[0]
    assert sql_injection_risks('sa.text("LOCK TABLE t IN EXCLUSIVE MODE")') == ([], 1)
    assert sql_injection_risks("conn.execute(sa.select(t).where(t.c.id == x))") == ([], 1)


def test_report_db_sql_uses_bound_parameters():
    files = sorted((ROOT / "reports").rglob("*.py"))
    assert ROOT / "reports" / "db" / "repository.py" in files
    risks, sinks = [], 0
    for path in files:
        found, n = sql_injection_risks(path.read_text(), str(path.relative_to(ROOT)))
        risks += found
        sinks += n
    assert sinks >= 10, "the scan saw almost no SQL calls: is it looking at the right code?"
    assert risks == [], "SQL text built from values (use bound parameters):\n" + "\n".join(risks)


# ----------------------------------------------------------------------------- reckon sql

FILE_READS = [
    "SELECT * FROM csv.`/etc/passwd`",
    "SELECT * FROM text.`/etc/passwd`",
    "SELECT * FROM parquet.`/etc/`",
    "SELECT * FROM json.`/etc/hostname`",
    "SELECT * FROM `csv`.`/etc/passwd`",
    "SELECT * FROM binaryFile.`/etc/ssl`",
    "SELECT * FROM delta.`/tmp/another-warehouse/provisional_totals`",
    "SELECT * FROM read_files('/etc/passwd', format => 'text')",
    "SELECT * FROM provisional_totals p JOIN text.`/etc/shadow` s ON true",
]


@pytest.mark.parametrize("query", FILE_READS)
def test_sql_refuses_reading_files_outside_the_warehouse(query):
    try:
        check_read_only(query)
    except UsageError:
        return
    raise AssertionError(f"`reckon sql` would read a file outside the warehouse: {query}")


def test_sql_still_refuses_writes():
    """Spot check only; tests/test_sql.py covers DDL/DML refusal in depth."""
    with pytest.raises(UsageError, match="read-only"):
        check_read_only("INSERT INTO event_log SELECT * FROM event_log")


# ----------------------------------------------------------------------------- user paths


def test_generate_writes_where_the_user_says_and_never_over_event_files(tmp_path, monkeypatch,
                                                                        capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "deep" / "landing"
    args = ["generate", "--out", str(out), "--events", "40", "--lines-per-file", "20",
            "--partitions", "2", "--keys", "3"]
    assert main(args) == 0
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert written and all(p.parts[:2] == ("deep", "landing") for p in written), written
    before = {p: p.read_bytes() for p in out.iterdir()}
    assert main([*args, "--seed", "99"]) != 0  # refuses: the folder holds event files
    assert "generate" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.iterdir()} == before
