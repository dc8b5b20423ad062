"""`reckon sql --engine spark`: one read-only query over the warehouse's Delta tables, with time
travel.

Every Delta table of the warehouse (spark/tables.py ``TABLES`` that exist) is visible by its
name as a temporary view. Temporary views cannot time-travel, so a table name followed by
``VERSION AS OF n``, ``TIMESTAMP AS OF '...'`` (or ``FOR SYSTEM_VERSION|SYSTEM_TIME AS OF``),
the target of ``DESCRIBE HISTORY`` / ``DESCRIBE DETAIL``, and the table argument of
``table_changes('name', ...)`` are rewritten to the path form (``delta.`<path>```,
``table_changes_by_path('<path>', ...)``), so plain and time-travel queries both work::

    reckon sql --warehouse wh "SELECT * FROM provisional_deltas VERSION AS OF 3"
    reckon sql --warehouse wh "SELECT * FROM provisional_totals WHERE status = 'OPEN'"

The query first passes ``reckon.sql_guard.check_read_only`` (the read-only rule on tokens both
engines apply); then, before anything runs, Spark's own parser reads it and its plan is checked
the same way (``check_plan_read_only``), so a keyword the token scan missed is still refused.

Spark's variable substitution is off for the query (``spark.sql.variable.substitute=false``):
``SELECT '${env:HOME}'`` returns the text ``${env:HOME}``, never the environment. Any error of
the engine (a parse or analysis error, a failed job, a ``java.lang.StackOverflowError`` from a
query nested too deep such as ``NOT NOT ... NOT true``) is one line (``engine_error``).
"""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from reckon.errors import UsageError
from reckon.sql_guard import (
    OPTION_ARGUMENT,
    SAFE_FUNCTION_GROUPS,
    SAFE_MISC_FUNCTIONS,
    SAFE_OPTIONS,
    SAFE_TABLE_FUNCTIONS,
    QueryResult,
    Token,
    check_read_only,
    rewrite_time_travel,
)

__all__ = ["check_plan_read_only", "engine_error", "register_tables", "run_query"]


_ROOT_COMMANDS = ("Show", "Describe")  # plan roots of SHOW ... / DESCRIBE ... (read-only)


# writes and programs that are not Commands: INSERTs, script transforms (TRANSFORM ... USING
# 'program' runs it through a shell), EXECUTE IMMEDIATE
_WRITING_NODES = ("InsertIntoStatement", "InsertIntoDir", "ScriptTransformation",
                  "ExecuteImmediate")


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_NAMED_TABLES = ("UnresolvedRelation", "UnresolvedTable", "UnresolvedTableOrView",
                 "UnresolvedView")


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def check_plan_read_only(spark: Any, sql: str) -> None:
    """Raise UsageError unless Spark's own parser (Delta's extension included) reads ``sql``
    as a query over plain table names. The second line of defence behind ``check_read_only``:
    a token scanner that drew one boundary differently from Spark's lexer could hide a
    keyword; the parsed plan cannot. Every node (CTE bodies and subqueries included) must be
    a query node: no command below a SHOW / DESCRIBE / EXPLAIN root, no INSERT, no relation
    named by more than one part (``text.`file```, ``delta.`/path```; the time-travel rewrite
    adds the warehouse's own paths after this check), no JVM call, no file-reading table
    function."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    jvm = spark._jvm
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(sql)
    except (CapturedException, Py4JJavaError) as exc:
        raise engine_error(exc) from None
    command = jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.plans.logical.Command")

    def refuse(what: str) -> UsageError:
        return UsageError(f"query {what}: `reckon sql` is read-only and reads the warehouse "
                          "tables by their plain names only (provisional_totals, ...)")

    root = plan.nodeName()
    if command.isInstance(plan) or root.startswith(_ROOT_COMMANDS):
        if not root.startswith(_ROOT_COMMANDS) and root != "ExplainCommand":
            raise refuse(f"is a {root} statement")
        # EXPLAIN and DESCRIBE QUERY analyse a plan kept in a field: checked like a query
        pending = ([plan.logicalPlan()] if root == "ExplainCommand" else
                   [plan.plan()] if root == "DescribeQueryCommand" else
                   [*_seq(plan.children()), *_seq(plan.innerChildren())])
    else:
        pending = [plan]
    while pending:
        node = pending.pop()
        name = node.nodeName()
        if command.isInstance(node) or name.startswith(_WRITING_NODES):
            raise refuse(f"holds a {name} statement")
        if name in _NAMED_TABLES and node.multipartIdentifier().size() > 1:
            raise refuse(f"reads {'.'.join(_seq(node.multipartIdentifier()))} by path")
        if name == "RelationTimeTravel":  # its relation is an argument, not a child
            pending.append(node.relation())
        if name == "UnresolvedTableValuedFunction":
            func = str(_seq(node.name())[-1]).upper()
            if func not in SAFE_TABLE_FUNCTIONS or len(_seq(node.name())) > 1:
                raise refuse(f"calls {func.lower()}()")
            args = _seq(node.functionArgs())
            # table_changes parses its first argument as a table name, after this check
            if func == "TABLE_CHANGES" and not (
                    args and args[0].nodeName() == "Literal"
                    and _PLAIN_NAME.fullmatch(str(args[0].value()))):
                raise refuse("calls table_changes() on anything but a plain table name")
        expressions = _seq(node.expressions())
        while expressions:
            expr = expressions.pop()
            if expr.nodeName() == "UnresolvedFunction":
                _check_function(spark, expr)
            expressions.extend(_seq(expr.children()))
        pending.extend(_seq(node.children()))
        pending.extend(_seq(node.innerChildren()))  # CTE bodies, subqueries


def engine_error(exc: BaseException, tables: str = "") -> UsageError:
    """One line for an error Spark raised running the user's query: its first line, or for
    a JVM stack overflow (a query nested too deep to parse or plan) what to do instead.

    Example: ``SELECT NOT NOT ... NOT true`` (5,000 NOTs) gives ``query is too deep for
    Spark (java.lang.StackOverflowError): ...``, never the 1,000-line Java stack.
    """
    java = getattr(exc, "java_exception", None)  # a Py4JJavaError: the Java error itself
    text = str(exc if java is None else java)
    if "StackOverflowError" in text:
        return UsageError("query is too deep for Spark (java.lang.StackOverflowError): nest "
                          "fewer operators (NOT NOT ..., a + (b + ...)); use a WITH clause "
                          "for each level instead")
    first = (text.strip().splitlines() or [type(exc).__name__])[0]
    return UsageError(f"query failed: {first}{tables}")


def _function_group(spark: Any, name: str) -> str | None:
    """The group of Spark's built-in function ``name`` (``string_funcs``), None if none."""
    jvm = spark._jvm
    registry = jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()
    ident = jvm.org.apache.spark.sql.catalyst.FunctionIdentifier.apply(name.lower())
    info = registry.lookupFunction(ident)
    return str(info.get().getGroup()) if info.isDefined() else None


def _check_function(spark: Any, expr: Any) -> None:
    """Refuse a function call outside the allowlist, or one given options outside it."""
    parts = [str(p) for p in _seq(expr.nameParts())]
    func = parts[-1].upper()
    builtin = len(parts) == 1 or [p.lower() for p in parts[:-1]] in (["builtin"],
                                                                      ["system", "builtin"])
    group = _function_group(spark, func) if builtin else None
    if func not in SAFE_MISC_FUNCTIONS and group not in SAFE_FUNCTION_GROUPS:
        raise UsageError(f"query calls {'.'.join(parts).lower()}(): `reckon sql` runs only "
                         "Spark's built-in functions that compute on values (no JVM calls, "
                         "files, session or user functions)")
    position = OPTION_ARGUMENT.get(func)
    args = _seq(expr.arguments())
    if position is None or len(args) <= position:
        return
    options = args[position]
    pairs = _seq(options.arguments()) if options.nodeName() == "UnresolvedFunction" and \
        str(_seq(options.nameParts())[-1]).lower() == "map" else None
    if pairs is None or any(a.nodeName() != "Literal" for a in pairs):
        raise UsageError(f"query gives {func.lower()}() options that are not a literal "
                         "map('key', 'value', ...): `reckon sql` checks every option")
    for key in (str(k.value()) for k in pairs[::2]):
        if key.lower() not in SAFE_OPTIONS:
            raise UsageError(f"query gives {func.lower()}() the option {key!r}: `reckon sql` "
                             "allows only options that shape the parse (no file paths)")


def register_tables(spark: Any, warehouse: Path) -> dict[str, str]:
    """Register every existing warehouse table as a temp view; return name -> path."""
    from spark import tables as tb
    from spark.provisional import read_provisional
    from storage.spec_log import rules_in_force

    paths: dict[str, str] = {}
    for name in tb.TABLES:
        if tb.table_exists(warehouse, name):
            path = tb.table_path(warehouse, name)
            spark.read.format("delta").load(path).createOrReplaceTempView(name)
            paths[name] = path
    if tb.PROVISIONAL_DELTAS in paths:  # derived from the deltas (spark.provisional)
        read_provisional(spark, warehouse, rules_in_force(warehouse)).createOrReplaceTempView(
            tb.PROVISIONAL_TOTALS)
    return paths


def run_query(spark: Any, warehouse: str | Path, sql: str, limit: int = 1000) -> QueryResult:
    """Check, rewrite and run one read-only query; fetch at most ``limit`` rows (+1 to know
    whether there were more). Never collects an unbounded result."""
    if limit < 1:
        raise UsageError(f"--limit={limit} is not valid: give a positive number of rows")
    tokens = check_read_only(sql)
    wh = Path(warehouse).expanduser().resolve()
    if not wh.is_dir():
        raise UsageError(f"--warehouse={str(wh)!r} is not valid: no such directory")
    return _cancellable(spark, lambda: _run_checked(spark, wh, tokens, limit))


def _run_checked(spark: Any, wh: Path, tokens: list[Token], limit: int) -> QueryResult:
    """Every Spark step of run_query, variable substitution off ('${env:HOME}' is text)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    spark.conf.set("spark.sql.variable.substitute", "false")
    check_plan_read_only(spark, "".join(t.text for t in tokens))
    paths = register_tables(spark, wh)
    text = rewrite_time_travel(tokens, paths)
    try:
        df = spark.sql(text)
        got = df.limit(limit + 1).collect()
    except (CapturedException, Py4JJavaError) as exc:  # the user's query failed in Spark
        raise engine_error(exc, f" (tables: {', '.join(paths) or 'none'})") from None
    return QueryResult(tuple(df.columns), tuple(tuple(r) for r in got[:limit]),
                       len(got) > limit, limit, tuple(paths))


def _cancellable(spark: Any, run: Callable[[], QueryResult]) -> QueryResult:
    """``run()`` in a worker thread, so that Ctrl-C (SIGINT) reaches this one as a plain
    KeyboardInterrupt: it cancels Spark's jobs over its own free gateway connection and
    re-raises (the CLI ends in one line, exit 130). PySpark's own SIGINT handler would call
    the JVM over the connection the running query holds, and print py4j tracebacks
    ("reentrant call")."""
    done: dict[str, Any] = {}

    def work() -> None:
        try:
            done["result"] = run()
        except BaseException as exc:  # handed to the caller's thread
            done["error"] = exc

    worker = threading.Thread(target=work, name="reckon-sql-query", daemon=True)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler) if in_main else None
    try:
        worker.start()
        while worker.is_alive():
            worker.join(0.2)
    except KeyboardInterrupt:
        spark.sparkContext.cancelAllJobs()
        worker.join(30)
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if "error" in done:
        raise done["error"]
    return cast(QueryResult, done["result"])
