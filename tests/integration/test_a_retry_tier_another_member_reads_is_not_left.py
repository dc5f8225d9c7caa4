"""A retry tier is left unread only when no member of the group reads it, whenever that is.

Contract: the worker's look for retry tiers left unread goes on for as long as it runs, so
a tier that a replica of another release read, and that nobody reads once that replica is
gone, is named by a worker started long before (before, a worker looked again only while
its first look had found some: the tier stayed unnamed and ``/ready`` green). A tier that
another member of the group subscribes to is not left, however many records wait in it
(a replica of another release in a rolling deploy, reading a tier of its own). Each look
reads a tier on from where the last one stopped, and counts only the deployment's records.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from app.demo.produce import ensure_topic
from app.kafka_clients import KafkaClients
from app.runtime.tier_check import StrandedTiers
from app.settings import Settings
from dlq.headers import DLT_APP_ID
from dlq.topics import retry_topic
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.waiting import eventually

pytestmark = pytest.mark.integration


async def test_a_tier_is_named_once_nobody_reads_it(topic: OrderTopic) -> None:
    stream = topic.stream
    app_id = f"{stream.app_id}-tiers"
    settings = Settings(
        broker_url=stream.broker_url, order_topic=stream.topic, app_id=app_id, retry_delays="1"
    )
    other = retry_topic(stream.topic, 30)  # a tier of another release's RETRY_DELAYS
    await ensure_topic(stream.bootstrap, other, 1)
    tiers = StrandedTiers(KafkaClients.from_settings(settings), settings)
    looking = asyncio.ensure_future(tiers.keep_looking(every=0.5))
    replica = AIOKafkaConsumer(
        other, bootstrap_servers=stream.bootstrap, group_id=app_id, enable_auto_commit=False
    )
    producer = AIOKafkaProducer(bootstrap_servers=stream.bootstrap)
    await producer.start()
    try:
        await asyncio.sleep(1.5)  # looks that find nothing: the tier has no record yet
        assert tiers.found == {}
        await replica.start()  # the other release's replica reads the tier
        await eventually(
            lambda: asyncio.sleep(0, replica.assignment()),
            lambda assigned: bool(assigned),
            what="the replica's assignment",
            within=30,
        )
        await producer.send_and_wait(other, b"{}", key=b"o-2", headers=[(DLT_APP_ID, b"billing")])
        await producer.send_and_wait(
            other, b"{}", key=b"o-1", headers=[(DLT_APP_ID, app_id.encode())]
        )
        await asyncio.sleep(2)  # several looks, each finding a member that reads it
        read_by_the_replica = dict(tiers.found)
        await replica.stop()  # the replica is gone: nobody reads the tier
        found = await eventually(
            lambda: asyncio.sleep(0, dict(tiers.found)),
            lambda found: bool(found),
            what="the tier named",
            within=60,
        )
    finally:
        looking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await looking
        await producer.stop()
        await replica.stop()

    assert read_by_the_replica == {}
    assert found == {other: 1}  # billing's record is its own business
    # Each look read on from where the last one stopped: the two records once.
    assert {tp.partition: read for tp, read in tiers._read.items()} == {0: (2, [1])}
    assert not tiers.check().ok
