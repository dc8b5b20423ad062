"""Exports are recorded in the sign-off log (the workbench's issue 61).

Every export of a run's breaks, the workbench's CSV and PDF of its filtered break list and a
CSV or PDF file of the day's report it serves, is one ``exported`` entry of the hash-chained
log: who (the logged-in user), when, and what (the file, its filters, how many breaks). An
export decides nothing: it counts toward no review state, and any enabled workbench user may
make one (an auditor, the run's reconciler).

* The log's decision CHECK takes ``exported`` (SQLite copies the table, rows kept).
* PostgreSQL: ``reckon_signoff_signer()`` (migration 0007) lets an ``exported`` entry through
  for any enabled workbench user when the workbench's role writes it, and for the role that is
  logged in otherwise, without the four-eyes rule (which stands for every other decision).

Revision ID: 0016_exports_logged
Revises: 0015_break_assignment
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_exports_logged"
down_revision: str | None = "0015_break_assignment"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = ("decision IN ('approved', 'rejected', 'accepted', 'resolved', 'reopened', "
        "'break-comment', 'break-accepted', 'break-resolved', 'break-rejected', "
        "'break-reopened', 'break-assigned')")
_NEW = ("decision IN ('approved', 'rejected', 'accepted', 'resolved', 'reopened', "
        "'break-comment', 'break-accepted', 'break-resolved', 'break-rejected', "
        "'break-reopened', 'break-assigned', 'exported')")

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
    IF NEW.decision = 'exported' THEN
      -- a record of an export: any enabled workbench user (an auditor too), no four eyes
      IF NOT EXISTS (SELECT FROM workbench_users WHERE name = NEW."by" AND enabled) THEN
        RAISE EXCEPTION 'an export by % refused: not an enabled workbench user', NEW."by"
          USING ERRCODE = '42501';
      END IF;
      RETURN NEW;
    END IF;
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
  IF NEW.decision = 'exported' THEN
    RETURN NEW;  -- made by the role that is logged in (checked above); it decides nothing
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

# migration 0007's function, restored by a downgrade
_SIGNER_0007 = """
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
    with op.batch_alter_table("signoff_log", recreate="auto") as batch:
        batch.drop_constraint("ck_signoff_log_decision", type_="check")
        batch.create_check_constraint("ck_signoff_log_decision", condition)


def upgrade() -> None:
    _decisions(_NEW)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_SIGNER)


def downgrade() -> None:
    """Refused while the log holds an export record (the log is append-only)."""
    held = op.get_bind().execute(sa.text(
        "SELECT count(*) FROM signoff_log WHERE decision = 'exported'")).scalar_one()
    if held:
        raise RuntimeError(f"cannot downgrade below 0016: the sign-off log holds {held} "
                           "'exported' entr(y/ies); stay at 0016")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_SIGNER_0007)
    _decisions(_OLD)
