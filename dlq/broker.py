"""The DLQ command's two conversations with the broker: read a dead-letter topic, publish replays.

Reading uses a consumer without a group: it assigns every partition itself,
so it never joins (or disturbs) a worker's group and commits nothing. It
reads from the beginning to the end offsets taken when it started, then
polls once more: Tansu reports the high watermark per record batch, so the
last batch may reach past the end it announced.

Both clients come from ``app.kafka_clients`` (the worker's connection settings). One
that cannot start is one line: the broker's refusal of the settings, or why it
could not be reached, within ``CONNECT_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, TopicAuthorizationFailedError
from aiokafka.protocol.metadata import MetadataRequest

from app import errors
from app.kafka_clients import CONNECT_TIMEOUT_SECONDS, KafkaClients, topic_errors
from app.records import RawRecord
from dlq.errors import BrokerUnreachable, NothingMatched
from dlq.records import OutRecord

POLL_MS = 200


async def read_topic(clients: KafkaClients, topic: str) -> list[RawRecord]:
    """Every record of ``topic``, from the beginning to the end offsets seen at the start.

    As long as it takes: the caller bounds it (``asyncio.timeout``).
    """
    async with _consumer(clients) as consumer:
        partitions = await _partitions(consumer, clients, topic)
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        return await _read_to(consumer, ends)


async def read_at(
    clients: KafkaClients, topic: str, partition: int, offset: int
) -> RawRecord | None:
    """The record at ``partition``/``offset`` of ``topic``, or None if there is none."""
    async with _consumer(clients) as consumer:
        known = await _partitions(consumer, clients, topic)
        if partition not in {tp.partition for tp in known}:
            return None
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        first = (await consumer.beginning_offsets([tp]))[tp]
        end = (await consumer.end_offsets([tp]))[tp]
        if offset < first:
            return None
        consumer.seek(tp, offset)
        records = await _read_to(consumer, {tp: min(offset + 1, end)})
        return next((record for record in records if record.offset == offset), None)


async def _read_to(consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> list[RawRecord]:
    records: list[RawRecord] = []
    pending = [tp for tp in ends if await consumer.position(tp) < ends[tp]]
    while pending:
        records += _raw(await consumer.getmany(*pending, timeout_ms=POLL_MS))
        pending = [tp for tp in pending if await consumer.position(tp) < ends[tp]]
    records += _raw(await consumer.getmany(*ends, timeout_ms=POLL_MS))
    return sorted(records, key=lambda record: (record.partition, record.offset))


async def _partitions(
    consumer: AIOKafkaConsumer, clients: KafkaClients, topic: str
) -> list[TopicPartition]:
    found = consumer.partitions_for_topic(topic)
    if not found:
        # A consumer starts knowing only the topics its first metadata request named: on
        # Apache Kafka (metadata v1 and later, an empty list is no topic) none. Every topic
        # is asked for, not this one: naming a missing topic would have the broker create it.
        metadata = await consumer._client.fetch_all_metadata()
        found = metadata.partitions_for_topic(topic)
    if not found:
        # Left out of every topic's metadata: missing, or hidden from a login that may not
        # describe it (the broker leaves such topics out). Asked by name (never created so),
        # it says which.
        client = consumer._client
        request = MetadataRequest([topic], allow_auto_topic_creation=False)
        answer = await client.send(client.get_random_node(), request)
        if topic_errors(answer).get(topic) == TopicAuthorizationFailedError.errno:
            raise TopicAuthorizationFailedError(topic)
        raise NothingMatched(
            f"no topic {topic} on the broker at {clients.broker_url} "
            "(nothing was dead-lettered yet?)"
        )
    return [TopicPartition(topic, partition) for partition in sorted(found)]


def _raw(batch: dict[TopicPartition, list[Any]]) -> list[RawRecord]:
    return [
        RawRecord(
            topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            key=message.key,
            value=message.value,
            headers=tuple((name, value or b"") for name, value in message.headers or ()),
            timestamp_ms=message.timestamp,
        )
        for messages in batch.values()
        for message in messages
    ]


class Replayer:
    """Publishes replay and skip records, one at a time, each acknowledged by every replica."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer

    async def send(self, record: OutRecord, partition: int | None) -> tuple[int, int]:
        """Send ``record`` (to ``partition`` when given); its partition and offset once acked."""
        sent = await self._producer.send_and_wait(
            record.topic,
            record.value,
            key=record.key,
            partition=partition,
            headers=list(record.headers),
        )
        return sent.partition, sent.offset


@asynccontextmanager
async def replayer(clients: KafkaClients) -> AsyncIterator[Replayer]:
    """A started ``Replayer`` on the broker; stopped (flushed) on leaving."""
    producer = clients.producer(acks="all", request_timeout_ms=int(CONNECT_TIMEOUT_SECONDS * 1000))
    async with _started(producer, clients):
        yield Replayer(producer)


@asynccontextmanager
async def _consumer(clients: KafkaClients) -> AsyncIterator[AIOKafkaConsumer]:
    consumer = clients.consumer(
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=int(CONNECT_TIMEOUT_SECONDS * 1000),
    )
    async with _started(consumer, clients):
        yield consumer


@asynccontextmanager
async def _started(client: Any, clients: KafkaClients) -> AsyncIterator[None]:
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
            await client.start()
    except (KafkaError, OSError, TimeoutError) as exc:
        await client.stop()
        # aiokafka's error says only that it could not bootstrap: connect once more, as it
        # does, to learn why (a refused login, an untrusted certificate, nobody there).
        try:
            await clients.check(CONNECT_TIMEOUT_SECONDS)
        except (errors.BrokerRefused, errors.BrokerUnreachable) as found:
            raise BrokerUnreachable(str(found)) from None
        why = str(exc) or f"no answer within {CONNECT_TIMEOUT_SECONDS:g} s"
        raise BrokerUnreachable(f"cannot reach the broker at {clients.where}: {why}") from None
    try:
        yield
    finally:
        await client.stop()
