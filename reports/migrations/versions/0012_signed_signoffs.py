"""Each sign-off is signed by its signer's own key; the administrator registers the keys.

* ``signoff_log.key_id`` and ``signoff_log.signature``: the signer's ed25519 signature of the
  entry's hash (reckon.signing), so whoever can write the database cannot write an entry in
  another's name or recompute the chain after an edit. Entries written before: null (legacy,
  reported by verify-log as unsigned, docs/decisions/0011).
* ``signer_keys``: each registered public key, its name and scope, signed by the
  administrator's key (``signoff_admin_key``, pinned in the configuration); a revocation is a
  row of scope ``revoked`` naming the last log seq the key may have signed (``through_seq``).

On PostgreSQL every reckon role may read the keys; only the owner (the administrator) writes
them. The log's triggers (migrations 0006, 0007) stand as they are.

Revision ID: 0012_signed_signoffs
Revises: 0011_quality_verdict_paths
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_signed_signoffs"
down_revision: str | None = "0011_quality_verdict_paths"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_GRANTS = """
GRANT SELECT ON signer_keys TO reckon_reconciler, reckon_reviewer, reckon_workbench;
"""


def upgrade() -> None:
    with op.batch_alter_table("signoff_log") as batch:
        batch.add_column(sa.Column("key_id", sa.String(16), nullable=True))
        batch.add_column(sa.Column("signature", sa.String(128), nullable=True))
    op.create_table(
        "signer_keys",
        sa.Column("seq", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("public_key", sa.String(100), nullable=False),
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("scope", sa.String(20), nullable=False),
        sa.Column("admin_key_id", sa.String(16), nullable=False),
        sa.Column("signature", sa.String(128), nullable=False),
        sa.Column("through_seq", sa.BigInteger(), nullable=True),
        sa.CheckConstraint("scope IN ('self', 'workbench', 'revoked')",
                           name="ck_signer_keys_scope"),
    )
    op.create_index("ix_signer_keys_key_id", "signer_keys", ["key_id"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_GRANTS)


def downgrade() -> None:
    op.drop_index("ix_signer_keys_key_id", "signer_keys")
    op.drop_table("signer_keys")
    with op.batch_alter_table("signoff_log") as batch:
        batch.drop_column("signature")
        batch.drop_column("key_id")
