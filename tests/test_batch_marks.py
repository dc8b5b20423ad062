"""Fast tier: the batch mark a stream commit carries in its userMetadata (spark/tables.py)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from spark.tables import batch_mark, parse_batch_mark


@given(st.text(min_size=1), st.sampled_from(["event_log", "provisional_totals"]),
       st.integers(0, 2**62))
def test_a_mark_reads_back_as_what_was_written(app_id, table, batch_id):
    assert parse_batch_mark(batch_mark(app_id, table, batch_id)) == (app_id, table, batch_id)


def test_other_user_metadata_is_no_mark():
    for text in (None, "", "nightly replay", "reckon_batch", json.dumps({"reckon_batch": 3}),
                 json.dumps({"reckon_batch": {"app": "a", "table": "t"}}),
                 json.dumps({"reckon_batch": {"app": "a", "table": "t", "batch": "x"}}), "{"):
        assert parse_batch_mark(text) is None, text
