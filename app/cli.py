"""The ``reckon`` console script. Every command has --help; heavy imports happen inside commands.

``main`` runs a command in named steps: parse the command line (``app.cli_parser``, every
command and its flags), settle the settings (flags over config, deprecated flag names moved
onto their clear ones), refuse a read of a warehouse that does not exist, then run the
command's handler (app/commands).

Errors reckon raises on purpose (bad arguments, missing setup, failed checks) print one clear
line and exit non-zero; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.cli_parser import build_parser
from app.settings import load_settings, warn_renamed
from reckon.config import Settings
from reckon.errors import ReckonError, UsageError
from storage.sharing import share_process

__all__ = ["main", "require_existing"]


#: (flag, its deprecated name, the Settings field both set, the deprecated flag's dest); see
#: reckon.vocabulary.DEPRECATED_SETTINGS.
_RENAMED_FLAGS = (("--watermark-bound", "--lateness", "watermark_bound", "deprecated_lateness"),
                  ("--allowed-lateness", "--grace", "allowed_lateness", "deprecated_grace"))


def _deprecated_flags(args: argparse.Namespace) -> dict[str, str]:
    """Move each deprecated flag's value onto its clear flag, warning once; return the
    deprecated flags used (field -> flag), so that a refusal names the flag the user typed.
    Both names at once is a UsageError, even with one value: which one counts is not a guess
    the user should have to make.

    Example: ``reckon stream --lateness 5s`` runs as ``--watermark-bound 5s`` and prints
    ``reckon: warning: --lateness is deprecated, use --watermark-bound``.
    """
    used: dict[str, str] = {}
    for new, old, name, dest in _RENAMED_FLAGS:
        value = getattr(args, dest, None)
        if value is None:
            continue
        if getattr(args, name, None) is not None:
            raise UsageError(f"{new} and {old} set the same setting ({old} is its deprecated "
                             f"name): give only {new}")
        warn_renamed(old, new)
        setattr(args, name, value)
        used[name] = old
    return used


def _settings(args: argparse.Namespace) -> Settings:
    deprecated = _deprecated_flags(args)
    overrides: dict[str, Any] = {}
    for name in ("warehouse", "window", "slide", "watermark_bound", "allowed_lateness",
                 "idle_timeout",
                 "max_files_per_trigger", "kafka_bootstrap", "kafka_topic", "spark_master",
                 "report_db_url", "expected_partitions", "tolerance_abs", "tolerance_rel",
                 "watermark_inputs", "watermark_bound_by_partition",
                 "watermark_bound_by_source"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    settings = load_settings(getattr(args, "config", None), **overrides)
    return settings.with_values(deprecated) if deprecated else settings


def _report_db_failure(exc: BaseException, settings: Settings | None) -> str | None:
    """A report database that cannot be reached or opened, as one line that says what to check
    (None for any other exception: a bug keeps its traceback)."""
    if not type(exc).__module__.startswith("sqlalchemy"):
        return None
    from sqlalchemy import exc as sa_exc

    cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    orig = getattr(exc, "orig", None)
    if (getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)) == "42501":
        return (f"the report database refused it: {cause}. Log in with a role that may do "
                "this (audits: a member of reckon_reconciler; sign-offs: of reckon_reviewer)")
    if not isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError
                      | sa_exc.ArgumentError):
        return None
    if "readonly database" in cause and settings and settings.report_db.startswith("sqlite:"):
        from reports.review import permission_fix

        db_file = Path(settings.report_db.removeprefix("sqlite:///"))
        return permission_fix(db_file, settings.warehouse_path)
    where = settings.public_dict()["report_db_url"] if settings else "the report database"
    return (f"cannot use the report database {where}: {cause}. Check report_db_url "
            "(RECKON_REPORT_DB_URL) and that the server is running and reachable")


# Commands that read a warehouse someone already has: a mistyped --warehouse must be an error,
# not a new empty warehouse that "has no breaks" or "passes its checks".
_READS_TABLES = frozenset({"compact", "replay", "audit", "check", "report", "sql", "explain",
                           "bound-whatif", "vacuum"})
# Commands that read the report database the audits wrote (SQLite: a file in the warehouse).
_READS_REPORT_DB = frozenset({"breaks", "signoff", "verify-log"})
# run with the warehouse's event-time spec (reckon.spec); the stream resolves its own
_TAKES_WAREHOUSE_SPEC = frozenset({"compact", "replay", "audit", "check", "report", "explain",
                                   "bound-whatif"})


def _holds_tables(warehouse: Path) -> bool:
    """Whether the warehouse holds any reckon table (imported here: the report database's
    commands, a sign-off among them, import nothing of Spark)."""
    from storage.table_names import TABLES, table_exists

    return any(table_exists(warehouse, t) for t in TABLES)


def require_existing(command: str, settings: Settings) -> None:
    """Refuse a read of a warehouse (or report database) that does not exist, with what to
    do, before anything creates it. ``replay --kafka`` reads a topic and may start one."""
    wh = settings.warehouse_path
    if command in _READS_TABLES and not _holds_tables(wh):
        what = "does not exist" if not wh.exists() else "holds no reckon table"
        raise UsageError(f"--warehouse {str(wh)!r} {what}: check --warehouse (or "
                         "RECKON_WAREHOUSE), or run `reckon stream` to create a warehouse")
    if command in _READS_REPORT_DB and settings.report_db.startswith("sqlite:///"):
        path = Path(settings.report_db.removeprefix("sqlite:///"))
        if not path.is_file():
            raise UsageError(f"no report database at {str(path)!r}: run `reckon audit --date "
                             "D` first, or check --warehouse (or RECKON_REPORT_DB_URL)")


def _quiet_broken_pipe() -> int:
    """The reader of our output went away (``reckon breaks list --json | head``): no
    traceback, and no second error when Python flushes stdout at exit. 141 = 128 + SIGPIPE,
    as other tools end."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "deprecated_command", None):  # `reckon bound-whatif`: runs, and warns once
        warn_renamed(f"reckon {args.deprecated_command}", f"reckon {args.command}")
    settings: Settings | None = None
    try:
        from app.pipeline import quiet_libraries

        quiet_libraries()
        settings = _settings(args)
        share_process(settings.shared_warehouse)
        if args.command == "sql":  # a statement that may not run is refused first
            from reckon.sql_guard import check_read_only

            check_read_only(args.query)
            if args.engine == "duckdb":
                from reports.duck import check_duck_sql, connect

                check_duck_sql(connect(), args.query)
        if not (args.command == "replay" and getattr(args, "kafka_bootstrap", None)):
            require_existing(args.command, settings)
        if args.command in _TAKES_WAREHOUSE_SPEC:
            from storage.spec_log import settings_for

            settings = settings_for(settings, args.command)
        return int(args.handler(args, settings) or 0)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except ReckonError as exc:
        print(f"reckon {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:
        message = _report_db_failure(exc, settings)
        if message is None:
            raise
        print(f"reckon {args.command}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"reckon {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
