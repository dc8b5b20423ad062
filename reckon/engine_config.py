"""What an engine is handed instead of the whole ``Settings``: small frozen values, built once
at the edge (the app layer: ``reckon/commands``, ``reckon/pipeline.py``, the DAGs, the bench)
and passed explicitly.

Why: an engine that takes ``Settings`` may read any of its forty fields, so a reader has to
open the engine to learn what it depends on, and a test has to build all of them. An engine
that takes ``AuditConfig`` says in its signature that it reads one warehouse under one set of
event-time rules and one tolerance, and nothing else (docs/glossary.md, "engine config").

Example:
    >>> from reckon.config import load_settings
    >>> config = load_settings(env={}, warehouse="/tmp/wh").audit_config()
    >>> config.warehouse.name, config.tolerance.to_config()["tolerance_abs"]
    ('wh', '0.00')
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from reckon.eventtime import EventTimeRules
from reckon.reconcile import Tolerance

__all__ = ["AuditConfig", "CheckConfig", "WhatIfConfig"]


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


@dataclass(frozen=True)
class CheckConfig:
    """What the data-quality suites check the tables against (``audits.suites.build_suites``):
    the warehouse (its recorded rule versions), the event-time rules (window width, clock
    skew, allowed lateness), the tolerance of the day's audit, whether unexplained breaks
    only warn, the accepted amount range and the booked currencies (empty: every ISO 4217
    currency with 0 to 3 minor digits). Built by ``Settings.check_config()``; ``reckon check``
    swaps in the tolerance the day's audit applied (``dataclasses.replace``).

    Example:
        >>> from reckon.config import load_settings
        >>> load_settings(env={}, warehouse="/tmp/wh").check_config().allow_unexplained
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
    """What the lateness what-if reads and judges by (``audits.lateness``,
    ``audits.lateness_batches``): the warehouse whose event log it replays, the event-time
    rules (windows, allowed lateness, the configured bound the candidate ladder always holds)
    and the completeness a recommended bound must reach when ``--target`` is not given.
    Built by ``Settings.whatif_config()``.

    Example:
        >>> from reckon.config import load_settings
        >>> load_settings(env={}, warehouse="/tmp/wh").whatif_config().target
        Decimal('0.999')
    """

    warehouse: Path
    rules: EventTimeRules
    target: Decimal
