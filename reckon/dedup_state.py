"""When the stream's de-duplication state can judge a batch on its own.

The running stream keeps, per event_id, the latest arrival it has seen in Spark's state store
(``reckon.jvm.BucketedDedupState``), so a steady batch needs no read of the archive's horizon. The
verdict is the same rule either way (``reckon.eventtime.is_duplicate_of_recent``); what the
state cannot know is a copy it never saw or has forgotten:

* a copy archived before this checkpoint's state began (a new checkpoint on a warehouse that
  already holds events). The state starts from the archive's last horizon (the copies that
  arrived at most a horizon before the latest arrival archived then, ``archived_until``), so
  only a row that arrived before ``archived_until`` can need an older archived copy;
* a copy whose state entry outlived its TTL. The state keeps an entry at least ``ttl`` of
  processing time after its last update (a prune may forget it later, never sooner). A copy
  ``c`` can miss its earlier copy ``p`` (arrived at most a horizon before it) only if ``p``
  was processed more than ``ttl`` before ``c``, that is if ``c``'s lag (processing time
  minus arrival) exceeds ``p``'s by more than ``ttl - horizon``.
  ``p``'s lag is at least the smallest lag any batch of the state has had (``min_lag``).

For such a batch the stream judges its rows against the archive instead, as it always did;
the state is updated either way.

>>> coverage = StateCoverage(archived_until=None, started=0, min_lag=5)
>>> state_suffices(coverage, min_arrival=100, processed_at=110, horizon=50, ttl=100)
True
>>> state_suffices(coverage, min_arrival=100, processed_at=300, horizon=50, ttl=100)
False
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["StateCoverage", "state_suffices", "state_ttl"]


def state_ttl(horizon: int) -> int:
    """How long (processing time, microseconds) the state keeps an entry after its last
    update: two horizons, so a copy is judged by the state alone while the stream's lag
    varies by less than a horizon.

    >>> state_ttl(3_600_000_000) // 3_600_000_000
    2
    """
    return 2 * horizon


@dataclass(frozen=True)
class StateCoverage:
    """What a query's dedup state can vouch for (times in epoch microseconds).

    ``archived_until``: the latest arrival the archive held when the state began on a
    warehouse with events, seeded with the copies that arrived at most a horizon before it
    (None: it began on an empty archive); ``started``: the processing
    time of the state's first batch (None: none yet); ``min_lag``: the smallest processing
    time minus latest arrival of any of its batches (None: none yet)."""

    archived_until: int | None
    started: int | None
    min_lag: int | None

    def after_batch(self, processed_at: int, max_arrival: int) -> StateCoverage:
        """The coverage once a batch processed at ``processed_at`` has updated the state."""
        lag = processed_at - max_arrival
        return replace(self, started=processed_at if self.started is None else self.started,
                       min_lag=lag if self.min_lag is None else min(self.min_lag, lag))


def state_suffices(coverage: StateCoverage, *, min_arrival: int, processed_at: int,
                   horizon: int, ttl: int) -> bool:
    """Whether every earlier copy that could make a row of this batch a duplicate is in the
    state: no row within a horizon of what was archived before the state began, and no entry
    it needs can have expired."""
    if coverage.archived_until is not None and min_arrival < coverage.archived_until:
        return False
    if coverage.started is None or processed_at - coverage.started <= ttl:
        return True  # nothing has been in the state longer than its TTL
    assert coverage.min_lag is not None  # set with started
    min_lag = coverage.min_lag
    if coverage.archived_until is not None:  # the seed entered with the first batch
        min_lag = min(min_lag, coverage.started - coverage.archived_until)
    return processed_at - min_arrival <= min_lag + ttl - horizon
