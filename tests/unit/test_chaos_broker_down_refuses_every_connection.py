"""The soak takes its broker down as a stopped broker is taken down, and brings it back.

Contract of ``ChaosBrokers.take_down`` and ``bring_back``: while down, a new
connection to a broker's proxy is refused (and every open one reset, the proxy's
``reset``); once back, connections are accepted again on the same port, the one the
nodes advertise. No broker is started: the proxies' listeners are what clients meet.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.brokers import ChaosBrokers
from chaos.profile import SHORT


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[ChaosBrokers]:
    made = ChaosBrokers.create("kafka", SHORT, tmp_path)
    made.start_proxies()
    yield made
    made.stop_proxies()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=2)


def test_down_refuses_connections_until_brought_back(brokers: ChaosBrokers) -> None:
    (proxy,) = brokers.proxies
    port = proxy.port
    connect(port).close()

    brokers.take_down()
    with pytest.raises(ConnectionRefusedError):
        connect(port)

    brokers.bring_back()
    assert proxy.port == port
    connect(port).close()
