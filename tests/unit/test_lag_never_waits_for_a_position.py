"""Lag never waits for a partition's position, so a scrape never holds faust's consumer.

Contract: ``FaustPartitions.position``, the position lag counts from on ``/metrics``
and ``/ready``, answers at once with the fetch position faust's aiokafka consumer
holds: None while it holds none (the partition's offset not looked up yet, or not
found), None for a partition not assigned and before the consumer started. It never
calls faust's ``consumer.position()``: that runs aiokafka's, which waits until a
position is found (forever while the partition's leader cannot be asked), on the
consumer thread whose two workers also commit the offsets. Two scrapes waiting there
stopped every commit of a worker in the cluster soak, and its rebalance and SIGTERM
with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from app.monitoring.progress import Progress
from app.runtime.web import FaustPartitions

TOPIC = "orders"


class FaustConsumer:
    """faust's consumer as lag sees it; its ``position`` never answers, as faust's can."""

    def __init__(self, consumer: AIOKafkaConsumer | None) -> None:
        self._thread = SimpleNamespace(_consumer=consumer)
        self.asked = 0

    def assignment(self) -> set[Any]:
        return {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)}

    def highwater(self, tp: Any) -> int:
        return 10

    async def position(self, tp: Any) -> int:
        self.asked += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@pytest.fixture
async def kafka_consumer() -> AsyncIterator[AIOKafkaConsumer]:
    """An aiokafka consumer (never connected) with partitions 0 and 1 assigned."""
    consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:9")
    consumer.assign([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
    yield consumer
    await consumer.stop()


def _partitions(faust_consumer: FaustConsumer) -> FaustPartitions:
    app = SimpleNamespace(
        consumer=faust_consumer, topics=SimpleNamespace(acks_enabled_for=lambda topic: True)
    )
    return FaustPartitions(cast(Any, app))


def _seek(consumer: AIOKafkaConsumer, partition: int, offset: int) -> None:
    """What the fetcher does once it found the partition's committed offset."""
    assignment = consumer._subscription.subscription.assignment
    assignment.state_value(TopicPartition(TOPIC, partition)).seek(offset)


async def test_no_position_yet_is_none_at_once(kafka_consumer: AIOKafkaConsumer) -> None:
    faust_consumer = FaustConsumer(kafka_consumer)
    partitions = _partitions(faust_consumer)
    async with asyncio.timeout(1):
        assert await partitions.position((TOPIC, 0)) is None
    assert faust_consumer.asked == 0


async def test_a_held_position_is_read(kafka_consumer: AIOKafkaConsumer) -> None:
    _seek(kafka_consumer, 0, 7)
    faust_consumer = FaustConsumer(kafka_consumer)
    partitions = _partitions(faust_consumer)
    assert await partitions.position((TOPIC, 0)) == 7
    assert await partitions.position((TOPIC, 1)) is None
    assert await partitions.position((TOPIC, 5)) is None  # not assigned
    assert faust_consumer.asked == 0


async def test_before_the_consumer_started_there_is_none() -> None:
    faust_consumer = FaustConsumer(None)
    assert await _partitions(faust_consumer).position((TOPIC, 0)) is None
    assert faust_consumer.asked == 0


async def test_lag_counts_the_partitions_with_a_position_and_waits_for_none(
    kafka_consumer: AIOKafkaConsumer,
) -> None:
    _seek(kafka_consumer, 1, 4)
    faust_consumer = FaustConsumer(kafka_consumer)
    async with asyncio.timeout(1):
        lag = await Progress().lag(_partitions(faust_consumer))
    assert lag == {(TOPIC, 1): 6}
    assert faust_consumer.asked == 0
