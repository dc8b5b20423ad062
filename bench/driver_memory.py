"""The driver's memory on a real cluster: the replay and the audit of each given day, with the
driver in this process's JVM and the executors in another (a Spark standalone worker).

In ``local[2]`` the driver JVM is also the executor, so its heap counts the executors' working
memory and grows with the data whatever the driver holds. Here the executors run elsewhere,
so the driver JVM's heap is the driver's own: the Delta logs it plans from, the query plans,
the collected summaries. The scale curve (bench/scale_curve.py) starts the cluster and runs

    python -m bench.driver_memory --master spark://HOST:PORT DAY_WAREHOUSE...

which prints one JSON object on stdout: per warehouse, the events it holds and the replay's
and the audit's wall seconds and driver memory (bench.harness.MemorySampler).
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

__all__ = ["DRIVER_HEAP", "EXECUTOR_MEMORY", "main"]

#: The driver's heap limit: far below one day's data at every scale, so a run that finishes
#: shows the driver never held the data.
DRIVER_HEAP = "1g"
#: Each executor's heap (the worker offers a little more, for Spark's overhead).
EXECUTOR_MEMORY = "6g"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.driver_memory",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", required=True, help="spark://HOST:PORT")
    parser.add_argument("warehouses", nargs="+", type=Path,
                        help="day warehouses built by the scale curve (day-<events>)")
    args = parser.parse_args(argv)

    from audits.audit import audit_day
    from bench.datasets import BENCH_DAY
    from bench.harness import base_settings, log, measure
    from spark.replay import replay_day
    from spark.session import few_cores_conf, get_spark

    def settings_for(warehouse: Path) -> Any:
        # local mode's tuning too, so that only the process split differs from the local runs
        return base_settings(warehouse, spark_master=args.master, extra_spark_conf={
            "spark.driver.memory": DRIVER_HEAP, "spark.executor.memory": EXECUTOR_MEMORY,
            **few_cores_conf(base_settings(warehouse))})

    spark = get_spark(settings_for(args.warehouses[0]), app_name="reckon-bench-driver-memory")
    points: dict[str, Any] = {}
    for warehouse in args.warehouses:
        settings = settings_for(warehouse)
        events = int(warehouse.name.removeprefix("day-"))
        log(f"driver memory on {args.master}: replay_day at {events:,} events")
        _, replay = measure(spark, partial(replay_day, spark, settings.replay_config(), BENCH_DAY))
        log(f"driver memory on {args.master}: audit_day(record=False) at {events:,} events")
        _, audit = measure(spark, partial(audit_day, spark, settings.audit_config(), BENCH_DAY,
                                          kind="bench", recorder=None))
        points[str(events)] = {"replay": replay, "audit": audit}
    print(json.dumps({"driver_heap": DRIVER_HEAP, "executor_memory": EXECUTOR_MEMORY,
                      "spark_master": args.master, "results": points}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
