#!/bin/sh
# The Iceberg JDBC catalog's role and database (names and password from topology.env), next to
# Airflow's own database on the same server. Run once by the postgres image on a new volume.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v user="$BINLOG_CDC_CATALOG_USER" -v password="$BINLOG_CDC_CATALOG_PASSWORD" \
  -v database="$BINLOG_CDC_CATALOG_DATABASE" <<'SQL'
CREATE ROLE :"user" LOGIN PASSWORD :'password';
CREATE DATABASE :"database" OWNER :"user";
SQL
