"""A partition with nothing committed yet is read again from its earliest offset after a seek.

faust seeks every partition to its committed offset at each rebalance, and whenever it
drops a fetch that came back while the flow was stopped (a rebalance under way).
aiokafka's ``seek_to_committed`` moves only the partitions that have a committed offset:
one with none stays where its fetch left it, so the records fetched and dropped there
were never read again. The next record read counted them as skipped and the commit
passed them: the chaos soak's group lost the events its first rebalance caught in
flight (181, 269 and 624 events in three runs under load, every consumer's).

Contract (``app.runtime.transport.rewind``, which the worker's consumer runs at each seek
for every partition without a committed offset): the partition's next fetch starts at the
offset given, or at the partition's earliest offset when none is given.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from app.runtime.transport import rewind
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.workers import Stream

pytestmark = pytest.mark.integration

RECORDS = 10


@pytest.fixture
async def read_past(topic: OrderTopic, stream: Stream) -> AsyncIterator[AIOKafkaConsumer]:
    """The group's consumer, having fetched partition 0's ten records and committed none."""
    tp = TopicPartition(stream.topic, 0)
    producer = AIOKafkaProducer(bootstrap_servers=stream.bootstrap, acks="all")
    await producer.start()
    try:
        for n in range(RECORDS):
            await producer.send_and_wait(stream.topic, b"record %d" % n, partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        stream.topic,
        bootstrap_servers=stream.bootstrap,
        group_id=stream.app_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        fetched: list[int] = []
        while len(fetched) < RECORDS:
            batches = await consumer.getmany(timeout_ms=10_000)
            assert batches, f"fetched {fetched} of partition 0's {RECORDS} records, then nothing"
            fetched += [record.offset for record in batches.get(tp, [])]
        assert fetched == list(range(RECORDS))
        assert await consumer.position(tp) == RECORDS
        yield consumer
    finally:
        await consumer.stop()


async def test_a_seek_to_committed_leaves_a_fresh_partition_where_its_fetch_left_it(
    read_past: AIOKafkaConsumer, stream: Stream
) -> None:
    tp = TopicPartition(stream.topic, 0)

    committed = await read_past.seek_to_committed(tp)

    assert committed == {tp: None}
    assert await read_past.position(tp) == RECORDS  # records 0 to 9 would not come again


@pytest.mark.parametrize("floor", [0, None], ids=["earliest known", "earliest unknown"])
async def test_rewind_reads_a_fresh_partition_again_from_its_earliest_offset(
    read_past: AIOKafkaConsumer, stream: Stream, floor: int | None
) -> None:
    tp = TopicPartition(stream.topic, 0)
    await read_past.seek_to_committed(tp)

    await rewind(read_past, {tp: floor})

    assert await read_past.position(tp) == 0
    again = await read_past.getmany(tp, timeout_ms=10_000)
    assert [record.offset for record in again[tp]] == list(range(RECORDS))
