"""The relay's producer: a batch per partition, and each record keeps its own outcome.

Contract: ``KafkaBroker.send_many`` puts every record on the partition Kafka's default
partitioner (murmur2 of the key, as the Java client) names, a partition's records in
the order given; each record's outcome is its batch's acknowledgement, or the reason it
was not queued, at the record's own place: a record with neither key nor value is the
row's fault (``BadRow``), one larger than a batch goes on its own, and none of them
keeps the others from the topic.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.partitioner import murmur2

from app.kafka_clients import KafkaClients
from app.outbox.broker import MAX_BATCH_BYTES, KafkaBroker
from app.outbox.message import BadRow, Message
from dlq.broker import read_topic
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.session_broker import relay_idempotent

pytestmark = pytest.mark.integration

WITHIN = 30.0


async def test_each_record_lands_on_its_keys_partition_in_order_with_its_own_outcome(
    topic: OrderTopic,
) -> None:
    stream = topic.stream
    keyed = [
        Message(
            stream.topic, f"order-{n % 7}".encode(), f"v{n}".encode(), (("id", f"e{n}".encode()),)
        )
        for n in range(60)
    ]
    large = Message(stream.topic, b"order-large", b"x" * (MAX_BATCH_BYTES + 1), (("id", b"big"),))
    empty = Message(stream.topic, None, None, (("id", b"empty"),))
    keyless = Message(stream.topic, None, b"no key", (("id", b"keyless"),))
    messages = [*keyed[:30], empty, large, keyless, *keyed[30:]]

    clients = KafkaClients(stream.broker_url)
    broker = KafkaBroker(clients, idempotent=relay_idempotent())
    await broker.start()
    try:
        outcomes = await broker.send_many(messages)
        assert isinstance(outcomes[30], BadRow)
        futures = [o for i, o in enumerate(outcomes) if i != 30]
        assert all(isinstance(f, asyncio.Future) for f in futures)
        acked = await asyncio.wait_for(asyncio.gather(*futures), WITHIN)  # type: ignore[arg-type]
    finally:
        await broker.stop()
    assert len({id(f) for f in futures}) < len(futures)  # records share their batch's answer
    assert acked[30].partition == _partition(b"order-large", stream.partitions)

    on_topic = await asyncio.wait_for(read_topic(clients, stream.topic), WITHIN)
    ids = [record.header("id") for record in on_topic]
    assert sorted(ids) == sorted(dict(m.headers)["id"] for m in messages if m is not empty)
    for record in on_topic:
        if record.key is not None:
            assert record.partition == _partition(record.key, stream.partitions)
    for n in range(7):
        key = f"order-{n}".encode()
        values = [record.value for record in on_topic if record.key == key]
        assert values == [m.value for m in keyed if m.key == key]  # the order given


def _partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions
