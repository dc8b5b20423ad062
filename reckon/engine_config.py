"""What an engine is handed instead of the whole ``Settings``: small frozen values, built once
at the edge (the app layer: ``app/commands``, ``app/pipeline.py``, the DAGs, the bench)
and passed explicitly.

Why: an engine that takes ``Settings`` may read any of its forty fields, so a reader has to
open the engine to learn what it depends on, and a test has to build all of them. An engine
that takes ``AuditConfig`` says in its signature that it reads one warehouse under one set of
event-time rules and one tolerance, and nothing else (docs/glossary.md, "engine config").

Two modules keep ``Settings`` on purpose: spark/session.py and spark/spec.py are the edge
itself, where the configuration becomes a Spark session or the warehouse's recorded spec.
``spark.stream.run_stream`` (and ``BatchProcessor.of``, its twin for tests) is the stream's
edge: it records the spec from ``Settings``, then hands the batches a ``StreamConfig``.

Example:
    >>> from reckon.config import settings_of
    >>> config = settings_of(warehouse="/tmp/wh").audit_config()
    >>> config.warehouse.name, config.tolerance.to_config()["tolerance_abs"]
    ('wh', '0.00')
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from reckon.eventtime import EventTimeRules
from reckon.reconcile import Tolerance

__all__ = ["REPORTED_SETTINGS", "AuditConfig", "CheckConfig", "CheckRunConfig",
           "CompactionConfig", "ParseConfig", "ProgressConfig", "ReplayConfig", "ReportConfig",
           "StreamConfig",
           "TriggerLimits", "WhatIfConfig"]

#: The settings a day's report shows in its configuration table (besides the audit run's own
#: parameters, which win): the event-time rules, the tolerance, where it ran.
REPORTED_SETTINGS = ("window", "slide", "watermark_bound", "allowed_lateness", "idle_timeout",
                     "max_clock_skew", "dedup_horizon", "expected_partitions", "tolerance_abs",
                     "tolerance_rel", "target_completeness", "spark_master", "report_db_url")


@dataclass(frozen=True)
class AuditConfig:
    """What the audit of a day reads and applies (``audits.audit.audit_day``): the warehouse it
    reads and writes, the event-time rules its windows and provisional totals follow, and the
    tolerance within which a residual still counts as explained. Built by
    ``Settings.audit_config()``; the report database is the recorder's, handed in apart.

    Example:
        >>> AuditConfig(Path("/wh"), EventTimeRules.parse(window="10s"), Tolerance()).rules.windows.size
        10000000
    """

    warehouse: Path
    rules: EventTimeRules
    tolerance: Tolerance
    # the material_gap setting (reckon.materiality), recorded with the run it audits
    material_gap: tuple[tuple[str, Decimal], ...] = ()
    # the completeness the lateness what-ifs recorded with the run recommend a bound for
    # (audits/day_whatif.py; the target_completeness setting); None: the run records none
    whatif_target: Decimal | None = None


@dataclass(frozen=True)
class CheckConfig:
    """What the data-quality suites check the tables against (``audits.suites.build_suites``):
    the warehouse (its recorded rule versions), the event-time rules (window width, clock
    skew, allowed lateness), the tolerance of the day's audit, whether unexplained breaks
    only warn, the accepted amount range and the booked currencies (empty: every ISO 4217
    currency with 0 to 3 minor digits). Built by ``Settings.check_config()``; ``reckon check``
    swaps in the tolerance the day's audit applied (``dataclasses.replace``).

    Example:
        >>> from reckon.config import settings_of
        >>> settings_of(warehouse="/tmp/wh").check_config().allow_unexplained
        False
    """

    warehouse: Path
    rules: EventTimeRules
    tolerance: Tolerance
    allow_unexplained: bool
    amount_min: Decimal
    amount_max: Decimal
    currencies: tuple[str, ...]


@dataclass(frozen=True)
class WhatIfConfig:
    """What the bound what-if reads and judges by (``audits.bound_whatif``,
    ``audits.bound_whatif_batches``): the warehouse whose event log it replays, the event-time
    rules (windows, allowed lateness, the configured bound the candidate ladder always holds)
    and the completeness a recommended bound must reach when ``--target`` is not given.
    Built by ``Settings.whatif_config()``.

    Example:
        >>> from reckon.config import settings_of
        >>> settings_of(warehouse="/tmp/wh").whatif_config().target
        Decimal('0.999')
    """

    warehouse: Path
    rules: EventTimeRules
    target: Decimal


@dataclass(frozen=True)
class ParseConfig:
    """The values the typed validation rules read (``spark.parse.typed_checks``, the stream's
    ``parse_events`` and the replay): the accepted amount range, the booked currencies (empty:
    every ISO 4217 currency with 0 to 3 minor digits), the earliest event time (its ISO text,
    which the quarantine's detail quotes) and the max clock skew in microseconds. Frozen and
    hashable: it is the key of the parse's cached columns, so a changed rule can never meet
    columns built for the old one. Built by ``Settings.parse_config()``.

    Example:
        >>> from reckon.config import settings_of
        >>> from dataclasses import replace
        >>> config = settings_of(warehouse="/tmp/wh").parse_config()
        >>> config.amount_max, config.max_clock_skew, hash(config) == hash(replace(config))
        (Decimal('1000000.00'), 300000000, True)
    """

    amount_min: Decimal
    amount_max: Decimal
    currencies: tuple[str, ...]
    min_event_time: str
    max_clock_skew: int


@dataclass(frozen=True)
class ReplayConfig:
    """What the nightly replay reads and applies (``spark.replay``): the warehouse whose event
    log it reads and whose canonical tables it writes, the event-time rules (windows), the
    typed rules it re-applies, the Kafka topic a replay ``from_kafka`` reads (bootstrap empty:
    none configured), and how many repeated event_ids it still broadcasts before grouping the
    whole day. The data-quality check's event-log comparison reads the log by the same values.
    Built by ``Settings.replay_config()``.

    Example:
        >>> from reckon.config import settings_of
        >>> config = settings_of(warehouse="/tmp/wh").replay_config()
        >>> config.kafka_topic, config.broadcast_ids, config.parse.currencies
        ('events', 1000000, ())
    """

    warehouse: Path
    rules: EventTimeRules
    parse: ParseConfig
    kafka_bootstrap: str
    kafka_topic: str
    broadcast_ids: int


@dataclass(frozen=True)
class ProgressConfig:
    """What the wait for a closed day reads and judges by (``spark.progress``): the warehouse
    whose ``watermark_progress`` the stream writes, and the event-time rules that say when
    every window of a day is final (end of its last window plus the allowed lateness).
    Built by ``Settings.progress_config()``.

    Example:
        >>> from datetime import date
        >>> rules = ProgressConfig(Path("/wh"), EventTimeRules.parse(window="10s")).rules
        >>> rules.day_final_at(date(2026, 1, 2)) - rules.day_final_at(date(2026, 1, 1))
        86400000000
    """

    warehouse: Path
    rules: EventTimeRules


@dataclass(frozen=True)
class CompactionConfig:
    """What the nightly compaction needs (``spark.compaction.compact_day``): the warehouse,
    and every how many batches the stream compacts its open days itself (0: never, so the
    nightly run may compact those days too; else it leaves them to the stream until its
    watermark has left the day). Built by ``Settings.compaction_config()``.

    Example:
        >>> CompactionConfig(Path("/wh"), stream_compact_every=0).stream_compact_every
        0
    """

    warehouse: Path
    stream_compact_every: int


@dataclass(frozen=True)
class TriggerLimits:
    """How much one micro-batch of the stream reads at most (``spark.sources.StreamSource.read``):
    landing files per trigger, Kafka offsets per trigger. Built by ``Settings.trigger_limits()``.

    Example:
        >>> TriggerLimits(max_files=10, max_offsets=1_000_000).max_files
        10
    """

    max_files: int
    max_offsets: int


@dataclass(frozen=True)
class CheckRunConfig:
    """What a data-quality run reads besides the report database (``audits.quality.run_checks``):
    what the suites check against (``checks``), how the replay reads the event log that the
    canonical totals are compared with (``replay``), and the jars folder where the Data Docs'
    browser assets are cached, and up to how many rows a table's day is validated in the
    driver's memory rather than on Spark (``in_memory_rows``, 0: always Spark; the setting
    ``check_in_memory_rows``). Built by ``Settings.check_run_config()``.

    Example:
        >>> from reckon.config import settings_of
        >>> config = settings_of(warehouse="/tmp/wh").check_run_config()
        >>> config.checks.warehouse == config.replay.warehouse
        True
    """

    checks: CheckConfig
    replay: ReplayConfig
    jars_dir: Path
    in_memory_rows: int


@dataclass(frozen=True)
class ReportConfig:
    """What the report of a day reads and shows (``reports.render.render_day``): the what-if's
    values (the warehouse, the event-time rules, the target completeness), the report
    database's URL it reads the audit run from and records the report in, and the settings its
    configuration table shows (``REPORTED_SETTINGS``, the database password redacted).
    Built by ``Settings.report_config()``.

    Example:
        >>> from reckon.config import settings_of
        >>> config = settings_of(warehouse="/tmp/wh").report_config()
        >>> dict(config.shown)["window"], config.report_db
        ('10s', 'sqlite:////tmp/wh/reports/reckon.db')
    """

    whatif: WhatIfConfig
    report_db: str
    shown: tuple[tuple[str, Any], ...]
    required_approvers: int = 1  # reckon.signoff.review_state's ``required``
    # the material_gap setting as reckon.materiality's rule: (code, minimum absolute gap)
    material_gap: tuple[tuple[str, Decimal], ...] = ()

    @property
    def warehouse_path(self) -> Path:
        """The warehouse the report reads (the report database's paths are relative to it)."""
        return self.whatif.warehouse


@dataclass(frozen=True)
class StreamConfig:
    """What every micro-batch of the stream reads and applies (``spark.stream.BatchProcessor``):
    the warehouse it writes, the event-time rules the warehouse's spec records (windows, the
    watermark's bound, the allowed lateness, the dedup horizon), the parse's rules, and every
    how many batches it compacts its open days (0: never). Built by
    ``Settings.stream_config()`` after the spec is established (``spark.spec``), so the rules
    are the recorded ones.

    Example:
        >>> from reckon.config import settings_of
        >>> config = settings_of(warehouse="/tmp/wh").stream_config()
        >>> config.warehouse.name, config.rules.windows.size, config.compact_every > 0
        ('wh', 10000000, True)
    """

    warehouse: Path
    rules: EventTimeRules
    parse: ParseConfig
    compact_every: int
