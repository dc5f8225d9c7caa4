"""``BROKER_URL`` names the bootstrap servers the way faust reads it.

Contract: ``bootstrap_servers`` reads ``kafka://h1:9092;kafka://h2:9092`` (``;`` or
``,``, with or without the scheme, a trailing ``/`` ignored) into ``host:port``
servers; a server written without a port gets Kafka's 9092, as faust's own client
gives it (before, the framework's checks read the host as the port and waited for
a broker they could never reach, with ``/ready`` red, while faust had connected);
a port that is not a number from 1 to 65535 is a ``ConfigurationError`` naming the
server, and so is a URL naming no server, or a server without a host (``kafka://``:
the worker waited for it without answering ``/ready``), or one that is no host and port
(``kafka//h:9092``, a colon left out: the worker looked the whole text up as a host and
waited for it). The settings refuse each of them
at start, so every command says so in one line: ``python -m app relay`` printed a
traceback for them.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from app.__main__ import build_cli
from app.broker_url import bootstrap_servers
from app.errors import ConfigurationError
from app.settings import Settings, describe


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
        ("aiokafka://h1:9093", ["h1:9093"]),
        ("KAFKA://h1:9093", ["h1:9093"]),
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
        ("kafka//127.0.0.1:9092", "'kafka//127.0.0.1:9092' is no host and port"),
        ("kafka:///broker:9092", "'/broker:9092' is no host and port"),
        ("kafka://broker:9092/x", "'broker:9092/x' is no host and port"),
        ("kafka://my broker:9092", "'my broker:9092' is no host and port"),
        ("http://127.0.0.1:9092", "'http://' is no Kafka scheme"),
        ("kafka://a:9092;https://b:9092", "'https://' is no Kafka scheme"),
    ],
)
def test_a_server_no_client_can_reach_is_refused(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        bootstrap_servers(url)


BAD_URLS = ["kafka://broker:9o92", "kafka://", "kafka://:9092", " ; ", "kafka//broker:9092"]


@pytest.mark.parametrize("url", BAD_URLS)
def test_the_settings_refuse_it_naming_broker_url(url: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(broker_url=url)

    (line,) = describe(raised.value)
    assert line.startswith("BROKER_URL: "), line


@pytest.mark.parametrize("url", BAD_URLS)
def test_the_relay_refuses_it_in_one_line(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_URL", url)

    result = CliRunner().invoke(build_cli(), ["relay"])

    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "BROKER_URL" in result.output
