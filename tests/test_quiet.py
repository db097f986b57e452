"""The filters of :mod:`airflow_provider_binlog.quiet` on the records kazoo and py4j really log (their
own messages, through their own loggers): plumbing to DEBUG (dropped unless DEBUG is on), an outage's
repeated kazoo warnings folded into one warning and one reconnection line, and the warnings that
need action kept."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from airflow_provider_binlog import quiet
from airflow_provider_binlog.canal.meta.zookeeper_client import ZooKeeperConfig, connect_zookeeper
from airflow_provider_binlog.dev.services import ZooKeeperServer


@pytest.fixture
def filtered() -> Iterator[None]:
    quiet.install()
    quiet.install()  # idempotent: one filter per logger
    assert sum(isinstance(f, quiet.KazooNoise) for f in logging.getLogger(quiet.KAZOO).filters) == 1
    yield


def _said(caplog: pytest.LogCaptureFixture, name: str) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == name]


def test_kazoo_connect_and_close_notes_and_an_outage(
    filtered: None, caplog: pytest.LogCaptureFixture
) -> None:
    kazoo = logging.getLogger(quiet.KAZOO)
    caplog.set_level(logging.INFO, logger=quiet.KAZOO)
    # one session opened and closed, as every sensor poke does
    kazoo.info("Connecting to %s(%s):%s, use_ssl: %r", "127.0.0.1", "127.0.0.1", 2181, False)
    kazoo.info("Zookeeper connection established, state: %s", "CONNECTED")
    kazoo.info("Closing connection to %s:%s", "127.0.0.1", 2181)
    kazoo.info("Zookeeper session closed, state: %s", "CLOSED")
    assert _said(caplog, quiet.KAZOO) == []
    # an outage: kazoo warns at every retry
    for _ in range(40):
        kazoo.warning("Connection dropped: %s", "socket connection broken")
        kazoo.warning("Transition to CONNECTING")
        kazoo.info("Zookeeper connection lost")
    kazoo.info("Zookeeper connection established, state: %s", "CONNECTED")
    kazoo.warning("Failed connecting to Zookeeper within the connection retry policy.")
    kazoo.warning("Session has expired")
    assert _said(caplog, quiet.KAZOO) == [
        (logging.WARNING, "Connection dropped: socket connection broken"),
        (logging.INFO, "Zookeeper connection established, state: CONNECTED again (after 79 more connection "
         "warnings, at DEBUG)"),
        (logging.WARNING, "Failed connecting to Zookeeper within the connection retry policy."),
        (logging.WARNING, "Session has expired"),
    ]  # fmt: skip
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger=quiet.KAZOO)
    kazoo.info("Closing connection to %s:%s", "127.0.0.1", 2181)
    assert _said(caplog, quiet.KAZOO) == [(logging.DEBUG, "Closing connection to 127.0.0.1:2181")]


def test_py4j_notes_after_the_jvm_went_away(filtered: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    for name in quiet.PY4J:
        py4j = logging.getLogger(name)
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError:
            py4j.info("Error while receiving.", exc_info=True)
            py4j.exception("Exception occurred while shutting down connection")
        py4j.info("Closing down clientserver connection")
        py4j.warning("a py4j warning of its own")
        assert _said(caplog, name) == [(logging.WARNING, "a py4j warning of its own")]
    assert "ConnectionResetError" not in caplog.text


@pytest.mark.integration
def test_a_connection_to_an_existing_chroot_is_one_session(
    zookeeper: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The chroot is made by a session of its own only when it is missing: every later connection
    (each sensor poke makes some) opens one session, not two."""
    caplog.set_level(logging.DEBUG, logger=quiet.KAZOO)

    def sessions() -> int:
        caplog.clear()
        client = connect_zookeeper(ZooKeeperConfig(zookeeper.hosts, chroot=f"{zk_chroot}/quiet"))
        client.stop()
        client.close()
        said = [r.getMessage() for r in caplog.records if r.name == quiet.KAZOO]
        return sum(m.startswith("Zookeeper session closed") for m in said)  # one per session

    assert sessions() == 2  # the chroot made first
    assert sessions() == 1
