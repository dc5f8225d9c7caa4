"""Every Kafka client is made by one factory from one settings object.

Contract: no module of the framework (``app`` but its development tools under
``app/demo``, and ``dlq``) makes an aiokafka producer, consumer, admin client or
connection itself: ``app.kafka_clients.KafkaClients`` does. So the security settings
reach each client or none: the factory's producers, consumers and admin clients, the
consumer and producer faust builds for the worker's app, the relay's producer, its
takeover search and the DLQ command's reader and replayer all carry the settings'
protocol, mechanism and login, and share one TLS context. PLAINTEXT gives faust no
credentials at all, as before. No broker is contacted: clients are built, never started.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from app.demo.certificates import CertificateAuthority
from app.kafka_clients import KafkaClients
from app.outbox.broker import KafkaBroker
from app.registry import Registry
from app.runtime.faust_app import create_app
from app.settings import Settings
from dlq.cli import _target

pytestmark = pytest.mark.usefixtures("settings_from_the_test_only")

ROOT = Path(__file__).resolve().parents[2]
MADE_HERE = re.compile(r"\b(AIOKafka(Producer|Consumer|AdminClient|Client)|create_conn)\(")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    ca = CertificateAuthority(tmp_path)
    return Settings(
        broker_url="kafka://127.0.0.1:1",
        broker_security_protocol="SASL_SSL",
        broker_sasl_mechanism="SCRAM-SHA-512",
        broker_sasl_username="alice",
        broker_sasl_password="s3cret",
        broker_ssl_ca_file=str(ca.cert),
    )


def test_only_the_factory_makes_kafka_clients() -> None:
    sources = [*(ROOT / "app").rglob("*.py"), *(ROOT / "dlq").rglob("*.py")]
    makers = {
        str(path.relative_to(ROOT))
        for path in sources
        if MADE_HERE.search(path.read_text()) and "demo" not in path.parts
    }
    assert makers == {"app/kafka_clients.py"}


def secured(client: Any) -> tuple[Any, ...]:
    """What an aiokafka client connects with (its ``AIOKafkaClient``'s settings)."""
    inner = getattr(client, "_client", None) or client.client
    return (
        inner._security_protocol,
        inner._sasl_mechanism,
        inner._sasl_plain_username,
        inner._sasl_plain_password,
        inner._ssl_context,
    )


async def test_each_client_carries_the_settings(settings: Settings) -> None:
    clients = KafkaClients.from_settings(settings)
    context = clients.options()["ssl_context"]
    expected = ("SASL_SSL", "SCRAM-SHA-512", "alice", "s3cret", context)
    producer, consumer, admin = clients.producer(), clients.consumer(), clients.admin()
    relay = KafkaBroker(clients)
    try:
        assert secured(producer) == expected
        assert secured(consumer) == expected
        assert secured(admin) == expected
        assert secured(relay.producer) == expected
        assert context.check_hostname
    finally:
        await producer.stop()
        await consumer.stop()
        await admin.close()
        await relay.stop()


async def test_the_workers_faust_clients_carry_the_settings(settings: Settings) -> None:
    app = create_app(settings, Registry())
    consumer = app.consumer._thread._create_worker_consumer(app.transport)
    producer = app.producer._new_producer()
    try:
        assert secured(consumer)[:4] == ("SASL_SSL", "SCRAM-SHA-512", "alice", "s3cret")
        assert secured(producer)[:4] == ("SASL_SSL", "SCRAM-SHA-512", "alice", "s3cret")
        assert secured(consumer)[4] is secured(producer)[4] is not None
    finally:
        await consumer._client.close()
        await producer.stop()


def test_plaintext_gives_faust_no_credentials() -> None:
    options = KafkaClients("kafka://127.0.0.1:1").faust_options()
    assert options == {"broker": "kafka://127.0.0.1:1"}


def test_the_dlq_command_connects_with_the_settings(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in settings.model_dump().items():
        if value is not None and name.startswith("broker_"):
            secret = getattr(value, "get_secret_value", None)
            monkeypatch.setenv(name.upper(), secret() if secret else str(value))
    target = _target(None, 5.0)
    assert target.clients.security == settings.broker_security
    assert target.clients.bootstrap == ["127.0.0.1:1"]
