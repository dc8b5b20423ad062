"""The ``reckon`` command line: every command, its flags and the handler it runs.

``build_parser`` builds the argparse parser that ``app.cli.main`` parses with. Each command
is one ``_*_parser`` function (its flags, in ``--help`` order), and names its handler in
app/commands as a ``"module:function"`` string (``_lazy``): nothing of a command is imported
until it runs, so ``reckon --help`` is fast and starts no JVM. ``COMMANDS`` maps each command
to its handler once the parser is built.

Example: ``build_parser().parse_args(["audit", "--date", "2026-01-01"]).command == "audit"``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from reckon.config import Settings
from reckon.errors import NotBuiltYetError
from reckon.signoff import DECISIONS
from reckon.vocabulary import DEPRECATED_COMMANDS

__all__ = ["COMMANDS", "Handler", "build_parser"]

Handler = Callable[[argparse.Namespace, Settings], int]


def _version() -> str:
    try:
        return version("reckon")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


# ----------------------------------------------------------------------------- handlers


def _lazy(target: str) -> Handler:
    """A handler of app.commands (``module:function``), imported only when run, so
    `reckon --help` stays fast and imports no Spark."""

    def handler(args: argparse.Namespace, settings: Settings) -> int:
        import importlib

        module_name, func_name = target.split(":")
        try:
            func = getattr(importlib.import_module(module_name), func_name)
        except (ImportError, AttributeError) as exc:
            raise NotBuiltYetError(f"`reckon {args.command}` is not available: {exc}") from None
        return int(func(args, settings) or 0)

    return handler


# ----------------------------------------------------------------------------- parser

COMMANDS: dict[str, Handler] = {}


def _add(sub: Any, name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(handler=handler, command=name)
    COMMANDS[name] = handler
    return parser


def _warehouse(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--warehouse", required=required,
                   help="warehouse directory holding the Delta tables (default: ./warehouse)")


def _event_time_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", help="window width, e.g. 10s (default from config: 10s)")
    p.add_argument("--slide", help="hopping windows: slide, e.g. 5s (must divide the window)")
    p.add_argument("--watermark-bound", dest="watermark_bound", metavar="DURATION",
                   help="watermark bound L: an input's watermark is its maximum event time "
                   "minus L, e.g. 3s")
    p.add_argument("--allowed-lateness", dest="allowed_lateness", metavar="DURATION",
                   help="allowed lateness G: a closed window still takes events until the "
                   "watermark passes its end + G, e.g. 0s")
    p.add_argument("--lateness", dest="deprecated_lateness", metavar="DURATION",
                   help="deprecated name of --watermark-bound")
    p.add_argument("--grace", dest="deprecated_grace", metavar="DURATION",
                   help="deprecated name of --allowed-lateness")
    p.add_argument("--idle-timeout", dest="idle_timeout", metavar="DURATION",
                   help="a partition silent this long (arrival time) stops holding the watermark")
    p.add_argument("--watermark-inputs", dest="watermark_inputs", choices=("partition", "source"),
                   help="what has its own maximum and bound: each partition (default), or "
                   "each (partition, source) pair")
    p.add_argument("--watermark-bound-by-partition", dest="watermark_bound_by_partition",
                   metavar="P=DURATION,...",
                   help="bounds of some partitions instead of --watermark-bound, e.g. 0=5s,3=30s; "
                   "with --change-spec they change only the partitions named (2= removes "
                   "partition 2's bound, none removes them all)")
    p.add_argument("--watermark-bound-by-source", dest="watermark_bound_by_source",
                   metavar="SOURCE=DURATION,...",
                   help="bounds of some sources (with --watermark-inputs source), e.g. "
                   "sat=10s,http=30s; with --change-spec they change only the sources named "
                   "(sat= removes sat's bound, none removes them all)")


def _workbench_commands(sub: Any) -> None:
    """``reckon workbench`` (the reviewer's web app) and ``reckon users`` (who may log in)."""
    p = _add(sub, "workbench", _lazy("workbench.cli:cmd_workbench"),
             "serve the reviewer's workbench: breaks, evidence and sign-off in the browser")
    _warehouse(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8088, help="TCP port (default 8088)")
    p.add_argument("--secure-cookies", dest="secure_cookies", action="store_true",
                   help="mark cookies Secure (when served behind HTTPS)")
    p = _add(sub, "users", _lazy("workbench.cli:cmd_users"),
             "the workbench's users: add NAME --role R, list, disable NAME (and end their "
             "sessions), revoke NAME (end their sessions only)")
    _warehouse(p)
    p.add_argument("action", choices=("add", "list", "disable", "revoke"),
                   help="add NAME (asks for a password), list, disable NAME, or revoke NAME "
                   "(end their sessions)")
    p.add_argument("name", nargs="?", help="the user's name: the same name as their OS account "
                   "or database role, so the four-eyes rule sees one person")
    p.add_argument("--role", choices=("reconciler", "reviewer", "auditor"), default="reviewer",
                   help="with add: what the user may do (default reviewer; an auditor only "
                   "reads)")
    p.add_argument("--password-env", dest="password_env", metavar="VAR",
                   help="read the password from this environment variable (else asked twice)")
    p.add_argument("--password-stdin", dest="password_stdin", action="store_true",
                   help="read the password from standard input, one line (e.g. piped from a "
                   "password manager), as docker login does")


def _generate_parser(sub: Any) -> None:
    """The flags of `reckon generate`:

    ``reckon generate --out OUT [--events EVENTS] [--partitions PARTITIONS] [--keys
    KEYS] [--seed SEED] [--rate RATE] [--start START] [--duplicate-rate DUPLICATE_RATE]
    [--malformed-rate MALFORMED_RATE] [--future-rate FUTURE_RATE] [--tail-share
    TAIL_SHARE] [--median-delay MEDIAN_DELAY] [--slow-skew SLOW_SKEW] [--lines-per-file
    LINES_PER_FILE] [--currencies CURRENCIES] [--no-idle-partition]
    [--no-slow-partition] [--json]``
    """
    p = _add(sub, "generate", _lazy("app.commands.sample:cmd_generate"),
             "write a landing directory of NDJSON events in arrival order, with realistic faults")
    p.add_argument("--out", required=True, help="folder to write (must not hold event files)")
    p.add_argument("--events", type=int, default=100_000, help="unique events (default 100000)")
    p.add_argument("--partitions", type=int, default=4, help="input partitions (default 4)")
    p.add_argument("--keys", type=int, default=50, help="merchant keys (default 50)")
    p.add_argument("--seed", type=int, default=7,
                   help="random seed: the same seed writes the same files (default 7)")
    p.add_argument("--rate", type=float, default=200.0, help="events per second of event time")
    p.add_argument("--start", default="2026-01-01T00:00:00Z", help="first event time (UTC)")
    p.add_argument("--duplicate-rate", dest="duplicate_rate", type=float, default=0.01,
                   help="share of events delivered twice (default 0.01)")
    p.add_argument("--malformed-rate", dest="malformed_rate", type=float, default=0.002,
                   help="share of malformed lines (default 0.002)")
    p.add_argument("--future-rate", dest="future_rate", type=float, default=0.0005,
                   help="share of events dated in the future (default 0.0005)")
    p.add_argument("--tail-share", dest="tail_share", type=float, default=0.03,
                   help="share of events in the heavy delay tail")
    p.add_argument("--median-delay", dest="median_delay", default="300ms",
                   help="median arrival delay (default 300ms)")
    p.add_argument("--slow-skew", dest="slow_skew", default="2s",
                   help="extra delay of the slow partition")
    p.add_argument("--lines-per-file", dest="lines_per_file", type=int, default=10_000,
                   help="lines per landing file (default 10000)")
    p.add_argument("--currencies", help="ISO 4217 codes to draw from, most common first "
                   "(default USD,EUR,GBP,JPY,KWD): most merchants settle in one, some in two "
                   "or three")
    p.add_argument("--no-idle-partition", action="store_true",
                   help="no partition falls silent for a stretch")
    p.add_argument("--no-slow-partition", action="store_true",
                   help="no partition lags behind the others")
    p.add_argument("--json", action="store_true", help="the manifest, machine-readable")


def _stream_parser(sub: Any) -> None:
    """The flags of `reckon stream`:

    ``reckon stream (--landing LANDING | --kafka HOST:PORT) [--topic KAFKA_TOPIC]
    [--warehouse WAREHOUSE] [--window WINDOW] [--slide SLIDE] [--watermark-bound DURATION]
    [--allowed-lateness DURATION] [--lateness DURATION] [--grace DURATION] [--idle-timeout
    DURATION] [--watermark-inputs {partition,source}] [--watermark-bound-by-partition
    P=DURATION,...] [--watermark-bound-by-source SOURCE=DURATION,...]
    [--max-files-per-trigger N] [--partitions P,P,...] [--available-now | --trigger TRIGGER]
    [--change-spec]``
    """
    p = _add(sub, "stream", _lazy("app.commands.stream:cmd_stream"),
             "run the streaming aggregator: provisional totals, late events, watermark progress")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--landing", help="landing directory of event files (*.ndjson, *.jsonl, "
                     "*.json: one JSON object per line); every other file is named in the log "
                     "as not read, with the reason")
    src.add_argument("--kafka", dest="kafka_bootstrap", metavar="HOST:PORT",
                     help="Kafka bootstrap servers")
    p.add_argument("--topic", dest="kafka_topic", help="Kafka topic (with --kafka)")
    _warehouse(p)
    _event_time_flags(p)
    p.add_argument("--max-files-per-trigger", dest="max_files_per_trigger", type=int,
                   metavar="N", help="landing files read per micro-batch at most")
    p.add_argument("--partitions", dest="expected_partitions", metavar="P,P,...",
                   help="expected partitions, e.g. 0,1,2,3 (the watermark waits for each)")
    trig = p.add_mutually_exclusive_group()
    trig.add_argument("--available-now", action="store_true",
                      help="process everything there now, then stop")
    trig.add_argument("--trigger", help="processing-time trigger interval, e.g. 5s")
    p.add_argument("--change-spec", action="store_true",
                   help="record the given --watermark-bound/--allowed-lateness/--idle-timeout/"
                   "--partitions/--watermark-inputs/--watermark-bound-by-partition/"
                   "--watermark-bound-by-source as the "
                   "warehouse's new event-time spec, applying from the next batch (without it, "
                   "a value that disagrees with the warehouse's spec is refused)")


def _replay_parser(sub: Any) -> None:
    """The flags of `reckon replay`:

    ``reckon replay [--warehouse WAREHOUSE] [--kafka HOST:PORT] [--topic KAFKA_TOPIC]
    [--json] [--date DATE] [--from DATE] [--to DATE]``
    """
    p = _add(sub, "replay", _lazy("app.commands.nightly:cmd_replay"),
             "recompute canonical totals for a day (or a range) from the full event log")
    _warehouse(p)
    p.add_argument("--kafka", dest="kafka_bootstrap", metavar="HOST:PORT",
                   help="replay straight from a Kafka topic (earliest to latest) instead")
    p.add_argument("--topic", dest="kafka_topic", help="Kafka topic (with --kafka)")
    _days(p, "replay")


def _days(p: Any, verb: str) -> None:
    """``--json`` and the day or range a nightly step runs for (``--date``, ``--from``,
    ``--to``), as ``reckon replay`` and ``reckon compact`` take them."""
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    p.add_argument("--date", help=f"day to {verb}, YYYY-MM-DD (UTC)")
    p.add_argument("--from", dest="date_from", metavar="DATE", help="first day of a range")
    p.add_argument("--to", dest="date_to", metavar="DATE",
                   help="last day of a range (inclusive)")


def _compact_parser(sub: Any) -> None:
    """The flags of `reckon compact`:

    ``reckon compact [--warehouse WAREHOUSE] [--json] [--date DATE] [--from DATE] [--to
    DATE]``
    """
    p = _add(sub, "compact", _lazy("app.commands.nightly:cmd_compact"),
             "rewrite a closed day's small files of the stream tables into a few large ones "
             "(Delta OPTIMIZE of that day's partitions; the nightly DAG runs it before the "
             "replay)")
    _warehouse(p)
    _days(p, "compact")


def _vacuum_parser(sub: Any) -> None:
    """The flags of `reckon vacuum`:

    ``reckon vacuum [--warehouse WAREHOUSE] [--retain RETAIN] [--dry-run] [--json]``
    """
    p = _add(sub, "vacuum", _lazy("app.commands.nightly:cmd_vacuum"),
             "delete the data files no table version within the retention uses (Delta "
             "VACUUM of every reckon table; older versions stop being readable)")
    _warehouse(p)
    p.add_argument("--retain", help="keep what versions this recent use, e.g. 30d (default "
                   "from config: vacuum_retain, 30d; at least 7d)")
    p.add_argument("--dry-run", dest="dry_run", action="store_true",
                   help="count the files it would delete, delete none")
    p.add_argument("--json", action="store_true", help="machine-readable summary")


def _audit_parser(sub: Any) -> None:
    """The flags of `reckon audit`:

    ``reckon audit [--warehouse WAREHOUSE] --date DATE [--tolerance-abs TOLERANCE_ABS]
    [--tolerance-rel TOLERANCE_REL] [--kind KIND] [--json]``
    """
    p = _add(sub, "audit", _lazy("app.commands.nightly:cmd_audit"),
             "reconcile provisional against canonical totals for a day")
    _warehouse(p)
    p.add_argument("--date", required=True, help="YYYY-MM-DD (UTC)")
    p.add_argument("--tolerance-abs", dest="tolerance_abs",
                   help="absolute money tolerance for a residual (default 0.00)")
    p.add_argument("--tolerance-rel", dest="tolerance_rel",
                   help="relative tolerance, share of the canonical amount (default 0)")
    p.add_argument("--kind", default="nightly", help="run kind recorded with the result")
    p.add_argument("--json", action="store_true", help="machine-readable summary")


def _check_parser(sub: Any) -> None:
    """The flags of `reckon check`:

    ``reckon check [--warehouse WAREHOUSE] --date DATE [--json]``
    """
    p = _add(sub, "check", _lazy("app.commands.nightly:cmd_check"),
             "run the data-quality suites (Great Expectations) for a day")
    _warehouse(p)
    p.add_argument("--date", required=True, help="YYYY-MM-DD (UTC)")
    p.add_argument("--json", action="store_true", help="machine-readable summary")


def _breaks_parser(sub: Any) -> None:
    """The flags of `reckon breaks`:

    ``reckon breaks [--warehouse WAREHOUSE] [--date DATE] [--status STATUS]
    [--currency CURRENCY] [--key KEY] [--min-gap AMOUNT] [--json] {list}``
    """
    p = _add(sub, "breaks", _lazy("app.commands.review:cmd_breaks"),
             "list reconciliation breaks with their review status and age")
    p.add_argument("action", choices=["list"], help="what to do (list)")
    _warehouse(p)
    p.add_argument("--date", help="only this day (YYYY-MM-DD)")
    p.add_argument("--status", help="only breaks in this review status (open, explained, "
                                    "accepted, resolved, rejected)")
    p.add_argument("--currency", help="only breaks in this currency (ISO 4217, e.g. JPY)")
    p.add_argument("--key", help="only breaks of this account or merchant key")
    p.add_argument("--min-gap", metavar="AMOUNT",
                   help="only breaks whose gap is at least this much either way, in the "
                        "break's own currency (10: 10 EUR, 10 JPY)")
    p.add_argument("--json", action="store_true", help="machine-readable output, amounts as "
                   "exact decimal text")


def _signoff_parser(sub: Any) -> None:
    """The flags of `reckon signoff`:

    ``reckon signoff [--warehouse WAREHOUSE] --run RUN [--by BY] --note NOTE [--decision
    {approved,rejected,accepted,resolved,reopened}] [--json]``
    """
    p = _add(sub, "signoff", _lazy("app.commands.review:cmd_signoff"),
             "record a review decision on an audit run in the hash-chained sign-off log")
    _warehouse(p)
    p.add_argument("--run", required=True, help="audit run id")
    p.add_argument("--by", help="optional: your account name, checked against the account "
                   "that runs the command (the signer is that account, never another name)")
    p.add_argument("--note", required=True, help="what was reviewed and decided")
    p.add_argument("--decision", default="approved", choices=list(DECISIONS),
                   help="the decision recorded (default approved); your latest decision on "
                   "the run stands: accepted and resolved approve and close its open breaks, "
                   "reopened withdraws your decision")
    p.add_argument("--json", action="store_true",
                   help="the recorded entry and the run's state, machine-readable")


def _verify_log_parser(sub: Any) -> None:
    """The flags of `reckon verify-log`:

    ``reckon verify-log [--warehouse WAREHOUSE] [--expect-head HASH] [--json]``
    """
    p = _add(sub, "verify-log", _lazy("app.commands.review:cmd_verify_log"),
             "check the sign-off log: its hash chain, each signer's signature, the breaks "
             "and report each entry signed, and the head published outside the warehouse")
    _warehouse(p)
    p.add_argument("--expect-head", metavar="HASH",
                   help="a head hash published earlier (with a report, a notification, or "
                   "the signoff_heads file): it must still be in the log")
    p.add_argument("--json", action="store_true", help="machine-readable result")


def _keys_parser(sub: Any) -> None:
    """The flags of `reckon keys`:

    ``reckon keys init [--key-file FILE]``; ``reckon keys register [--warehouse WAREHOUSE]
    NAME --public-key KEY [--scope {self,workbench}]``; ``reckon keys revoke KEY_ID``;
    ``reckon keys list``
    """
    p = _add(sub, "keys", _lazy("app.commands.keys:cmd_keys"),
             "signing keys: make yours (init), register a signer's public key or revoke a "
             "lost one (register, revoke: the administrator), list the registered keys (list)")
    p.add_argument("action", choices=["init", "register", "revoke", "list"],
                   help="what to do")
    p.add_argument("name", nargs="?", help="register: the signer's account name; revoke: "
                   "the key id (`reckon keys list`)")
    _warehouse(p)
    p.add_argument("--public-key", help="register: the key `reckon keys init` printed")
    p.add_argument("--scope", default="self", choices=["self", "workbench"],
                   help="register: self (signs as its name only, default) or workbench (the "
                   "workbench's service key, which signs for its logged-in users)")
    p.add_argument("--key-file", help="init: where to write the new private key (default: "
                   "the signing_key setting, or ~/.reckon/signing_key.pem)")


def _report_parser(sub: Any) -> None:
    """The flags of `reckon report`:

    ``reckon report [--warehouse WAREHOUSE] --date DATE --out OUT [--json]``
    """
    p = _add(sub, "report", _lazy("app.commands.nightly:cmd_report"),
             "render the day's reconciliation report (HTML, PDF, CSV)")
    _warehouse(p)
    p.add_argument("--date", required=True, help="YYYY-MM-DD (UTC), a day with an audit run")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--json", action="store_true", help="the files written, machine-readable")


def _sql_parser(sub: Any) -> None:
    """The flags of `reckon sql`:

    ``reckon sql [--warehouse WAREHOUSE] [--engine {duckdb,spark}] [--json] [--limit LIMIT]
    query``
    """
    p = _add(sub, "sql", _lazy("app.commands.investigate:cmd_sql"),
             "run a read-only SQL query over the warehouse tables")
    _warehouse(p)
    p.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb",
                   help="duckdb (default): answers in about a second, no JVM; spark: "
                        "Spark SQL, for Spark-only syntax (DESCRIBE HISTORY, table_changes)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--limit", type=int, default=1000, help="rows printed at most (default 1000)")
    p.add_argument("query", help='e.g. "SELECT * FROM provisional_totals LIMIT 10"')


def _explain_parser(sub: Any) -> None:
    """The flags of `reckon explain`:

    ``reckon explain [--warehouse WAREHOUSE] [--engine {duckdb,spark}] --key KEY --window TIME
    [--currency CURRENCY] [--json]``
    """
    p = _add(sub, "explain", _lazy("app.commands.investigate:cmd_explain"),
             "tell the story of one window and key, per currency: every event and what "
             "became of it")
    _warehouse(p)
    p.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb",
                   help="duckdb (default): reads the window's rows in about a second, no JVM; "
                        "spark: the same story read with Spark")
    p.add_argument("--key", required=True, help="the account or merchant key, e.g. "
                   "merchant-0003")
    p.add_argument("--window", dest="window_at", metavar="TIME", required=True,
                   help="any instant inside the window, e.g. 2026-01-01T09:42:00Z")
    p.add_argument("--currency", help="only this currency's story (ISO 4217 code, e.g. EUR); "
                   "default: every currency of the key's window, each told separately")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _deprecated_command(sub: Any, old: str, new: str, handler: Handler
                        ) -> argparse.ArgumentParser:
    """``reckon <old>``, the first name of ``reckon <new>``: the same flags and handler, left
    out of ``reckon --help``; ``main`` warns once that it is deprecated (args.command is the
    new name, args.deprecated_command the one typed).

    Example: ``reckon bound-whatif --date D`` runs ``reckon bound-whatif --date D`` and prints
    ``reckon: warning: reckon bound-whatif is deprecated, use reckon bound-whatif``.
    """
    parser = sub.add_parser(old, description=f"deprecated name of `reckon {new}`")
    parser.set_defaults(handler=handler, command=new, deprecated_command=old)
    return parser


def _bound_whatif_curve_parser(sub: Any) -> None:
    """The flags of `reckon bound-whatif-curve` (first name: `reckon bound-whatif-curve`):

    ``reckon bound-whatif-curve --events EVENTS --window DURATION --bounds BOUNDS [--json]``
    """
    handler = _lazy("app.commands.investigate:cmd_bound_whatif_curve")
    new = _add(sub, "bound-whatif-curve", handler, "bound what-if on a file of events: "
               "completeness and emit latency for candidate watermark bounds")
    for old, now in DEPRECATED_COMMANDS.items():
        if now == "bound-whatif-curve":
            _bound_whatif_curve_flags(_deprecated_command(sub, old, now, handler))
    _bound_whatif_curve_flags(new)


def _bound_whatif_curve_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--events", required=True, help="CSV or Parquet with event_time, arrival_time")
    p.add_argument("--window", required=True, metavar="DURATION", help="window width, e.g. 10s")
    p.add_argument("--bounds", required=True, help="comma-separated durations, e.g. 0s,2s,5s")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _bound_whatif_parser(sub: Any) -> None:
    """The flags of `reckon bound-whatif` (first name: `reckon bound-whatif`):

    ``reckon bound-whatif [--warehouse WAREHOUSE] [--engine {duckdb,spark}] --date DATE [--bounds
    BOUNDS] [--target TARGET] [--per-source] [--json]``
    """
    handler = _lazy("app.commands.investigate:cmd_bound_whatif")
    new = _add(sub, "bound-whatif", handler,
               "bound what-if on the warehouse's event log for a day: what other watermark "
               "bounds would have done (completeness per micro-batch, as the stream ran, and "
               "per event), recommended bound overall and per partition, who is late")
    for old, now in DEPRECATED_COMMANDS.items():
        if now == "bound-whatif":
            _bound_whatif_flags(_deprecated_command(sub, old, now, handler))
    _bound_whatif_flags(new)


def _bound_whatif_flags(p: argparse.ArgumentParser) -> None:
    _warehouse(p)
    p.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb",
                   help="duckdb (default): read the Delta tables without a JVM; spark: the "
                   "same analysis on Spark")
    p.add_argument("--date", required=True, help="YYYY-MM-DD (UTC)")
    p.add_argument("--bounds", help="comma-separated durations (default: a standard ladder)")
    p.add_argument("--target", help="target completeness, e.g. 0.999 (default from config)")
    p.add_argument("--per-source", dest="per_source", action="store_true",
                   help="recommend a bound per source (inputs by partition and source) and "
                   "compare it with the best single bound")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _demo_parser(sub: Any) -> None:
    """The flags of `reckon demo`:

    ``reckon demo [--warehouse WAREHOUSE] [--events EVENTS] [--out OUT]``
    """
    p = _add(sub, "demo", _lazy("app.commands.sample:cmd_demo"),
             "run the whole flow end to end on the embedded defaults")
    _warehouse(p)
    p.add_argument("--events", type=int, default=120_000,
                   help="events to generate (default 120000: about 6 minutes on 2 quiet "
                   "cores, longer on a busy machine)")
    p.add_argument("--out", help="reports folder: each day's report in <out>/<day> "
                   "(default: <warehouse>/reports)")


#: One builder per command, in the order `reckon --help` lists them.
_PARSERS: tuple[Callable[[Any], None], ...] = (
    _generate_parser,
    _stream_parser,
    _replay_parser,
    _compact_parser,
    _vacuum_parser,
    _audit_parser,
    _check_parser,
    _breaks_parser,
    _signoff_parser,
    _verify_log_parser,
    _keys_parser,
    _workbench_commands,
    _report_parser,
    _sql_parser,
    _explain_parser,
    _bound_whatif_curve_parser,
    _bound_whatif_parser,
    _demo_parser,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reckon",
        description="Provisional stream totals, canonical batch totals, and the audit between "
                    "them. Every command takes --help.",
    )
    parser.add_argument("--config", help="TOML config file (default: $RECKON_CONFIG or ./reckon.toml)")
    parser.add_argument("--version", action="version", version=f"reckon {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add_parser in _PARSERS:
        add_parser(sub)
    return parser
