"""Configuration in one place: the settings, their defaults and their rules, as one value.

The defaults run on one laptop: local Spark, a ``./warehouse`` directory, a SQLite report
database inside it. Where values come from (built-in defaults < a TOML file < RECKON_*
environment < CLI flags) is read by the app layer (app/settings.py ``load_settings``); this
module only holds and checks them, so the engines and the pure rules take a ``Settings`` (or
the frozen configs of reckon/engine_config.py) without reading any file. Every key can be
overridden by an environment variable named ``RECKON_`` + the key in upper case, e.g.
``RECKON_WATERMARK_BOUND=5s``, ``RECKON_REPORT_DB_URL=postgresql+psycopg://...``.

The event-time settings speak one vocabulary (reckon/vocabulary.py): ``watermark_bound``
(flag ``--watermark-bound``), the bound L behind each input's maximum event time;
``allowed_lateness`` (``--allowed-lateness``), what Flink and Beam call allowed lateness. Their
first names (``DEPRECATED_SETTINGS``) still work and warn once; the warehouse records them by
those first names, so existing warehouses open unchanged.

Example:

>>> settings_of(window="1m").window
'1m'
"""

from __future__ import annotations

import difflib
import json
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from reckon.engine_config import (
    REPORTED_SETTINGS,
    AuditConfig,
    CheckConfig,
    CheckRunConfig,
    CompactionConfig,
    ParseConfig,
    ProgressConfig,
    ReplayConfig,
    ReportConfig,
    StreamConfig,
    TriggerLimits,
    WhatIfConfig,
)
from reckon.errors import ConfigError, ReckonError
from reckon.eventtime import EventTimeRules
from reckon.materiality import thresholds
from reckon.money import MAX_EVENT_AMOUNT, accepted_currencies
from reckon.reconcile import Tolerance
from reckon.schema import AMOUNT_PRECISION, AMOUNT_SCALE
from reckon.timeutil import parse_duration, parse_timestamp
from reckon.vocabulary import DEPRECATED_SETTINGS, stored_key

__all__ = ["CLEAR_ALL", "DEPRECATED_SETTINGS", "PROJECT_ROOT", "REPLAY_MODES", "WAREHOUSE_ORIGIN",
           "Settings", "bounds_in_force", "flag", "fold_deprecated", "keywords_of", "nearest",
           "setting_names", "settings_of"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: the origin of a value taken from the warehouse's recorded spec (reckon.spec.with_spec)
WAREHOUSE_ORIGIN = "the warehouse"
#: where every setting's name is documented: what a refused unknown name points to
_DOCUMENTED = ("reckon.example.toml lists every setting, RECKON_ + its name in upper case "
               "in the environment (README, Configuration)")
#: how the nightly replay may run (setting ``replay_mode``)
REPLAY_MODES = ("python", "spark-submit")
#: a bounds map's entry that clears every recorded bound of its kind (given as ``none``)
CLEAR_ALL = "*"


@dataclass(frozen=True)
class Settings:
    # where things live
    warehouse: str = "warehouse"
    report_db_url: str = ""  # empty -> sqlite file <warehouse>/reports/reckon.db
    jars_dir: str = str(PROJECT_ROOT / ".cache" / "jars")
    # Spark
    spark_master: str = "local[*]"
    spark_driver_memory: str = "4g"
    shuffle_partitions: int = 4
    spark_ui: bool = False
    # start the driver JVM from the class-data archive `make setup` trains (spark/class_archive.py);
    # false: load every class from the jars at each start
    spark_class_archive: bool = True
    # a nightly step (compact, replay, audit, check) over days of at most this many events runs
    # Spark's expressions interpreted instead of generating and compiling Java for each query
    # (spark.execution_mode: on a small day the compiling is most of the step); 0: always
    # generate code
    interpreted_max_rows: int = 200_000
    # event time (see reckon.eventtime)
    window: str = "10s"
    slide: str = ""
    watermark_bound: str = "3s"  # L: an input's watermark is its maximum event time minus L
    allowed_lateness: str = "0s"  # G: a closed window takes events until WM >= end + G
    idle_timeout: str = "60s"
    max_clock_skew: str = "5m"
    dedup_horizon: str = "1h"
    expected_partitions: tuple[int, ...] = ()
    # bounds per watermark input (reckon.eventtime.WatermarkPolicy): inputs are partitions,
    # or with "source" (partition, source) pairs (empty: "source" when bounds by source are
    # given, else "partition"); overrides of watermark_bound by partition ("0=5s,3=30s") and
    # by source ("sat=10s,http=30s", inputs by source only)
    watermark_inputs: str = ""
    watermark_bound_by_partition: Mapping[str, str] = field(default_factory=dict)
    watermark_bound_by_source: Mapping[str, str] = field(default_factory=dict)
    # validation
    amount_min: Decimal = Decimal("0.00")
    amount_max: Decimal = Decimal("1000000.00")
    # ISO 4217 codes reckon books; empty: every one with a minor unit of 0-3 places
    # (reckon.money). Narrow it to refuse currencies a deployment never takes.
    currencies: tuple[str, ...] = ()
    min_event_time: str = "2000-01-01T00:00:00Z"
    # stream source
    kafka_bootstrap: str = ""
    kafka_topic: str = "events"
    max_files_per_trigger: int = 10
    max_offsets_per_trigger: int = 1_000_000
    # batches between the stream's compactions of its open days (event_log's small files,
    # provisional_totals' settled windows); 0: never
    event_log_compact_every: int = 50
    # `reckon stream` serves its batches' figures in the Prometheus text format on this
    # loopback port while it runs (spark.metrics_exporter); 0: off
    metrics_port: int = 0
    # audit
    tolerance_abs: Decimal = Decimal("0.00")
    tolerance_rel: Decimal = Decimal("0")
    target_completeness: Decimal = Decimal("0.999")
    allow_unexplained: bool = False  # data-quality: UNEXPLAINED/MISSING_* rows only warn
    # data-quality: a table's day of at most this many rows is validated in the driver's
    # memory (GX on pandas, one Arrow transfer) instead of as Spark jobs; 0: always Spark
    check_in_memory_rows: int = 200_000
    # data-quality: a day whose every table holds at most this many rows (Delta statistics)
    # is checked without a JVM (delta-rs reads, GX on pandas: audits/quality_local.py); 0:
    # always Spark
    check_without_jvm_max_rows: int = 200_000
    # sign-off: distinct reviewers (never the run's reconciler) whose standing approval signs a
    # run off (reckon.signoff.review_state)
    required_approvers: int = 1
    # the sign-off log's keys (reckon.signing, docs/decisions/0011): this account's private
    # key (empty: ~/.reckon/signing_key.pem); the administrator's public key, pinned here,
    # outside the warehouse ("ed25519:..."), which signs every signer's key registration;
    # unsigned entries accepted as written before signing keys (seq 1 to this; 0: none); a
    # file outside the warehouse that each sign-off's new log head is appended to, and that
    # verify-log checks the log against (empty: none)
    signing_key: str = ""
    signoff_admin_key: str = ""
    signoff_legacy_through: int = 0
    signoff_heads: str = ""
    # several OS accounts share the warehouse (like git's core.sharedRepository): "group"
    # makes what reckon creates writable by the warehouse's group; empty: the umask decides
    shared_warehouse: str = ""
    # materiality (reckon.materiality): the minimum absolute gap per currency that makes a
    # break material ("EUR=1000,JPY=100000"); a currency not named: every break material;
    # empty: no break is marked
    material_gap: Mapping[str, str] = field(default_factory=dict)
    # replay
    replay_broadcast_ids: int = 1_000_000  # repeated event_ids sent to every task (hashes)
    # nightly
    lookback_days: int = 1
    # how the nightly DAG's replay task runs, read by the task when it runs (the DAG's shape
    # never depends on it): "python" inside the task (local Spark), "spark-submit" through
    # Airflow's Spark connection ``spark_conn_id`` (app/submit_replay.py on a cluster)
    replay_mode: str = "python"
    spark_conn_id: str = "reckon_spark"
    watermark_wait_timeout: str = "2h"
    watermark_poll: str = "1m"  # how often the nightly run looks at the watermark
    # Spark's JVM logging and the JVM's own stderr to stdout, each line with its level
    # (Airflow files task stderr as ERROR; the nightly DAG turns this on); off, Spark's
    # default (everything on stderr) for terminals
    spark_log_to_stdout: bool = False
    # notifications of the nightly DAG (app.notify), sent with Airflow's notifiers; each
    # is off until turned on: a task's final failure, an audit with unexplained or material
    # breaks, a failed quality gate, a day's report ready for review. They go to every
    # channel set: mail to notify_email through the SMTP connection notify_smtp_conn
    # (AIRFLOW_CONN_SMTP_DEFAULT), and the Slack incoming webhook of the connection
    # notify_slack_conn (empty: none)
    notify_on_failure: bool = False
    notify_on_breaks: bool = False
    notify_on_quality_gate: bool = False
    notify_report_ready: bool = False
    notify_email: tuple[str, ...] = ()
    notify_email_from: str = ""  # empty: the SMTP connection's from_email
    notify_smtp_conn: str = "smtp_default"
    notify_slack_conn: str = ""
    # the workbench's base URL as reviewers open it ("https://reckon.example.com"): the
    # "report ready" notice then links the day's page and its report there (empty: the
    # report's path only)
    workbench_url: str = ""
    # VACUUM: files the tables no longer use are deleted once this old (reckon vacuum)
    vacuum_retain: str = "30d"
    # reckon sql on DuckDB (reports.duck): a query is stopped after this long, and may ask
    # for at most this many rows (--limit)
    sql_timeout: str = "5m"
    sql_max_rows: int = 1_000_000
    extra_spark_conf: Mapping[str, str] = field(default_factory=dict)
    # where each value not left at its default came from ("--window", "RECKON_WINDOW", the
    # config file, "the warehouse"): what a refusal names when values disagree (reckon.spec)
    origins: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.event_time_rules()  # validates every duration and the window/slide pair
        if self.amount_min > self.amount_max:
            raise ConfigError(f"amount_min={self.amount_min} is above amount_max={self.amount_max}")
        for name in ("amount_min", "amount_max"):
            if Decimal(getattr(self, name)).copy_abs() >= MAX_EVENT_AMOUNT:  # abs() rounds
                raise ConfigError(
                    f"{name}={getattr(self, name)} is not valid: an event's amount is stored as "
                    f"DECIMAL({AMOUNT_PRECISION},{AMOUNT_SCALE}), so its magnitude must stay "
                    f"below {MAX_EVENT_AMOUNT:,}")
        accepted_currencies(self.currencies)  # every listed code is a bookable ISO 4217 code
        if self.shuffle_partitions < 1:
            raise ConfigError(f"shuffle_partitions={self.shuffle_partitions} must be >= 1")
        if not (Decimal(0) < self.target_completeness <= Decimal(1)):
            raise ConfigError(f"target_completeness={self.target_completeness} must be in (0, 1]")
        if self.tolerance_abs < 0 or self.tolerance_rel < 0:
            raise ConfigError("tolerance_abs and tolerance_rel must be >= 0")
        if self.event_log_compact_every < 0:
            raise ConfigError(f"event_log_compact_every={self.event_log_compact_every} must be "
                              ">= 0 (0: the stream never compacts its open days itself)")
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"metrics_port={self.metrics_port} is not valid: a TCP port "
                              "1-65535 for the stream's metrics, or 0 for none")
        on = [n for n in ("notify_on_failure", "notify_on_breaks", "notify_on_quality_gate",
                          "notify_report_ready") if getattr(self, n)]
        if on and not (self.notify_email or self.notify_slack_conn):
            raise ConfigError(f"{on[0]} is on but nothing would receive it: set notify_email "
                              "(mail through the SMTP connection notify_smtp_conn) or "
                              "notify_slack_conn (a Slack incoming webhook connection)")
        _check_workbench_url(self.workbench_url)
        if self.interpreted_max_rows < 0:
            raise ConfigError(f"interpreted_max_rows={self.interpreted_max_rows} must be >= 0 "
                              "(0: Spark always generates code)")
        if self.check_in_memory_rows < 0:
            raise ConfigError(f"check_in_memory_rows={self.check_in_memory_rows} must be >= 0 "
                              "(0: every table is validated on Spark)")
        if self.check_without_jvm_max_rows < 0:
            raise ConfigError(f"check_without_jvm_max_rows={self.check_without_jvm_max_rows} "
                              "must be >= 0 (0: every check starts Spark)")
        if self.replay_broadcast_ids < 0:
            raise ConfigError(f"replay_broadcast_ids={self.replay_broadcast_ids} must be >= 0")
        if parse_timestamp(self.min_event_time, "min_event_time") < 0:
            # window starts are computed with integer division and remainder, which floor in
            # Python but truncate in Spark below zero: the two would disagree on a window
            raise ConfigError(f"min_event_time={self.min_event_time!r} is before 1970-01-01: "
                              "event times must not be negative; use 1970-01-01T00:00:00Z or "
                              "later")
        scheme = _WAREHOUSE_SCHEME.match(self.warehouse)
        if scheme and scheme.group(1).lower() != "file":
            # Path() would turn s3a://bucket/wh into ./s3a:/bucket/wh: every job would write a
            # local directory on its own machine, on a cluster a different one per executor
            raise ConfigError(
                f"warehouse={self.warehouse!r}: reckon reads the Delta logs (batch marks, table "
                "versions) as files, so the warehouse must be a filesystem path that the driver "
                "and every executor see at the same place (a local directory, a shared volume, "
                "or an object store mounted there); write /mnt/lake/reckon, not a "
                f"{scheme.group(1)}:// URL (RECKON_WAREHOUSE or --warehouse)")
        if self.lookback_days < 0:
            raise ConfigError(f"lookback_days={self.lookback_days} must be >= 0")
        if self.replay_mode not in REPLAY_MODES:
            raise ConfigError(f"replay_mode={self.replay_mode!r} is not valid: one of "
                              f"{', '.join(REPLAY_MODES)} (RECKON_REPLAY_MODE)")
        if not self.spark_conn_id.strip():
            raise ConfigError("spark_conn_id is empty: name the Airflow connection of the "
                              "Spark cluster (RECKON_SPARK_CONN_ID, default reckon_spark)")
        if self.shared_warehouse not in ("", "group"):
            raise ConfigError(f"shared_warehouse={self.shared_warehouse!r} is not valid: "
                              "\"group\" (files writable by the warehouse's group) or empty")
        if self.signoff_legacy_through < 0:
            raise ConfigError(f"signoff_legacy_through={self.signoff_legacy_through} must be "
                              ">= 0 (the last unsigned legacy entry's seq; 0: none)")
        if self.signoff_admin_key:
            from reckon.signing import load_public

            try:
                load_public(self.signoff_admin_key)
            except ReckonError as exc:
                raise ConfigError(f"signoff_admin_key: {exc}") from None
        if self.required_approvers < 1:
            raise ConfigError(f"required_approvers={self.required_approvers} is not valid: the "
                              "number of distinct reviewers who sign a run off, 1 or more")
        self.material_thresholds()  # each code bookable, each amount exact and >= 0
        parse_duration(self.watermark_wait_timeout, "watermark_wait_timeout")
        if parse_duration(self.sql_timeout, "sql_timeout") <= 0:
            raise ConfigError(f"sql_timeout={self.sql_timeout!r} is not valid: give a "
                              "positive duration, e.g. 60s")
        if self.sql_max_rows < 1:
            raise ConfigError(f"sql_max_rows={self.sql_max_rows} must be >= 1")
        if parse_duration(self.watermark_poll, "watermark_poll") < 1_000_000:
            raise ConfigError(f"watermark_poll={self.watermark_poll!r} is not valid: at least 1s "
                              "(each look is a task try that Airflow schedules)")
        parse_duration(self.vacuum_retain, "vacuum_retain")
        if self.report_db_url and not _URL_SCHEME.match(self.report_db_url):
            raise ConfigError(
                f"report_db_url={_redact_url(self.report_db_url)!r} is not a database URL: "
                "write sqlite:////abs/path/reckon.db or "
                "postgresql+psycopg://user@host:5432/reckon (RECKON_REPORT_DB_URL; the "
                "password from PGPASSWORD), "
                "or leave it empty for <warehouse>/reports/reckon.db")

    # ------------------------------------------------------------------ derived values
    @property
    def warehouse_path(self) -> Path:
        scheme = _WAREHOUSE_SCHEME.match(self.warehouse)  # only file:// passes validation
        local = self.warehouse[scheme.end():] if scheme else self.warehouse
        return Path(local).expanduser().resolve()

    @property
    def report_db(self) -> str:
        if self.report_db_url:
            return self.report_db_url
        return f"sqlite:///{self.warehouse_path / 'reports' / 'reckon.db'}"

    def material_thresholds(self) -> dict[str, Decimal]:
        """``material_gap`` as the rule reckon.materiality applies: code -> minimum absolute
        gap (empty: materiality off).

        Example: ``Settings(material_gap={"EUR": "1000"}).material_thresholds()`` is
        ``{"EUR": Decimal("1000")}``."""
        return thresholds(self.material_gap)

    def event_time_rules(self) -> EventTimeRules:
        return EventTimeRules.parse(
            window=self.window, slide=self.slide or None, watermark_bound=self.watermark_bound,
            allowed_lateness=self.allowed_lateness, idle_timeout=self.idle_timeout,
            max_clock_skew=self.max_clock_skew, dedup_horizon=self.dedup_horizon,
            expected_partitions=self.expected_partitions, inputs=self.watermark_inputs,
            bound_by_partition=bounds_in_force(self.watermark_bound_by_partition),
            bound_by_source=bounds_in_force(self.watermark_bound_by_source),
        )

    def audit_config(self) -> AuditConfig:
        """What the audit reads and applies, built once here at the edge and handed to
        ``audits.audit.audit_day`` instead of these settings (reckon/engine_config.py).

        Example: ``audit_day(spark, settings.audit_config(), day, recorder=None)``.
        """
        return AuditConfig(warehouse=self.warehouse_path, rules=self.event_time_rules(),
                           tolerance=Tolerance(self.tolerance_abs, self.tolerance_rel),
                           material_gap=tuple(sorted(self.material_thresholds().items())),
                           whatif_target=self.target_completeness)

    def check_config(self) -> CheckConfig:
        """What the data-quality suites check against, built once here at the edge and
        handed to ``audits.suites.build_suites`` (reckon/engine_config.py)."""
        audit = self.audit_config()
        return CheckConfig(warehouse=audit.warehouse, rules=audit.rules,
                           tolerance=audit.tolerance, allow_unexplained=self.allow_unexplained,
                           amount_min=self.amount_min, amount_max=self.amount_max,
                           currencies=tuple(self.currencies))

    def whatif_config(self) -> WhatIfConfig:
        """What the bound what-if reads and judges by, built once here at the edge and
        handed to ``audits.bound_whatif`` and ``audits.bound_whatif_batches`` (reckon/engine_config.py)."""
        return WhatIfConfig(warehouse=self.warehouse_path, rules=self.event_time_rules(),
                            target=self.target_completeness)

    def parse_config(self) -> ParseConfig:
        """The values the typed validation rules read, built once here at the edge and handed
        to ``spark.parse.parse_events`` / ``typed_checks`` (reckon/engine_config.py)."""
        return ParseConfig(amount_min=self.amount_min, amount_max=self.amount_max,
                           currencies=tuple(self.currencies), min_event_time=self.min_event_time,
                           max_clock_skew=self.event_time_rules().max_clock_skew)

    def replay_config(self) -> ReplayConfig:
        """What the nightly replay reads and applies, built once here at the edge and handed
        to ``spark.replay.replay_day`` (reckon/engine_config.py)."""
        return ReplayConfig(warehouse=self.warehouse_path, rules=self.event_time_rules(),
                            parse=self.parse_config(), kafka_bootstrap=self.kafka_bootstrap,
                            kafka_topic=self.kafka_topic, broadcast_ids=self.replay_broadcast_ids)

    def progress_config(self) -> ProgressConfig:
        """The warehouse and rules by which a day counts as closed, handed to
        ``spark.progress.wait_for_day_closed`` (reckon/engine_config.py)."""
        return ProgressConfig(warehouse=self.warehouse_path, rules=self.event_time_rules())

    def stream_config(self) -> StreamConfig:
        """What each micro-batch applies, handed to ``spark.stream.BatchProcessor``
        (reckon/engine_config.py)."""
        return StreamConfig(warehouse=self.warehouse_path, rules=self.event_time_rules(),
                            parse=self.parse_config(),
                            compact_every=self.event_log_compact_every)

    def compaction_config(self) -> CompactionConfig:
        """What the nightly compaction needs, handed to ``spark.compaction.compact_day``
        (reckon/engine_config.py)."""
        return CompactionConfig(warehouse=self.warehouse_path,
                                stream_compact_every=self.event_log_compact_every)

    def trigger_limits(self) -> TriggerLimits:
        """How much one micro-batch reads at most, handed to ``spark.sources.StreamSource.read``
        (reckon/engine_config.py)."""
        return TriggerLimits(max_files=self.max_files_per_trigger,
                             max_offsets=self.max_offsets_per_trigger)

    def check_run_config(self) -> CheckRunConfig:
        """What a data-quality run reads, handed to ``audits.quality.run_checks``
        (reckon/engine_config.py)."""
        return CheckRunConfig(checks=self.check_config(), replay=self.replay_config(),
                              jars_dir=Path(self.jars_dir),
                              in_memory_rows=self.check_in_memory_rows)

    def report_config(self) -> ReportConfig:
        """What the report of a day reads and shows, handed to ``reports.render.render_day``
        (reckon/engine_config.py); the settings it shows keyed as the warehouse records them
        (``reckon.vocabulary.stored_key``), as the audit run's own parameters are."""
        shown = self.public_dict()
        return ReportConfig(whatif=self.whatif_config(), report_db=self.report_db,
                            shown=tuple((stored_key(k), shown[k]) for k in REPORTED_SETTINGS),
                            required_approvers=self.required_approvers,
                            material_gap=tuple(sorted(self.material_thresholds().items())))

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with the given keys replaced (None values are ignored: 'flag not given'),
        each recorded as given by its flag."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return self.with_values({k: flag(k) for k in given}, **given)

    def with_values(self, origins: Mapping[str, str], **values: Any) -> Settings:
        """A copy with ``values`` replaced, ``origins`` saying where each came from (e.g.
        ``{"expected_partitions": "the topic's metadata"}``)."""
        return replace(self, **_coerce_all(values), origins={**self.origins, **origins})

    def origin(self, name: str) -> str | None:
        """Where setting ``name`` came from; None when it is the built-in default."""
        return self.origins.get(name)

    def user_set(self) -> dict[str, Any]:
        """The values a user set (the config file, ``RECKON_*``, a flag, a caller's keyword),
        by field: never a default, nor a value taken from the warehouse's recorded spec. What
        may be handed on to another process as if set there (app.airflow_env), so that a
        default never poses as a choice the warehouse's spec must agree with.

        >>> sorted(settings_of(window="1m", watermark_bound="5s").user_set())
        ['watermark_bound', 'window']
        """
        return {name: getattr(self, name) for name, origin in self.origins.items()
                if origin != WAREHOUSE_ORIGIN}

    def public_dict(self) -> dict[str, Any]:
        """For logs and report headers: no secrets (the database URL loses its password)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "origins":
                continue
            value = getattr(self, f.name)
            if f.name == "report_db_url":
                value = _redact_url(self.report_db)
            out[f.name] = str(value) if isinstance(value, Decimal) else value
        return out


_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_WAREHOUSE_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def _check_workbench_url(url: str) -> None:
    """The workbench's base URL must be one a mail reader can open: http(s), a host, no
    query or fragment (the notice appends ``/day/<day>``), no credentials (a notice is read
    by many). Example: ``https://reckon.example.com`` or ``http://127.0.0.1:8088/wb``."""
    if not url:
        return
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # not a number, or out of range
        port_ok = False
    if (parts.scheme not in ("http", "https") or not parts.hostname or not port_ok or parts.query
            or parts.fragment or "@" in parts.netloc or any(c.isspace() for c in url)):
        raise ConfigError(f"workbench_url={_redact_url(url)!r} is not valid: the workbench's "
                          "base URL as reviewers open it, http:// or https:// and a host, "
                          "without credentials, query or fragment (e.g. "
                          "https://reckon.example.com)")


def _redact_url(url: str) -> str:
    if "://" in url and "@" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url


def _coerce(name: str, value: Any) -> Any:
    kinds = {f.name: f.type for f in fields(Settings) if f.name != "origins"}
    if name not in kinds:
        raise ConfigError(f"unknown setting {name!r}{nearest(name, setting_names())}")
    kind = kinds[name]
    try:
        if kind == "int":
            return int(value)
        if kind == "bool":
            if isinstance(value, bool):
                return value
            return str(value).strip().lower() in ("1", "true", "yes", "on")
        if kind == "Decimal":
            if isinstance(value, float):
                raise ConfigError(f"{name}={value!r}: write money and ratios as strings "
                                  f"(\"{value}\"), floats are not exact")
            return Decimal(str(value))
        if kind == "tuple[int, ...]":
            items = value.split(",") if isinstance(value, str) else value
            return tuple(int(x) for x in items if str(x).strip() != "")
        if kind == "tuple[str, ...]":
            items = value.split(",") if isinstance(value, str) else value
            return tuple(str(x).strip() for x in items if str(x).strip())
        if kind == "Mapping[str, str]":
            return _map(name, value)
        return str(value)
    except (ValueError, InvalidOperation, TypeError):
        raise ConfigError(f"setting {name}={value!r} cannot be read as {kind}") from None


#: the bounds maps, and the example each one's refusal shows
_BOUND_MAPS: Mapping[str, str] = {"watermark_bound_by_source": "sat=10s,http=30s",
                                  "watermark_bound_by_partition": "0=5s,3=30s"}


def _map(name: str, value: Any) -> dict[str, str]:
    """A map setting from the file (a TOML table), ``RECKON_*`` or a flag (``k=v,k=v``, or a
    JSON object when a value holds a comma). A bounds map is checked here, once: each name
    given once and not empty, a partition a number >= 0; ``k=`` (no bound) removes k's
    recorded bound in ``--change-spec`` and ``none`` all of them (``CLEAR_ALL``).

    >>> _map("watermark_bound_by_source", "sat=10s, http=")
    {'sat': '10s', 'http': ''}
    >>> _map("watermark_bound_by_source", "none")
    {'*': ''}
    """
    if isinstance(value, str) and value.strip().startswith("{"):
        pairs = _json_pairs(name, value)  # values may hold commas: a JSON object
    elif isinstance(value, str):
        if name in _BOUND_MAPS and value.strip().lower() == "none":
            return {CLEAR_ALL: ""}
        pairs = [_pair(name, kv, value) for kv in value.split(",") if kv.strip()]
    else:
        pairs = [(str(k), "" if v is None else str(v)) for k, v in dict(value).items()]
    out: dict[str, str] = {}
    for key, bound in ((k.strip(), v.strip()) for k, v in pairs):
        if name in _BOUND_MAPS:
            _check_input_name(name, key, value)
            if key in out:
                raise ConfigError(f"{name}: {key!r} is given twice ({key}={out[key]}, "
                                  f"{key}={bound}): give each once, e.g. {_BOUND_MAPS[name]}")
        out[key] = bound
    return out


def _pair(name: str, item: str, whole: str) -> tuple[str, str]:
    if "=" not in item:
        example = _BOUND_MAPS.get(name, '{"spark.sql.extensions": "a.B,c.D"}')
        what = ("NAME=DURATION pairs separated by commas" if name in _BOUND_MAPS
                else "key=value pairs separated by commas, or a JSON object when a value "
                     "holds a comma")
        raise ConfigError(f"setting {name}={whole!r} cannot be read: {item.strip()!r} has no "
                          f"'=': write {what}, e.g. {example}")
    key, value = item.split("=", 1)
    return key, value


def _check_input_name(name: str, key: str, whole: Any) -> None:
    """A bounds map's key: a source's name (not empty), or a partition number >= 0."""
    if key == CLEAR_ALL:
        return
    if not key:
        raise ConfigError(f"{name}={whole!r}: a bound without a name: write each as NAME="
                          f"DURATION, e.g. {_BOUND_MAPS[name]}")
    if name == "watermark_bound_by_partition" and not (key.isascii() and key.isdigit()):
        raise ConfigError(f"watermark_bound_by_partition: {key!r} is not a partition number "
                          "(a number >= 0; write 0=5s,3=30s)")


def bounds_in_force(given: Mapping[str, str]) -> dict[str, str]:
    """A bounds map without its removals (``k=`` and ``none`` only mean something to a
    ``--change-spec`` of a recorded map, reckon.spec): the bounds themselves.

    >>> bounds_in_force({"sat": "10s", "http": "", "*": ""})
    {'sat': '10s'}
    """
    return {k: v for k, v in given.items() if k != CLEAR_ALL and v != ""}


def _json_pairs(name: str, text: str) -> list[tuple[str, str]]:
    try:
        raw = json.loads(text, object_pairs_hook=lambda pairs: pairs)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"setting {name}={text!r} is not a valid JSON object: {exc}") from None
    if not isinstance(raw, list):
        raise ConfigError(f"setting {name}={text!r} must be a JSON object of strings")
    return [(str(k), str(v)) for k, v in raw]


def _coerce_all(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _coerce(k, v) for k, v in values.items()}


def fold_deprecated(given: Mapping[str, Any], spell: Callable[[str], str], where: str = ""
                    ) -> tuple[dict[str, Any], dict[str, str], list[tuple[str, str]]]:
    """``given`` keyed by Settings field, the name each field was given by, and each
    deprecated name given with its name now, as the user would read them (the loader in
    app.settings warns about those). A setting given by both its names is a ConfigError, even
    with one value. ``spell`` shows a name as the user wrote it (``RECKON_GRACE``), ``where``
    says where (`` in 'reckon.toml'``).

    >>> fold_deprecated({"watermark_bound": "5s", "window": "1m"}, str)[0]
    {'watermark_bound': '5s', 'window': '1m'}
    >>> fold_deprecated({"grace": "1s"}, lambda n: "--" + n)[2]  # vocabulary: keep
    [('--grace', '--allowed_lateness')]
    """
    for old, new in DEPRECATED_SETTINGS.items():
        if new in given and old in given:
            raise ConfigError(f"{spell(new)} and {spell(old)}{where} set the same setting "
                              f"({spell(old)} is its deprecated name): give only {spell(new)}")
    deprecated = [(spell(old) + where, spell(new)) for old, new in DEPRECATED_SETTINGS.items()
                  if old in given]
    values = {DEPRECATED_SETTINGS.get(name, name): value for name, value in given.items()}
    names = {DEPRECATED_SETTINGS.get(name, name): name for name in given}
    return values, names, deprecated


def keywords_of(given: Mapping[str, Any]) -> dict[str, Any]:
    """A Python caller's keywords by field, None left out: a deprecated name (``lateness=``)
    still works, with a DeprecationWarning pointing at the caller's caller (the line that
    called ``settings_of`` or ``load_settings``), so that a script written before the rename
    runs and says what to write instead.

    >>> keywords_of({"watermark_bound": "5s", "window": None})
    {'watermark_bound': '5s'}
    """
    values, _, deprecated = fold_deprecated({k: v for k, v in given.items() if v is not None},
                                            lambda n: n + "=")
    for old, new in deprecated:
        warnings.warn(f"{old} is deprecated, use {new}", DeprecationWarning, stacklevel=3)
    return values


def settings_of(**values: Any) -> Settings:
    """Settings from the built-in defaults and ``values`` alone (by setting name, None left
    out; a deprecated name warns): no file, no environment. What a caller that already holds
    its values uses (a test, a docstring, a job handed its values);
    ``app.settings.load_settings`` adds the TOML file and ``RECKON_*``.

    >>> settings_of(window="1m", watermark_bound="5s").watermark_bound
    '5s'
    """
    given = keywords_of(values)
    return Settings(**_coerce_all(given), origins={k: flag(k) for k in given})


def setting_names() -> set[str]:
    """Every name a setting is set by now (its deprecated names are ``DEPRECATED_SETTINGS``)."""
    return {f.name for f in fields(Settings)} - {"origins"}


def nearest(name: str, known: set[str], spell: Callable[[str], str] = str) -> str:
    """``: did you mean X?`` for the known name nearest ``name``, else where every name is
    documented: a refusal always says what to write instead.

    >>> nearest("windw", {"window", "warehouse"})
    ': did you mean window?'
    """
    near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6) or [
        k for k in sorted(known) if k.endswith(name) or name.endswith(k)][:1]
    if near:
        return f": did you mean {spell(near[0])}?"
    return f"; {_DOCUMENTED}"


_FLAGS = {"expected_partitions": "--partitions", "kafka_bootstrap": "--kafka",
          "kafka_topic": "--topic"}


def flag(name: str) -> str:
    """The CLI flag that sets ``name`` (what a message about its value names).

    >>> flag("watermark_bound"), flag("idle_timeout")
    ('--watermark-bound', '--idle-timeout')
    """
    return _FLAGS.get(name, "--" + name.replace("_", "-"))
