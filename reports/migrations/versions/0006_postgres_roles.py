"""On PostgreSQL, the database itself enforces who may write what (no-op on SQLite).

Two group roles, created when missing (the migrating role needs CREATEROLE, or a DBA creates
them first: docker/postgres/init-databases.sh does):

* ``reckon_reconciler``: the audits and reports. Reads everything; inserts and updates the
  run, break, check and report tables; may not write the sign-off log.
* ``reckon_reviewer``: reads everything; may only insert into the sign-off log and move a
  break's review status (the columns review_status and updated_at of break_reviews).

People log in as their own roles, members of one group (``CREATE ROLE alice LOGIN IN ROLE
reckon_reviewer``). Triggers then hold for every role but the tables' owner (the
administrator who migrates, who could drop any trigger anyway):

* the sign-off log is append-only: UPDATE, DELETE and TRUNCATE are refused for everyone;
* a sign-off's ``by`` must be the session's login role, and that role may not be the run's
  reconciler (four-eyes, enforced beside the application's check);
* an audit run's ``reconciler`` must be the session's login role, and never changes after.

Refusals use SQLSTATE 42501 (insufficient_privilege). A later migration that adds a table
grants on it too.

Revision ID: 0006_postgres_roles
Revises: 0005_signoff_binds_figures
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006_postgres_roles"
down_revision: str | None = "0005_signoff_binds_figures"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Constant DDL (no user data). The owner test: members of the table's owner (and superusers)
# could disable the triggers, so the rules bind everyone else.
_FUNCTIONS = """
CREATE OR REPLACE FUNCTION reckon_is_owner(tbl regclass) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT pg_has_role(session_user, (SELECT relowner FROM pg_class WHERE oid = tbl), 'MEMBER')
$$;

CREATE OR REPLACE FUNCTION reckon_signoff_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the sign-off log is append-only: % refused', TG_OP
    USING ERRCODE = '42501';
END $$;

CREATE OR REPLACE FUNCTION reckon_signoff_signer() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  run_reconciler text;
BEGIN
  IF reckon_is_owner(TG_RELID) THEN
    RETURN NEW;
  END IF;
  IF NEW."by" IS DISTINCT FROM session_user::text THEN
    RAISE EXCEPTION 'a sign-off by % refused: this session logged in as %, and a sign-off is '
      'made by the role that is logged in', NEW."by", session_user USING ERRCODE = '42501';
  END IF;
  SELECT reconciler INTO run_reconciler FROM audit_runs WHERE run_id = NEW.run_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no audit run %: nothing to sign off', NEW.run_id USING ERRCODE = '42501';
  END IF;
  IF run_reconciler = session_user::text THEN
    RAISE EXCEPTION '% may not sign off run %: % reconciled it, and a run needs a second '
      'person''s sign-off (four-eyes rule)', session_user, NEW.run_id, run_reconciler
      USING ERRCODE = '42501';
  END IF;
  RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION reckon_audit_run_reconciler() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    IF NEW.reconciler IS DISTINCT FROM OLD.reconciler THEN
      RAISE EXCEPTION 'the reconciler of audit run % is %, and stays so', OLD.run_id,
        OLD.reconciler USING ERRCODE = '42501';
    END IF;
  ELSIF NOT reckon_is_owner(TG_RELID) AND NEW.reconciler IS DISTINCT FROM session_user::text THEN
    RAISE EXCEPTION 'audit run % names % as its reconciler, but this session logged in as %',
      NEW.run_id, NEW.reconciler, session_user USING ERRCODE = '42501';
  END IF;
  RETURN NEW;
END $$;
"""

# Each function resolves names in the migrated schema only: a session's own temporary
# tables (pg_temp, searched first by default) must not stand in for audit_runs.
_PIN_SEARCH_PATH = """
DO $$
DECLARE
  fn text;
BEGIN
  FOREACH fn IN ARRAY ARRAY['reckon_is_owner(regclass)', 'reckon_signoff_append_only()',
                            'reckon_signoff_signer()', 'reckon_audit_run_reconciler()'] LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', fn,
                   current_schema());
  END LOOP;
END $$;
"""

_TRIGGERS = """
CREATE TRIGGER signoff_log_append_only BEFORE UPDATE OR DELETE ON signoff_log
  FOR EACH ROW EXECUTE FUNCTION reckon_signoff_append_only();
CREATE TRIGGER signoff_log_no_truncate BEFORE TRUNCATE ON signoff_log
  FOR EACH STATEMENT EXECUTE FUNCTION reckon_signoff_append_only();
CREATE TRIGGER signoff_log_signer BEFORE INSERT ON signoff_log
  FOR EACH ROW EXECUTE FUNCTION reckon_signoff_signer();
CREATE TRIGGER audit_runs_reconciler BEFORE INSERT OR UPDATE ON audit_runs
  FOR EACH ROW EXECUTE FUNCTION reckon_audit_run_reconciler();
"""


_ROLES = """
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reckon_reconciler') THEN
    CREATE ROLE reckon_reconciler NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reckon_reviewer') THEN
    CREATE ROLE reckon_reviewer NOLOGIN;
  END IF;
EXCEPTION
  WHEN duplicate_object OR unique_violation THEN NULL;  -- created meanwhile for another database
  WHEN insufficient_privilege THEN
    RAISE EXCEPTION 'the roles reckon_reconciler and reckon_reviewer are missing and % may not '
      'create roles: ask the database administrator to create them (NOLOGIN), then migrate '
      'again', session_user USING ERRCODE = '42501';
END $$;
"""

_GRANTS = """
DO $$ BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO reckon_reconciler, reckon_reviewer',
                 current_schema());
  EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO reckon_reconciler',
                 current_schema());
END $$;
GRANT SELECT ON audit_runs, audit_run_currencies, breaks, break_reviews, late_attribution,
  check_runs, expectation_results, reports, signoff_log, alembic_version
  TO reckon_reconciler, reckon_reviewer;
GRANT INSERT, UPDATE ON audit_runs, audit_run_currencies, breaks, break_reviews,
  late_attribution, check_runs, expectation_results, reports TO reckon_reconciler;
GRANT INSERT ON signoff_log TO reckon_reviewer;
GRANT UPDATE (review_status, updated_at) ON break_reviews TO reckon_reviewer;
REVOKE UPDATE, DELETE, TRUNCATE ON signoff_log FROM PUBLIC;
"""

_DROP = """
DROP TRIGGER IF EXISTS signoff_log_append_only ON signoff_log;
DROP TRIGGER IF EXISTS signoff_log_no_truncate ON signoff_log;
DROP TRIGGER IF EXISTS signoff_log_signer ON signoff_log;
DROP TRIGGER IF EXISTS audit_runs_reconciler ON audit_runs;
DROP FUNCTION IF EXISTS reckon_signoff_append_only();
DROP FUNCTION IF EXISTS reckon_signoff_signer();
DROP FUNCTION IF EXISTS reckon_audit_run_reconciler();
DROP FUNCTION IF EXISTS reckon_is_owner(regclass);
DO $$ BEGIN
  EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM reckon_reconciler',
                 current_schema());
  EXECUTE format('REVOKE ALL ON SCHEMA %I FROM reckon_reconciler, reckon_reviewer',
                 current_schema());
END $$;
REVOKE ALL ON audit_runs, audit_run_currencies, breaks, break_reviews, late_attribution,
  check_runs, expectation_results, reports, signoff_log, alembic_version
  FROM reckon_reconciler, reckon_reviewer;
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for ddl in (_ROLES, _GRANTS, _FUNCTIONS, _PIN_SEARCH_PATH, _TRIGGERS):
        op.execute(ddl)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_DROP)  # the roles stay: other databases of the server may use them
