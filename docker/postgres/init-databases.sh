#!/usr/bin/env bash
# First start of the PostgreSQL volume only: one database and role for reckon's report
# database (its owner migrates it), the group roles its migrations grant to, the workbench's
# login role, and one database and role for Airflow's metadata. Passwords come from the container environment
# (docker-compose.yml passes them from the host environment); nothing is stored here.
set -euo pipefail
: "${RECKON_DB_PASSWORD:?RECKON_DB_PASSWORD must be set}"
: "${AIRFLOW_DB_PASSWORD:?AIRFLOW_DB_PASSWORD must be set}"
: "${WORKBENCH_DB_PASSWORD:?WORKBENCH_DB_PASSWORD must be set}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
     -v reckon_pw="$RECKON_DB_PASSWORD" -v airflow_pw="$AIRFLOW_DB_PASSWORD" \
     -v workbench_pw="$WORKBENCH_DB_PASSWORD" <<'SQL'
CREATE ROLE reckon LOGIN PASSWORD :'reckon_pw';
CREATE DATABASE reckon OWNER reckon;
-- the groups people's own login roles join (reports/migrations 0006 grants to them):
-- CREATE ROLE alice LOGIN IN ROLE reckon_reviewer; (and a password)
CREATE ROLE reckon_reconciler NOLOGIN;
CREATE ROLE reckon_reviewer NOLOGIN;
-- the reviewer's workbench logs in as its own role and signs for the people it authenticated
-- (reports/migrations 0007 grants to reckon_workbench; its triggers check who it signs for)
CREATE ROLE reckon_workbench NOLOGIN;
CREATE ROLE workbench LOGIN PASSWORD :'workbench_pw' IN ROLE reckon_workbench;
CREATE ROLE airflow LOGIN PASSWORD :'airflow_pw';
CREATE DATABASE airflow OWNER airflow;
SQL
