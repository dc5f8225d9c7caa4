"""Lag counts what is not yet committed to the database.

Contract: ``Progress`` reports, per assigned partition, the high watermark minus
the next offset to process: after a batch returned from the pipeline (its
database commit), the offset after its last record; while the first batch since the
assignment is in flight, its first record's offset (the fetch position is already past
it); before any batch, the consumer's position; never from before the group's committed offset
(a partition assigned back after another member worked on it counted this worker's last
batch of it: lag that was not there, and ``/ready`` red on it). Revoked partitions
disappear. The oldest
unprocessed age is the time since the oldest record of a batch in flight became
due (its timestamp, or a retry record's retry-due-at), 0 when nothing is in
flight; a batch that raised is no longer in flight and moves no offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from app.monitoring.progress import Progress, TopicPartition
from app.pipeline.outcomes import Applied, Outcome
from app.records import RawRecord
from dlq import headers as h

NOW = 1_700_000_000.0


class FakeConsumer:
    """A ``PartitionSource`` with fixed answers."""

    def __init__(self, assigned: set[TopicPartition], high: dict[TopicPartition, int]) -> None:
        self.assigned = assigned
        self.high = high
        self.positions: dict[TopicPartition, int] = {}
        self.commits: dict[TopicPartition, int] = {}

    def assignment(self) -> set[TopicPartition]:
        return self.assigned

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.high.get(tp)

    async def position(self, tp: TopicPartition) -> int | None:
        return self.positions.get(tp)

    def committed(self, tp: TopicPartition) -> int | None:
        return self.commits.get(tp)


def record(
    partition: int,
    offset: int,
    produced: float = NOW,
    headers: Sequence[tuple[str, bytes]] = (),
) -> RawRecord:
    return RawRecord("t", partition, offset, b"k", b"{}", tuple(headers), int(produced * 1000))


def done(records: Sequence[RawRecord]) -> list[Outcome]:
    return [Applied("c", f"e{r.offset}", "OrderPaid") for r in records]


async def processed(records: Sequence[RawRecord]) -> list[Outcome]:
    return done(records)


async def test_lag_counts_from_the_last_processed_batch_or_the_position() -> None:
    progress = Progress(clock=lambda: NOW)
    consumer = FakeConsumer({("t", 0), ("t", 1)}, {("t", 0): 10, ("t", 1): 7})
    consumer.positions = {("t", 0): 4, ("t", 1): 5}
    assert await progress.lag(consumer) == {("t", 0): 6, ("t", 1): 2}

    await progress.run(processed, [record(0, 4), record(0, 5), record(0, 8)])
    assert await progress.lag(consumer) == {("t", 0): 1, ("t", 1): 2}

    consumer.assigned = {("t", 1)}  # partition 0 revoked
    assert await progress.lag(consumer) == {("t", 1): 2}


async def test_a_partition_assigned_back_counts_from_what_the_group_committed() -> None:
    progress = Progress(clock=lambda: NOW)
    consumer = FakeConsumer({("t", 0)}, {("t", 0): 10})
    await progress.run(processed, [record(0, 2), record(0, 3)])
    assert await progress.lag(consumer) == {("t", 0): 6}

    # Revoked, worked on by another member up to its end, and assigned back, between two
    # looks: this worker's last batch of it is behind what the group committed.
    consumer.high[("t", 0)] = 30
    consumer.commits[("t", 0)] = 30
    assert await progress.lag(consumer) == {("t", 0): 0}


async def test_a_partition_without_a_high_watermark_is_left_out() -> None:
    consumer = FakeConsumer({("t", 0)}, {})
    consumer.positions = {("t", 0): 3}
    assert await Progress(clock=lambda: NOW).lag(consumer) == {}


async def test_oldest_unprocessed_age_covers_the_batch_in_flight() -> None:
    progress = Progress(clock=lambda: NOW)
    release = asyncio.Event()

    async def slow(records: Sequence[RawRecord]) -> list[Outcome]:
        await release.wait()
        return done(records)

    batch = [record(0, 1, produced=NOW - 30), record(1, 1, produced=NOW - 5)]
    assert progress.oldest_unprocessed_age() == 0
    running = asyncio.create_task(progress.run(slow, batch))
    await asyncio.sleep(0)
    assert progress.oldest_unprocessed_age() == pytest.approx(30)
    release.set()
    await running
    assert progress.oldest_unprocessed_age() == 0


async def test_a_retry_record_is_unprocessed_only_from_its_due_time() -> None:
    progress = Progress(clock=lambda: NOW)
    release = asyncio.Event()

    async def slow(records: Sequence[RawRecord]) -> list[Outcome]:
        await release.wait()
        return done(records)

    due = datetime.fromtimestamp(NOW - 2, UTC).isoformat().encode()
    retry = record(
        0, 1, produced=NOW - 300, headers=[(h.RETRY_DUE_AT, due), (h.DLT_ORIGINAL_TOPIC, b"o")]
    )
    running = asyncio.create_task(progress.run(slow, [retry]))
    await asyncio.sleep(0)
    assert progress.oldest_unprocessed_age() == pytest.approx(2)
    release.set()
    await running


async def test_a_batch_that_raised_moves_no_offset() -> None:
    progress = Progress(clock=lambda: NOW)
    consumer = FakeConsumer({("t", 0)}, {("t", 0): 10})
    consumer.positions = {("t", 0): 2}

    async def stopping(records: Sequence[RawRecord]) -> list[Outcome]:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await progress.run(stopping, [record(0, 2), record(0, 3)])
    assert progress.oldest_unprocessed_age() == 0
    assert await progress.lag(consumer) == {("t", 0): 8}


async def test_a_first_batch_in_flight_counts_from_its_first_record() -> None:
    # The fetch position is past the fetched records; the first batch since the assignment
    # has not committed them (the database is down, say): they still wait.
    progress = Progress(clock=lambda: NOW)
    consumer = FakeConsumer({("t", 0), ("t", 1)}, {("t", 0): 11, ("t", 1): 7})
    consumer.positions = {("t", 0): 11, ("t", 1): 7}
    release = asyncio.Event()

    async def stuck(records: Sequence[RawRecord]) -> list[Outcome]:
        await release.wait()
        return done(records)

    running = asyncio.create_task(progress.run(stuck, [record(0, 3), record(0, 4), record(1, 6)]))
    await asyncio.sleep(0)
    assert await progress.lag(consumer) == {("t", 0): 8, ("t", 1): 1}
    release.set()
    await running
    assert await progress.lag(consumer) == {("t", 0): 6, ("t", 1): 0}
