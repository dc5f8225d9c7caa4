"""The DLQ command's two conversations with the broker: read a dead-letter topic, publish replays.

Reading uses a consumer without a group: it assigns every partition itself,
so it never joins (or disturbs) a worker's group and commits nothing. It
reads from the beginning to the end offsets taken when it started, then
polls once more: Tansu reports the high watermark per record batch, so the
last batch may reach past the end it announced.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from app.records import RawRecord
from dlq.errors import BrokerUnreachable, CommandError, NothingMatched
from dlq.records import OutRecord

CONNECT_TIMEOUT_SECONDS = 10.0
POLL_MS = 200


def bootstrap_servers(broker_url: str) -> list[str]:
    """faust's ``kafka://h1:9092;kafka://h2:9092`` (or ``,``) → ``["h1:9092", "h2:9092"]``."""
    servers = []
    for part in broker_url.replace(",", ";").split(";"):
        part = part.strip()
        if part:
            servers.append(part.split("://", 1)[-1].rstrip("/"))
    if not servers:
        raise CommandError(f"BROKER_URL names no broker: {broker_url!r}")
    return servers


async def read_topic(broker_url: str, topic: str) -> list[RawRecord]:
    """Every record of ``topic``, from the beginning to the end offsets seen at the start.

    As long as it takes: the caller bounds it (``asyncio.timeout``).
    """
    async with _consumer(broker_url) as consumer:
        partitions = await _partitions(consumer, broker_url, topic)
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        return await _read_to(consumer, ends)


async def read_at(broker_url: str, topic: str, partition: int, offset: int) -> RawRecord | None:
    """The record at ``partition``/``offset`` of ``topic``, or None if there is none."""
    async with _consumer(broker_url) as consumer:
        known = await _partitions(consumer, broker_url, topic)
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
    consumer: AIOKafkaConsumer, broker_url: str, topic: str
) -> list[TopicPartition]:
    found = consumer.partitions_for_topic(topic)
    if not found:
        # A consumer starts knowing only the topics its first metadata request named: on
        # Apache Kafka (metadata v1 and later, an empty list is no topic) none. Every topic
        # is asked for, not this one: naming a missing topic would have the broker create it.
        metadata = await consumer._client.fetch_all_metadata()
        found = metadata.partitions_for_topic(topic)
    if not found:
        raise NothingMatched(
            f"no topic {topic} on the broker at {broker_url} (nothing was dead-lettered yet?)"
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
            record.topic, record.value, key=record.key, partition=partition,
            headers=list(record.headers),
        )
        return sent.partition, sent.offset


@asynccontextmanager
async def replayer(broker_url: str) -> AsyncIterator[Replayer]:
    """A started ``Replayer`` on ``broker_url``; stopped (flushed) on leaving."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers(broker_url),
        acks="all",
        request_timeout_ms=int(CONNECT_TIMEOUT_SECONDS * 1000),
    )
    async with _started(producer, broker_url):
        yield Replayer(producer)


@asynccontextmanager
async def _consumer(broker_url: str) -> AsyncIterator[AIOKafkaConsumer]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers(broker_url),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=int(CONNECT_TIMEOUT_SECONDS * 1000),
    )
    async with _started(consumer, broker_url):
        yield consumer


@asynccontextmanager
async def _started(client: Any, broker_url: str) -> AsyncIterator[None]:
    cause = _LastError()
    logging.getLogger("aiokafka").addHandler(cause)
    try:
        await asyncio.wait_for(client.start(), CONNECT_TIMEOUT_SECONDS)
    except (KafkaError, OSError, TimeoutError) as exc:
        await client.stop()
        why = cause.message or str(exc) or f"no answer within {CONNECT_TIMEOUT_SECONDS:g} s"
        raise BrokerUnreachable(
            f"cannot reach the broker at {', '.join(bootstrap_servers(broker_url))}: {why}"
        ) from None
    finally:
        logging.getLogger("aiokafka").removeHandler(cause)
    try:
        yield
    finally:
        await client.stop()


class _LastError(logging.Handler):
    """Keeps aiokafka's last error line: it names the cause its exception leaves out."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.message = ""

    def emit(self, record: logging.LogRecord) -> None:
        # 'Unable connect to "h:p": [Errno 111] ...': the address is in our message already.
        self.message = re.sub(r'^Unable connect to "[^"]*": ', "", record.getMessage())
