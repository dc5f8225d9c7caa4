"""``Intake`` against a real faust app (no broker): what it takes off an agent's channel and acks.

- every event waiting on the channel comes in one ``take``, in delivery order,
  ``most`` at most; ``take`` waits while nothing is waiting;
- an event fetched in an earlier generation of the group's assignment, or delivered
  while flow control is suspended (a rebalance), is dropped: neither taken nor acked;
- ``ack`` makes the offsets committable in faust's consumer, and faust's sensors
  hear of every event going in and out, with the state they returned going in.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import faust
import pytest
from faust.sensors import Sensor
from faust.types.tuples import TP, ConsumerMessage

from app.runtime.intake import Intake

TOPIC = "orders"


class Recorder(Sensor):
    def __init__(self) -> None:
        super().__init__()
        self.went_in: list[int] = []
        self.went_out: list[tuple[int, Any]] = []

    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> Any:
        self.went_in.append(offset)
        return f"state-{offset}"

    def on_stream_event_out(
        self, tp: TP, offset: int, stream: Any, event: Any, state: Any = None
    ) -> None:
        self.went_out.append((offset, state))


@pytest.fixture
async def faust_app() -> AsyncIterator[tuple[faust.App, Any, Recorder]]:
    app = faust.App("intake-test", broker="kafka://127.0.0.1:1", store="memory://")
    topic = app.topic(TOPIC, key_serializer="raw", value_serializer="raw")
    app.topics.add(topic)
    # What the conductor does when the worker starts: note which topics are acked.
    await app.topics._update_indices()
    recorder = Recorder()
    app.sensors.add(recorder)
    app.flow_control.resume()  # as after a partition assignment
    yield app, app.stream(topic), recorder


def deliver(app: faust.App, stream: Any, offset: int, generation: int | None = None) -> Any:
    """Put an event on the stream's channel, as faust's conductor does for a fetched record."""
    generation = app.consumer_generation_id if generation is None else generation
    message = ConsumerMessage(
        TOPIC, 0, offset, 0.0, 0, {}, b"k", b"v", None, generation_id=generation
    )
    message.incref()  # one channel reads the topic
    event = app.create_event(b"k", b"v", {}, message)
    stream.channel.queue.put_nowait(event)  # the queue's own put waits for flow control
    return event


def offsets(events: list[Any]) -> list[int]:
    return [event.message.offset for event in events]


async def test_takes_every_waiting_event_at_once_most_at_most(faust_app: Any) -> None:
    app, stream, _ = faust_app
    intake = Intake(stream)
    for offset in range(7):
        deliver(app, stream, offset)

    assert offsets(await intake.take(5)) == [0, 1, 2, 3, 4]
    assert offsets(await intake.take(5)) == [5, 6]

    waiting = asyncio.ensure_future(intake.take(5))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # nothing delivered: it waits
    deliver(app, stream, 7)
    assert offsets(await asyncio.wait_for(waiting, 1)) == [7]


async def test_events_of_an_earlier_generation_or_a_suspended_flow_are_dropped(
    faust_app: Any,
) -> None:
    app, stream, recorder = faust_app
    intake = Intake(stream)
    current = app.consumer_generation_id
    stale = deliver(app, stream, 0, generation=current - 1)
    deliver(app, stream, 1)
    assert offsets(await intake.take(10)) == [1]

    app.flow_control.suspend()  # a rebalance began after this one was delivered
    suspended = deliver(app, stream, 2)
    taking = asyncio.ensure_future(intake.take(10))
    await asyncio.sleep(0.05)
    assert not taking.done()  # the suspended delivery was dropped, nothing else waits
    taking.cancel()

    assert not stale.message.acked and not suspended.message.acked
    assert recorder.went_in == [1]


async def test_ack_makes_offsets_committable_and_tells_the_sensors(faust_app: Any) -> None:
    app, stream, recorder = faust_app
    intake = Intake(stream)
    for offset in range(3):
        deliver(app, stream, offset)
    events = await intake.take(10)
    tp = TP(TOPIC, 0)
    assert list(app.consumer._acked[tp]) == []
    # Tracked as pending, so that faust waits for them before a rebalance's commit.
    assert {m.offset for m in app.consumer._unacked_messages} == {0, 1, 2}

    intake.ack(events)

    assert list(app.consumer._acked[tp]) == [0, 1, 2]
    assert all(event.message.acked for event in events)
    assert not app.consumer._unacked_messages
    assert recorder.went_in == [0, 1, 2]
    assert recorder.went_out == [(0, "state-0"), (1, "state-1"), (2, "state-2")]
