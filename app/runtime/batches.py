"""Batches of an agent's events, the next one read while the current one is processed.

faust's ``take_events`` stops reading while its caller holds a batch, so the
broker fetch and faust's own per-event work wait for the database, and the
database waits for them. Here a reader keeps taking events (up to one batch
ahead, so memory stays bounded) while the current batch is processed: the two
overlap, and under load the next batch is full by the time it is wanted. While a
batch is processed the reader takes what arrived every ``GATHER_SECONDS``, all
in one go (``intake``); while the processor waits for events, each as it comes.
An event's wait is counted from its take, at most ``GATHER_SECONDS`` after faust
delivered it.

``prepare``, when given, is awaited on each chunk the reader takes, before the chunk
joins the pending events: work on them ahead of their batch (``ahead``: decoding),
done while the batch in hand waits on the database. A chunk joins them even when
the batches stop (or ``prepare`` fails) on the way, so that it is withheld with them.

A batch is what is pending when the processor is free: ``size`` events, or
fewer once the oldest pending event has waited ``within`` seconds. With a
backlog on the broker (``behind``: the newest pending event has at least
``size`` records after it) a batch that is not full instead waits up to
``within`` after the processor became free, so that batches grow towards
``size`` rather than shrinking to what one processing time brings; without a
backlog, an event waits at most ``within`` plus the batch in hand.

Acks are ours (``Source.ack``): a batch's events are acked only after
``process`` returned for it, batch after batch in arrival order, so an offset
never moves past an event whose effects are not committed. A batch that did
not finish, and the events read ahead behind it, are withheld
(``acks.withhold``): never committed, read again by the partitions' next owner.
A batch that ``process`` gives up (``BatchGivenUp``: a rebalance took it away, or
the worker is stopping) is withheld, and so is every later batch delivered in the same
assignment (consumer generation): an ack behind a withheld batch would let a commit
move past it. faust forgets a partition's committed offset as a rebalance begins and
commits what was acked while it waits for the batches in hand, so a later batch acked
then would commit the offsets of both, and the withheld events would never be read
again. Batches of the next assignment (read again from the committed offset) go on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from app.errors import BatchGivenUp
from app.runtime.acks import withhold

# While a batch is processed, the reader takes what arrived this often, instead of waking
# for every event that faust delivers (faust hands them over one per turn of the loop).
GATHER_SECONDS = 0.005
Process = Callable[[list[Any]], Awaitable[None]]
Prepare = Callable[[list[Any]], Awaitable[None]]
Behind = Callable[[Any], int]


class _Pending:
    """Events read and not yet taken, with their arrival times; signals for both sides."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.arrived: list[float] = []
        self.signal = asyncio.Event()  # an event arrived into an empty list, or a batch filled
        self.room = asyncio.Event()  # the reader may go on
        self.busy = False  # a batch is being processed

    def take(self, size: int) -> list[Any]:
        batch = self.events[:size]
        del self.events[:size], self.arrived[:size]
        self.room.set()
        return batch


class Source(Protocol):
    """Where the events come from (``intake.Intake`` for a faust agent)."""

    async def take(self, most: int) -> list[Any]:
        """Wait for an event; return it with those waiting behind it, ``most`` at most."""

    def ack(self, events: list[Any]) -> None:
        """The effects of ``events`` are committed: their offsets may move."""


async def run_batches(
    source: Source,
    size: int,
    within: float,
    process: Process,
    behind: Behind | None = None,
    prepare: Prepare | None = None,
) -> None:
    """``process`` each batch, then ack it, until cancelled; raises what ``process`` or
    the source raised."""
    loop = asyncio.get_running_loop()
    pending = _Pending()

    async def read() -> None:
        while True:
            while len(pending.events) >= size:
                pending.room.clear()
                await pending.room.wait()
            if pending.busy:
                # Nobody waits for these yet: let them gather, and take them in one go.
                await asyncio.sleep(GATHER_SECONDS)
            try:
                events = await source.take(size - len(pending.events))
            except StopAsyncIteration:
                return  # the stream ended: the worker is stopping
            try:
                if prepare is not None:
                    await prepare(events)
            finally:
                # Pending even when stopped or failed while preparing: processed or withheld.
                was_empty = not pending.events
                pending.events += events
                pending.arrived += [loop.time()] * len(events)
            if was_empty or len(pending.events) >= size:
                pending.signal.set()

    reader = asyncio.ensure_future(read())
    reader.add_done_callback(lambda _: pending.signal.set())
    batch: list[Any] = []
    # The assignments (generations) in which a batch was given up: nothing of them is acked.
    given_up: set[Any] = set()
    try:
        while True:
            batch = await _next_batch(pending, reader, size, within, behind, loop)
            if not batch:
                return
            generations = {getattr(event, "generation_id", None) for event in batch}
            if given_up & generations:
                withhold(batch)
                batch = []
                continue
            pending.busy = True
            try:
                await process(batch)
            except BatchGivenUp:
                given_up |= generations - {None}
                withhold(batch)
                batch = []
                continue
            finally:
                pending.busy = False
            source.ack(batch)
            batch = []
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        withhold(batch)
        withhold(pending.events)


async def _next_batch(
    pending: _Pending,
    reader: asyncio.Future[Any],
    size: int,
    within: float,
    behind: Behind | None,
    loop: asyncio.AbstractEventLoop,
) -> list[Any]:
    """The next batch; ``[]`` once the reader stopped with nothing pending (raises if it failed)."""
    free_at = loop.time()
    while not pending.events:
        if reader.done():
            reader.result()  # the reader failed: raise its error here
            return []
        pending.signal.clear()
        await pending.signal.wait()
    backlog = behind is not None and behind(pending.events[-1]) >= size
    deadline = (max(pending.arrived[0], free_at) if backlog else pending.arrived[0]) + within
    while len(pending.events) < size and not reader.done():
        left = deadline - loop.time()
        if left <= 0:
            break
        pending.signal.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(left):
                await pending.signal.wait()
    return pending.take(size)
