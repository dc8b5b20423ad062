#!/usr/bin/env bash
# First start of the PostgreSQL volume only: one database and role for reckon's report
# database (its owner migrates it), the two group roles its migrations grant to, and one
# database and role for Airflow's metadata. Passwords come from the container environment
# (docker-compose.yml passes them from the host environment); nothing is stored here.
set -euo pipefail
: "${RECKON_DB_PASSWORD:?RECKON_DB_PASSWORD must be set}"
: "${AIRFLOW_DB_PASSWORD:?AIRFLOW_DB_PASSWORD must be set}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
     -v reckon_pw="$RECKON_DB_PASSWORD" -v airflow_pw="$AIRFLOW_DB_PASSWORD" <<'SQL'
CREATE ROLE reckon LOGIN PASSWORD :'reckon_pw';
CREATE DATABASE reckon OWNER reckon;
-- the groups people's own login roles join (reports/migrations 0006 grants to them):
-- CREATE ROLE alice LOGIN IN ROLE reckon_reviewer; (and a password)
CREATE ROLE reckon_reconciler NOLOGIN;
CREATE ROLE reckon_reviewer NOLOGIN;
CREATE ROLE airflow LOGIN PASSWORD :'airflow_pw';
CREATE DATABASE airflow OWNER airflow;
SQL
