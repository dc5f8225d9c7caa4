"""``Inbox`` and ``Intake`` against a real faust app (no broker): what an agent takes and acks.

- every message waiting in the inbox comes in one ``take``, in delivery order,
  ``most`` at most; ``take`` waits while nothing is waiting;
- a message fetched in an earlier generation of the group's assignment, or taken
  while flow control is suspended (a rebalance), is dropped: neither taken nor
  tracked nor acked;
- a message taken is tracked in faust's consumer (faust waits for it before a
  rebalance's commit) and the sensors hear of it coming in; ``ack`` makes its offset
  committable and the sensors hear of it going out;
- a delivery waits while the flow is suspended, never for room: a partition whose
  message finds ``high`` messages waiting is no longer fetched until the inbox is down
  to half of that.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import faust
import pytest
from aiokafka import TopicPartition
from faust.sensors import Sensor
from faust.types.tuples import TP, ConsumerMessage

from app.runtime.inbox import Inbox
from app.runtime.intake import Intake

TOPIC = "orders"


class Recorder(Sensor):
    def __init__(self) -> None:
        super().__init__()
        self.went_in: list[int] = []
        self.went_out: list[int] = []

    def on_message_in(self, tp: TP, offset: int, message: Any) -> None:
        self.went_in.append(offset)

    def on_message_out(self, tp: TP, offset: int, message: Any) -> None:
        self.went_out.append(offset)


@pytest.fixture
async def faust_app() -> AsyncIterator[tuple[faust.App, Intake, Inbox, Recorder]]:
    app = faust.App("intake-test", broker="kafka://127.0.0.1:1", store="memory://")
    topic = app.topic(TOPIC, key_serializer="raw", value_serializer="raw")
    app.topics.add(topic)
    # What the conductor does when the worker starts: note which topics are acked.
    await app.topics._update_indices()
    recorder = Recorder()
    app.sensors.add(recorder)
    app.flow_control.resume()  # as after a partition assignment
    inbox = Inbox(high=4)
    yield app, Intake(app.stream(topic), inbox), inbox, recorder


def message(
    app: faust.App, offset: int, generation: int | None = None, tp: Any = None
) -> ConsumerMessage:
    """A fetched record as the consumer makes it."""
    generation = app.consumer_generation_id if generation is None else generation
    return ConsumerMessage(
        TOPIC, 0, offset, 0.0, 0, {}, b"k", b"v", None, tp=tp, generation_id=generation
    )


def offsets(messages: list[Any]) -> list[int]:
    return [m.offset for m in messages]


async def test_takes_every_waiting_message_at_once_most_at_most(faust_app: Any) -> None:
    app, intake, inbox, _ = faust_app
    for offset in range(4):
        inbox.put(message(app, offset))

    assert offsets(await intake.take(3)) == [0, 1, 2]
    assert offsets(await intake.take(3)) == [3]

    waiting = asyncio.ensure_future(intake.take(3))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # nothing delivered: it waits
    inbox.put(message(app, 4))
    assert offsets(await asyncio.wait_for(waiting, 1)) == [4]


async def test_messages_of_an_earlier_generation_or_a_suspended_flow_are_dropped(
    faust_app: Any,
) -> None:
    app, intake, inbox, recorder = faust_app
    current = app.consumer_generation_id
    stale = message(app, 0, generation=current - 1)
    inbox.put(stale)
    inbox.put(message(app, 1))
    assert offsets(await intake.take(10)) == [1]

    app.flow_control.suspend()  # a rebalance began after this one was delivered
    suspended = message(app, 2)
    inbox.put(suspended)
    taking = asyncio.ensure_future(intake.take(10))
    await asyncio.sleep(0.05)
    assert not taking.done()  # the suspended delivery was dropped, nothing else waits
    taking.cancel()

    assert not stale.acked and not suspended.acked
    assert not stale.tracked and not suspended.tracked
    assert recorder.went_in == [1]


async def test_taking_tracks_and_ack_makes_offsets_committable(faust_app: Any) -> None:
    app, intake, inbox, recorder = faust_app
    for offset in range(3):
        inbox.put(message(app, offset))
    taken = await intake.take(10)
    tp = TP(TOPIC, 0)
    assert list(app.consumer._acked[tp]) == []
    # Tracked as pending, so that faust waits for them before a rebalance's commit.
    assert {m.offset for m in app.consumer._unacked_messages} == {0, 1, 2}
    assert recorder.went_in == [0, 1, 2] and recorder.went_out == []

    intake.ack(taken)

    assert list(app.consumer._acked[tp]) == [0, 1, 2]
    assert all(m.acked for m in taken)
    assert not app.consumer._unacked_messages
    assert recorder.went_out == [0, 1, 2]


async def test_a_delivery_waits_for_the_flow_never_for_room(faust_app: Any) -> None:
    app, intake, inbox, _ = faust_app
    for offset in range(6):  # more than ``high`` (4): nothing waits for room
        inbox.put(message(app, offset))

    app.flow_control.suspend()
    delivery = asyncio.ensure_future(inbox.put_when_open(app.flow_control, message(app, 6)))
    await asyncio.sleep(0.05)
    assert not delivery.done()  # the flow is stopped
    app.flow_control.resume()
    await asyncio.wait_for(delivery, 1)
    assert offsets(await intake.take(10)) == [0, 1, 2, 3, 4, 5, 6]


async def test_a_partition_is_not_fetched_while_the_inbox_is_near_full(faust_app: Any) -> None:
    app, _, _, _ = faust_app
    inbox = Inbox(high=8)  # stops a partition at 8 waiting, fetches it again at 4
    full: list[TP] = []
    dropped: list[TP] = []
    inbox.watch(full.append, dropped.append)
    tp = TP(TOPIC, 0)
    for offset in range(8):
        inbox.put(message(app, offset))
    assert full == []
    inbox.put(message(app, 8))  # finds 8 waiting
    inbox.put(message(app, 9))
    assert full == [tp]  # once, however many more come

    assert len(await inbox.take(5)) == 5
    assert dropped == []  # 5 still waiting
    assert len(await inbox.take(1)) == 1
    assert dropped == [tp]


async def test_a_near_full_inbox_stops_fetching_the_partition_in_faust_s_consumer(
    faust_app: Any,
) -> None:
    """The fetch loop's messages carry aiokafka's ``TopicPartition``; faust's consumer keeps
    ``TP``s and asserts it when it lists the partitions to fetch."""
    app, intake, inbox, _ = faust_app  # high: 4
    consumer = app.consumer
    consumer._active_partitions = {TP(TOPIC, 0)}  # as after an assignment
    for offset in range(5):
        inbox.put(message(app, offset, tp=TopicPartition(TOPIC, 0)))
    assert consumer._get_active_partitions() == set()  # no assertion: TPs only
    assert consumer._buffered_partitions == {TP(TOPIC, 0)}

    await intake.take(5)
    assert consumer._get_active_partitions() == {TP(TOPIC, 0)}
    assert not consumer._buffered_partitions
