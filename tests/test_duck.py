"""Fast tier: `reckon sql` on DuckDB (reports/duck.py), as a user meets it -- no JVM.

The warehouse here is written by delta-rs itself (no Spark), with the tables' real column
types (DECIMAL(38,3) amounts, UTC timestamps). The differential test against Spark, on a
streamed warehouse, is tests/test_duck_spark.py.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main

pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
T1 = datetime(2026, 3, 1, 10, 0, 10, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")
MONEY = pa.decimal128(38, 3)


def _recon(rows: list[tuple[str, str, str, str]]) -> pa.Table:
    """reconciliation rows (key, currency, provisional, canonical), gap = canonical - prov."""
    return pa.table({
        "window_start": pa.array([T0] * len(rows), TS),
        "window_end": pa.array([T1] * len(rows), TS),
        "key": [r[0] for r in rows], "currency": [r[1] for r in rows],
        "provisional_total": pa.array([Decimal(r[2]) for r in rows], MONEY),
        "canonical_total": pa.array([Decimal(r[3]) for r in rows], MONEY),
        "gap": pa.array([Decimal(r[3]) - Decimal(r[2]) for r in rows], MONEY),
        "status": ["MATCH" if r[2] == r[3] else "UNEXPLAINED" for r in rows],
        "window_date": pa.array([date(2026, 3, 1)] * len(rows), pa.date32()),
    })


@pytest.fixture()
def wh(tmp_path: Path) -> Path:
    """A warehouse delta-rs wrote: reconciliation at version 0 (two rows) and 1 (three)."""
    from deltalake import write_deltalake

    path = tmp_path / "wh"
    table = str(path / "reconciliation")
    write_deltalake(table, _recon([("k1", "EUR", "1.10", "1.10"), ("k2", "JPY", "5", "7")]))
    write_deltalake(table, _recon([("k1", "EUR", "1.10", "1.10"), ("k2", "JPY", "5", "7"),
                                   ("k3", "KWD", "0.125", "0.126")]), mode="overwrite")
    return path


def _md5s(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _sql(capsys, wh: Path, *args: str) -> tuple[int, str, str]:
    code = main(["sql", "--warehouse", str(wh), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_count_answers_without_a_jvm_from_the_real_command(wh):
    """The installed command in its own process: the right count, and pyspark never
    imported (so no JVM could start)."""
    script = ("import sys; from app.cli import main; "
              f"rc = main(['sql', '--warehouse', {str(wh)!r}, '--json', "
              "'SELECT count(*) AS n FROM reconciliation']); "
              "print('pyspark' in sys.modules, rc)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False, cwd=ROOT)
    assert done.stderr == ""
    rows, imported = done.stdout.rsplit("\n", 2)[0], done.stdout.splitlines()[-1]
    assert json.loads(rows) == [{"n": 3}]
    assert imported == "False 0"


def test_a_misspelled_table_is_named_with_the_list_of_tables(wh):
    done = subprocess.run([sys.executable, "-m", "app.cli", "sql", "--warehouse", str(wh),
                           "SELECT count(*) FROM reconcilation"], capture_output=True,
                          text=True, timeout=120, check=False, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("reckon sql: error: query failed: no table named "
                                  "reconcilation")
    assert "reconciliation" in done.stderr and "provisional_totals" in done.stderr


def test_a_table_this_warehouse_has_not_written_yet_names_those_it_has(wh, capsys):
    code, out, err = _sql(capsys, wh, "SELECT count(*) FROM late_events")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "this warehouse has no late_events yet (tables here: reconciliation)" in err
    code, out, _ = _sql(capsys, wh, "SHOW TABLES")
    assert code == 0 and out.split()[2:3] == ["reconciliation"]


def test_decimals_stay_exact_and_times_are_utc(wh, capsys):
    code, out, _ = _sql(capsys, wh, "--json", "SELECT key, currency, gap, window_start "
                        "FROM reconciliation WHERE gap <> 0 ORDER BY key")
    assert code == 0
    assert json.loads(out) == [
        {"key": "k2", "currency": "JPY", "gap": "2.000", "window_start": "2026-03-01T10:00:00Z"},
        {"key": "k3", "currency": "KWD", "gap": "0.001", "window_start": "2026-03-01T10:00:00Z"}]


def test_time_travel_reads_the_version_asked_for(wh, capsys):
    code, out, _ = _sql(capsys, wh, "--json", "SELECT n.key FROM reconciliation n LEFT JOIN "
                        "reconciliation VERSION AS OF 0 o ON n.key = o.key WHERE o.key IS NULL")
    assert code == 0 and json.loads(out) == [{"key": "k3"}]
    code, out, _ = _sql(capsys, wh, "--json", "SELECT count(*) AS n FROM reconciliation "
                        "FOR SYSTEM_VERSION AS OF 0")
    assert json.loads(out) == [{"n": 2}]
    code, out, _ = _sql(capsys, wh, "--json", "SELECT count(*) AS n FROM reconciliation "
                        "TIMESTAMP AS OF '2999-01-01 00:00:00'")
    assert json.loads(out) == [{"n": 3}]
    code, _, err = _sql(capsys, wh, "SELECT * FROM reconciliation VERSION AS OF 9")
    assert code == 2 and err.count("\n") == 1 and "reconciliation@v9" in err


def test_the_row_cap_and_the_limit(wh, capsys, monkeypatch):
    code, out, _ = _sql(capsys, wh, "--limit", "1", "SELECT key FROM reconciliation")
    assert code == 0 and "more rows exist: raise --limit above 1" in out
    monkeypatch.setenv("RECKON_SQL_MAX_ROWS", "10")
    code, _, err = _sql(capsys, wh, "--limit", "11", "SELECT key FROM reconciliation")
    assert code == 2 and err.count("\n") == 1 and "above sql_max_rows=10" in err


def test_a_query_past_the_timeout_is_stopped_with_one_line(wh, capsys, monkeypatch):
    monkeypatch.setenv("RECKON_SQL_TIMEOUT", "1s")
    code, _, err = _sql(capsys, wh, "SELECT count(*) FROM range(100000000000) a")
    assert code == 2 and err.count("\n") == 1
    assert "longer than sql_timeout=1s and was stopped" in err


#: What a hostile or careless user might send; every one is refused with one line.
HOSTILE = [
    "DROP TABLE reconciliation",
    "DELETE FROM reconciliation",
    "UPDATE reconciliation SET gap = 0",
    "INSERT INTO reconciliation SELECT * FROM reconciliation",
    "CREATE TABLE x AS SELECT 1",
    "CREATE VIEW v AS SELECT 1",
    "ALTER TABLE reconciliation ADD COLUMN x INT",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "SELECT 1; DROP TABLE reconciliation",
    "ATTACH '/tmp/x.db' AS x",
    "DETACH x",
    "PRAGMA version",
    "INSTALL httpfs",
    "LOAD httpfs",
    "COPY reconciliation TO '/tmp/out.csv'",
    "EXPORT DATABASE '/tmp/dump'",
    "IMPORT DATABASE '/tmp/dump'",
    "CHECKPOINT",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_csv_auto('/etc/passwd')",
    "SELECT * FROM read_parquet('reconciliation/*.parquet')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM 'reconciliation/part-0.parquet'",
    "SELECT * FROM parquet_metadata('x.parquet')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "SELECT * FROM query('SELECT 1')",
    "SELECT * FROM query_table('reconciliation')",
    "SELECT getvariable('x')",
    "SET VARIABLE x = 1",
    "SELECT * FROM reconciliation WHERE key = $1",
    "SELECT * FROM reconciliation WHERE key = ?",
    "SELECT * FROM main.reconciliation",
    "SELECT * FROM system.main.duckdb_settings()",
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM os",
    "SELECT * FROM reconciliation AT (VERSION => 0)",
    "WITH t AS (SELECT 1) SELECT * FROM t, read_csv('/etc/passwd')",
    "SELECT (SELECT count(*) FROM read_csv('/etc/passwd'))",
    "DESCRIBE HISTORY reconciliation",
    "SELECT * FROM table_changes('reconciliation', 0)",
    "CALL pragma_version()",
    "VACUUM",
    "SELECT 'x'\\'; DROP TABLE reconciliation; --'",
]


def test_a_hostile_corpus_is_refused_one_line_each_and_the_warehouse_is_unchanged(wh, capsys):
    before = _md5s(wh)
    for sql in HOSTILE:
        code, out, err = _sql(capsys, wh, sql)
        assert code == 2, sql
        assert out == "" and err.count("\n") == 1 and err.startswith("reckon sql: error: "), \
            (sql, err)
    assert _md5s(wh) == before
    assert not Path("/tmp/out.csv").exists() and not Path("/tmp/dump").exists()


def test_the_notebook_connection_reads_every_table_and_reaches_no_file(wh):
    import app.read

    con = app.read.open(wh)
    assert con.sql("SELECT count(*) AS n FROM reconciliation").df()["n"].tolist() == [3]
    frame = con.sql("SELECT key, gap FROM reconciliation ORDER BY key").pl()
    assert frame["gap"].to_list() == [Decimal("0.000"), Decimal("2.000"), Decimal("0.001")]
    for sql in ("SELECT * FROM read_csv('/etc/passwd')", "SET enable_external_access = true",
                "COPY reconciliation TO '/tmp/nb.csv'"):
        with pytest.raises(Exception, match=r"disabled|locked"):
            con.execute(sql).fetchall()
    assert not Path("/tmp/nb.csv").exists()
    from reckon.errors import UsageError

    with pytest.raises(UsageError, match="no such directory"):
        app.read.open(wh / "nope")


def _evaluated(sql: str) -> object:
    import duckdb

    return duckdb.connect().execute("SELECT " + sql).fetchall()[0][0]


@given(before=st.integers(-10**12, 10**12), advance=st.integers(0, 10**9),
       step=st.integers(1, 10**8))
@settings(max_examples=60, deadline=None)
def test_the_folds_sql_computes_the_core_rules_ends_passed(before, advance, step):
    """provisional_sql writes reckon.eventtime.ends_passed through SqlExpr: DuckDB's
    truncating % and the rule's floor remainder must give the same ends, negatives too."""
    from reckon.eventtime import ends_passed
    from reports.duck import SqlExpr

    after = before + advance
    first, last = ends_passed(SqlExpr(f"({before})::BIGINT"), SqlExpr(f"({after})::BIGINT"), step)
    assert (_evaluated(str(first)), _evaluated(str(last))) == ends_passed(before, after, step)


@given(end=st.integers(0, 10**6), watermark=st.none() | st.integers(0, 10**6),
       allowed_lateness=st.integers(0, 10**5))
@settings(max_examples=60, deadline=None)
def test_the_folds_sql_status_is_the_core_window_status(end, watermark, allowed_lateness):
    from audits.duck_tables import SqlExpr, _status_sql
    from reckon.eventtime import window_status

    wm = SqlExpr("NULL::BIGINT" if watermark is None else f"({watermark})::BIGINT")
    assert _evaluated(_status_sql(SqlExpr(f"({end})::BIGINT"), wm, allowed_lateness)) == \
        window_status(end, watermark, allowed_lateness).value
