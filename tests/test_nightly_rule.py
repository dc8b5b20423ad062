"""Fast tier: which day a nightly run processes (one rule, however the run was started), and
durations said in words."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from app.pipeline import nightly_days
from reckon.errors import ConfigError, UsageError
from reckon.timeutil import describe_duration

D = date(2026, 1, 1)
MIDNIGHT = datetime(2026, 1, 1, tzinfo=UTC)
AFTER = datetime(2026, 11, 26, 10, 30, tzinfo=UTC)  # when someone pressed the button


@pytest.mark.parametrize(("how", "day", "logical", "run_after", "want"), [
    # the schedule: the run for [D, D+1) starts after midnight at the end of D
    ("schedule", None, MIDNIGHT, datetime(2026, 1, 2, 0, 1, tzinfo=UTC), D),
    ("backfill of D", None, MIDNIGHT, AFTER, D),
    ("airflow dags trigger --logical-date 2026-01-01", None, MIDNIGHT, AFTER, D),
    ("REST API logical_date in another zone", None,
     datetime.fromisoformat("2026-01-01T05:00:00+05:00"), AFTER, D),
    ("conf names the day", "2026-01-01", datetime(2026, 11, 26, tzinfo=UTC), AFTER, D),
    ("conf day with spaces", " 2026-01-01 ", None, AFTER, D),
    ("trigger without a logical date: the last complete day", None, None, AFTER,
     date(2026, 11, 25)),
    ("empty conf day: the logical date's", "", MIDNIGHT, AFTER, D),
])
def test_one_rule_for_the_day_however_the_run_was_started(how, day, logical, run_after, want):
    newest, days = nightly_days(day=day, logical_date=logical, run_after=run_after,
                                lookback_days=0)
    assert (newest, days) == (want, [want]), how


def test_the_lookback_runs_oldest_first_up_to_the_day():
    assert nightly_days(day="2026-03-01", logical_date=None, run_after=AFTER,
                        lookback_days=2)[1] == [date(2026, 2, 27), date(2026, 2, 28),
                                                date(2026, 3, 1)]


def test_a_bad_day_or_lookback_is_one_clear_error():
    with pytest.raises(UsageError, match="day='2026-02-30' is not valid"):
        nightly_days(day="2026-02-30", logical_date=None, run_after=AFTER, lookback_days=0)
    with pytest.raises(ConfigError, match="lookback_days=-1 is not valid"):
        nightly_days(day=None, logical_date=MIDNIGHT, run_after=AFTER, lookback_days=-1)


@pytest.mark.parametrize(("micros", "words"), [
    (0, "0 seconds"), (1_500, "under a second"), (1_000_000, "1 second"),
    (7_263_000_000, "2 hours 1 minute 3 seconds"), (90_061_000_000, "1 day 1 hour 1 minute 1 second"),
    (7_200_000_000, "2 hours"), (-30_000_000, "30 seconds"),
])
def test_durations_in_words(micros, words):
    assert describe_duration(micros) == words
