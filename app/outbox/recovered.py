"""Rows a dead relay may have published: look for their records before sending them again.

A row claimed under an expired lease was ``PROCESSING`` for a relay that stopped
answering. It may have died before it sent the row, while the record was on its way,
or after the broker acknowledged the record and before it marked the row
``PUBLISHED``; only the topic can tell. Before such a row is sent again, the relay
reads the row's partition (every partition for a record without a key) from the
row's ``created_at`` (a record is never older than its row; ``CLOCK_SKEW`` allowed
for; from the partition's start for a producer's zero ``created_at``) to its end, and a
row whose record is there byte for byte (key, value and headers) is marked
``PUBLISHED`` without a second copy.

Bounded: at most the last ``MAX_RECORDS`` records of a partition are read, within
``SEARCH_SECONDS``; a record older than that window, or a search that runs out of
time, is not found and the row is sent again (at least once, as without the search;
consumers deduplicate); so is one whose topic the relay may not read (an ACL without
Read: one warning line, not a wait). Such rows exist only after a crash, so the search
is rare.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import TopicAuthorizationFailedError

from app.kafka_clients import KafkaClients
from app.outbox.message import Message

CLOCK_SKEW = timedelta(minutes=1)
MAX_RECORDS = 100_000
SEARCH_SECONDS = 30.0
POLL_MS = 200
log = logging.getLogger("effectively_once.relay")

Fingerprint = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]


class PartitionsUnknown(RuntimeError):
    """The partitions a record may be in are not known yet: the search cannot tell."""


def fingerprint(key: bytes | None, value: bytes | None, headers: Any) -> Fingerprint:
    """What makes two records the same record."""
    return key, value, tuple((name, bytes(value or b"")) for name, value in headers or ())


async def already_sent(
    clients: KafkaClients,
    wanted: Mapping[int, tuple[Message, datetime | None]],
    partitions_of: Callable[[Message], Sequence[int]],
) -> set[int]:
    """Of ``wanted`` (row id -> its record and the row's ``created_at``, None for a
    producer's zero value: ``app.outbox.written``), the rows whose
    record is on its topic already. ``partitions_of`` gives where a record may be
    (``PartitionsUnknown`` when it knows none: the caller asks again later); the reading
    consumer is one of ``clients`` (the relay's connection settings)."""
    looking: dict[TopicPartition, dict[Fingerprint, list[int]]] = {}
    since: dict[TopicPartition, int] = {}
    for row_id, (message, created) in wanted.items():
        # No write time (a producer's zero created_at): from the partition's start, as far
        # as MAX_RECORDS reach. A time before 1970 is none the broker can seek to.
        ms = 0 if created is None else max(0, int((created - CLOCK_SKEW).timestamp() * 1000))
        mark = fingerprint(message.key, message.value, message.headers)
        partitions = partitions_of(message)
        if not partitions:  # looking nowhere would find nothing, and send a second copy
            raise PartitionsUnknown(f"no partitions known for topic {message.topic!r}")
        for partition in partitions:
            tp = TopicPartition(message.topic, partition)
            looking.setdefault(tp, {}).setdefault(mark, []).append(row_id)
            since[tp] = min(since.get(tp, ms), ms)
    if not looking:
        return set()
    consumer = clients.consumer(
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        try:
            async with asyncio.timeout(SEARCH_SECONDS):
                return await _search(consumer, looking, since)
        except TimeoutError:
            log.warning(
                "gave up looking for %d record(s) a dead relay may have sent after %.0fs; "
                "they are sent again (consumers deduplicate)",
                len(wanted),
                SEARCH_SECONDS,
            )
            return set()
        except TopicAuthorizationFailedError as exc:
            topics = sorted({tp.topic for tp in looking})
            log.warning(
                "cannot look for %d record(s) a dead relay may have sent: the broker denies "
                "this relay Read on %s (TopicAuthorizationFailed: %s); they are sent again "
                "(consumers deduplicate; an ACL allowing Read avoids the copies)",
                len(wanted),
                ", ".join(repr(t) for t in topics),
                exc,
            )
            return set()
    finally:
        await consumer.stop()


async def _search(
    consumer: AIOKafkaConsumer,
    looking: dict[TopicPartition, dict[Fingerprint, list[int]]],
    since: dict[TopicPartition, int],
) -> set[int]:
    partitions = list(looking)
    consumer.assign(partitions)
    ends = await consumer.end_offsets(partitions)
    firsts = await consumer.beginning_offsets(partitions)
    at = await consumer.offsets_for_times(since)
    for tp in partitions:
        start = at[tp].offset if at.get(tp) is not None else ends[tp]
        consumer.seek(tp, max(start, firsts[tp], ends[tp] - MAX_RECORDS))
    found: set[int] = set()
    pending = [tp for tp in partitions if await consumer.position(tp) < ends[tp]]
    while pending:
        batch = await consumer.getmany(*pending, timeout_ms=POLL_MS)
        for tp, records in batch.items():
            for record in records:
                if record.offset >= ends[tp]:
                    continue
                mark = fingerprint(record.key, record.value, record.headers)
                found.update(looking[tp].get(mark, ()))
        pending = [tp for tp in pending if await consumer.position(tp) < ends[tp]]
    return found
