#!/usr/bin/env bash
# airflow-provider-binlog developer entry point.
#
#   bash dev.sh demo     set up, then run the main job (the demo)
#   bash dev.sh test     set up, lint (ruff check, ruff format --check, mypy), then the whole suite (what CI runs)
#   bash dev.sh setup    only set up: Debian packages, .venv, the relocated Jackson jar
#   bash dev.sh lint     ruff and mypy
#
# Setup is idempotent: a second run installs nothing it need not.
set -euo pipefail
cd "$(dirname "$0")"
VENV=${BINLOG_CDC_VENV:-.venv}
PY=${PYTHON:-python3}

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

setup_system() {
    local pkgs=()
    command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || pkgs+=(mariadb-server)
    command -v mariadb-install-db >/dev/null || pkgs+=(mariadb-server)
    [ -f /usr/share/java/zookeeper.jar ] || pkgs+=(zookeeper)
    [ -f /usr/share/java/slf4j-simple.jar ] || pkgs+=(libslf4j-java)
    [ -f /usr/share/java/jarjar.jar ] || pkgs+=(libjarjar-java)
    # PostgreSQL: the Iceberg JDBC catalog's database in tests, and its JDBC driver for Spark
    compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || pkgs+=(postgresql)
    [ -f /usr/share/java/postgresql.jar ] || pkgs+=(libpostgresql-jdbc-java)
    # a JDK: Spark's JVM, and javac for the local file system of lake/spark/local_fs_jar.py
    command -v javac >/dev/null || pkgs+=(openjdk-17-jdk-headless)
    "$PY" -c 'import venv, ensurepip' 2>/dev/null || pkgs+=(python3-venv)
    # the C row decoder (optional: without these the package installs and decodes in Python)
    command -v gcc >/dev/null || pkgs+=(gcc)
    [ -f "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] || pkgs+=(python3-dev)
    if [ ${#pkgs[@]} -gt 0 ]; then
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo=sudo
        log "installing Debian packages: ${pkgs[*]}"
        $sudo apt-get update -q
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${pkgs[@]}"
    fi
}

setup_python() {
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        "$PY" -m venv "$VENV"
    fi
    local stamp
    stamp=$(cat pyproject.toml setup.py airflow_provider_binlog/binlog/_rowdecode.c airflow_provider_binlog/lake/_fold.c airflow_provider_binlog/lake/_columns.c airflow_provider_binlog/_slots.h | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$VENV/.setup-stamp" 2>/dev/null)" != "$stamp" ]; then
        log "installing airflow-provider-binlog[dev] into $VENV (first time: a few minutes)"
        "$VENV/bin/pip" install -q --upgrade pip
        "$VENV/bin/pip" install -q -e '.[dev]'
        echo "$stamp" > "$VENV/.setup-stamp"
    fi
    "$VENV/bin/python" -c 'from airflow_provider_binlog.binlog import _rowdecode' 2>/dev/null \
        || log "warning: the C row decoder did not build; row images decode in Python (slower)"
    "$VENV/bin/python" -c 'from airflow_provider_binlog.lake import _fold' 2>/dev/null \
        || log "warning: the C fold did not build; changes fold in Python (slower)"
    "$VENV/bin/python" -c 'from airflow_provider_binlog.lake import _columns' 2>/dev/null \
        || log "warning: the C column builder did not build; pyarrow converts staged values (slower)"
}

setup_jars() {
    if "$VENV/bin/python" -c 'import airflow_provider_binlog.lake.spark.class_archive' 2>/dev/null; then
        "$VENV/bin/python" -m airflow_provider_binlog.lake.spark.class_archive
    fi
}

setup() {
    setup_system
    setup_python
    setup_jars
}

lint() {
    log "lint: ruff check, ruff format --check, mypy"
    "$VENV/bin/ruff" check .
    "$VENV/bin/ruff" format --check .
    "$VENV/bin/mypy"
}

cmd=${1:-help}
shift || true
case "$cmd" in
    setup) setup ;;
    demo) setup; exec "$VENV/bin/python" -m airflow_provider_binlog.dev.demo "$@" ;;
    test) setup; lint; exec "$VENV/bin/pytest" tests "$@" ;;
    lint) setup_python; lint ;;
    *) sed -n '2,10p' "$0"; exit 2 ;;
esac
