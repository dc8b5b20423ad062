"""A steady micro-batch reuses the code Spark generated for the batches before it.

Every batch has its own id, watermark and processing time. Written into the plans as literals,
they made each batch's plans new Java source: compiled again (Janino) and run interpreted until
the JIT caught up, in every batch (spark.constants). Counted with Spark's own codegen metrics,
not timed.
"""

from __future__ import annotations

import pytest

from spark import tables as tb
from spark.session import session_conf
from spark.stream import BatchProcessor
from tests.scenarios import ev
from tests.test_replay_audit import _raw

pytestmark = pytest.mark.spark

#: Spark's defaults, which the tests' session turns off (tests/conftest.py)
GENERATED_CODE = {"spark.sql.codegen.wholeStage": "true",
                  "spark.sql.codegen.factoryMode": "FALLBACK"}


def _compilations(spark) -> int:
    """How many classes Spark's code generator has compiled in this JVM so far."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def _probe_counts_a_new_plan(spark) -> None:
    """The metric is live in this JVM: a plan with a literal never seen before compiles.

    Other tests in the session may have compiled the stream's plans already (Spark caches
    generated classes by their source text), so the stream's first batch may compile nothing;
    this probe is what proves that a literal written into a plan would be counted."""
    import time

    unseen = time.time_ns() % 1_000_000_007
    before = _compilations(spark)
    spark.range(4).selectExpr(f"id * {unseen} + id AS probe").agg({"probe": "max"}).collect()
    assert _compilations(spark) > before, "Spark's codegen metric did not move for a new plan"


def _batch(i: int) -> list:
    """Batch ``i`` of a steady feed, one minute of event time later than the one before: on-time
    events on two partitions in two currencies, a copy of an event of the batch before (a
    duplicate) and an event of the first minute (late once the watermark has passed it)."""
    t0 = 60 * i
    on_time = [ev(t0 + s, t0 + s + 1, partition=s % 2, currency=("USD", "JPY")[s % 2])
               for s in range(0, 60, 5)]
    earlier = [ev(t0 - 55, t0 - 54)] if i else []  # the first event of the batch before
    late = [ev(1 + i, t0 + 59, partition=1)] if i > 1 else []
    return on_time + earlier + late


def test_a_steady_batch_compiles_no_new_code(spark, tmp_path):
    from tests.streamkit import stream_settings

    settings = stream_settings(tmp_path / "wh", window="1m", watermark_bound="5s")
    with session_conf(spark, GENERATED_CODE):  # the product's default; the session interprets
        processor = BatchProcessor.of(spark, settings, query_id="codegen")
        compiled = []
        for batch_id in range(6):
            before = _compilations(spark)
            processor(_raw(spark, _batch(batch_id)), batch_id)
            compiled.append(_compilations(spark) - before)
        late = tb.read_table(spark, settings.warehouse_path, tb.LATE_EVENTS).count()
        assert late >= 3, "the feed must exercise the late side output"
        _probe_counts_a_new_plan(spark)
    assert compiled[-2:] == [0, 0], f"compilations per batch: {compiled}"
