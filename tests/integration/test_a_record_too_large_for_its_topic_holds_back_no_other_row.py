"""A row too large for its topic goes ``DEAD`` alone; the rows after it still publish.

Contract: on a one-partition topic created with a small ``max.message.bytes``, after a
first row published (the idempotent producer has a sequence on the partition), a row
whose record the broker refuses as too large counts its attempts and goes ``DEAD``,
while every other row, of its aggregate and of others, is published once (the rows
refused with it in one batch are sent again each in a batch of its own). The dead row's
``last_error`` says how large its record is, what decides the limit and what to run
once it is raised (before, only ``MessageSizeTooLargeError``).
Before, aiokafka's idempotent producer kept the refused batch's records in the
partition's sequence, every later batch was refused as out of order, and each row
after it went ``DEAD`` in turn (Apache Kafka; a producer that is not idempotent, on
Tansu, never had the sequence to lose).
"""

from __future__ import annotations

import re

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from app.outbox import NewEvent
from app.pipeline.pause import Backoff
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import (
    relay_on,
    rows,
    shipped,
    statuses,
    until_idle,
    write,
)

pytestmark = pytest.mark.integration

MAX_MESSAGE_BYTES = 2000
QUICK = Backoff(0.01, 0.01, jitter=0.0)


def event(topic: str, aggregate: str, version: int, size: int = 10) -> NewEvent:
    return NewEvent(topic, "Counted", "Counter", aggregate, {"pad": "x" * size}, version)


async def topic_of_limit(bootstrap: str, name: str, max_message_bytes: int) -> None:
    """Create ``name``, one partition, with its own ``max.message.bytes``."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        config = {"max.message.bytes": str(max_message_bytes)}
        await admin.create_topics([NewTopic(name, 1, 1, topic_configs=config)])
    finally:
        await admin.close()


async def test_a_record_the_topic_refuses_holds_back_no_other_row(
    topic: OrderTopic, migrated_database: str
) -> None:
    stream = topic.stream
    name = f"{stream.topic}-small"
    await topic_of_limit(stream.bootstrap, name, MAX_MESSAGE_BYTES)
    await write(migrated_database, [event(name, "first", 1)], per_transaction=1)
    async with relay_on(
        migrated_database, stream.broker_url, max_attempts=2, attempt_backoff=QUICK
    ) as relay:
        await until_idle(relay)
        events = [event(name, "big", 1, size=5_000), event(name, "big", 2)]
        events += [event(name, f"after-{n}", 1) for n in range(5)]
        await write(migrated_database, events, per_transaction=1)
        for _ in range(20):
            await until_idle(relay)
            if (await statuses(migrated_database)).get("PENDING", 0) == 0:
                break

    assert await statuses(migrated_database) == {"PUBLISHED": 7, "DEAD": 1}
    [dead] = [
        r for r in await rows(migrated_database, "status", "last_error") if r["status"] == "DEAD"
    ]
    assert re.search(r": a record of 5,\d{3} bytes, over what the topic ", dead["last_error"])
    assert "max.message.bytes" in dead["last_error"]
    assert "python -m app outbox requeue ID --execute" in dead["last_error"]
    on_topic = [(e["aggregateId"], e["aggregateVersion"]) for e in await shipped(stream, name)]
    # Order holds within an aggregate; "big" 2 waited for "big" 1 to go DEAD.
    assert sorted(on_topic) == sorted(
        [("first", 1), ("big", 2)] + [(f"after-{n}", 1) for n in range(5)]
    )


async def test_a_record_the_topic_was_raised_to_accept_is_published(
    topic: OrderTopic, migrated_database: str
) -> None:
    # Past aiokafka's own 1 MiB cap (the producer refused it before the broker could say).
    stream = topic.stream
    name = f"{stream.topic}-large"
    await topic_of_limit(stream.bootstrap, name, 3 * 1024 * 1024)
    large = event(name, "large", 1, size=1_500_000)
    await write(migrated_database, [large], per_transaction=1)
    async with relay_on(
        migrated_database, stream.broker_url, max_attempts=2, attempt_backoff=QUICK
    ) as relay:
        await until_idle(relay)

    assert await statuses(migrated_database) == {"PUBLISHED": 1}
    [record] = await shipped(stream, name)
    assert len(record["data"]["pad"]) == 1_500_000
