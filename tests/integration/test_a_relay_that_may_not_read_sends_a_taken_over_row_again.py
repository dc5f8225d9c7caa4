"""A relay whose ACLs allow Write but not Read sends a row it took over again, at once.

Contract (``app.outbox.recovered``): before a row taken over from a dead relay's lease
is sent, the relay looks on its topic for the record the dead one may have sent; on a
broker whose ACLs let the relay write the topic but not read it, the look ends at once
with one warning naming the topic and the permission, and the row is sent again (at
least once, as when the look runs out of time; consumers deduplicate by event id).
Before, the look was retried as a broker outage, backing off to 30 s, and the relay
shipped nothing else meanwhile while ``/ready`` stayed green for two minutes.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import pytest

from app.broker_security import BrokerSecurity
from app.demo.acl_kafka import AclKafka
from app.kafka_clients import KafkaClients
from app.outbox.broker import KafkaBroker
from app.outbox.message import Message
from tests.integration.support.acls import USER, acl_stream, create_topics, grant

pytestmark = pytest.mark.integration

LOOKED_WITHIN = 10.0


async def test_a_look_the_acls_refuse_ends_at_once_with_a_warning(
    acl_kafka: AclKafka, caplog: pytest.LogCaptureFixture
) -> None:
    stream = acl_stream(acl_kafka)
    await create_topics(stream, [stream.topic])
    grant(acl_kafka, "Write", [stream.topic])  # Write implies Describe; no Read
    settings = acl_kafka.settings(USER)
    security = BrokerSecurity(
        protocol=settings["BROKER_SECURITY_PROTOCOL"],  # type: ignore[arg-type]
        mechanism=settings["BROKER_SASL_MECHANISM"],  # type: ignore[arg-type]
        username=USER,
        password=settings["BROKER_SASL_PASSWORD"],
    )
    relay = KafkaBroker(KafkaClients(settings["BROKER_URL"], security), idempotent=False)
    await relay.start()
    message = Message(stream.topic, b"order-1", b"{}", (("id", b"e-1"),))
    try:
        await (await relay.send(message))  # the dead relay's copy, sent as this principal
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="effectively_once.relay"):
            found = await relay.already_sent({7: (message, datetime.now(UTC))})
        took = time.monotonic() - started
    finally:
        await relay.stop()

    assert found == set()  # not found: sent again
    assert took < LOOKED_WITHIN, took
    [line] = [r.getMessage() for r in caplog.records if r.name == "effectively_once.relay"]
    assert f"denies this relay Read on {stream.topic!r}" in line, line
    assert settings["BROKER_SASL_PASSWORD"] not in line
