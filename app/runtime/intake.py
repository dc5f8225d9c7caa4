"""An agent's events taken off its channel as many at a time as are waiting.

faust's stream iterator hands out one event per turn of the event loop (it
yields to the loop before each one), and a ``noack`` stream then wants one
``ack`` coroutine per event. The runtime works in batches, so ``Intake`` takes
every event already delivered to the agent's channel at once and does, per
event, what faust's iterator does:

- an event delivered while flow control is suspended (a rebalance is under
  way) or fetched in an earlier generation of the group's assignment is
  dropped, neither processed nor acked (its partition's next owner reads it);
- the message is tracked as pending acknowledgement (faust waits for tracked
  messages before it commits at a rebalance or shutdown), and the sensors hear
  of it going in (faust's monitor, statsd, ...);
- ``ack`` acknowledges through faust's own ``Event.ack`` (reference count,
  committable offsets) and tells the sensors it went out.
"""

from __future__ import annotations

from typing import Any


class Intake:
    """The events of one agent's stream, taken and acked in batches."""

    def __init__(self, stream: Any) -> None:
        app = stream.app
        self._stream = stream
        self._app = app
        self._queue = stream.channel.queue
        self._acking_topics = app.topics.acking_topics
        self._consumer = app.consumer
        self._sensors = app.sensors
        self._states: dict[int, Any] = {}

    async def start(self) -> None:
        """Start the stream as iterating it would (its ``on_start`` hooks)."""
        await self._stream.maybe_start()

    async def take(self, most: int) -> list[Any]:
        """Wait until an event is delivered; return it with those waiting behind it (``most``
        at most). Raises what faust threw into the channel."""
        queue = self._queue
        while True:
            if queue.empty():
                delivered = [await queue.get()]
            else:
                delivered = []
            while len(delivered) < most and not queue.empty():
                delivered.append(queue.get_nowait())
            events = [event for event in delivered if self._admit(event)]
            if events:
                return events

    def holds(self, events: list[Any]) -> bool:
        """True while ``events`` are still this worker's to process: no rebalance under way
        and the assignment they were delivered in still current."""
        app = self._app
        generation = app.consumer_generation_id
        return app.flow_control.is_active() and all(
            event.message.generation_id == generation for event in events
        )

    def _admit(self, event: Any) -> bool:
        app = self._app
        message = event.message
        if (
            not app.flow_control.is_active()
            or message.generation_id != app.consumer_generation_id
        ):
            return False
        tp, offset = message.tp, message.offset
        if message.topic in self._acking_topics and not message.tracked:
            message.tracked = True
            self._consumer.track_message(message)
        self._states[id(event)] = self._sensors.on_stream_event_in(tp, offset, self._stream, event)
        return True

    def ack(self, events: list[Any]) -> None:
        """Acknowledge ``events``: their offsets may be committed."""
        sensors = self._sensors
        stream = self._stream
        states = self._states
        for event in events:
            last = event.ack()
            message = event.message
            tp, offset = message.tp, message.offset
            sensors.on_stream_event_out(tp, offset, stream, event, states.pop(id(event), None))
            if last:
                sensors.on_message_out(tp, offset, message)
