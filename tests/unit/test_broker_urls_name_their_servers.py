"""``BROKER_URL`` names the bootstrap servers the way faust reads it.

Contract: ``bootstrap_servers`` reads ``kafka://h1:9092;kafka://h2:9092`` (``;`` or
``,``, with or without the scheme, a trailing ``/`` ignored) into ``host:port``
servers; a server written without a port gets Kafka's 9092, as faust's own client
gives it (before, the framework's checks read the host as the port and waited for
a broker they could never reach, with ``/ready`` red, while faust had connected);
a port that is not a number from 1 to 65535 is a ``ConfigurationError`` naming the
server, and so is a URL naming no server, or a server without a host (``kafka://``:
the worker waited for it without answering ``/ready``).
"""

from __future__ import annotations

import pytest

from app.errors import ConfigurationError
from app.kafka_clients import bootstrap_servers


@pytest.mark.parametrize(
    ("url", "servers"),
    [
        ("kafka://localhost:9092", ["localhost:9092"]),
        ("kafka://kafka", ["kafka:9092"]),
        ("kafka://h1:9093;kafka://h2", ["h1:9093", "h2:9092"]),
        ("h1, h2:19092", ["h1:9092", "h2:19092"]),
        ("kafka://broker.example.com:9094/", ["broker.example.com:9094"]),
        ("kafka://[::1]", ["[::1]:9092"]),
        ("kafka://[::1]:9093", ["[::1]:9093"]),
    ],
)
def test_each_server_has_a_host_and_a_port(url: str, servers: list[str]) -> None:
    assert bootstrap_servers(url) == servers


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("kafka://kafka:abc", "the port of 'kafka:abc' is not a number from 1 to 65535"),
        ("kafka://kafka:70000", "the port of 'kafka:70000' is not a number from 1 to 65535"),
        (" ; ", "BROKER_URL names no broker"),
        ("kafka://", "a server in it names no host"),
        ("kafka://:9092", "':9092' names no host"),
    ],
)
def test_a_server_no_client_can_reach_is_refused(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        bootstrap_servers(url)
