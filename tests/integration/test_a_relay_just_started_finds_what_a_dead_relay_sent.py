"""A relay that has sent nothing yet still finds the records a dead relay sent.

Contract: ``KafkaBroker.already_sent``, asked by a relay whose producer has sent
nothing since it started (a restarted worker taking over a dead relay's rows as its
first work), finds a record already on its topic: it learns the topic's partitions
before it looks. Before, its producer knew no partition of a topic it had not sent
to, the search looked in none, and the row was published a second time (the
cluster soak's extra DLT copies, each taken over within seconds of a relay's start).
A row whose ``created_at`` is a producer's zero value (None: Go's year 1; or Java's epoch,
a time before 1970 less the clock skew allowed) is looked for from the partition's start
and found (before, year 1 raised ``OverflowError`` and 1970 a negative time aiokafka
refuses, retried in place for ever: the relay's cycle never ended).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.kafka_clients import KafkaClients
from app.outbox.broker import KafkaBroker
from app.outbox.message import Message
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.session_broker import relay_idempotent

pytestmark = pytest.mark.integration


async def test_a_fresh_relay_finds_the_dead_relays_record(topic: OrderTopic) -> None:
    stream = topic.stream
    created = datetime.now(UTC)
    message = Message(stream.topic, b"customer-00187", b"poison", (("dlt-reason", b"x"),))
    dead = KafkaBroker(KafkaClients(stream.broker_url), idempotent=relay_idempotent())
    await dead.start()
    try:
        await (await dead.send(message))
    finally:
        await dead.stop()

    fresh = KafkaBroker(KafkaClients(stream.broker_url), idempotent=relay_idempotent())
    await fresh.start()
    try:
        assert await fresh.already_sent({7: (message, created)}) == {7}
        other = message._replace(value=b"never sent")
        assert await fresh.already_sent({8: (other, created)}) == set()
    finally:
        await fresh.stop()


@pytest.mark.parametrize("created", [None, datetime(1970, 1, 1, tzinfo=UTC)])
async def test_a_row_with_a_zero_created_at_is_looked_for_from_the_start(
    topic: OrderTopic, created: datetime | None
) -> None:
    stream = topic.stream
    message = Message(stream.topic, b"customer-00042", b"go-zero", (("id", b"e-1"),))
    broker = KafkaBroker(KafkaClients(stream.broker_url), idempotent=relay_idempotent())
    await broker.start()
    try:
        await (await broker.send(message))
        assert await broker.already_sent({3: (message, created)}) == {3}
    finally:
        await broker.stop()
