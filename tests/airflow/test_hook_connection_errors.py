"""Every source connection error names the Airflow connection id (issue #17): a wrong port and TLS
failures, through each way the provider connects (the replication client, the plain SELECT
connection, test_connection), against the real MariaDB; no password in any message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from airflow_harness import mysql_uri

from airflow_provider_binlog.binlog.errors import BinlogError
from airflow_provider_binlog.dev.services import MariaDbServer, free_port
from airflow_provider_binlog.hooks.binlog import BinlogHook

pytestmark = pytest.mark.integration

SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"


def _failures(conn_id: str) -> list[str]:
    """The messages of each way the hook connects to the source (each must fail)."""
    hook = BinlogHook(conn_id, zookeeper_conn_id=None, meta_dir="/nonexistent")
    messages = []
    for attempt in (lambda: hook.get_conn().head_position(), hook.source_connection, hook.check_source):
        with pytest.raises(BinlogError) as failed:
            attempt()
        messages.append(str(failed.value))
    ok, message = hook.test_connection()
    assert not ok
    return [*messages, message]


def _env(monkeypatch: pytest.MonkeyPatch, conn_id: str, uri: str) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", uri)


def test_wrong_port_names_the_connection(monkeypatch: pytest.MonkeyPatch, mariadb: MariaDbServer) -> None:
    port = free_port()
    uri = mysql_uri(mariadb).replace(f":{mariadb.port}", f":{port}")
    _env(monkeypatch, "src_wrong_port", uri)
    *raised, tested = _failures("src_wrong_port")
    for message in raised:
        assert "connection 'src_wrong_port'" in message and f"127.0.0.1:{port}" in message, message
        assert mariadb.repl_password not in message, message
    # the Test button's message: the host, not the id (the UI tests under a random one)
    assert "src_wrong_port" not in tested and f"127.0.0.1:{port}" in tested, tested
    assert mariadb.repl_password not in tested, tested


@pytest.mark.parametrize(
    ("case", "ca", "expect"),
    [
        ("bad_ca", "garbage", "SSLError"),  # the CA file is no certificate
        ("no_tls", SYSTEM_CA, "error 2026"),  # a real CA, but the server offers no TLS
    ],
)
def test_tls_failure_names_the_connection(
    monkeypatch: pytest.MonkeyPatch, mariadb: MariaDbServer, tmp_path: Path, case: str, ca: str, expect: Any
) -> None:
    if ca == "garbage":
        ca = str(tmp_path / "ca.pem")
        Path(ca).write_text("not a certificate\n")
    elif not Path(ca).exists():
        pytest.skip(f"no {ca}")
    have_ssl = mariadb.execute("SELECT @@have_ssl")[0][0]
    if case == "no_tls" and str(have_ssl).upper() == "YES":
        pytest.skip("this MariaDB offers TLS")
    conn_id = f"src_{case}"
    _env(monkeypatch, conn_id, f"{mysql_uri(mariadb)}?ssl_ca={ca}")
    *raised, tested = _failures(conn_id)
    for message in raised:
        assert f"connection '{conn_id}'" in message and f"127.0.0.1:{mariadb.port}" in message, message
        assert expect in message, message
        assert mariadb.repl_password not in message, message
    assert conn_id not in tested and f"127.0.0.1:{mariadb.port}" in tested and expect in tested, tested
