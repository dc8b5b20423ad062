"""spark-submit entry point of the nightly replay: the same ``app.pipeline.run_replay`` the
CLI and the in-process DAG task call, for every day of ``[D - lookback_days, D]``.

    spark-submit --jars <delta jars> app/submit_replay.py --date D [--lookback-days N]

Settings come from the environment (RECKON_*), as everywhere. Prints one JSON line per day.
An entry point like the ``reckon`` command, so it lives in the app layer beside it.
"""

from __future__ import annotations

import sys
from pathlib import Path

# spark-submit puts this file's folder first on sys.path; its modules (config.py, spec.py)
# would then shadow top-level names. Import reckon/spark as packages from the repo root.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import json  # noqa: E402
from datetime import timedelta  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    from app.pipeline import run_replay
    from app.settings import load_settings
    from reckon.errors import ReckonError, invalid
    from reckon.timeutil import parse_date

    parser = argparse.ArgumentParser(prog="submit_replay.py", description=__doc__)
    parser.add_argument("--date", required=True, help="newest day D, YYYY-MM-DD (UTC)")
    parser.add_argument("--lookback-days", dest="lookback_days", type=int, default=0,
                        help="also replay this many days before D (default 0)")
    args = parser.parse_args(argv)
    try:
        newest = parse_date(args.date, "--date")
        if args.lookback_days < 0:
            raise invalid("--lookback-days", args.lookback_days, "a number of days >= 0")
        settings = load_settings()
        for k in range(args.lookback_days, -1, -1):
            result = run_replay(settings, newest - timedelta(days=k))
            print(json.dumps(result.to_dict(), sort_keys=True, default=str), flush=True)
    except ReckonError as exc:
        print(f"submit_replay: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
