"""Put a workload on a topic: create the topic if needed, then send every message fast."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from app.demo.envelopes import Message

TOPIC_READY_TIMEOUT_SECONDS = 15.0
TOPIC_POLL_SECONDS = 0.1


async def ensure_topic(
    bootstrap: str, topic: str, partitions: int, replication_factor: int = 1
) -> None:
    """Create ``topic`` with ``partitions`` partitions, each on ``replication_factor``
    brokers, unless it exists (idempotent).

    Returns once the broker's metadata lists the topic, so that a producer
    started right after does not race its creation.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        if topic not in await admin.list_topics():
            try:
                await admin.create_topics(
                    [
                        NewTopic(
                            name=topic,
                            num_partitions=partitions,
                            replication_factor=replication_factor,
                        )
                    ]
                )
            except TopicAlreadyExistsError:
                pass  # created concurrently by someone else: the goal is met
        for _ in range(int(TOPIC_READY_TIMEOUT_SECONDS / TOPIC_POLL_SECONDS)):
            if topic in await admin.list_topics():
                return
            await asyncio.sleep(TOPIC_POLL_SECONDS)
        raise TimeoutError(
            f"topic {topic!r} not listed {TOPIC_READY_TIMEOUT_SECONDS}s after creation"
        )
    finally:
        await admin.close()


async def produce(
    bootstrap: str,
    topic: str,
    messages: Iterable[Message],
    *,
    linger_ms: int = 10,
    max_batch_size: int = 512 * 1024,
) -> int:
    """Send ``messages`` in order and wait until the broker acknowledged all; return the count.

    Sends are queued without awaiting each delivery (the producer batches per
    partition while lingering) and their acknowledgements awaited together.
    One producer keeps the order of messages that share a key, because they
    share a partition.
    """
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=linger_ms,
        max_batch_size=max_batch_size,
    )
    await producer.start()
    try:
        deliveries = [
            await producer.send(topic, value=message.value, key=message.key) for message in messages
        ]
        await asyncio.gather(*deliveries)
        return len(deliveries)
    finally:
        await producer.stop()
