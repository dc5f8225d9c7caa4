"""A topic's fetched records, handed from the fetch loop straight to its agent's batches.

faust delivers a fetched record through its conductor: a coroutine per record that
waits for flow control and the producer's buffer, decodes the record into an
``Event``, puts it on the agent's channel (with a high- and low-water check per
record), and the stream's sensors are told of each event going in and out (the
monitor keeps timings per event). The worker takes its records in batches of
thousands and acks them batch by batch, so none of that per-record work serves it:
for a topic with an ``Inbox`` the fetch loop (``drain``) appends the record's
message to the inbox instead, and ``Intake`` takes every message waiting there at
once. faust's consumer bookkeeping stays as it is: the messages are faust's own, a
message taken is tracked as pending acknowledgement (faust waits for those before a
rebalance's commit), an ack goes through ``Message.ack`` (committable offsets), and
faust's monitor counts messages in and out as before.

Delivery waits while the flow is stopped (a rebalance) or the inbox holds
``capacity`` messages; ``drain`` then races it against the flow's suspension, as it
does faust's own delivery, so a rebalance abandons it. A message that waited in the
inbox across a rebalance belongs to an earlier generation and is dropped when taken
(``Intake``): the rebalance's seek reads it again.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any


class Inbox:
    """One topic's fetched messages not yet taken by its agent, ``capacity`` at most."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._messages: deque[Any] = deque()
        self._arrived = asyncio.Event()  # a message is waiting
        self._room = asyncio.Event()  # below capacity
        self._room.set()

    def __len__(self) -> int:
        return len(self._messages)

    def full(self) -> bool:
        return len(self._messages) >= self.capacity

    def put(self, message: Any) -> None:
        """Append ``message`` (the caller checked there is room)."""
        self._messages.append(message)
        self._arrived.set()
        if len(self._messages) >= self.capacity:
            self._room.clear()

    async def put_when_open(self, flow_control: Any, message: Any) -> None:
        """Append ``message`` once the flow runs (faust's ``flow_control``) and there is room."""
        await flow_control.acquire()
        while self.full():
            await self._room.wait()
        self.put(message)

    async def take(self, most: int) -> list[Any]:
        """Wait until a message is waiting; return the waiting ones, ``most`` at most."""
        messages = self._messages
        while not messages:
            self._arrived.clear()
            await self._arrived.wait()
        count = min(most, len(messages))
        taken = [messages.popleft() for _ in range(count)]
        if not messages:
            self._arrived.clear()
        if len(messages) < self.capacity:
            self._room.set()
        return taken
