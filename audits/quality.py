"""Data-quality checks of one day with Great Expectations (GX Core), and ``reckon check``.

``run_checks`` validates the day's partition of every warehouse table against its suite
(``audits.suites``), one whole-dataframe batch per table: a day of at most
``check_in_memory_rows`` rows in the driver's memory (GX's pandas datasource), a bigger one as
a Spark DataFrame (GX's Spark datasource; nothing is collected to the driver but GX's capped
samples), with the same expectations and the same records either way; it stores the GX validation
results and rebuilds the GX Data Docs, and records a ``CheckRun`` with one
``ExpectationResult`` per expectation in the report database. ``check_day`` does the same and
raises ``DataQualityError`` when a blocking expectation failed; warnings never fail a run.
The report database is the caller's ``ledger`` (audits/ledger.py), e.g.
``run_checks(spark, settings.check_run_config(), day, ledger=ReportDB.from_settings(settings))``
(ReportDB of reports.db.repository): the check reads the day's current audit from it and
records its run there, never opening it itself. What it checks against is handed in as a
``CheckRunConfig`` (reckon/engine_config.py), never the whole settings.

Layout under the warehouse: the file-backed GX context is ``<warehouse>/reports/gx/`` (suites,
validation definitions, validation results); the Data Docs site is
``<warehouse>/reports/data_docs/index.html``. Re-running a day records a new run (the newest is
current) and rebuilds the day's Data Docs pages; nothing else changes.

A table that does not exist is validated as an empty DataFrame of its schema (so its suite
still shows in Data Docs) and fails the run with a blocking ``expect_table_to_exist``: the
nightly steps write every table, so a missing one means a step did not run or the warehouse is
not the one meant, and a check that passed there would vouch for nothing.

Money is per (window, key, currency): the per-grain suites are unique on that grain, check
each amount against its currency's minor unit, and compare every canonical_totals row with the
event log its replay read, per currency (``audits.suites``), so a total that adds two
currencies fails the day.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from audits.datadocs import data_docs_dir
from audits.driver_frame import driver_frame, is_flat, stable_order
from audits.ledger import CheckLedger
from audits.records import CheckRun, ExpectationResult
from audits.suite_model import MIN_ROWS, DayScope, TableSuite
from audits.suites import build_suites
from reckon.engine_config import CheckConfig, CheckRunConfig
from reckon.errors import DataQualityError
from reckon.quality_verdict import (
    DayVerdict,
    SuiteVerdict,
    day_verdict,
    min_rows,
    suite_verdict,
)
from reckon.reconcile import Tolerance

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")  # before great_expectations is imported

__all__ = [
    "CheckResult",
    "SuiteOutcome",
    "Validate",
    "check_day",
    "data_docs_dir",
    "gx_context_dir",
    "gx_validate",
    "run_checks",
    "run_suites",
    "suite_outcome",
    "with_audit_tolerance",
]

_SITE = "reckon_data_docs"
_DATASOURCE = "reckon_warehouse"
_IN_MEMORY_DATASOURCE = "reckon_warehouse_in_memory"  # GX's pandas engine (check_in_memory_rows)
_BATCH = "day"
_SAMPLE = 5
_MISSING = "expect_table_to_exist"
_ONE_PARTITION_ROWS = 1_000_000  # a day this small is validated as one Spark partition
# What a passing suite stores. A reviewer signs what the Data Docs page shows, so a pass must
# show what was observed (a row count, "0 unexpected of N rows"), not a bare tick:
# BOOLEAN_ONLY kept nothing. See ``_validate`` for the measured cost.
_PASSING_RESULT_FORMAT: Any = {"result_format": "SUMMARY", "partial_unexpected_count": _SAMPLE}


def gx_context_dir(warehouse: str | Path) -> Path:
    """The file-backed GX context (great_expectations.yml, suites, validation results)."""
    return Path(warehouse) / "reports" / "gx"


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class SuiteOutcome:
    """One table's suite on one day. Counts are computed once, at construction."""

    suite: str
    table: str
    rows: int                          # rows of the day's partition (0 when the table is missing)
    table_exists: bool
    results: tuple[ExpectationResult, ...]
    table_version: int | None = None   # the Delta version checked (None: the table is missing)
    day_has_events: bool = True        # the day's event_log had rows (else a quiet day)
    engine: str = "spark"              # GX's engine: "pandas" (in memory) or "spark"
    passed: int = field(init=False)
    blocking_failures: tuple[ExpectationResult, ...] = field(init=False)
    warnings: tuple[ExpectationResult, ...] = field(init=False)
    verdict: SuiteVerdict = field(init=False)  # reckon.quality_verdict: the one decision

    def __post_init__(self) -> None:
        object.__setattr__(self, "passed", sum(1 for r in self.results if r.success))
        object.__setattr__(self, "blocking_failures", tuple(
            r for r in self.results if not r.success and r.severity == "blocking"))
        object.__setattr__(self, "warnings", tuple(
            r for r in self.results if not r.success and r.severity != "blocking"))
        object.__setattr__(self, "verdict", suite_verdict(
            rows=self.rows, day_has_events=self.day_has_events,
            results=[(r.severity, r.success) for r in self.results]))

    def to_dict(self) -> dict[str, Any]:
        return {"suite": self.suite, "table": self.table, "rows": self.rows,
                "verdict": self.verdict.text,
                "table_exists": self.table_exists, "table_version": self.table_version,
                "engine": self.engine, "expectations": len(self.results),
                "passed": self.passed, "blocking_failures": len(self.blocking_failures),
                "warnings": len(self.warnings),
                "results": [_result_dict(r) for r in self.results]}


@dataclass(frozen=True)
class CheckResult:
    """Every suite of one day's check run. ``success``: no blocking expectation failed."""

    run_id: str
    day: date
    started_at: datetime
    duration_seconds: float
    data_docs_index: str
    suites: tuple[SuiteOutcome, ...]
    data_docs_warning: str | None = None  # set when the Data Docs pages still need internet
    day_has_events: bool = True
    expectations: int = field(init=False)
    blocking_failures: tuple[ExpectationResult, ...] = field(init=False)
    warnings: int = field(init=False)
    verdict: DayVerdict = field(init=False)
    success: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "expectations", sum(len(s.results) for s in self.suites))
        failures = tuple(r for s in self.suites for r in s.blocking_failures)
        object.__setattr__(self, "blocking_failures", failures)
        object.__setattr__(self, "warnings", sum(len(s.warnings) for s in self.suites))
        verdict = day_verdict([s.verdict for s in self.suites],
                              day_has_events=self.day_has_events)
        object.__setattr__(self, "verdict", verdict)
        object.__setattr__(self, "success", verdict.passed)

    @property
    def results(self) -> tuple[ExpectationResult, ...]:
        return tuple(r for s in self.suites for r in s.results)

    def to_check_run(self) -> CheckRun:
        return CheckRun(run_id=self.run_id, day=self.day, started_at=self.started_at,
                        duration_seconds=self.duration_seconds, success=self.success,
                        blocking_failures=len(self.blocking_failures), warnings=self.warnings,
                        suites=len(self.suites), expectations=self.expectations,
                        data_docs_path=self.data_docs_index,
                        table_versions={s.table: s.table_version for s in self.suites
                                        if s.table_version is not None},
                        verdict=self.verdict.text,
                        suite_verdicts={s.suite: s.verdict.text for s in self.suites})

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (dates and times as ISO-8601 text)."""
        return {"run_id": self.run_id, "day": self.day.isoformat(),
                "started_at": self.started_at.isoformat(),
                "duration_seconds": round(self.duration_seconds, 3),
                "data_docs_index": self.data_docs_index,
                "data_docs_warning": self.data_docs_warning, "success": self.success,
                "verdict": self.verdict.text,
                "suites": [s.to_dict() for s in self.suites],
                "expectations": self.expectations,
                "blocking_failures": len(self.blocking_failures), "warnings": self.warnings}

    def summary(self) -> str:
        """The readable report of ``reckon check``: one line per suite, then each failure."""
        lines = [f"data-quality check {self.day.isoformat()} {self.verdict.text}: "
                 f"{len(self.blocking_failures)} blocking failure(s), {self.warnings} "
                 f"warning(s); {self.expectations} expectations in {len(self.suites)} suites, "
                 f"{self.duration_seconds:.1f} s (run {self.run_id})"]
        width = max((len(s.suite) for s in self.suites), default=0)
        for s in self.suites:
            where = (f"{s.rows} rows, version {s.table_version}" if s.table_exists
                     else "table missing")
            lines.append(f"  {s.suite:<{width}}  {s.verdict.text:<22}  {s.passed:>3}/"
                         f"{len(s.results):<3} passed  {len(s.blocking_failures)} blocking, "
                         f"{len(s.warnings)} warning  ({where})")
        for s in self.suites:
            for r in (*s.blocking_failures, *s.warnings):
                lines.append(f"  [{r.severity}] {_describe(r)}")
        lines.append(f"Data Docs: {self.data_docs_index}")
        if self.data_docs_warning:
            lines.append(f"  warning: {self.data_docs_warning}")
        return "\n".join(lines)

    def raise_for_failures(self) -> None:
        """Raise ``DataQualityError`` naming each failed blocking expectation with samples."""
        if self.success:
            return
        head = (f"data-quality check of {self.day.isoformat()} failed: "
                f"{len(self.blocking_failures)} blocking expectation(s) (run {self.run_id}; "
                f"Data Docs {self.data_docs_index})")
        raise DataQualityError("\n".join([head, *(f"  - {_describe(r)}"
                                                   for r in self.blocking_failures)]))


def _result_dict(r: ExpectationResult) -> dict[str, Any]:
    return {"expectation": r.expectation, "column": r.column, "severity": r.severity,
            "success": r.success, "unexpected_count": r.unexpected_count,
            "sample": json.loads(r.sample), "kwargs": json.loads(r.kwargs)}


def _describe(r: ExpectationResult) -> str:
    column = f" on column {r.column}" if r.column else ""
    count = "" if r.unexpected_count is None else f": {r.unexpected_count} unexpected"
    return f"{r.table}: {r.expectation}{column}{count}; sample {r.sample}"


# ----------------------------------------------------------------------------- GX plumbing


def _site_config(warehouse: Path) -> dict[str, Any]:
    return {"class_name": "SiteBuilder", "show_how_to_buttons": False,
            "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                              "base_directory": str(data_docs_dir(warehouse)) + os.sep},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}}


def _gx_context(warehouse: Path) -> Any:
    """The warehouse's file-backed GX context, with analytics and progress bars off and the
    one Data Docs site pointing at ``<warehouse>/reports/data_docs``."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    root = gx_context_dir(warehouse)
    root.parent.mkdir(parents=True, exist_ok=True)
    ctx: Any = gx.get_context(mode="file", context_root_dir=str(root))
    if ctx.config.analytics_enabled is not False:
        ctx.enable_analytics(False)
    current: Any = ctx.variables.progress_bars  # a ProgressBarsConfig, or a dict once saved
    bars = dict(current) if isinstance(current, dict) else vars(current) if current else {}
    if bars.get("globally", True) or bars.get("metric_calculations", True):
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False,
                                                         metric_calculations=False)
        ctx.variables.save()
    site = _site_config(warehouse)
    sites = dict(ctx.list_data_docs_sites())
    for name in sites:
        if name != _SITE:
            ctx.delete_data_docs_site(name)  # the scaffold's local_site: one site only
    if _SITE not in sites:
        ctx.add_data_docs_site(_SITE, site)
    elif dict(sites[_SITE]) != site:
        ctx.update_data_docs_site(_SITE, site)
    return ctx


def _batch_definition(ctx: Any, asset_name: str, in_memory: bool) -> Any:
    """The whole-dataframe batch of the table's asset on the Spark datasource, or on the
    pandas one when the day is validated in the driver's memory (``in_memory``)."""
    name = _IN_MEMORY_DATASOURCE if in_memory else _DATASOURCE
    try:
        datasource = ctx.data_sources.get(name)
    except (KeyError, LookupError, ValueError):
        datasource = (ctx.data_sources.add_pandas(name=name) if in_memory
                      else ctx.data_sources.add_spark(name=name))
    try:
        asset = datasource.get_asset(asset_name)
    except LookupError:
        asset = datasource.add_dataframe_asset(name=asset_name)
    try:
        return asset.get_batch_definition(_BATCH)
    except KeyError:
        return asset.add_batch_definition_whole_dataframe(_BATCH)


def _column_of(kwargs: dict[str, Any]) -> str | None:
    if "column" in kwargs:
        return str(kwargs["column"])
    if "column_list" in kwargs:
        return ",".join(kwargs["column_list"])
    if "column_A" in kwargs:
        return f"{kwargs['column_A']},{kwargs['column_B']}"
    return None


def _counts_rows(cfg: Any) -> bool:
    """Whether the expectation judges rows (so a pass means 0 unexpected rows)."""
    from great_expectations.expectations.expectation import (
        ColumnMapExpectation,
        ColumnPairMapExpectation,
        MulticolumnMapExpectation,
    )

    return isinstance(cfg.to_domain_obj(), (ColumnMapExpectation, ColumnPairMapExpectation,
                                            MulticolumnMapExpectation))


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _sample(result: dict[str, Any], exception: dict[str, Any] | None) -> list[Any]:
    """Up to 5 offending rows (index columns) or values, the observed value, or the error."""
    if exception and exception.get("raised_exception"):
        return [f"GX raised: {exception.get('exception_message')}"]
    rows = result.get("partial_unexpected_index_list")
    if isinstance(rows, list) and rows:
        return rows[:_SAMPLE]
    values = result.get("partial_unexpected_list")
    if isinstance(values, list) and values:
        return values[:_SAMPLE]
    if "observed_value" in result:
        return [result["observed_value"]]
    return []


def _records(run_id: str, suite_name: str, table: str, gx_result: Any) -> list[ExpectationResult]:
    out = []
    for r in gx_result.results:
        cfg = r.expectation_config
        kwargs = {k: v for k, v in cfg.kwargs.items() if k not in ("batch_id", "result_format")}
        result = dict(r.result or {})
        count = result.get("unexpected_count")
        if count is None and r.success and _counts_rows(cfg):
            count = 0  # BOOLEAN_ONLY pass: a passing row-level expectation found no row
        out.append(ExpectationResult(
            run_id=run_id, suite=suite_name, table=table, expectation=cfg.type,
            column=_column_of(kwargs), severity=str((cfg.meta or {}).get("severity", "blocking")),
            success=bool(r.success), unexpected_count=None if count is None else int(count),
            sample=_json(_sample(result, r.exception_info)), kwargs=_json(kwargs)))
    return out


def _validate(spark: Any, ctx: Any, config: CheckRunConfig, suite: TableSuite, day: date,
              run_id: str, run_time: datetime, version: int | None,
              day_has_events: bool | None) -> SuiteOutcome:
    """Validate the day's partition of one table at Delta ``version`` (None: no table).
    ``day_has_events`` sets the suites' ``MIN_ROWS`` parameter (None: this is the event log,
    which tells: its own rows).

    Where: the derived rows are persisted and counted once. A day of at most
    ``config.in_memory_rows`` rows (the setting ``check_in_memory_rows``) is brought to the
    driver in one Arrow transfer (``audits.driver_frame``: object columns holding what
    ``collect`` gives, Decimals kept) and validated by GX's pandas engine; a bigger day is
    validated on Spark, where every expectation's metrics are Spark jobs. Why: on a day of
    ordinary size those jobs' scheduling is nearly all of a check's CPU, the rows are not;
    both engines give the same records (tests/test_quality.py compares them), and the
    validation page's "Batch Spec" says which ran (``PandasDataFrame``/``SparkDataFrame``).
    E.g. with the default 200,000, a demo day's 5,000 events go to pandas; with 0, Spark.

    One pass on a passing suite: ``_PASSING_RESULT_FORMAT`` (``SUMMARY`` without index
    columns, so a passing page shows observed values), stored. Only a failing suite runs a
    second pass, ``SUMMARY`` with the offending rows' index columns, stored under the same key
    (the run, its time, the one batch), so it replaces the first (a pre-pass that decided the
    format cost one pass more on every passing suite: bench/CHANGELOG.md). On Spark, small
    days are read as one partition so that GX's ``limit`` sample queries run one job each
    instead of scanning partition by partition.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from spark.provisional import read_day
    from spark.tables import SCHEMAS

    warehouse = config.checks.warehouse
    exists = version is not None
    if exists:
        df = read_day(spark, warehouse, suite.table, config.checks.rules, day,
                      version).where(
            F.col(suite.partition_column) == F.lit(day))
    else:
        df = spark.createDataFrame([], SCHEMAS[suite.table])
    scope = DayScope(spark, config.replay, day)  # what derive reads besides the day's rows
    base: Any = None
    try:
        base = suite.derive(df, scope).persist(StorageLevel.MEMORY_AND_DISK)
        rows = base.count()
        has_events = rows > 0 if day_has_events is None else day_has_events
        bound = config.in_memory_rows  # 0: always Spark
        in_memory = bound > 0 and rows <= bound and is_flat(base.schema)
        data: Any
        if in_memory:  # at most the configured rows: one Arrow transfer, then no Spark job
            data = stable_order(driver_frame(base), suite.index_columns)
            base.unpersist()
        else:
            data = base.coalesce(1) if rows <= _ONE_PARTITION_ROWS else base
        gx_result = gx_validate(ctx, suite, data, in_memory=in_memory, has_events=has_events,
                                run_id=run_id, run_time=run_time)
    finally:
        if base is not None:
            base.unpersist()
        scope.release()
    return suite_outcome(config, suite, gx_result, run_id=run_id, rows=rows, version=version,
                         has_events=has_events, engine="pandas" if in_memory else "spark")


def gx_validate(ctx: Any, suite: TableSuite, data: Any, *, in_memory: bool, has_events: bool,
                run_id: str, run_time: datetime) -> Any:
    """GX's validation of ``data`` (a pandas frame when ``in_memory``, else a Spark one)
    against ``suite``, stored in ``ctx`` under the run: one pass with
    ``_PASSING_RESULT_FORMAT``, a second with the offending rows' index columns only when it
    failed (``_validate`` says why). Shared by the Spark path and the JVM-free one
    (``audits.quality_local``), so both store the same results and pages."""
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    gx_suite = ctx.suites.add_or_update(gx.ExpectationSuite(
        name=suite.name, expectations=[c.to_gx() for c in suite.checks],
        meta={"table": suite.table, "partition_column": suite.partition_column,
              "owner": "audits.suites"}))
    definition = ctx.validation_definitions.add_or_update(gx.ValidationDefinition(
        name=f"{suite.name}_{_BATCH}", data=_batch_definition(ctx, suite.table, in_memory),
        suite=gx_suite))
    run: dict[str, Any] = {"batch_parameters": {"dataframe": data},
                           "expectation_parameters": {MIN_ROWS: min_rows(has_events)},
                           "run_id": RunIdentifier(run_name=run_id, run_time=run_time)}
    gx_result = definition.run(result_format=_PASSING_RESULT_FORMAT, **run)
    if not gx_result.success:  # stored again under the same key, with the rows' index
        gx_result = definition.run(result_format={
            "result_format": "SUMMARY", "partial_unexpected_count": _SAMPLE,
            "unexpected_index_column_names": list(suite.index_columns)}, **run)
    return gx_result


def suite_outcome(config: CheckRunConfig, suite: TableSuite, gx_result: Any, *, run_id: str,
                  rows: int, version: int | None, has_events: bool,
                  engine: str) -> SuiteOutcome:
    """The suite's records from GX's result; a table missing at ``version`` None first gets
    a failed blocking ``expect_table_to_exist`` (nothing was checked)."""
    from storage.table_names import table_path

    records = _records(run_id, suite.name, suite.table, gx_result)
    if version is None:  # a table the nightly run writes is not there: nothing was checked
        path = table_path(config.checks.warehouse, suite.table)
        records.insert(0, ExpectationResult(
            run_id=run_id, suite=suite.name, table=suite.table, expectation=_MISSING,
            column=None, severity="blocking", success=False, unexpected_count=None,
            sample=_json([f"no Delta table at {path}: run the step that writes it (`reckon "
                          "stream`, `replay`, `audit`), or check --warehouse"]),
            kwargs=_json({"path": path})))
    return SuiteOutcome(suite.name, suite.table, rows, version is not None, tuple(records),
                        version, day_has_events=has_events, engine=engine)


def _asset_name(suite: TableSuite, day: date, version: int | None) -> str:
    """What a validation page shows as "Data asset": the table, the day and the Delta version
    checked, so a reviewer can tell which data a signed page vouches for."""
    where = f"Delta version {version}" if version is not None else "table missing"
    return f"{suite.table} ({suite.partition_column} {day.isoformat()}, {where})"


def _build_docs(ctx: Any, config: CheckRunConfig, run_id: str, asset_names: dict[str, str],
                verdicts: dict[str, SuiteVerdict]) -> tuple[str, str | None]:
    """Render this run's validation pages and the suites' pages, then the index (which lists
    every suite and every stored validation), and serve the pages' browser assets from the
    site (``audits.datadocs``). Incremental: older runs keep their pages.

    GX's dataframe batches (Spark's, and pandas' in memory) do not name the table, day and
    version checked (Spark leaves ``batch_spec.data_asset_name`` empty, which the validation
    page prints as "Data asset: None"); this run's stored results get the name from
    ``asset_names`` (suite -> name) before they are rendered. Their ``success`` is reckon's
    verdict of the suite (``verdicts``: suite -> reckon.quality_verdict's), kept in ``meta``
    too: GX calls a suite failed on a warning, reckon only on a blocking failure, and the
    index's colour must say what the report and the gate say.

    Returns the index path and a one-line warning when the site still needs internet.
    """
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
    )

    from audits.datadocs import assets_dir, localise_site

    store = ctx.validation_results_store
    ids: list[Any] = [key for key in store.list_keys() if key.run_id.run_name == run_id]
    for key in ids:
        suite = key.expectation_suite_identifier.name
        name, verdict = asset_names.get(suite), verdicts.get(suite)
        stored = store.get(key)
        if name:
            stored.meta.setdefault("batch_spec", {})["data_asset_name"] = name
        if verdict is not None:
            stored.success = verdict.passed
            stored.meta["reckon_verdict"] = verdict.text
        store.set(key, stored)
    ids += [ExpectationSuiteIdentifier(name=name) for name in asset_names]
    ctx.build_data_docs(site_names=[_SITE], resource_identifiers=ids)
    site = data_docs_dir(config.checks.warehouse)
    localised = localise_site(site, config.jars_dir)
    return str(site / "index.html"), localised.warning(assets_dir(config.jars_dir))


# ----------------------------------------------------------------------------- entry points


def with_audit_tolerance(config: CheckConfig, ledger: CheckLedger, day: date) -> CheckConfig:
    """``config`` with the tolerance the day's current audit applied: `reckon audit
    --tolerance-abs` may differ from the configuration, and the reconciliation suite must judge
    its MATCHED/EXPLAINED rows by the rule that made them (not flag them as broken).

    Example: an audit run with ``params["tolerance_abs"] == "0.01"`` gives a config whose
    ``tolerance.absolute`` is ``Decimal("0.01")``; no audit of the day leaves ``config`` as is.
    """
    run = ledger.current_audit_run(day)
    if run is None:
        return config
    given = config.tolerance
    return replace(config, tolerance=Tolerance(
        absolute=Decimal(str(run.params.get("tolerance_abs", given.absolute))),
        relative=Decimal(str(run.params.get("tolerance_rel", given.relative)))))


def run_checks(spark: Any, config: CheckRunConfig, day: date, *, ledger: CheckLedger,
               record: bool = True) -> CheckResult:
    """Run every suite on ``day`` (UTC), store GX results and Data Docs, record the run in the
    report database ``ledger`` (unless ``record`` is False; the day's audit tolerance is read
    from it either way) and return the result. Never raises for failed expectations; see
    ``check_day``. A small day can run the same suites without Spark:
    ``audits.quality_local.run_checks_without_jvm``.

    Example:
        >>> with ReportDB.from_settings(settings) as db:  # doctest: +SKIP
        ...     run_checks(spark, settings.check_run_config(), date(2026, 1, 1),
        ...                ledger=db).success
        True
    """
    def validate(ctx: Any, suite: TableSuite, version: int | None, run_id: str,
                 started_at: datetime, day_has_events: bool | None) -> SuiteOutcome:
        return _validate(spark, ctx, config, suite, day, run_id, started_at, version,
                         day_has_events)

    return run_suites(config, day, ledger=ledger, record=record, validate=validate)


#: How one suite is validated on one engine: (GX context, suite, the Delta version checked
#: (None: the table is missing), run id, run time, whether the day has events (None: this is
#: the event log, which tells)) -> its outcome.
Validate = Callable[[Any, TableSuite, "int | None", str, datetime, "bool | None"], SuiteOutcome]


def run_suites(config: CheckRunConfig, day: date, *, ledger: CheckLedger, record: bool,
               validate: Validate) -> CheckResult:
    """The check run around the engine: its id, the suites under the day's audit tolerance,
    every table's version pinned at the start, the event log first (whether the day had events
    sets the others' row-count checks), Data Docs, the record. ``validate`` is the engine's
    (Spark's ``_validate``, or ``audits.quality_local``'s without a JVM)."""
    from spark.provisional import table_version

    started_at = datetime.now(UTC)
    t0 = time.perf_counter()
    run_id = f"check-{day.isoformat()}-{started_at:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    warehouse = config.checks.warehouse
    ctx = _gx_context(warehouse)
    suites = build_suites(with_audit_tolerance(config.checks, ledger, day))
    # every table is checked at the version it had when the run started (the stream keeps
    # committing), and the run records which: what GX passed can be matched to what the
    # audit read
    versions = {s.table: table_version(warehouse, s.table) for s in suites}
    first = validate(ctx, suites[0], versions[suites[0].table], run_id, started_at, None)
    outcomes = (first, *(validate(ctx, s, versions[s.table], run_id, started_at,
                                  first.day_has_events) for s in suites[1:]))
    index, docs_warning = _build_docs(
        ctx, config, run_id,
        {s.name: _asset_name(s, day, versions[s.table]) for s in suites},
        {o.suite: o.verdict for o in outcomes})
    if docs_warning:  # the nightly task's log says it too, not only `reckon check`
        logging.getLogger(__name__).warning(docs_warning)
    result = CheckResult(run_id=run_id, day=day, started_at=started_at,
                         duration_seconds=time.perf_counter() - t0, data_docs_index=index,
                         suites=outcomes, data_docs_warning=docs_warning,
                         day_has_events=first.day_has_events)
    if record:
        ledger.record_check_run(result.to_check_run(), result.results)
    return result


def check_day(spark: Any, config: CheckRunConfig, day: date, *,
              ledger: CheckLedger) -> CheckResult:
    """``run_checks``, then raise ``DataQualityError`` if a blocking expectation failed (the
    run, its GX results and Data Docs are stored first in ``ledger``, so the failure can be
    inspected)."""
    result = run_checks(spark, config, day, ledger=ledger)
    result.raise_for_failures()
    return result
