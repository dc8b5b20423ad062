"""`reckon sql`: refuses anything but one read-only statement (strings and comments cannot fool
it), sees the warehouse tables by name, and time-travels through Delta versions."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from app.cli import main
from reckon.errors import UsageError
from reckon.sql_guard import check_read_only, rewrite_time_travel, tokenize
from reports.terminal import table_text
from spark.sql_query import check_plan_read_only, run_query

REFUSED = [
    ("DROP TABLE provisional_totals", 'starts with'),
    ("drop table provisional_totals", 'starts with'),
    ("SELECT 1; DROP TABLE x", 'more than one statement'),
    ("SELECT 1;DROP TABLE x;", 'more than one statement'),
    ("SELECT 1 ; SELECT 2", 'more than one statement'),
    ("INSERT INTO event_log SELECT * FROM event_log", 'starts with'),
    ("WITH t AS (SELECT 1) INSERT INTO x SELECT * FROM t", 'contains INSERT'),
    ("UPDATE provisional_totals SET total_amount = 0", 'starts with'),
    ("DELETE FROM late_events", 'starts with'),
    ("MERGE INTO a USING b ON a.k = b.k WHEN MATCHED THEN DELETE", 'starts with'),
    ("CREATE TABLE x AS SELECT 1", 'starts with'),
    ("CREATE OR REPLACE TEMP VIEW v AS SELECT 1", 'starts with'),
    ("ALTER TABLE event_log ADD COLUMNS (x INT)", 'starts with'),
    ("TRUNCATE TABLE quarantine", 'starts with'),
    ("COPY INTO x FROM '/tmp'", 'starts with'),
    ("OPTIMIZE provisional_totals", 'starts with'),
    ("VACUUM provisional_totals RETAIN 0 HOURS", 'starts with'),
    ("SET spark.sql.ansi.enabled=false", 'starts with'),
    ("RESET", 'starts with'),
    ("ADD JAR /tmp/evil.jar", 'starts with'),
    ("CALL system.do_something()", 'starts with'),
    ("RESTORE TABLE provisional_totals TO VERSION AS OF 0", 'starts with'),
    ("CACHE TABLE event_log", 'starts with'),
    ("EXPLAIN INSERT INTO x VALUES (1)", 'contains INSERT'),
    ("SELECT java_method('java.lang.System', 'exit', 0)", 'contains JAVA_METHOD'),
    ("SELECT reflect('java.lang.Runtime', 'getRuntime')", 'contains REFLECT'),
    ("/* harmless */ DROP TABLE x", 'starts with'),
    ("SELECT 'a' AS x; -- then\nDELETE FROM y", 'more than one statement'),
    ("SELECT 1 /* ; */ ; TRUNCATE TABLE z", 'more than one statement'),
    ("", 'is empty'),
    ("   ;  ", 'is empty'),
    ("-- only a comment", 'is empty'),
    ("SELECT 'unterminated", 'unterminated string'),
    ("SELECT 1 /* unterminated", 'unterminated /* comment'),
    # script transforms run a program through the shell; IDENTIFIER and quoted paths reach
    # files outside the warehouse
    ("SELECT TRANSFORM(key) USING 'touch /tmp/pwned' AS (x) FROM provisional_totals", 'runs a script'),
    ("FROM provisional_totals MAP key USING \"cat\" AS (x)", 'runs a script'),
    ("SELECT * FROM IDENTIFIER('parquet.`/etc`')", 'IDENTIFIER(...)'),
    ("DESCRIBE HISTORY '/other/warehouse/provisional_totals'", 'by path'),
    ("DESCRIBE DETAIL \"/other/warehouse/provisional_totals\"", 'by path'),
    # token boundaries drawn as Spark's lexer draws them: a raw string has no escapes, a CR
    # ends a line comment, a backslash before LF continues one, /*+ opens a hint (parsed, and
    # no nested comment inside a comment)
    ("SELECT r'\\' AS x, java_method('a', 'b') --'", 'contains JAVA_METHOD'),
    ("WITH s AS (SELECT R\"\\\" AS x) INSERT INTO t SELECT * FROM s --\"", 'contains INSERT'),
    ("SELECT 1 AS x --\rDROP TABLE t", 'contains DROP'),
    ("WITH s AS (SELECT 1 AS x -- \\\n'\n) INSERT INTO t SELECT * FROM s -- '",
     'contains INSERT'),
    ("SELECT /* a /*+ b */ 1 AS x, reflect('a', 'b') */", 'contains REFLECT'),
    ("SELECT /*+ REPARTITION(java_method('a', 'b')) */ 1", 'contains JAVA_METHOD'),
    # '*/' is one token to Spark wherever it stands: here it ends the hint, and '/*' after it
    # is no comment opener that could hide the script
    ("SELECT /*+ COALESCE(1) */* FROM (SELECT TRANSFORM(1) USING 'touch /tmp/x' AS (x)) t -- */",
     'runs a script'),
]

ALLOWED = [
    "SELECT 1",
    "select 1;",
    "SELECT 1 -- DROP TABLE x; a comment that mentions DROP",
    "SELECT 1 /* DELETE FROM y; */",
    "SELECT 'DROP TABLE x; DELETE' AS s",
    "SELECT \"it's; INSERT\" AS s",
    "SELECT 'a\\'; DROP TABLE x' AS s",
    "SELECT `update` FROM (SELECT 1 AS `update`)",
    "WITH t AS (SELECT 1 AS a) SELECT a FROM t",
    "(SELECT 1) UNION ALL (SELECT 2)",
    "VALUES (1, 'a'), (2, 'b')",
    "SHOW TABLES",
    "DESCRIBE provisional_totals",
    "DESCRIBE HISTORY provisional_deltas",
    "EXPLAIN SELECT 1",
    "SELECT * FROM provisional_deltas VERSION AS OF 3",
    "SELECT replace(key, 'a', 'b'), date_add(window_date, 1) FROM provisional_totals",
    "SELECT transform(array(1, 2), x -> x + 1), identifier FROM (SELECT 1 AS identifier)",
    "SELECT a.key FROM provisional_totals a JOIN late_events b USING (key)",
    "SELECT 'a''b' AS two_literals_side_by_side, r'C:\\dir' AS raw, X'1F' AS hex",
    "SELECT 1 -- a comment \\\ncontinued by its backslash",
    "SELECT /*+ BROADCAST(l) */ l.key FROM late_events l",
    # what analysts write: aggregates, windows, dates, money formatting, JSON, CASE, typeof
    "SELECT currency, sum(total_amount), count(*), percentile_approx(event_count, 0.5), "
    "round(avg(total_amount), 2), greatest(1, 2), coalesce(NULL, 1), nvl(NULL, 2), "
    "typeof(key), if(true, 1, 0) FROM provisional_totals GROUP BY currency",
    "SELECT row_number() OVER (PARTITION BY key ORDER BY window_start) AS n, "
    "lag(total_amount) OVER (ORDER BY window_start), date_format(window_start, 'HH:mm'), "
    "window_start + INTERVAL 10 SECONDS FROM provisional_totals",
    "SELECT from_json('{\"a\": 1}', 'a INT', map('mode', 'PERMISSIVE')), "
    "to_json(named_struct('k', 1)), explode(array(1, 2)), upper(concat('a', 'b'))",
    "SELECT * FROM range(3)",
]


@pytest.mark.parametrize("sql, reason", REFUSED)
def test_refuses_anything_but_one_read_only_statement(sql, reason):
    with pytest.raises(UsageError) as err:
        check_read_only(sql)
    assert reason in str(err.value)  # refused for the right reason, and says which


@pytest.mark.parametrize("sql", ALLOWED)
def test_allows_read_only_statements_whatever_their_literals_and_comments_say(sql):
    tokens = check_read_only(sql)
    assert "".join(t.text for t in tokens).rstrip().rstrip(";") == sql.rstrip().rstrip(";")


def test_cli_refuses_ddl_with_exit_code_2_before_starting_spark(capsys, tmp_path):
    code = main(["sql", "--warehouse", str(tmp_path), "SELECT 1; DROP TABLE x"])
    assert code == 2
    assert "more than one statement" in capsys.readouterr().err


@pytest.mark.parametrize("sql", [
    "SELECT * FROM provisional_totals VERSION AS OF 3 LIMIT 10",
    "select * from `provisional_totals` timestamp as of '2026-01-01'",
    "SELECT * FROM provisional_totals FOR SYSTEM_VERSION AS OF 1",
    "DESCRIBE HISTORY provisional_totals",
    "SELECT * FROM table_changes('provisional_totals', 0)",
])
def test_time_travel_of_the_derived_totals_names_the_table_that_has_history(sql, capsys,
                                                                           tmp_path):
    """provisional_totals is folded on read from provisional_deltas: it has no versions, and
    Spark only said "not supported" after starting (the README's tour ran into it)."""
    code = main(["sql", "--warehouse", str(tmp_path), sql])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "provisional_deltas VERSION AS OF" in err


@pytest.mark.parametrize("sql", [
    "SELECT * FROM provisional_totals WHERE status = 'OPEN'",
    "SELECT * FROM provisional_deltas VERSION AS OF 3",
    "SELECT 'provisional_totals' AS name, version FROM provisional_deltas VERSION AS OF 1",
])
def test_the_derived_totals_and_the_deltas_history_still_pass_the_token_check(sql):
    check_read_only(sql)


def test_time_travel_rewrite_uses_the_path_only_where_needed():
    paths = {"provisional_totals": "/wh/provisional_totals"}
    sql = ("SELECT a.key FROM provisional_totals VERSION AS OF 2 a JOIN provisional_totals b "
           "ON a.key = b.key -- provisional_totals VERSION AS OF 9")
    out = rewrite_time_travel(tokenize(sql), paths)
    assert out == ("SELECT a.key FROM delta.`/wh/provisional_totals` VERSION AS OF 2 a JOIN "
                   "provisional_totals b ON a.key = b.key -- provisional_totals VERSION AS OF 9")
    assert rewrite_time_travel(tokenize("SELECT * FROM table_changes('provisional_totals', 0)"),
                               paths) == \
        "SELECT * FROM table_changes_by_path('/wh/provisional_totals', 0)"
    assert rewrite_time_travel(tokenize("DESCRIBE HISTORY provisional_totals"), paths) == \
        "DESCRIBE HISTORY delta.`/wh/provisional_totals`"


def test_table_text_aligns_and_prints_decimals_exactly():
    text = table_text([("a", Decimal("10.50"), None), ("bb", Decimal("1.00"), 3)],
                      ["key", "total", "n"])
    assert text.splitlines() == [
        "key  total  n",
        "---  -----  -",
        "a    10.50  -",
        "bb    1.00  3",
    ]


def _write_twice(spark, warehouse):
    from spark import tables as tb

    path = tb.ensure_table(spark, warehouse, tb.CANONICAL_TOTALS)
    schema = tb.SCHEMAS[tb.CANONICAL_TOTALS]
    from datetime import UTC, date, datetime

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    t1 = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    first = [(t0, t1, "k1", "EUR", Decimal("1.10"), 1, date(2026, 1, 1), "r1")]
    second = [(t0, t1, "k1", "EUR", Decimal("2.25"), 2, date(2026, 1, 1), "r2"),
              (t0, t1, "k2", "EUR", Decimal("7.00"), 1, date(2026, 1, 1), "r2")]
    spark.createDataFrame(first, schema).write.format("delta").mode("append").save(path)
    spark.createDataFrame(second, schema).write.format("delta").mode("overwrite").save(path)
    return path


def test_plain_and_time_travel_queries_return_the_right_rows(spark, warehouse):
    _write_twice(spark, warehouse)
    now = run_query(spark, warehouse, "SELECT key, total_amount FROM canonical_totals "
                                      "ORDER BY key")
    assert now.rows == (("k1", Decimal("2.25")), ("k2", Decimal("7.00")))
    v1 = run_query(spark, warehouse, "SELECT key, total_amount, replay_id FROM canonical_totals "
                                     "VERSION AS OF 1 ORDER BY key")
    assert v1.rows == (("k1", Decimal("1.10"), "r1"),)
    joined = run_query(spark, warehouse, """
        SELECT n.key, n.total_amount - o.total_amount AS delta
        FROM canonical_totals n JOIN canonical_totals VERSION AS OF 1 o ON n.key = o.key""")
    assert joined.rows == (("k1", Decimal("1.15")),)
    capped = run_query(spark, warehouse, "SELECT * FROM canonical_totals", limit=1)
    assert len(capped.rows) == 1 and capped.truncated


def test_time_travel_to_version_zero_of_a_table_written_twice(spark, warehouse):
    from spark import tables as tb

    path = tb.table_path(warehouse, "late_events")
    spark.createDataFrame([(1, "first")], "id INT, v STRING").write.format("delta").save(path)
    spark.createDataFrame([(2, "second")], "id INT, v STRING").write.format("delta") \
        .mode("overwrite").save(path)
    assert run_query(spark, warehouse, "SELECT id, v FROM late_events").rows == ((2, "second"),)
    assert run_query(spark, warehouse, "SELECT id, v FROM late_events VERSION AS OF 0").rows \
        == ((1, "first"),)
    history = run_query(spark, warehouse, "DESCRIBE HISTORY late_events")
    assert len(history.rows) == 2


def test_cli_json_output_keeps_decimals_exact_and_times_in_utc(spark, warehouse, capsys):
    _write_twice(spark, warehouse)
    code = main(["sql", "--warehouse", str(warehouse), "--json",
                 "SELECT key, total_amount, window_start FROM canonical_totals "
                 "VERSION AS OF 1"])
    assert code == 0
    assert json.loads(capsys.readouterr().out) == [
        {"key": "k1", "total_amount": "1.100", "window_start": "2026-01-01T00:00:00Z"}]
    code = main(["sql", "--warehouse", str(warehouse), "SELECT no_such_column FROM event_log"])
    assert code == 2
    assert "query failed" in capsys.readouterr().err


def test_a_misspelled_table_is_one_line_from_the_real_cli(spark, warehouse):
    """As a user meets it: the installed command in its own process, whose stderr would
    carry pyspark's ERROR log of the failed statement (the whole Java stack) before ours."""
    import subprocess
    import sys

    _write_twice(spark, warehouse)
    done = subprocess.run([sys.executable, "-m", "app.cli", "sql", "--engine", "spark",
                           "--warehouse", str(warehouse), "SELECT * FROM provisonal_totals"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert "at org.apache" not in done.stderr and "Traceback" not in done.stderr
    ours = [line for line in done.stderr.splitlines() if line.startswith("reckon")]
    assert len(ours) == 1 and ours[0].startswith(
        "reckon sql: error: query failed: [TABLE_OR_VIEW_NOT_FOUND] The table or view "
        "`provisonal_totals` cannot be found.")
    assert len(done.stderr) < 2000  # the JVM's few start-up lines and ours, no stack


PLAN_REFUSED = [
    # each passes the token check; Spark's parsed plan shows what it is
    ("SELECT * FROM text.`reckon.toml`", "reads text.reckon.toml by path"),
    ("WITH a AS (SELECT * FROM csv.`etc`) SELECT * FROM a", "reads csv.etc by path"),
    ("SELECT (SELECT max(value) FROM text.`notes`) AS m", "reads text.notes by path"),
    ("SELECT * FROM (SELECT 1) x JOIN LATERAL (SELECT * FROM json.`x`) y", "reads json.x"),
    ("SELECT * FROM delta.`wh2` VERSION AS OF 0", "reads delta.wh2 by path"),
    ("EXPLAIN SELECT * FROM parquet.`etc`", "reads parquet.etc by path"),
    # and what the token check refuses too, should a scanner boundary ever slip
    ("WITH s AS (SELECT 1 AS x) INSERT INTO t SELECT * FROM s", "InsertIntoStatement"),
    ("INSERT OVERWRITE DIRECTORY 'out' SELECT 1", "InsertIntoDir"),
    ("VACUUM provisional_totals", "VacuumTableCommand"),
    ("SET spark.sql.ansi.enabled=false", "SetCommand"),
    ("WITH a AS (SELECT reflect('java.lang.System', 'exit', 0) AS z) SELECT * FROM a",
     "calls reflect()"),
    ("SELECT * FROM late_events WHERE key IN (SELECT java_method('a', 'b'))",
     "calls java_method()"),
    ("SELECT * FROM read_files('etc', format => 'text')", "calls read_files()"),
    ("SELECT * FROM (SELECT TRANSFORM(1) USING 'cat' AS (x)) t", "ScriptTransformation"),
    ("SELECT * FROM table_changes('delta.`/other/wh/provisional_totals`', 0)",
     "table_changes() on anything but a plain table name"),
    ("DESCRIBE QUERY SELECT * FROM json.`notes`", "reads json.notes by path"),
    ("SELEC 1", "query failed: [PARSE_SYNTAX_ERROR]"),
    # an allowlist of functions and options, not a denylist
    ("SELECT from_xml('<a/>', 'b STRING', map('rowValidationXSDPath', '/etc/passwd'))",
     "the option 'rowValidationXSDPath'"),
    ("SELECT from_json('{}', 'a INT', str_to_map('mode:x'))", "not a literal map"),
    ("SELECT input_file_name() FROM event_log", "query calls input_file_name()"),
    ("SELECT current_user()", "query calls current_user()"),
    ("SELECT assert_true(false)", "query calls assert_true()"),
    ("SELECT spark_catalog.default.my_udf(1)", "query calls spark_catalog.default.my_udf()"),
    ("SELECT * FROM some_table_function(1)", "calls some_table_function()"),
    ("SELECT aes_decrypt(X'00', 'k')", "query calls aes_decrypt()"),
]


@pytest.mark.parametrize("sql, reason", PLAN_REFUSED)
def test_spark_parsed_plan_is_the_second_line_of_defence(spark, sql, reason):
    with pytest.raises(UsageError) as err:
        check_plan_read_only(spark, sql)
    assert reason in str(err.value)


@pytest.mark.parametrize("sql", [s for s in ALLOWED if s.strip().rstrip(";") != "select 1"])
def test_the_plan_check_passes_what_the_token_check_passes(spark, sql):
    check_plan_read_only(spark, sql.rstrip().rstrip(";"))


def test_run_query_refuses_a_file_the_token_check_let_through(spark, warehouse):
    (warehouse / "notes").write_text("secret\n")
    check_read_only("SELECT * FROM text.`notes`")  # no path separator for the scanner to see
    with pytest.raises(UsageError, match="by path"):
        run_query(spark, warehouse, "SELECT * FROM text.`notes`")


def test_deep_nesting_is_one_line_not_a_stack_overflow(capsys, tmp_path):
    deep = "SELECT " + "(" * 3000 + "1" + ")" * 3000
    assert main(["sql", "--warehouse", str(tmp_path), deep]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nests parentheses 3000 deep" in err


def test_json_output_names_nan_and_infinity_as_strings(spark, warehouse, capsys):
    _write_twice(spark, warehouse)
    code = main(["sql", "--engine", "spark", "--warehouse", str(warehouse), "--json",
                 "SELECT double('NaN') AS n, double('Infinity') AS i, -double('Infinity') AS m, "
                 "1.5D AS f"])
    assert code == 0
    out = capsys.readouterr().out
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"not JSON: {c}")) == [
        {"n": "nan", "i": "inf", "m": "-inf", "f": 1.5}]


def _reckon_sql(warehouse: Path, query: str, engine: str = "spark") -> subprocess.Popen[str]:
    """`reckon sql --engine ENGINE` as a user runs it: its own process (on Spark, its own
    JVM)."""
    return subprocess.Popen([sys.executable, "-m", "app.cli", "sql", "--engine", engine,
                             "--warehouse", str(warehouse), query], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_variables_are_not_substituted(spark, warehouse):
    """Issue 60 probe: SELECT '${env:HOME}' returned the environment (any secret in it)."""
    _write_twice(spark, warehouse)
    got = run_query(spark, warehouse, "SELECT '${env:HOME}' AS h, '${system:user.name}' AS u")
    assert got.rows == (("${env:HOME}", "${system:user.name}"),)


def test_an_engine_stack_overflow_is_one_line_from_the_real_cli(spark, warehouse):
    """Issue 60 probe: NOT NOT ... (5,000) printed a 1,061-line StackOverflowError."""
    _write_twice(spark, warehouse)
    done = _reckon_sql(warehouse, "SELECT " + "NOT " * 5000 + "true")
    out, err = done.communicate(timeout=300)
    assert done.returncode == 2 and out == "", err
    assert "at org.apache" not in err and "Traceback" not in err and "StackOverflow" not in err[
        :err.find("reckon sql")], err
    ours = [line for line in err.splitlines() if line.startswith("reckon")]
    assert len(ours) == 1 and ours[0].startswith(
        "reckon sql: error: query is too deep for Spark (java.lang.StackOverflowError)"), err
    # the default engine (DuckDB) refuses the same query in one line too
    duck = _reckon_sql(warehouse, "SELECT " + "NOT " * 5000 + "true", engine="duckdb")
    out, err = duck.communicate(timeout=120)
    assert duck.returncode == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("reckon sql: error: query failed:") and "Traceback" not in err, err


def test_ctrl_c_ends_a_running_query_in_one_line_with_130(spark, warehouse):
    """Issue 60 probe: Ctrl-C on a triple CROSS JOIN printed tracebacks."""
    _write_twice(spark, warehouse)
    started = time.monotonic()
    run = _reckon_sql(warehouse, "SELECT count(*) FROM range(100000) a CROSS JOIN "
                                 "range(100000) b CROSS JOIN range(100000) c")
    while not _has_java_child(run.pid):  # its JVM is up: give the query time to start
        assert run.poll() is None and time.monotonic() - started < 120
        time.sleep(0.5)
    time.sleep(20)
    assert run.poll() is None  # still counting
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130, err
    assert out == "" and "Traceback" not in err and "at org.apache" not in err, err
    assert [line for line in err.splitlines() if "reckon" in line or "ERROR" in line] == [
        "reckon sql: interrupted"], err


def _has_java_child(pid: int) -> bool:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return any("java" in Path(f"/proc/{child}/cmdline").read_text()
               for child in children.read_text().split()
               if Path(f"/proc/{child}/cmdline").exists())
