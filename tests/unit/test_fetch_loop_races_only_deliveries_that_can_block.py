"""The fetch loop hands a record straight to the conductor unless its delivery can wait.

Contract (``app.runtime.drain``): a record whose delivery cannot block (the flow runs,
the conductor's index is not being rebuilt, the producer's buffer is under its limit,
no channel of its topic is full) is delivered by awaiting the callback itself; any of
those conditions makes it race the flow's suspension as faust does (``wait_first``).
Either way each record is delivered once, in order, and its read offset recorded; a
record below the read offset is dropped. A seek (a rebalance's, to the committed
offsets) while a fetch's records are delivered ends that fetch: the record being
delivered does not move the read offset the seek set, and the rest are not delivered
(the next fetch reads from the new positions). Otherwise the records the seek went back
to would be dropped as read already, or skipped as a gap, and their offsets committed
past while nobody processed them.

A topic with an ``Inbox`` (the framework's agents) skips the conductor: its records are
appended to the inbox, in order, unless the flow is stopped; then the append races the
flow's suspension the same way. A full inbox never holds up the fetch loop: it stops
fetching the partition instead. Each append stamps its partition's time in faust's
monitor (``stream_inbound_time``), as a faust stream's record does: faust's check of
stuck streams logged every partition as one that "has not started processing".
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.runtime.drain import can_block, drain_messages, flow_stopped
from app.runtime.inbox import Inbox

TOPIC = "orders"


@dataclass
class Message:
    offset: int
    topic: str = TOPIC
    tp: str = "tp"


@dataclass
class Queue:
    is_full: bool = False

    def full(self) -> bool:
        return self.is_full


@dataclass(eq=False)
class Channel:
    queue: Queue = field(default_factory=Queue)


class Flags:
    def set_flag(self, flag: str) -> None: ...

    def unset_flag(self, flag: str) -> None: ...


class FakeConsumer:
    """What ``drain_messages`` reads of faust's consumer, with one fetch of ``offsets``."""

    consumer_stopped_errors: tuple[type[BaseException], ...] = ()

    def __init__(self, offsets: list[int], read_from: int | None = None) -> None:
        self.channel = Channel()
        self.delivered: list[int] = []
        self.raced: list[int] = []
        self.suspend_flow = asyncio.Event()
        self._stopped = asyncio.Event()
        self._read_offset: defaultdict[str, int | None] = defaultdict(lambda: read_from)
        self._commit_every = None
        self._n_acked = 0
        self.should_stop = False
        self.diag = Flags()
        self.flow_active = True
        self.buffer = type("Buffer", (), {"size": 0, "max_messages": 100})()
        self.lock = asyncio.Lock()
        self.app = self
        self.transport = self
        self.topics = self
        self.flow_control = self
        self.producer = self
        self._tp_to_callback_lock = self.lock
        self._topic_name_index = {TOPIC: {self.channel}}
        self.fetches = [[Message(offset) for offset in offsets]]
        self.seek_epoch = 0
        self.seek_during: int | None = None  # the offset whose delivery a rebalance interrupts
        self.seek_to: int | None = None  # the committed offset it seeks to (None: none yet)
        self.after_seek: list[int] = []  # what the fetch after the seek returns

    def is_active(self) -> bool:
        return self.flow_active

    async def acquire(self) -> None:
        """faust's ``FlowControlEvent.acquire``: the flow runs in these tests' races."""

    def acks_enabled_for(self, topic: str) -> bool:
        return True

    async def _add_gap(self, tp: str, start: int, end: int) -> None:
        raise AssertionError("no gap expected")

    async def callback(self, message: Message) -> None:
        self.delivered.append(message.offset)
        if message.offset == self.seek_during:
            self.seek_during = None
            # faust's perform_seek while the delivery waited for the flow to resume.
            self._read_offset["tp"] = None if self.seek_to is None else self.seek_to - 1
            self.seek_epoch += 1
            self.fetches = [[Message(offset) for offset in self.after_seek]]
        if message.offset == 1:
            self.channel.queue.is_full = self.fill_after_first

    fill_after_first = False

    async def wait_first(self, delivery: Any, suspended: Any) -> None:
        suspended.close()
        self.raced.append(len(self.delivered))
        await delivery

    def getmany(self, timeout: float) -> AsyncIterator[tuple[str, Message]]:
        async def fetched() -> AsyncIterator[tuple[str, Message]]:
            for message in self.fetches.pop(0) if self.fetches else []:
                yield "tp", message
            if not self.fetches:
                self._stopped.set()

        return fetched()


async def drain(consumer: FakeConsumer) -> None:
    await drain_messages(consumer, type("Fetcher", (), {"_stopped": asyncio.Event()})())


async def test_records_go_straight_to_the_conductor_while_nothing_can_block() -> None:
    consumer = FakeConsumer([1, 2, 3])
    await drain(consumer)
    assert consumer.delivered == [1, 2, 3]
    assert consumer.raced == []
    assert consumer._read_offset["tp"] == 3


async def test_a_full_channel_makes_the_next_delivery_race_the_suspension() -> None:
    consumer = FakeConsumer([1, 2, 3])
    consumer.fill_after_first = True
    await drain(consumer)
    assert consumer.delivered == [1, 2, 3]
    assert consumer.raced == [1, 2]  # records 2 and 3, with one delivered before each


async def test_a_record_below_the_read_offset_is_dropped() -> None:
    consumer = FakeConsumer([4, 5, 6], read_from=5)
    await drain(consumer)
    assert consumer.delivered == [5, 6]


@pytest.mark.parametrize(
    "condition",
    ["suspended", "flow stopped", "conductor busy", "producer buffer full", "channel full"],
)
async def test_each_condition_can_block_a_delivery(condition: str) -> None:
    consumer = FakeConsumer([1])
    assert not can_block(consumer, Message(1))
    if condition == "suspended":
        consumer.suspend_flow.set()
    elif condition == "flow stopped":
        consumer.flow_active = False
    elif condition == "conductor busy":
        await consumer.lock.acquire()
    elif condition == "producer buffer full":
        consumer.buffer.size = 101
    else:
        consumer.channel.queue.is_full = True
    assert can_block(consumer, Message(1))


async def test_a_suspended_flow_makes_every_delivery_race_as_in_faust() -> None:
    consumer = FakeConsumer([1, 2])
    consumer.suspend_flow.set()
    await drain(consumer)
    assert consumer.raced == [0, 1]


@pytest.mark.parametrize("committed", [None, 2])
async def test_a_seek_during_a_delivery_ends_the_fetch_and_keeps_its_read_offset(
    committed: int | None,
) -> None:
    # Records 5 to 7 were fetched before a rebalance; 0 (or 2) to 7 are read again after it.
    consumer = FakeConsumer([5, 6, 7])
    consumer.seek_during = 5
    consumer.seek_to = committed
    first = committed or 0
    consumer.after_seek = list(range(first, 8))
    await drain(consumer)
    assert consumer.delivered == [5, *range(first, 8)]  # 6 and 7 of the old fetch dropped
    assert consumer._read_offset["tp"] == 7


def with_inbox(offsets: list[int], high: int = 10) -> tuple[FakeConsumer, Inbox]:
    consumer = FakeConsumer(offsets)
    inbox = Inbox(high)
    consumer.inboxes = {TOPIC: inbox}  # type: ignore[attr-defined]
    return consumer, inbox


async def test_records_of_a_topic_with_an_inbox_skip_the_conductor() -> None:
    consumer, inbox = with_inbox([1, 2, 3])
    consumer.monitor = type("Monitor", (), {"stream_inbound_time": {}})()  # type: ignore[attr-defined]
    before = time.monotonic()
    await drain(consumer)
    assert before <= consumer.monitor.stream_inbound_time["tp"] <= time.monotonic()  # type: ignore[attr-defined]
    assert consumer.delivered == []  # not one through the conductor
    assert [m.offset for m in await inbox.take(10)] == [1, 2, 3]
    assert consumer.raced == []
    assert consumer._read_offset["tp"] == 3


async def test_a_full_inbox_stops_the_partition_not_the_fetch_loop() -> None:
    consumer, inbox = with_inbox(list(range(1, 21)), high=2)
    stopped: list[str] = []
    inbox.watch(stopped.append, lambda tp: None)
    await asyncio.wait_for(drain(consumer), 1)  # nobody takes: the loop still ends its fetch
    assert len(inbox) == 20 and consumer.raced == []
    assert stopped == ["tp"]
    assert consumer._read_offset["tp"] == 20


@pytest.mark.parametrize("condition", ["suspended", "flow stopped"])
async def test_a_stopped_flow_makes_an_append_race_the_suspension(condition: str) -> None:
    consumer, inbox = with_inbox([1, 2])
    assert not flow_stopped(consumer)
    if condition == "suspended":
        consumer.suspend_flow.set()
    else:
        consumer.flow_active = False
    assert flow_stopped(consumer)
    await drain(consumer)
    assert consumer.raced == [0, 0]  # both appends raced (none went through the conductor)
    assert [m.offset for m in await inbox.take(10)] == [1, 2]
