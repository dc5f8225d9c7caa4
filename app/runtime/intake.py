"""An agent's fetched messages, taken and acked in batches.

The fetch loop appends the records of an agent's topic to its ``Inbox`` (``inbox``:
they skip faust's per-event delivery). ``Intake`` takes every message waiting there
at once and does, per message, what faust's stream iterator does for an event:

- a message delivered while flow control is suspended (a rebalance is under way)
  or fetched in an earlier generation of the group's assignment is dropped, neither
  processed nor acked (its partition's next owner reads it);
- the message is tracked as pending acknowledgement (faust waits for tracked
  messages before it commits at a rebalance or shutdown), and the sensors (faust's
  monitor, statsd, ...) hear of it coming in;
- ``ack`` acknowledges through faust's own ``Message.ack`` (committable offsets) and
  tells the sensors it went out.

The sensors are called one by one, as faust's stream calls them: faust's own
``SensorDelegate`` walks a ``WeakSet`` for every message, and that walk alone was 5%
of a worker's time.
"""

from __future__ import annotations

from typing import Any

from faust.transport.consumer import ensure_TP

from app.runtime.inbox import Inbox


class Intake:
    """The messages of one agent's topic, taken and acked in batches."""

    def __init__(self, stream: Any, inbox: Inbox) -> None:
        app = stream.app
        self._stream = stream
        self._inbox = inbox
        self._app = app
        self._acking_topics = app.topics.acking_topics
        self._consumer = app.consumer
        self._sensors = app.sensors
        # A partition is not fetched while the inbox is near full (faust's own back-pressure).
        # A message's ``tp`` may be aiokafka's ``TopicPartition``; faust's sets hold ``TP``s.
        consumer = app.consumer
        inbox.watch(
            lambda tp: consumer.on_buffer_full(ensure_TP(tp)),
            lambda tp: consumer.on_buffer_drop(ensure_TP(tp)),
        )

    async def start(self) -> None:
        """Start the stream as iterating it would (its ``on_start`` hooks)."""
        await self._stream.maybe_start()

    async def take(self, most: int) -> list[Any]:
        """Wait until a message is delivered; return it with those waiting behind it (``most``
        at most)."""
        while True:
            delivered = await self._inbox.take(most)
            app = self._app
            if not app.flow_control.is_active():
                continue
            generation = app.consumer_generation_id
            messages = [m for m in delivered if m.generation_id == generation]
            if messages:
                self._track(messages)
                return messages

    def holds(self, messages: list[Any]) -> bool:
        """True while ``messages`` are still this worker's to process: no rebalance under way
        and the assignment they were delivered in still current."""
        app = self._app
        generation = app.consumer_generation_id
        return app.flow_control.is_active() and all(
            message.generation_id == generation for message in messages
        )

    def _track(self, messages: list[Any]) -> None:
        """What ``Consumer.track_message`` does for each of ``messages`` of an acked topic."""
        unacked = self._consumer._unacked_messages
        sensors = list(self._sensors)
        acking = self._acking_topics
        for message in messages:
            if message.topic in acking and not message.tracked:
                message.tracked = True
                unacked.add(message)
                for sensor in sensors:
                    sensor.on_message_in(message.tp, message.offset, message)

    def ack(self, messages: list[Any]) -> None:
        """Acknowledge ``messages``: their offsets may be committed."""
        consumer = self._consumer
        sensors = list(self._sensors)
        for message in messages:
            if message.ack(consumer):
                for sensor in sensors:
                    sensor.on_message_out(message.tp, message.offset, message)
