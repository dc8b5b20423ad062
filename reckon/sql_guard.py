"""`reckon sql`'s read-only rule and its time travel, on tokens: what any engine runs.

Read-only is checked on tokens (strings, quoted identifiers and comments are recognised, so
neither ``'DROP'`` in a literal nor ``-- DROP`` in a comment fools it): exactly one statement,
starting with SELECT / WITH / VALUES / FROM / TABLE / SHOW / DESCRIBE / EXPLAIN, and no
keyword of a writing or session-changing statement anywhere outside literals and comments;
no script transform (``USING 'program'``), no ``IDENTIFIER(...)`` and no table by path. The
scanner draws token boundaries as Spark's lexer does (raw strings, CR-ended comments, hints).
Both engines start here: DuckDB (reports/duck.py) and Spark (spark/sql_query.py, which also
checks Spark's parsed plan). Temporary views cannot time-travel, so a table name followed by
``VERSION AS OF n`` (and the other forms) is rewritten to the path form
(``rewrite_time_travel``).

Example (the comment is one token, so its DROP is no keyword):

>>> [t.text for t in check_read_only("SELECT 1 -- DROP TABLE x") if t.text.strip()]
['SELECT', '1', '-- DROP TABLE x']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from reckon.errors import UsageError

__all__ = ["ALLOWED_FIRST", "FORBIDDEN", "QueryResult", "Token", "check_read_only",
           "rewrite_time_travel", "tokenize", "unquote"]


ALLOWED_FIRST = frozenset({"SELECT", "WITH", "VALUES", "FROM", "TABLE", "SHOW", "DESCRIBE",
                           "DESC", "EXPLAIN"})


FORBIDDEN = frozenset({
    "INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "DROP", "ALTER", "TRUNCATE", "COPY",
    "OPTIMIZE", "VACUUM", "SET", "RESET", "ADD", "CALL", "RESTORE", "CACHE", "UNCACHE",
    "REFRESH", "LOAD", "MSCK", "GRANT", "REVOKE", "USE", "CLONE", "REORG", "CONVERT", "FSCK",
    "REPAIR", "EXECUTE", "DECLARE", "OVERWRITE",
    # functions that run arbitrary JVM code
    "REFLECT", "JAVA_METHOD", "TRY_REFLECT",
})


# Table functions that read files by path: the warehouse tables are the only input.
FILE_READERS = frozenset({"READ_FILES", "TABLE_CHANGES_BY_PATH"})


# An allowlist, checked on Spark's parsed plan: a function runs only if it is one of Spark's
# built-ins in a group that computes on values alone. Not in it: misc_funcs (reflect,
# java_method, input_file_name, current_user, raise_error, aes_*, ...), table_funcs, avro and
# protobuf (a descriptor file by path), and any function not built in.
SAFE_FUNCTION_GROUPS = frozenset({
    "agg_funcs", "array_funcs", "bitwise_funcs", "collection_funcs", "conditional_funcs",
    "conversion_funcs", "csv_funcs", "datetime_funcs", "generator_funcs", "hash_funcs",
    "json_funcs", "lambda_funcs", "map_funcs", "math_funcs", "predicate_funcs", "string_funcs",
    "struct_funcs", "url_funcs", "window_funcs", "xml_funcs", "variant_funcs",
})


SAFE_MISC_FUNCTIONS = frozenset({"TYPEOF", "NVL", "NVL2", "COALESCE"})


SAFE_TABLE_FUNCTIONS = frozenset({
    "RANGE", "EXPLODE", "EXPLODE_OUTER", "INLINE", "INLINE_OUTER", "POSEXPLODE",
    "POSEXPLODE_OUTER", "STACK", "JSON_TUPLE", "TABLE_CHANGES", "VARIANT_EXPLODE",
    "VARIANT_EXPLODE_OUTER",
})


# Functions that take an options map (argument index): only these option keys, given as a
# literal map('key', 'value', ...). Not in it: anything naming a file (rowValidationXSDPath).
OPTION_ARGUMENT = {"FROM_JSON": 2, "FROM_CSV": 2, "FROM_XML": 2, "SCHEMA_OF_JSON": 1,
                   "SCHEMA_OF_CSV": 1, "SCHEMA_OF_XML": 1, "TO_JSON": 1, "TO_CSV": 1,
                   "TO_XML": 1}


SAFE_OPTIONS = frozenset(k.lower() for k in (
    "mode", "timestampFormat", "timestampNTZFormat", "dateFormat", "locale", "timeZone",
    "sep", "delimiter", "quote", "escape", "comment", "header", "nullValue", "emptyValue",
    "nanValue", "positiveInf", "negativeInf", "lineSep", "encoding", "ignoreLeadingWhiteSpace",
    "ignoreTrailingWhiteSpace", "allowNumericLeadingZeros", "allowBackslashEscapingAnyCharacter",
    "allowComments", "allowUnquotedFieldNames", "allowSingleQuotes", "allowNonNumericNumbers",
    "allowUnquotedControlChars", "dropFieldIfAllNull", "prefersDecimal", "primitivesAsString",
    "columnNameOfCorruptRecord", "rowTag", "attributePrefix", "valueTag", "ignoreNamespace",
    "ignoreSurroundingSpaces", "inferSchema", "pretty", "ignoreNullFields", "samplingRatio",
    "enableDateTimeParsingFallback"))


MAX_NESTING = 200  # parentheses deep: deeper parses overflow the JVM's stack


@dataclass(frozen=True)
class Token:
    """One lexical token. ``kind`` is one of: ws, comment, string, quoted (a backtick
    identifier), word, number, punct."""

    kind: str
    text: str

    @property
    def upper(self) -> str:
        return self.text.upper()


# Spark's lexer (SqlBaseLexer.g4) is the reference: a token boundary drawn anywhere else lets a
# keyword hide inside what this scanner takes for a literal or a comment. An identifier is
# letters (any script), digits and underscores; a bare URI (``file:///x``) is one identifier.
_WORD = re.compile(r"[^\W\d]\w*")


_URI_TAIL = re.compile(r"://[\w/\-.?=&#%]+")


_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?[A-Za-z]*")


_WS = re.compile(r"\s+")


def _string_end(sql: str, i: int, raw: bool) -> int:
    """Index just past the literal or backtick identifier opening at ``sql[i]``. A string ends
    at its first unescaped quote (a doubled quote is two literals side by side, one span
    either way); a raw string (``R'...'``) has no escapes; a backtick identifier doubles its
    backticks."""
    c, j, n = sql[i], i + 1, len(sql)
    while j < n:
        if sql[j] == "\\" and c != "`" and not raw:
            j += 2
            continue
        if sql[j] == c:
            if c == "`" and j + 1 < n and sql[j + 1] == c:
                j += 2
                continue
            return j + 1
        j += 1
    what = "identifier" if c == "`" else "string"
    raise UsageError(f"query has an unterminated {what} starting at character {i}: "
                     f"{sql[i:i + 30]!r}")


def tokenize(sql: str) -> list[Token]:
    """Split Spark SQL into tokens as Spark's lexer does. Strings ('..' or "..", backslash
    escapes; R'..' raw), backtick identifiers, ``--`` line comments (ended by CR or LF; a
    backslash before an LF continues them) and nested ``/* */`` comments are kept whole;
    ``/*+`` opens a hint, which Spark parses, so its contents are tokens (and inside a comment
    it opens no nested one). An unterminated string, identifier
    or comment is a UsageError."""
    tokens: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            m = _WS.match(sql, i)
            assert m is not None
            tokens.append(Token("ws", m.group()))
            i = m.end()
        elif sql.startswith("--", i):
            j = i + 2
            while j < n and sql[j] not in "\r\n":
                j += 2 if sql.startswith("\\\n", j) else 1
            tokens.append(Token("comment", sql[i:j]))
            i = j
        elif sql.startswith("/*+", i) or sql.startswith("*/", i):  # Spark's hint tokens
            width = 3 if sql.startswith("/*+", i) else 2
            tokens.append(Token("punct", sql[i:i + width]))
            i += width
        elif sql.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if sql.startswith("/*", j) and not sql.startswith("/*+", j):  # as Spark
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            if depth:
                raise UsageError("query has an unterminated /* comment: close it with */")
            tokens.append(Token("comment", sql[i:j]))
            i = j
        elif c in ("'", '"', "`"):
            j = _string_end(sql, i, raw=False)
            tokens.append(Token("quoted" if c == "`" else "string", sql[i:j]))
            i = j
        elif c in "rR" and sql[i + 1:i + 2] in ("'", '"'):
            j = _string_end(sql, i + 1, raw=True)
            tokens.append(Token("string", sql[i:j]))
            i = j
        elif m := _WORD.match(sql, i):
            j = m.end()
            if (uri := _URI_TAIL.match(sql, j)) and m.group().isalpha():
                j = uri.end()
            tokens.append(Token("word", sql[i:j]))
            i = j
        elif m := _NUMBER.match(sql, i):
            tokens.append(Token("number", m.group()))
            i = m.end()
        else:
            tokens.append(Token("punct", c))
            i += 1
    return tokens


def _significant(tokens: Iterable[Token]) -> list[Token]:
    return [t for t in tokens if t.kind not in ("ws", "comment")]


def check_read_only(sql: str) -> list[Token]:
    """Raise UsageError unless ``sql`` is exactly one read-only statement; return its tokens
    (a trailing semicolon is dropped)."""
    tokens = tokenize(sql)
    sig = _significant(tokens)
    while sig and sig[-1].text == ";":
        last = sig.pop()
        idx = max(i for i, t in enumerate(tokens) if t is last)
        tokens = tokens[:idx] + tokens[idx + 1:]
    if not sig:
        raise UsageError("query is empty: give one SELECT (or WITH, VALUES, SHOW, DESCRIBE, "
                         "EXPLAIN) statement")
    if any(t.text == ";" for t in sig):
        raise UsageError("query has more than one statement (a ';' separates them): "
                         "`reckon sql` runs exactly one read-only statement")
    depth = deepest = 0
    for t in sig:
        depth += (t.text == "(") - (t.text == ")")
        deepest = max(deepest, depth)
    if deepest > MAX_NESTING:
        raise UsageError(f"query nests parentheses {deepest} deep: `reckon sql` reads at most "
                         f"{MAX_NESTING}; use a WITH clause for each level instead")
    first = next((t for t in sig if t.text != "("), sig[0])
    if first.kind != "word" or first.upper not in ALLOWED_FIRST:
        raise UsageError(f"query starts with {first.text!r}: `reckon sql` is read-only and "
                         f"runs only {', '.join(sorted(ALLOWED_FIRST))} statements")
    for i, (prev, tok) in enumerate(zip([None, *sig], sig, strict=False)):
        nxt = sig[i + 1] if i + 1 < len(sig) else None
        if (tok.kind == "word" and tok.upper == "USING" and nxt is not None
                and nxt.kind == "string"):
            raise UsageError("query runs a script (TRANSFORM/MAP/REDUCE ... USING '...'): "
                             "`reckon sql` never runs programs; use SQL functions instead")
        if tok.kind == "word" and tok.upper == "IDENTIFIER" and nxt is not None \
                and nxt.text == "(":
            raise UsageError("query names a table with IDENTIFIER(...): `reckon sql` reads the "
                             "warehouse tables by their plain names only (provisional_totals, "
                             "late_events, ...)")
        if (tok.kind == "string" and prev is not None and prev.kind == "word"
                and prev.upper in ("HISTORY", "DETAIL")):
            raise UsageError(f"query describes {tok.text} by path: `reckon sql` reads the "
                             "warehouse tables by name only (DESCRIBE HISTORY late_events)")
        if tok.kind == "word" and tok.upper in FORBIDDEN and not (prev and prev.text == "."):
            raise UsageError(f"query contains {tok.text.upper()}: `reckon sql` is read-only "
                             "(no writes, DDL, session changes or JVM calls); quote a column "
                             "of that name with backticks")
        if tok.kind == "word" and tok.upper in FILE_READERS:
            raise UsageError(f"query calls {tok.text}(): `reckon sql` reads the warehouse tables "
                             "only, never files by path")
        if (tok.kind == "quoted" and tok.text.startswith("`") and prev is not None
                and prev.text == "." and any(c in tok.text for c in "/\\:")):
            raise UsageError(f"query reads {tok.text} by path: `reckon sql` reads the warehouse "
                             "tables by name only (provisional_totals, late_events, ...)")
    _check_derived_history(sig)
    return tokens


#: Views reckon sql derives on read, and the Delta table that holds their history.
DERIVED_FROM = {"provisional_totals": "provisional_deltas"}


def _check_derived_history(sig: Sequence[Token]) -> None:
    """Refuse time travel and DESCRIBE HISTORY/DETAIL of a derived view before Spark starts:
    it has no versions of its own, and Spark would only say "not supported" after a minute.

    Example: ``SELECT * FROM provisional_totals VERSION AS OF 3`` is refused, naming
    provisional_deltas; ``SELECT * FROM provisional_totals`` passes.
    """
    words = [t for t in sig if t.kind != "ws"]

    def upper_at(k: int) -> str:
        return words[k].upper if 0 <= k < len(words) else ""

    for k, tok in enumerate(words):
        name = (tok.text[1:-1] if tok.kind == "string" else unquote(tok)).lower() \
            if tok.kind in ("word", "quoted", "string") else ""
        source = DERIVED_FROM.get(name)
        if source is None or upper_at(k - 1) == "." or upper_at(k + 1) == ".":
            continue
        travels = (upper_at(k + 1) in ("VERSION", "TIMESTAMP") and upper_at(k + 2) == "AS") or (
            upper_at(k + 1) == "FOR" and upper_at(k + 2) in ("SYSTEM_VERSION", "SYSTEM_TIME"))
        described = upper_at(k - 1) in ("HISTORY", "DETAIL") and tok.kind != "string"
        changes = tok.kind == "string" and upper_at(k - 1) == "(" \
            and upper_at(k - 2) == "TABLE_CHANGES"
        if travels or described or changes:
            raise UsageError(
                f"{name} has no versions of its own: it is folded on read from {source}. "
                f"Time-travel {source} instead (SELECT * FROM {source} VERSION AS OF 3), or "
                "run `reckon explain` for one window's history")


def _path_ident(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def unquote(tok: Token) -> str:
    return tok.text[1:-1].replace(tok.text[0] * 2, tok.text[0]) if tok.kind == "quoted" \
        else tok.text


def rewrite_time_travel(tokens: Sequence[Token], paths: dict[str, str]) -> str:
    """Join ``tokens`` back into SQL, replacing the table references that need the path form
    (see the module docstring). ``paths`` maps lower-case table name -> Delta path."""
    out = [t.text for t in tokens]
    sig_idx = [i for i, t in enumerate(tokens) if t.kind not in ("ws", "comment")]
    sig = [tokens[i] for i in sig_idx]

    def upper_at(k: int) -> str:
        return sig[k].upper if 0 <= k < len(sig) else ""

    for k, tok in enumerate(sig):
        if tok.kind not in ("word", "quoted"):
            continue
        name = unquote(tok).lower()
        qualified = upper_at(k - 1) == "." or upper_at(k + 1) == "."
        if name in paths and not qualified:
            travels = (upper_at(k + 1) in ("VERSION", "TIMESTAMP") and upper_at(k + 2) == "AS"
                       and upper_at(k + 3) == "OF") or (
                upper_at(k + 1) == "FOR" and upper_at(k + 2) in ("SYSTEM_VERSION", "SYSTEM_TIME")
                and upper_at(k + 3) == "AS" and upper_at(k + 4) == "OF")
            described = (upper_at(k - 1) in ("HISTORY", "DETAIL")
                         and upper_at(k - 2) in ("DESCRIBE", "DESC"))
            if travels or described:
                out[sig_idx[k]] = _path_ident(paths[name])
        if tok.kind == "word" and tok.upper == "TABLE_CHANGES" and upper_at(k + 1) == "(" \
                and k + 2 < len(sig) and sig[k + 2].kind == "string":
            target = sig[k + 2].text[1:-1].lower()
            if target in paths:
                out[sig_idx[k]] = "table_changes_by_path"
                out[sig_idx[k + 2]] = _sql_string(paths[target])
    return "".join(out)


@dataclass(frozen=True)
class QueryResult:
    """At most ``limit`` rows of the query; ``truncated`` when it had more."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool
    limit: int
    tables: tuple[str, ...]

    def to_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]
