"""Each break's story and the inputs that contributed to it (the workbench's issue 42).

* ``break_stories``: per break of an audit run, the lines ``reckon explain`` prints for its
  (window, key, currency) and the late events and uncaught duplicates that explain its gap,
  recorded by the audit from the table versions it read (audits/stories.py), so the
  workbench shows the story without Spark.
* ``break_inputs``: the partitions and sources that contributed to a break
  (audits.break_story.inputs_of; reports.stories.inputs_of when written), keyed (run_id, dimension, value, day, window_start, key,
  currency): the workbench's partition and source filters page through one range of it.

Runs recorded before this revision have neither: their break pages say so.
On PostgreSQL: the reconciler role writes both, everyone reads them.

Revision ID: 0008_break_stories
Revises: 0007_workbench
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0008_break_stories"
down_revision: str | None = "0007_workbench"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_GRANTS = """
GRANT SELECT ON break_stories, break_inputs
  TO reckon_reconciler, reckon_reviewer, reckon_workbench;
GRANT INSERT ON break_stories, break_inputs TO reckon_reconciler;
"""


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(pg.JSONB(), "postgresql")


def _cell() -> list[sa.Column[Any]]:
    return [sa.Column("day", sa.Date(), primary_key=True),
            sa.Column("window_start", sa.DateTime(timezone=True), primary_key=True),
            sa.Column("key", sa.String(400), primary_key=True),
            sa.Column("currency", sa.String(3), primary_key=True)]


def upgrade() -> None:
    op.create_table(
        "break_stories",
        sa.Column("run_id", sa.String(200), primary_key=True),
        *_cell(),
        sa.Column("lines", _json(), nullable=False),
        sa.Column("evidence", _json(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "break_inputs",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("dimension", sa.String(20), primary_key=True),
        sa.Column("value", sa.String(400), primary_key=True),
        *_cell(),
        sa.Column("late_count", sa.BigInteger(), nullable=False),
        sa.Column("duplicate_count", sa.BigInteger(), nullable=False),
        sa.Column("event_count", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_break_inputs_cell", "break_inputs",
                    ["run_id", "day", "window_start", "key", "currency"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_GRANTS)


def downgrade() -> None:
    op.drop_table("break_inputs")
    op.drop_table("break_stories")
