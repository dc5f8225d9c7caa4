"""A partition whose buffer drained is handed over by the fetch that waits, not a second later.

faust stops taking a partition's fetched records while its stream buffer is under
pressure (``on_buffer_full``), and takes them again once the buffer drops
(``on_buffer_drop``). A fetch started meanwhile (aiokafka's ``fetched_records``,
on the consumer's thread) waits for new data with the partitions active when it
started; and aiokafka sends no new fetch to a broker while a partition's records
are still unread. So nothing came: the fetch waited out its whole timeout (faust's
1 s) before the next one took the records, once per buffer's worth (on Apache Kafka
99,999 records took 12.6 s, of which 7 s in such waits, the bare agent included).

Contract (``app.runtime.transport``): when a partition's buffer drops, the waiting
fetch is woken and drains again with the partitions active now.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiokafka.consumer.fetcher import Fetcher, FetchResult
from aiokafka.structs import TopicPartition

from app.runtime.transport import wake_waiters

TP = TopicPartition("orders", 0)
TIMEOUT = 5.0  # the fetch's own wait: far longer than the test allows


@dataclass
class PartitionState:
    paused: bool = False
    position: int = 0

    def consumed_to(self, offset: int) -> None:
        self.position = offset


@dataclass
class Assignment:
    state: PartitionState = field(default_factory=PartitionState)
    active: bool = True

    def state_value(self, _: Any) -> PartitionState:
        return self.state


class PartitionRecords:
    """What ``FetchResult`` reads of aiokafka's partition records: an iterator of records."""

    def __init__(self, offsets: list[int]) -> None:
        self._offsets = iter(offsets)
        self.next_fetch_offset = offsets[0]

    def __iter__(self) -> PartitionRecords:
        return self

    def __next__(self) -> int:
        offset = next(self._offsets)
        self.next_fetch_offset = offset + 1
        return offset


class Subscriptions:
    reassignment_in_progress = False

    def is_assigned(self, _: Any) -> bool:
        return True


def fetcher_holding(offsets: list[int], loop: asyncio.AbstractEventLoop) -> Fetcher:
    """aiokafka's ``Fetcher`` with ``offsets`` of ``TP`` fetched and not yet taken."""
    fetcher = Fetcher.__new__(Fetcher)
    fetcher._loop = loop
    fetcher._subscriptions = Subscriptions()
    fetcher._fetch_waiters = set()
    fetcher._closed = False
    fetcher._wait_consume_future = None
    fetcher._records = {
        TP: FetchResult(
            TP, assignment=Assignment(), partition_records=PartitionRecords(offsets), backoff=0
        )
    }
    return fetcher


class ConsumerThread:
    """An event loop in a thread of its own, as faust runs aiokafka's consumer."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def test_a_fetch_waiting_with_the_partition_inactive_takes_its_records_once_woken() -> None:
    thread = ConsumerThread()
    try:
        fetcher = fetcher_holding([0, 1, 2], thread.loop)
        active: set[TopicPartition] = {TopicPartition("orders", 1)}  # TP's buffer is full
        started = time.monotonic()
        fetch = thread.run(fetcher.fetched_records(active, timeout=TIMEOUT))
        while not fetcher._fetch_waiters:  # the fetch waits for data
            time.sleep(0.01)
        active.add(TP)  # faust's on_buffer_drop: the same set, on the main thread
        thread.loop.call_soon_threadsafe(wake_waiters, fetcher)
        drained = fetch.result(timeout=TIMEOUT + 1)
        waited = time.monotonic() - started
    finally:
        thread.stop()
    assert drained == {TP: [0, 1, 2]}
    assert waited < 1.0, f"the fetch took its records {waited:.2f} s after they were there"


def test_without_the_wake_the_fetch_waits_out_its_timeout() -> None:
    """The defect itself, so that the test above is known to be about it."""
    thread = ConsumerThread()
    try:
        fetcher = fetcher_holding([0, 1, 2], thread.loop)
        active: set[TopicPartition] = {TopicPartition("orders", 1)}
        fetch = thread.run(fetcher.fetched_records(active, timeout=0.5))
        while not fetcher._fetch_waiters:
            time.sleep(0.01)
        active.add(TP)
        assert fetch.result(timeout=2) == {}  # nothing, after the whole wait
    finally:
        thread.stop()


def test_waking_a_fetcher_nobody_waits_on_does_nothing() -> None:
    loop = asyncio.new_event_loop()
    try:
        fetcher = fetcher_holding([0], loop)
        wake_waiters(fetcher)
        assert fetcher._fetch_waiters == set()
    finally:
        loop.close()
