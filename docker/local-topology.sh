#!/usr/bin/env bash
# The docker-compose topology as plain processes on this machine (root: the Spark worker gets its
# own mount namespace with a private /tmp): MariaDB, ZooKeeper, PostgreSQL with the Iceberg JDBC
# catalog, a Spark standalone master and worker, the shared warehouse, all from docker/topology.env.
# Prints the env file to source for `airflow` commands; Ctrl-C stops everything.
#
#   bash docker/local-topology.sh [--settings docker/topology.env] [--dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m airflow_provider_binlog.dev.topology up "$@"
