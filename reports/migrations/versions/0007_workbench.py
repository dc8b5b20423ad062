"""The reviewer's workbench (workbench/): its users, and break actions in the sign-off log.

* ``workbench_users``: who may log in to the workbench, a scrypt hash of their password and
  their role (reconciler, reviewer, auditor). ``reckon users add`` writes it.
* The sign-off log takes three more decisions, each on one break of a run, named in the
  entry's note (so inside its hash): ``break-comment``, ``break-accepted``, ``break-resolved``.
  They do not sign a run off (reckon.signoff.SIGNING_DECISIONS is unchanged).
* On PostgreSQL, a group role ``reckon_workbench`` for the workbench's own login role. The
  workbench acts for the person it authenticated, so the signer trigger takes ``by`` from the
  entry when the session is the workbench's, and then checks that ``by`` is an enabled
  workbench user who may act (reviewer or reconciler) and is not the run's reconciler. The
  workbench role may read ``workbench_users`` but not write it: it cannot invent a signer.

Revision ID: 0007_workbench
Revises: 0006_postgres_roles
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_workbench"
down_revision: str | None = "0006_postgres_roles"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = "decision IN ('approved', 'rejected', 'accepted', 'resolved')"
_NEW = ("decision IN ('approved', 'rejected', 'accepted', 'resolved', 'break-comment', "
        "'break-accepted', 'break-resolved')")

_ROLE = """
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reckon_workbench') THEN
    CREATE ROLE reckon_workbench NOLOGIN;
  END IF;
EXCEPTION
  WHEN duplicate_object OR unique_violation THEN NULL;
  WHEN insufficient_privilege THEN
    RAISE EXCEPTION 'the role reckon_workbench is missing and % may not create roles: ask the '
      'database administrator to create it (NOLOGIN), then migrate again', session_user
      USING ERRCODE = '42501';
END $$;
GRANT SELECT ON audit_runs, audit_run_currencies, breaks, break_reviews, late_attribution,
  check_runs, expectation_results, reports, signoff_log, alembic_version, workbench_users
  TO reckon_workbench;
DO $$ BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO reckon_workbench', current_schema());
END $$;
GRANT INSERT ON signoff_log TO reckon_workbench;
GRANT UPDATE (review_status, updated_at) ON break_reviews TO reckon_workbench;
GRANT SELECT ON workbench_users TO reckon_reconciler, reckon_reviewer;
"""

_SIGNER = """
CREATE OR REPLACE FUNCTION reckon_signoff_signer() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  run_reconciler text;
  signer text := session_user::text;
BEGIN
  IF reckon_is_owner(TG_RELID) THEN
    RETURN NEW;
  END IF;
  IF pg_has_role(session_user, 'reckon_workbench', 'MEMBER') THEN
    IF NOT EXISTS (SELECT FROM workbench_users WHERE name = NEW."by" AND enabled
                   AND role IN ('reviewer', 'reconciler')) THEN
      RAISE EXCEPTION 'a sign-off by % refused: not a workbench user who may act', NEW."by"
        USING ERRCODE = '42501';
    END IF;
    signer := NEW."by";
  ELSIF NEW."by" IS DISTINCT FROM session_user::text THEN
    RAISE EXCEPTION 'a sign-off by % refused: this session logged in as %, and a sign-off is '
      'made by the role that is logged in', NEW."by", session_user USING ERRCODE = '42501';
  END IF;
  SELECT reconciler INTO run_reconciler FROM audit_runs WHERE run_id = NEW.run_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no audit run %: nothing to sign off', NEW.run_id USING ERRCODE = '42501';
  END IF;
  IF run_reconciler = signer THEN
    RAISE EXCEPTION '% may not sign off run %: % reconciled it, and a run needs a second '
      'person''s sign-off (four-eyes rule)', signer, NEW.run_id, run_reconciler
      USING ERRCODE = '42501';
  END IF;
  RETURN NEW;
END $$;
DO $$ BEGIN
  EXECUTE format('ALTER FUNCTION reckon_signoff_signer() SET search_path = pg_catalog, %I, '
                 'pg_temp', current_schema());
END $$;
"""


def _decisions(condition: str) -> None:
    """Replace the log's decision CHECK (SQLite copies the table; rows are kept as they are)."""
    with op.batch_alter_table("signoff_log", recreate="auto") as batch:
        batch.drop_constraint("ck_signoff_log_decision", type_="check")
        batch.create_check_constraint("ck_signoff_log_decision", condition)


def upgrade() -> None:
    op.create_table(
        "workbench_users",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("password_hash", sa.String(300), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("role IN ('reconciler', 'reviewer', 'auditor')",
                           name="ck_workbench_users_role"),
    )
    _decisions(_NEW)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_ROLE)
        op.execute(_SIGNER)


def downgrade() -> None:
    _decisions(_OLD)
    op.drop_table("workbench_users")
