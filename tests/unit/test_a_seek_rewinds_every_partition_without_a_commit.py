"""The worker's seek takes every partition without a committed offset back to its start.

aiokafka's ``seek_to_committed`` leaves such a partition where its fetch left it
(pinned on Apache Kafka by ``test_a_seek_reads_a_fresh_partition_from_its_start``); the
records fetched past there and dropped by faust were counted as skipped and committed
past, never processed.

Contract (the consumer of ``app.runtime.transport.consumer_class``, ``perform_seek``): the
partitions with a committed offset stay at it; each one without (None, or 0) is sought
on the consumer's thread to its earliest offset (``rewind``; to the beginning where the
broker did not say), and its last read offset is the one before that.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from faust.types import TP

from app.runtime.transport import consumer_class, rewind

DONE, FRESH, ZERO = TP("orders", 0), TP("orders", 1), TP("orders", 2)


class Thread:
    """The consumer thread: runs what it is asked to on the aiokafka consumer."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, tuple[Any, ...]]] = []
        self.client = object()

    def _ensure_consumer(self) -> object:
        return self.client

    async def call_thread(self, fun: Any, *args: Any) -> None:
        self.calls.append((fun, args))


class Seeking:
    """What ``perform_seek`` reads and writes of faust's consumer."""

    def __init__(self, committed: Mapping[TP, int | None], earliest: Mapping[TP, int]) -> None:
        self._committed = dict(committed)
        self._known_earliest = dict(earliest)
        self._thread = Thread()
        self._read_offset: defaultdict[TP, int | None] = defaultdict(lambda: None)
        self._committed_offset: defaultdict[TP, int | None] = defaultdict(lambda: None)
        self.seek_epoch = 0

    async def seek_to_committed(self) -> Mapping[TP, int | None]:
        return self._committed

    async def _earliest(self, partitions: list[TP]) -> Mapping[TP, int]:
        return {tp: self._known_earliest[tp] for tp in partitions if tp in self._known_earliest}


async def seek(consumer: Seeking) -> None:
    await consumer_class(100).perform_seek(consumer)  # type: ignore[arg-type]


async def test_partitions_without_a_commit_are_sought_to_their_earliest_offsets() -> None:
    consumer = Seeking({DONE: 40, FRESH: None, ZERO: 0}, {FRESH: 12, ZERO: 3})

    await seek(consumer)

    assert consumer._thread.calls == [(rewind, (consumer._thread.client, {FRESH: 12, ZERO: 3}))]
    assert consumer._read_offset == {DONE: 39, FRESH: 11, ZERO: 2}
    assert consumer._committed_offset == {DONE: 40, FRESH: 12, ZERO: 3}
    assert consumer.seek_epoch == 1


async def test_a_partition_whose_earliest_offset_is_not_known_is_read_from_its_beginning() -> None:
    consumer = Seeking({FRESH: None}, {})

    await seek(consumer)

    assert consumer._thread.calls == [(rewind, (consumer._thread.client, {FRESH: None}))]
    assert consumer._read_offset[FRESH] is None  # unknown until its first record


async def test_nothing_is_rewound_when_every_partition_has_a_commit() -> None:
    consumer = Seeking({DONE: 5, FRESH: 7}, {})

    await seek(consumer)

    assert consumer._thread.calls == []
    assert consumer._read_offset == {DONE: 4, FRESH: 6}
