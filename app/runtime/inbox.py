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
faust's sensors hear of messages coming in and going out as before.

Delivery waits only while the flow is stopped (a rebalance); ``drain`` then races it
against the flow's suspension, as it does faust's own delivery, so a rebalance
abandons it. A message that waited in the inbox across a rebalance belongs to an
earlier generation and is dropped when taken (``Intake``): the rebalance's seek reads
it again.

A delivery never waits for room: a full inbox would hold up the fetch loop, and with
it every other topic of the worker (a retry tier's batch can wait minutes for its due
time). Its size is kept in bounds as faust keeps its channels': a partition whose
message finds ``high`` messages waiting is no longer fetched (``on_full``: faust's
``Consumer.on_buffer_full``), and every such partition is fetched again once the
inbox is down to ``LOW`` of that (``on_drop``). What the consumer had fetched of it
before still comes in: at most one fetch response per partition beyond ``high``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

LOW = 0.5  # of ``high``: down to this many waiting, the stopped partitions are fetched again
Partition = Any  # faust's TP
OnPartition = Callable[[Partition], None]


class Inbox:
    """One topic's fetched messages not yet taken by its agent; about ``high`` at most."""

    def __init__(self, high: int) -> None:
        self.high = max(1, high)
        self._low = int(self.high * LOW)
        self._messages: deque[Any] = deque()
        self._arrived = asyncio.Event()  # a message is waiting
        self._on_full: OnPartition | None = None
        self._on_drop: OnPartition | None = None
        self._stopped: set[Partition] = set()  # partitions not fetched while this is full

    def watch(self, on_full: OnPartition, on_drop: OnPartition) -> None:
        """Call ``on_full(tp)`` when a message of ``tp`` finds ``high`` messages waiting, and
        ``on_drop(tp)`` for each such partition once the inbox is down to ``LOW``."""
        self._on_full, self._on_drop = on_full, on_drop

    def __len__(self) -> int:
        return len(self._messages)

    def put(self, message: Any) -> None:
        """Append ``message``."""
        messages = self._messages
        if len(messages) >= self.high and self._on_full is not None:
            tp = message.tp
            if tp not in self._stopped:
                self._stopped.add(tp)
                self._on_full(tp)
        messages.append(message)
        self._arrived.set()

    async def put_when_open(self, flow_control: Any, message: Any) -> None:
        """Append ``message`` once the flow runs (faust's ``flow_control``)."""
        await flow_control.acquire()
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
        if self._stopped and len(messages) <= self._low and self._on_drop is not None:
            stopped, self._stopped = self._stopped, set()
            for tp in stopped:
                self._on_drop(tp)
        return taken
