"""The audit benchmark's measuring protocol: contenders run in turns after one untimed round,
the median timed run is reported, and nothing one contender cached is left for the next."""

from __future__ import annotations

from typing import Any

from bench.workloads import _alternate


def test_contenders_alternate_and_the_median_run_is_reported(spark) -> None:
    calls: list[str] = []
    walls = {"ours": iter([99.0, 3.0, 1.0, 2.0]), "theirs": iter([50.0, 7.0, 9.0, 8.0])}
    cached_at_start: list[bool] = []

    def contender(name: str) -> Any:
        def run() -> tuple[Any, dict[str, Any]]:
            cached_at_start.append(not spark._jsparkSession.sharedState().cacheManager()
                                   .isEmpty())
            spark.range(10).cache().count()  # like DataComPy: cached and never unpersisted
            calls.append(name)
            wall = next(walls[name])
            return f"{name}@{wall}", {"wall_seconds": wall}
        return run

    out = _alternate(spark, {"ours": contender("ours"), "theirs": contender("theirs")}, 3)

    assert calls == ["ours", "theirs"] * 4  # in turns, the first round untimed
    assert cached_at_start == [False] * 8  # each run starts with nothing cached
    value, measured, timed = out["ours"]
    assert timed == [3.0, 1.0, 2.0] and measured["wall_seconds"] == 2.0 and value == "ours@2.0"
    value, measured, timed = out["theirs"]
    assert timed == [7.0, 9.0, 8.0] and measured["wall_seconds"] == 8.0 and value == "theirs@8.0"
