"""Fast tier: rules that had two implementations now have one owner (issue 40), and the inputs
on which the two used to disagree get the owner's one answer.

- A day: ``reckon.timeutil.parse_date`` (audits/quality.py had ``parse_day``, which took
  " 2026-01-01 " and refused a datetime, while ``parse_date`` refused the first and its callers
  let a datetime through).
- Sign-off: ``reckon.signoff`` (decisions in reports/review.py, reports/db/ and the CLI; the
  audit and the report each decided which signed-off run a re-audit replaced; the audit counted
  a run that started at the same moment or later, the report did not).
- Day D is final: ``reckon.eventtime.EventTimeRules`` (spark/progress.py summed it itself).
"""

from __future__ import annotations

from collections import namedtuple
from datetime import UTC, date, datetime

import pytest

from reckon.errors import UsageError
from reckon.eventtime import EventTimeRules, is_beyond_allowed_lateness
from reckon.signoff import (
    BREAK_ACTIONS,
    DECISIONS,
    closes_breaks,
    decision_constraint,
    four_eyes_refusal,
    impersonation_refusal,
    replaced_signoff,
    signs_off,
)
from reckon.timeutil import day_bounds, parse_date


def test_a_day_with_white_space_around_it_is_the_day():
    assert parse_date(" 2026-01-01\n", "--date") == date(2026, 1, 1)


def test_a_date_passes_and_a_moment_is_refused_in_one_line():
    assert parse_date(date(2026, 1, 1)) == date(2026, 1, 1)
    with pytest.raises(UsageError, match=r"^day=.* is not valid: a day \(YYYY-MM-DD\), not a "
                                         r"timestamp$"):
        parse_date(datetime(2026, 1, 1, 23, 30, tzinfo=UTC), "day")


def test_no_other_module_parses_a_day_on_its_own():
    import audits.quality

    assert not hasattr(audits.quality, "parse_day")


Entry = namedtuple("Entry", "run_id decision")


def test_a_re_audit_replaced_the_newest_signed_off_run_that_started_before_it():
    started = {"r1": datetime(2026, 1, 2, 1), "r2": datetime(2026, 1, 2, 2),
               "r3": datetime(2026, 1, 2, 3)}
    entries = [Entry("r1", "approved"), Entry("r2", "accepted"), Entry("r2", "rejected")]
    assert replaced_signoff(entries, "r3", started) == Entry("r2", "accepted")
    assert replaced_signoff([*entries, Entry("r3", "resolved")], "r3", started) is None
    assert replaced_signoff([Entry("r1", "rejected")], "r3", started) is None


def test_a_run_that_started_at_the_same_moment_or_later_was_not_replaced_by_it():
    """Where the audit's and the report's copies disagreed: the audit said r1 was replaced."""
    same = {"r1": datetime(2026, 1, 2, 1), "r2": datetime(2026, 1, 2, 1)}
    assert replaced_signoff([Entry("r1", "approved")], "r2", same) is None
    later = {"r1": datetime(2026, 1, 2, 3), "r2": datetime(2026, 1, 2, 1)}
    assert replaced_signoff([Entry("r1", "approved")], "r2", later) is None


def test_the_decisions_and_what_each_means():
    assert DECISIONS == ("approved", "rejected", "accepted", "resolved", "reopened")
    assert [d for d in DECISIONS if signs_off(d)] == ["approved", "accepted", "resolved"]
    assert [d for d in DECISIONS if closes_breaks(d)] == ["accepted", "resolved"]
    assert not any(signs_off(a) or closes_breaks(a) for a in BREAK_ACTIONS)
    # the text the latest migration of the constraint created (0016, which added the export
    # record): the model and the migration stay the same constraint
    from importlib import import_module

    migration = import_module("reports.migrations.versions.0016_exports_logged")
    assert decision_constraint() == migration._NEW


def test_who_may_sign():
    assert four_eyes_refusal("bob", "alice", "run-1") is None
    assert "four-eyes" in (four_eyes_refusal("ALICE", "alice", "run-1") or "")
    # what to do, too: `make demo` then the README's signoff is refused for every new user
    assert "another reviewer signs it as themselves" in (
        four_eyes_refusal("alice", "alice", "run-1") or "")
    assert impersonation_refusal("Bob", "bob", "the OS account that runs it") is None
    assert "signs as 'bob'" in (impersonation_refusal("eve", "bob", "the OS account") or "")


@pytest.mark.parametrize(("window", "slide", "allowed_lateness"), [("10s", None, "0s"), ("10s", None, "2s"),
                                                         ("10s", "5s", "1s"), ("7m", None, "0s")])
def test_day_d_is_final_exactly_when_its_last_window_is(window, slide, allowed_lateness):
    rules = EventTimeRules.parse(window=window, slide=slide, allowed_lateness=allowed_lateness)
    day = date(2026, 1, 1)
    at = rules.day_final_at(day)
    assert at >= day_bounds(day)[1] + rules.allowed_lateness
    last_end = rules.windows.day_event_times(day)[1]
    for wm in (at - 1, at, at + 1):
        assert rules.is_day_final(day, wm) == bool(is_beyond_allowed_lateness(last_end, wm, rules.allowed_lateness))
    assert not rules.is_day_final(day, at - 1) and rules.is_day_final(day, at)
    assert not rules.is_day_final(day, None)
