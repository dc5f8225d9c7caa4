"""The runtime's batches: read ahead while processing, acked only after ``process`` returned.

Contract of ``app.runtime.batches.run_batches``:
- every event is processed once, in arrival order, in batches of at most ``size``;
- an event is acked only after the ``process`` call holding it returned;
- while a batch is processed the next one is read (the overlap that makes it fast),
  and never more than one batch ahead;
- a batch that is not full goes once its oldest event waited ``within`` seconds;
- when ``process`` raises, nothing of that batch or of what was read ahead is acked;
  those events are withheld (faust will neither commit them nor wait for them)
  and the error reaches the caller;
- a batch that ``process`` gives up (``BatchGivenUp``) is withheld, not acked, and so
  is every later batch of the same assignment (consumer generation): nothing is acked
  behind a withheld batch; the batches of the next assignment go on;
- ``prepare``, when given, is awaited on every chunk the reader takes before its events
  can be in a batch, and runs for the next batch while the batch in hand is processed;
  a chunk whose preparing the stop interrupts is withheld with the rest;
- a source that ends (faust throws ``StopAsyncIteration`` into a stopping agent's
  channel) ends ``run_batches`` without an error, once the batch in hand is
  processed and acked; what was read ahead is withheld.
The source is a fake with ``intake.Intake``'s shape: ``take(most)``, ``ack(events)``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.errors import BatchGivenUp
from app.runtime.batches import run_batches


@dataclass
class FakeMessage:
    offset: int
    acked: bool = False
    generation_id: int | None = None


@dataclass
class FakeStream:
    """Hands out ``count`` events, ``gap`` seconds apart (else all that fit at once);
    records what was read and acked."""

    count: int
    gap: float = 0.0
    read: list[int] = field(default_factory=list)
    handed: list[FakeMessage] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    takes: list[int] = field(default_factory=list)  # ``most`` of every take

    async def take(self, most: int) -> list[FakeMessage]:
        assert most > 0
        self.takes.append(most)
        if len(self.read) == self.count:
            await asyncio.Event().wait()  # a live stream never ends by itself
        if self.gap:
            await asyncio.sleep(self.gap)
        else:
            await asyncio.sleep(0)
        offsets = range(len(self.read), min(self.count, len(self.read) + (1 if self.gap else most)))
        return [self._hand(offset) for offset in offsets]

    def _hand(self, offset: int) -> FakeMessage:
        self.read.append(offset)
        self.handed.append(FakeMessage(offset))
        return self.handed[-1]

    def ack(self, events: list[FakeMessage]) -> None:
        self.acked += [message.offset for message in events]


def offsets(batch: list[Any]) -> list[int]:
    return [event.offset for event in batch]


async def run_until(
    stream: FakeStream, process: Any, size: int, within: float, done: Any, prepare: Any = None
) -> None:
    """Run the batches until ``done()``; then stop them as a worker shutdown would."""
    task = asyncio.ensure_future(run_batches(stream, size, within, process, prepare=prepare))
    for _ in range(500):
        if done():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_every_event_once_in_order_and_acked_after_its_batch() -> None:
    stream = FakeStream(count=23)
    batches: list[list[int]] = []
    acked_before_return: list[list[int]] = []

    async def process(batch: list[Any]) -> None:
        await asyncio.sleep(0.01)
        acked_before_return.append([o for o in offsets(batch) if o in stream.acked])
        batches.append(offsets(batch))

    await run_until(stream, process, size=5, within=0.05, done=lambda: len(stream.acked) == 23)

    assert [o for batch in batches for o in batch] == list(range(23))
    assert all(len(batch) <= 5 for batch in batches)
    assert batches[:4] == [list(range(i, i + 5)) for i in (0, 5, 10, 15)]
    assert acked_before_return == [[] for _ in batches]
    assert stream.acked == list(range(23))


async def test_each_event_is_prepared_before_its_batch_and_while_the_one_before_is_processed() -> (
    None
):
    stream = FakeStream(count=30)
    prepared: list[int] = []
    prepared_while_first: list[int] = []
    unprepared_in_a_batch: list[int] = []

    async def prepare(events: list[Any]) -> None:
        await asyncio.sleep(0)  # work that yields, as decoding in slices does
        prepared.extend(offsets(events))

    async def process(batch: list[Any]) -> None:
        unprepared_in_a_batch.extend(o for o in offsets(batch) if o not in prepared)
        if offsets(batch)[0] == 0:
            await asyncio.sleep(0.05)  # the reader prepares the next batch meanwhile
            prepared_while_first.extend(prepared)

    await asyncio.wait_for(
        run_until(stream, process, 10, 0.01, lambda: len(stream.acked) == 30, prepare), 5
    )

    assert unprepared_in_a_batch == []
    assert prepared == list(range(30))  # each once, in arrival order
    assert prepared_while_first == list(range(20))  # the batch in hand and the next one
    assert stream.acked == list(range(30))


async def test_a_chunk_being_prepared_when_the_batches_stop_is_withheld() -> None:
    stream = FakeStream(count=20)
    preparing = asyncio.Event()

    async def prepare(events: list[Any]) -> None:
        if offsets(events)[0] >= 10:
            preparing.set()
            await asyncio.Event().wait()  # still preparing when the worker stops

    async def process(batch: list[Any]) -> None:
        await asyncio.sleep(0)

    def stuck() -> bool:  # the first batch acked, the second chunk still being prepared
        return preparing.is_set() and bool(stream.acked)

    await asyncio.wait_for(run_until(stream, process, 10, 0.01, stuck, prepare), 5)

    assert preparing.is_set()
    assert stream.acked == list(range(10))
    held = [event for event in stream.handed if event.offset >= 10]
    assert [event.offset for event in held] == list(range(10, 20))
    assert all(event.acked for event in held)  # withheld: marked, not acked


async def test_the_next_batch_is_read_while_one_is_processed_but_no_further() -> None:
    stream = FakeStream(count=40)
    release = asyncio.Event()
    read_during_first: list[int] = []

    async def process(batch: list[Any]) -> None:
        if offsets(batch)[0] == 0:
            await asyncio.sleep(0.05)  # the reader runs meanwhile
            read_during_first.extend(stream.read)
            await release.wait()

    task = asyncio.ensure_future(run_batches(stream, 10, 0.01, process))
    await asyncio.sleep(0.1)
    assert read_during_first == list(range(20))  # the batch in hand, and one batch ahead
    assert stream.read == list(range(20))
    assert stream.acked == []
    release.set()
    for _ in range(100):
        if len(stream.acked) == 40:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stream.acked == list(range(40))


async def test_a_partial_batch_goes_once_its_oldest_event_waited_within() -> None:
    stream = FakeStream(count=3, gap=0.01)
    taken: list[tuple[float, list[int]]] = []
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def process(batch: list[Any]) -> None:
        taken.append((loop.time() - started, offsets(batch)))

    await run_until(stream, process, size=100, within=0.2, done=lambda: len(stream.acked) == 3)

    assert [batch for _, batch in taken] == [[0, 1, 2]]
    waited = taken[0][0]
    assert 0.2 <= waited < 0.6  # the first event came at ~0.01 s, and waited ``within``


async def test_a_failing_batch_and_what_was_read_ahead_are_withheld_not_acked() -> None:
    stream = FakeStream(count=30)
    seen: list[FakeMessage] = []

    class Bug(Exception):
        pass

    async def process(batch: list[Any]) -> None:
        seen.extend(batch)
        if offsets(batch)[0] == 10:
            await asyncio.sleep(0.05)  # lets the reader fill the next batch
            raise Bug("a bug in the pipeline")

    with pytest.raises(Bug):
        await asyncio.wait_for(run_batches(stream, 10, 0.01, process), 5)

    assert stream.acked == list(range(10))
    assert stream.read == list(range(30))
    assert [e.offset for e in seen] == list(range(20))
    withheld = [e.offset for e in stream.handed if e.acked]
    assert withheld == stream.read[10:]  # the failed batch and the one read ahead


@dataclass
class PushedStream(FakeStream):
    """Hands out the events the test pushes, when it pushes them: all that are waiting."""

    queue: asyncio.Queue[int] = field(default_factory=asyncio.Queue)

    async def take(self, most: int) -> list[FakeMessage]:
        offsets = [await self.queue.get()]
        self.takes.append(most)
        while len(offsets) < most and not self.queue.empty():
            offsets.append(self.queue.get_nowait())
        return [self._hand(offset) for offset in offsets]


async def batches_with(behind: Any) -> list[list[int]]:
    """Events 0-9 at once; 10-19 while their batch is processed (0.3 s); 20-24 just after.

    Without a backlog the second batch goes as soon as the processor is free (its oldest
    event waited longer than ``within``); with one, it waits ``within`` more and
    takes 20-24 along.
    """
    stream = PushedStream(count=0)
    taken: list[list[int]] = []

    async def process(batch: list[Any]) -> None:
        taken.append(offsets(batch))
        if len(taken) == 1:
            await asyncio.sleep(0.3)

    task = asyncio.ensure_future(run_batches(stream, 100, 0.2, process, behind))
    for offset in range(10):
        stream.queue.put_nowait(offset)
    await asyncio.sleep(0.25)  # the first batch went at ~0.2 s and is being processed
    for offset in range(10, 20):
        stream.queue.put_nowait(offset)
    await asyncio.sleep(0.35)  # the processor got free at ~0.5 s
    for offset in range(20, 25):
        stream.queue.put_nowait(offset)
    await asyncio.sleep(0.4)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return taken


async def test_without_a_backlog_a_batch_goes_as_soon_as_its_oldest_event_waited_within() -> None:
    taken = await batches_with(behind=lambda event: 0)

    assert taken == [list(range(10)), list(range(10, 20)), list(range(20, 25))]


async def test_with_a_backlog_a_batch_waits_within_after_the_processor_got_free() -> None:
    taken = await batches_with(behind=lambda event: 1_000)

    assert taken == [list(range(10)), list(range(10, 25))]


async def test_while_a_batch_is_processed_events_are_taken_in_bulk_not_one_wake_each() -> None:
    """faust delivers one event per turn of the loop; a reader waking for each would pay a
    task switch per event. While a batch is processed nobody waits for the next one, so
    the reader lets them gather (``GATHER_SECONDS``) and takes them in one go."""
    stream = PushedStream(count=0)
    taken: list[list[int]] = []
    delivered = asyncio.Event()

    async def process(batch: list[Any]) -> None:
        taken.append(offsets(batch))
        if len(taken) == 1:
            await delivered.wait()
            await asyncio.sleep(0.05)

    task = asyncio.ensure_future(run_batches(stream, 100, 0.01, process))
    stream.queue.put_nowait(0)
    await asyncio.sleep(0.05)  # the first batch is being processed
    takes_before = len(stream.takes)
    for offset in range(1, 21):
        stream.queue.put_nowait(offset)
        await asyncio.sleep(0)  # one event per turn of the loop, as faust delivers them
    delivered.set()
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert taken == [[0], list(range(1, 21))]
    assert len(stream.takes) - takes_before <= 2


class EndingStream(FakeStream):
    """Hands out its events, then ends as a stopping agent's channel does."""

    async def take(self, most: int) -> list[FakeMessage]:
        if len(self.read) == self.count:
            raise StopAsyncIteration
        return await super().take(most)


async def test_a_source_that_ends_ends_the_batches_without_an_error() -> None:
    stream = EndingStream(count=5)
    processed: list[list[int]] = []

    async def process(batch: list[Any]) -> None:
        processed.append(offsets(batch))

    await asyncio.wait_for(run_batches(stream, 10, 0.01, process), 5)

    assert [offset for batch in processed for offset in batch] == [0, 1, 2, 3, 4]
    assert stream.acked == [0, 1, 2, 3, 4]


async def test_a_batch_given_up_is_withheld_and_the_next_one_goes_on() -> None:
    stream = EndingStream(count=6)
    processed: list[list[int]] = []

    async def process(batch: list[Any]) -> None:
        if 0 in offsets(batch):
            raise BatchGivenUp("a rebalance")
        processed.append(offsets(batch))

    await asyncio.wait_for(run_batches(stream, 3, 0.01, process), 5)

    given_up = [event for event in stream.handed if event.offset in (0, 1, 2)]
    assert all(event.acked for event in given_up)  # withheld: marked, not acked
    assert 0 not in stream.acked and 1 not in stream.acked and 2 not in stream.acked
    assert [offset for batch in processed for offset in batch] == [3, 4, 5]
    assert stream.acked == [3, 4, 5]


class ReassignedStream(EndingStream):
    """Offsets 0 to 5 delivered in assignment 1; then, after a rebalance that found offset 0
    committed, 0 to 5 again in assignment 2."""

    def _hand(self, offset: int) -> FakeMessage:
        first = offset < 6
        self.read.append(offset)
        self.handed.append(
            FakeMessage(offset if first else offset - 6, generation_id=1 if first else 2)
        )
        return self.handed[-1]


async def test_nothing_behind_a_batch_given_up_is_acked_in_its_assignment() -> None:
    stream = ReassignedStream(count=12)
    processed: list[tuple[int | None, list[int]]] = []

    async def process(batch: list[Any]) -> None:
        generation = batch[0].generation_id
        if generation == 1 and 0 in offsets(batch):
            raise BatchGivenUp("a rebalance")
        processed.append((generation, offsets(batch)))

    await asyncio.wait_for(run_batches(stream, 3, 0.01, process), 5)

    # 3 to 5 came after the batch given up, in the same assignment: not processed, not acked
    # (a commit of 6 would have skipped 0 to 2 for good); assignment 2 reads 0 to 5 again.
    assert processed == [(2, [0, 1, 2]), (2, [3, 4, 5])]
    assert stream.acked == [0, 1, 2, 3, 4, 5]
    withheld = [event for event in stream.handed if event.generation_id == 1]
    assert all(event.acked for event in withheld)  # marked settled for faust, never acked
