"""Fast tier: the data-quality verdict (reckon.quality_verdict), the one decision Data Docs,
the report, ``reckon check`` and the nightly gate show (issue 56)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reckon.quality_verdict import day_verdict, min_rows, suite_verdict

results = st.lists(st.tuples(st.sampled_from(["blocking", "warning"]), st.booleans()),
                   max_size=12)


@given(results=results, rows=st.integers(0, 10), events=st.booleans())
def test_a_suite_passes_exactly_when_no_blocking_expectation_failed(results, rows, events):
    verdict = suite_verdict(rows=rows, day_has_events=events, results=results)
    blocking = sum(1 for severity, ok in results if severity == "blocking" and not ok)
    warnings = sum(1 for severity, ok in results if severity == "warning" and not ok)
    assert verdict.passed is (blocking == 0)
    assert (verdict.blocking_failures, verdict.warnings) == (blocking, warnings)
    # the words say the same as the flag, whatever else they add
    assert verdict.text.startswith("passed") is verdict.passed
    assert verdict.text.startswith("FAILED") is (not verdict.passed)


@given(suites=st.lists(st.tuples(results, st.integers(0, 3)), max_size=7), events=st.booleans())
def test_a_day_passes_exactly_when_every_suite_passed(suites, events):
    verdicts = [suite_verdict(rows=rows, day_has_events=events, results=r) for r, rows in suites]
    day = day_verdict(verdicts, day_has_events=events)
    assert day.passed is all(v.passed for v in verdicts)
    assert day.text.startswith("passed") is day.passed


def test_a_quiet_day_states_its_verdict():
    """No events: every row rule is vacuously true and the row counts need 0 rows, so each
    suite says "passed (no events)" and the day "passed (no events on the day)"."""
    assert min_rows(False) == 0 and min_rows(True) == 1
    quiet = suite_verdict(rows=0, day_has_events=False,
                          results=[("blocking", True), ("warning", True)])
    assert (quiet.passed, quiet.text) == (True, "passed (no events)")
    assert day_verdict([quiet], day_has_events=False).text == "passed (no events on the day)"
    # no late events on a day with events is normal, and said as such
    assert suite_verdict(rows=0, day_has_events=True, results=[]).text == "passed (no rows)"


def test_warnings_and_failures_are_counted_in_the_words():
    assert suite_verdict(rows=5, day_has_events=True,
                         results=[("warning", False)]).text == "passed with 1 warning"
    assert suite_verdict(rows=5, day_has_events=True,
                         results=[("warning", False)] * 2).text == "passed with 2 warnings"
    failed = suite_verdict(rows=0, day_has_events=False,
                           results=[("blocking", False), ("warning", False)])
    assert (failed.passed, failed.text) == (False, "FAILED (1 blocking)")
    assert day_verdict([failed], day_has_events=False).text == "FAILED"
