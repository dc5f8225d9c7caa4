"""The test's side of the broker: create the topic, produce records, watch the group drain.

"Drained" is the completion signal the tests rely on: every partition's
committed offset for the worker's group has passed the last record we sent
there. The end is taken from the producer's acknowledgements, not from the
broker's high watermark: Tansu 0.6 (memory storage) reports the high
watermark per record batch, not per record, so a group would look drained
while most of a batch is still unread. The framework moves an offset only
after the database transaction that applied the records below it committed,
so once drained, the database holds the final state, including the effect
(or non-effect) of every duplicate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from app.demo.envelopes import Message
from app.demo.produce import ensure_topic
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Stream, WorkerProcess


class OrderTopic:
    """Produces to the test's topic and reads its group's progress; ``async with`` it."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self._admin = AIOKafkaAdminClient(bootstrap_servers=stream.bootstrap)
        self._producer = AIOKafkaProducer(
            bootstrap_servers=stream.bootstrap, acks="all", linger_ms=10
        )
        self._partitions = [TopicPartition(stream.topic, p) for p in range(stream.partitions)]
        self._ends: dict[int, int] = {}  # partition -> offset after the last record we sent

    async def __aenter__(self) -> OrderTopic:
        # Created here, before any worker or record, so it has the partitions we ask for.
        await ensure_topic(self.stream.bootstrap, self.stream.topic, self.stream.partitions)
        await self._admin.start()
        await self._producer.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._producer.stop()
        await self._admin.close()

    async def send(self, messages: Iterable[Message]) -> None:
        """Produce ``messages`` in order and wait until the broker has them all.

        One producer keeps per-partition order, so records with the same key
        (aggregate) arrive in the order given here.
        """
        deliveries = [
            await self._producer.send(
                self.stream.topic, message.value, key=message.key, headers=list(message.headers)
            )
            for message in messages
        ]
        for sent in await asyncio.gather(*deliveries):
            self._ends[sent.partition] = max(self._ends.get(sent.partition, 0), sent.offset + 1)

    async def lag(self) -> dict[int, int]:
        """Records sent but not yet committed by the group, per partition that has any."""
        committed = await self._admin.list_consumer_group_offsets(
            self.stream.app_id, partitions=self._partitions
        )
        lag = {}
        for tp in self._partitions:
            meta = committed.get(tp)
            done = meta.offset if meta is not None and meta.offset >= 0 else 0
            end = self._ends.get(tp.partition, 0)
            if end > done:
                lag[tp.partition] = end - done
        return lag

    async def drained(
        self,
        *,
        workers: Iterable[WorkerProcess],
        within: float = 60,
        stuck: Callable[[], str | None] | None = None,
    ) -> None:
        """Wait until the group has committed every record produced so far (``stuck``: see
        ``waiting.eventually``)."""
        await eventually(
            self.lag,
            lambda lag: not lag,
            what="consumer group lag to reach 0",
            within=within,
            workers=workers,
            stuck=stuck,
        )
