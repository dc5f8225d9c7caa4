"""The relay's producer: aiokafka, idempotent, ``acks=all``; never creates a topic by sending.

A row's topic must exist: the producer asks the broker for *every* topic (a
request that creates nothing) before it sends to one it has not seen, because
naming a missing topic in a send makes a broker with ``auto.create.topics.enable``
(Kafka's default) create it with the broker's defaults. The relay creates a missing
topic deliberately (``app.outbox.topics``); a row whose topic stays missing fails
its attempt.

Failures are told apart (``is_row_fault``): the broker refusing *this record*
(too large, invalid topic) counts as an attempt of the row; the broker being
unreachable or slow (connection, timeout, leader elections, not enough replicas) is
nobody's attempt: the relay waits and sends again. So is a write the cluster's ACLs
deny (``denial``): the same for every row of the topic, and mended by granting the
ACL, not by the row; the relay waits in place and names the topic and permission.

Idempotence (``RELAY_IDEMPOTENT``, on by default) keeps a batch the producer
retries internally from being written twice. A broker that refuses it
(``InitProducerId``; Tansu 0.6 does) stops the relay with a clear message;
without it a retried batch may be written twice, and the consumers' dedup absorbs
the copy. Either way aiokafka sends one batch per partition at a time, so a
partition receives the records in the order they were sent.

The relay queues each wave with ``send_many``: one batch per partition, built here,
not a record at a time through aiokafka's ``send`` (its per-record lookups were a
sixth of the relay's time).

The producer comes from ``app.kafka_clients`` with every connection setting. A broker
that refuses those settings (the login, its certificate or name, a client
certificate) stops the relay with ``BrokerRefused`` and the reason in one line; a
broker it cannot reach is ``BrokerUnreachable``, waited for.

Closing the producer delivers what it holds for at most its request timeout, then
drops the rest: an idempotent producer never gives up a batch on its own, so a broker
that went silent would otherwise hold the relay's (and its worker's) exit forever.
The dropped records' rows stay ``PROCESSING`` until their lease expires.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from app.errors import BrokerDenied, BrokerRefused, BrokerUnreachable
from app.kafka_clients import KafkaClients, unknown_topics
from app.outbox.message import BadRow, Message
from app.outbox.partitioner import RememberingPartitioner
from app.outbox.recovered import already_sent

START_TIMEOUT_SECONDS = 15.0
MAX_BATCH_BYTES = 256 * 1024
# The largest record the relay sends; the topic's ``max.message.bytes`` decides below it
# (aiokafka's default, 1 MiB, refused a record the topic was raised to accept). Well under
# the broker's ``socket.request.max.bytes`` (100 MiB), past which it drops the connection,
# which looks like an outage: retried in place forever instead of the row going ``DEAD``.
MAX_RECORD_BYTES = 32 * 1024 * 1024
NEITHER_KEY_NOR_VALUE = "a record needs a key or a value; this one has neither"
# What a broker without idempotent producers answers to InitProducerId.
_NO_IDEMPOTENCE = {"UnknownError", "UnsupportedVersionError"}
TOPICS_MAX_AGE_SECONDS = 60.0
log = logging.getLogger("effectively_once.relay")

# What a producer's principal needs for ``InitProducerId`` (an idempotent producer).
IDEMPOTENT_WRITE = (
    "IdempotentWrite on the cluster (or Write on any topic) for an idempotent producer; "
    "RELAY_IDEMPOTENT=false needs neither"
)
_DENIED = (
    TopicAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)

__all__ = [
    "BrokerRefused",
    "BrokerUnreachable",
    "KafkaBroker",
    "breaks_sequence",
    "denial",
    "is_row_fault",
]


# An idempotent producer's state the broker no longer accepts: the producer's fault (it is
# renewed), not the row's.
_PRODUCER_STATE = {
    "OutOfOrderSequenceNumber",
    "UnknownProducerId",
    "InvalidProducerEpoch",
    "ProducerFenced",
}


def is_row_fault(exc: BaseException) -> bool:
    """True when the broker refused the record itself (the row's attempt failed), False when
    the broker was unreachable or busy, its ACLs deny the write, or it refused the
    producer's state (nobody's attempt: send again later)."""
    if isinstance(exc, BadRow):
        return True
    if isinstance(exc, _DENIED) or type(exc).__name__ in _PRODUCER_STATE:
        return False
    return isinstance(exc, KafkaError) and not exc.retriable and not _is_timeout(exc)


def breaks_sequence(exc: BaseException | None) -> bool:
    """True when an idempotent producer must be renewed after ``exc``: the broker refused a
    batch (too large, denied, corrupt...) or the producer's state; aiokafka does not take
    a refused batch's records back out of the partition's sequence."""
    if not isinstance(exc, KafkaError):
        return False
    return type(exc).__name__ in _PRODUCER_STATE or not (exc.retriable or _is_timeout(exc))


def denial(exc: BaseException | None, topic: str) -> str | None:
    """What the ACLs deny, in one line naming ``topic`` and the permission, when ``exc`` is
    an authorization failure of a send to ``topic``; None otherwise."""
    if isinstance(exc, TopicAuthorizationFailedError):
        return f"TopicAuthorizationFailed: not allowed to write {topic!r} (an ACL must allow Write)"
    if isinstance(exc, ClusterAuthorizationFailedError):
        return f"ClusterAuthorizationFailed: not allowed {IDEMPOTENT_WRITE}"
    if isinstance(exc, TransactionalIdAuthorizationFailed):
        return "TransactionalIdAuthorizationFailed: not allowed to use the transactional id"
    return None


def _is_timeout(exc: KafkaError) -> bool:
    # KafkaTimeoutError (no metadata, buffer full, batch expired) is not marked retriable.
    return type(exc).__name__ in {"KafkaTimeoutError", "ProducerClosed"}


class KafkaBroker:
    """Sends ``Message``s; one per relay process."""

    def __init__(
        self,
        clients: KafkaClients,
        idempotent: bool = True,
        request_timeout_seconds: float = 15.0,
        client_id: str = "effectively-once-relay",
    ) -> None:
        self.clients = clients
        self.idempotent = idempotent
        self._partitioner = RememberingPartitioner()
        self._options = {
            "client_id": client_id,
            "acks": "all",
            "enable_idempotence": idempotent,
            "linger_ms": 2,
            "max_batch_size": MAX_BATCH_BYTES,
            "max_request_size": MAX_RECORD_BYTES,
            "partitioner": self._partitioner,
            "request_timeout_ms": int(request_timeout_seconds * 1000),
        }
        self._producer = clients.producer(**self._options)
        self._close_within = request_timeout_seconds
        self._started = False
        self._topics: set[str] = set()
        self._topics_at = 0.0

    @property
    def producer(self) -> AIOKafkaProducer:
        """The aiokafka producer (tests read its configuration)."""
        return self._producer

    async def start(self) -> None:
        """Connect; raises ``BrokerRefused`` for a setting the broker refuses, and
        ``BrokerUnreachable`` (an infrastructure failure) when it cannot be reached."""
        if self._started:
            return
        try:
            async with asyncio.timeout(START_TIMEOUT_SECONDS):
                await self._producer.start()
        except KafkaError as exc:
            await self._producer.stop()
            if isinstance(exc, ClusterAuthorizationFailedError):
                raise BrokerDenied(
                    f"the broker at {self.clients.where} denies this relay's principal "
                    f"{IDEMPOTENT_WRITE} (ClusterAuthorizationFailed for InitProducerId)"
                ) from None
            if self.idempotent and type(exc).__name__ in _NO_IDEMPOTENCE:
                raise BrokerRefused(
                    f"the broker refused an idempotent producer ({type(exc).__name__} for "
                    "InitProducerId); set RELAY_IDEMPOTENT=false for a broker without it"
                ) from None
            await self._why_not(exc)
        except (OSError, TimeoutError) as exc:
            await self._producer.stop()
            await self._why_not(exc)
        except BaseException:
            await self._producer.stop()
            raise
        self._started = True

    async def _why_not(self, exc: BaseException) -> None:
        """Raise why the producer could not start: aiokafka only says it could not
        bootstrap, so connect once more the way it does, to learn the reason (unless
        nothing answered at all: that is the reason)."""
        where = self.clients.where
        if isinstance(exc, TimeoutError):
            raise BrokerUnreachable(
                f"cannot reach the broker at {where}: no answer within {START_TIMEOUT_SECONDS:g} s"
            ) from exc
        await self.clients.check(START_TIMEOUT_SECONDS)  # raises BrokerRefused/-Unreachable
        raise BrokerUnreachable(
            f"cannot reach the broker at {where}: {type(exc).__name__}: {exc}"
        ) from exc

    async def stop(self) -> None:
        """Flush what is queued and disconnect (a producer never started is closed too);
        what is still unanswered after the request timeout is dropped, unacknowledged."""
        self._started = False
        await self._close(self._producer)

    async def _close(self, producer: AIOKafkaProducer) -> None:
        try:
            async with asyncio.timeout(self._close_within):
                await producer.stop()
            return
        except TimeoutError:
            pass
        log.warning(
            "the broker at %s answered nothing for %gs while the producer closed: the records "
            "it still held are dropped unacknowledged (their rows are sent again once their "
            "lease expires)",
            self.clients.where,
            self._close_within,
        )
        # aiokafka has no forced close: its sender is cancelled and its connections closed.
        # Not waited for: a request it retries may wait for a metadata update that the
        # closed client never makes (the process's end cancels what is left of it).
        sender = producer._sender.sender_task
        if sender is not None:
            sender.cancel()
        await producer.client.close()

    async def renew(self) -> None:
        """Replace the producer with a new one (a new producer id, sequences from 0) and start
        it; raises as ``start``. For an idempotent producer after a send the broker refused
        (``breaks_sequence``): aiokafka counted the refused batch's records in the
        partition's sequence, so every later batch to it would be refused as out of order.
        Nothing to do for a producer that is not idempotent."""
        if not self.idempotent:
            return
        log.warning("the broker refused a batch: renewing the idempotent producer")
        old, self._producer = self._producer, self.clients.producer(**self._options)
        self._started = False
        try:
            await self._close(old)
        except KafkaError:
            pass  # its sender task died of the refusal; nothing of it is used again
        await self.start()

    async def missing_topics(self, topics: set[str]) -> set[str]:
        """Which of ``topics`` the broker does not have (asks it when one is not known, or
        the list is older than a minute). Raises when the broker cannot be asked.

        A broker enforcing ACLs leaves out of its list every topic the principal may not
        Describe: those are asked about by name (never created by asking), and only one
        the broker then names unknown is missing. One it will not describe counts as
        there, so that its send meets the denial and waits in place (``denial``), not as
        missing, whose rows would count attempts; so does one described by then (an ACL
        granted between the two questions)."""
        stale = time.monotonic() - self._topics_at > TOPICS_MAX_AGE_SECONDS
        if stale or not topics <= self._topics:
            metadata = await self._producer.client.fetch_all_metadata()
            self._topics = set(metadata.topics())
            self._topics_at = time.monotonic()
        absent = topics - self._topics
        if absent:
            absent = await self._unknown_by_name(absent)
        return absent

    async def _unknown_by_name(self, topics: set[str]) -> set[str]:
        """Of ``topics``, those the broker names unknown when asked about each by name."""
        client = self._producer.client
        request = MetadataRequest(sorted(topics), allow_auto_topic_creation=False)
        answer = await client.send(client.get_random_node(), request)
        return unknown_topics(answer, topics)

    async def already_sent(self, wanted: Mapping[int, tuple[Message, datetime | None]]) -> set[int]:
        """Of ``wanted`` (row id -> record, row's ``created_at``), the rows whose record is on
        its topic already (``app.outbox.recovered``)."""
        # Where a record may be comes from the producer's metadata, which holds only the
        # topics it asked about (Apache Kafka names none unprompted): ask for these first.
        for topic in {message.topic for message, _ in wanted.values()}:
            await self._producer.partitions_for(topic)
        return await already_sent(self.clients, wanted, self._partitions_of)

    def _partitions_of(self, message: Message) -> Sequence[int]:
        partitions = sorted(self._producer.client.cluster.partitions_for_topic(message.topic) or ())
        if message.key is None or not partitions:
            return partitions  # a record without a key went to any partition
        return [self._partitioner(message.key, partitions, partitions)]

    async def send(self, message: Message) -> asyncio.Future[Any]:
        """Queue ``message``; the future completes when the broker acknowledged it."""
        if message.key is None and message.value is None:
            raise BadRow(NEITHER_KEY_NOR_VALUE)
        return await self._producer.send(
            message.topic, message.value, key=message.key, headers=list(message.headers)
        )

    async def send_many(self, messages: Sequence[Message]) -> list[asyncio.Future[Any] | Exception]:
        """Queue ``messages`` in one batch per partition (a partition's in their order); each
        one's outcome is its batch's future, completed when the broker acknowledged or
        refused the batch, or the error that kept it from being queued.

        aiokafka's ``send`` looks up the topic's partitions and calls the partitioner for
        every record: a sixth of the relay's time. Here that is once per topic and per
        key. A refused batch fails all its records, as a batch ``send`` filled would; a
        record larger than a batch goes on its own (``send``: the producer checks its size).
        """
        outcomes: dict[int, asyncio.Future[Any] | Exception] = {}
        batches: dict[tuple[str, int], list[int]] = {}
        for topic, indexes in _by_topic(messages).items():
            try:
                partitions = sorted(await self._producer.partitions_for(topic))
            except Exception as exc:
                for index in indexes:
                    outcomes[index] = exc
                continue
            available = self._available(topic)
            for index in indexes:
                message = messages[index]
                if message.key is None and message.value is None:
                    outcomes[index] = BadRow(NEITHER_KEY_NOR_VALUE)
                elif _size(message) > MAX_BATCH_BYTES:
                    outcomes[index] = await self._send_alone(message)
                else:
                    partition = self._partitioner(message.key, partitions, available)
                    batches.setdefault((topic, partition), []).append(index)
        for (topic, partition), indexes in batches.items():
            await self._send_batches(messages, indexes, topic, partition, outcomes)
        return [outcomes[index] for index in range(len(messages))]

    def _available(self, topic: str) -> list[int]:
        return sorted(self._producer.client.cluster.available_partitions_for_topic(topic) or ())

    async def _send_alone(self, message: Message) -> asyncio.Future[Any] | Exception:
        try:
            return await self.send(message)
        except Exception as exc:
            return exc

    async def _send_batches(
        self,
        messages: Sequence[Message],
        indexes: list[int],
        topic: str,
        partition: int,
        outcomes: dict[int, asyncio.Future[Any] | Exception],
    ) -> None:
        """Queue ``indexes`` of ``messages`` to one partition, in as many batches as they
        fill; each record's outcome is set to its batch's."""
        batch, members = self._producer.create_batch(), list[int]()
        for index in indexes:
            message = messages[index]
            headers = list(message.headers)
            if (
                batch.append(key=message.key, value=message.value, timestamp=None, headers=headers)
                is None
            ):
                await self._queue(batch, members, topic, partition, outcomes)
                batch, members = self._producer.create_batch(), list[int]()
                batch.append(key=message.key, value=message.value, timestamp=None, headers=headers)
            members.append(index)
        await self._queue(batch, members, topic, partition, outcomes)

    async def _queue(
        self,
        batch: Any,
        members: list[int],
        topic: str,
        partition: int,
        outcomes: dict[int, asyncio.Future[Any] | Exception],
    ) -> None:
        outcome: asyncio.Future[Any] | Exception
        try:
            outcome = await self._producer.send_batch(batch, topic, partition=partition)
        except Exception as exc:
            outcome = exc
        for index in members:
            outcomes[index] = outcome


def _by_topic(messages: Sequence[Message]) -> dict[str, list[int]]:
    indexes: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        indexes.setdefault(message.topic, []).append(index)
    return indexes


def _size(message: Message) -> int:
    return int(
        DefaultRecordBatchBuilder.estimate_size_in_bytes(
            message.key, message.value, list(message.headers)
        )
    )
