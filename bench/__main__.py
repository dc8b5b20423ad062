"""`python -m bench [--quick] [--only WORKLOAD ...]`: run the benchmarks, write
bench/results/<workload>.json and regenerate the tables in BENCHMARKS.md.

Data is generated under bench/data/ (gitignored) at the chosen scale and reused by later runs.
Every Spark contender runs in one local[2] SparkSession, on the same data, one after another.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from bench.harness import Scale, base_settings, environment, load_average, log, write_result
from bench.report import write_markdown
from bench.workloads import NO_SPARK_SESSION, WORKLOADS
from reckon.config import PROJECT_ROOT
from reckon.errors import UsageError

__all__ = ["main"]

QUICK_FACTOR = 0.05


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help=f"1/{int(1 / QUICK_FACTOR)} of the full sizes (a few minutes)")
    p.add_argument("--scale", type=float, default=None,
                   help="explicit size factor (1.0 = full benchmark; overrides --quick)")
    p.add_argument("--only", nargs="+", metavar="WORKLOAD", choices=sorted(WORKLOADS),
                   help=f"run only these workloads ({', '.join(WORKLOADS)})")
    p.add_argument("--results-dir", type=Path, default=PROJECT_ROOT / "bench" / "results")
    p.add_argument("--data-dir", type=Path, default=PROJECT_ROOT / "bench" / "data")
    p.add_argument("--markdown", type=Path, default=PROJECT_ROOT / "BENCHMARKS.md",
                   help="the file whose tables are regenerated from --results-dir")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: regenerate --markdown from --results-dir and bench/notes")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.report_only:
        write_markdown(args.results_dir, args.markdown)
        log(f"regenerated {args.markdown} from {args.results_dir}")
        return 0
    factor = args.scale if args.scale is not None else (QUICK_FACTOR if args.quick else 1.0)
    if not 0 < factor <= 10:
        raise UsageError(f"--scale {factor} is not valid: give a factor in (0, 10]")
    names = args.only or list(WORKLOADS)
    scale = Scale(factor=factor, data_dir=args.data_dir.resolve() / f"scale-{factor:g}")
    scale.data_dir.mkdir(parents=True, exist_ok=True)
    env = environment()
    log(f"scale factor {factor:g}; workloads {', '.join(names)}; load {load_average()}")

    spark = None
    if any(n not in NO_SPARK_SESSION for n in names):
        from spark.session import get_spark

        spark = get_spark(base_settings(scale.data_dir / "_session"), app_name="reckon-bench")
    failed = []
    for name in names:
        load_before = load_average()
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        log(f"=== {name} (load {load_before})")
        try:
            body = WORKLOADS[name](spark, scale)
        except Exception:
            traceback.print_exc()
            failed.append(name)
            continue
        payload = {
            "workload": name, "scale_factor": factor, "quick": factor < 1.0,
            "started_at": started.isoformat(), "total_seconds": round(time.perf_counter() - t0, 1),
            "load_average_before": load_before, "load_average_after": load_average(),
            "spark_master": None if spark is None else spark.sparkContext.master,
            "shuffle_partitions": None if spark is None
            else spark.conf.get("spark.sql.shuffle.partitions"),
            "command": "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv),
            "profile_env": bool(os.environ.get("RECKON_PROFILE")),
            **env, **body,
        }
        path = write_result(args.results_dir, name, payload)
        log(f"=== {name} done in {payload['total_seconds']}s -> {path}")
    write_markdown(args.results_dir, args.markdown)
    log(f"tables regenerated in {args.markdown}")
    if failed:
        log(f"FAILED: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
