"""When one consumer's run fails, the others stop cleanly: nothing is cut off after a commit.

Contract: consumers of a batch run concurrently; when one of them raises (a
bug: here telling the prefilter what it applied raises a ``RuntimeError``), the
processor cancels the others and waits for them before it raises that error. A
consumer whose transaction has not committed is cancelled (a pause it was
sleeping in ends, nothing of it is committed). A consumer that has committed
finishes what follows its commit first: its after-commit callbacks run, and what
it tells the prefilter is told in full (not cut off midway). When ``process``
raises, no task of the batch is left running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from app.context import HandlerContext
from app.errors import RetryableError
from app.pipeline.decode import EventOf
from app.pipeline.pause import Backoff
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, Outbox, database_down, write_effect

WITHIN_SECONDS = 10
# Long enough that "cancelled" and "still sleeping" cannot be confused.
LONG_PAUSE = Backoff(initial=60.0, maximum=60.0, jitter=0.0)


class Prefilter:
    """Knows nothing; the committer's ``remember`` holds on until the failing consumer's has
    raised a bug, which it does once the committer is remembering and the sleeper paused."""

    def __init__(self) -> None:
        self.remembered: list[str] = []
        self.committer_remembering = asyncio.Event()
        self.bug_raised = asyncio.Event()
        self.sleeper_paused = asyncio.Event()

    async def known(self, consumer: str, event_ids: Sequence[str]) -> dict[str, EventOf]:
        return {}

    async def remember(self, consumer: str, applied: Mapping[str, EventOf]) -> None:
        if consumer == "failing":
            await self.committer_remembering.wait()
            await self.sleeper_paused.wait()
            self.bug_raised.set()
            raise RuntimeError("bug in the failing consumer's remember")
        self.committer_remembering.set()
        await self.bug_raised.wait()
        await asyncio.sleep(0.05)  # still going a moment after the bug
        self.remembered.extend(applied)


async def test_a_failing_consumer_cancels_the_uncommitted_and_lets_the_committed_finish(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, outbox: Outbox
) -> None:
    callbacks: list[str] = []
    sleeper_attempts = 0
    prefilter = Prefilter()

    @handler("OrderPaid", consumer="committer", registry=registry)
    async def committer(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

        async def note() -> None:
            callbacks.append(event.event_id)

        ctx.after_commit(note)

    @handler("OrderPaid", consumer="failing", registry=registry)
    async def failing(event: Event, ctx: HandlerContext) -> None:
        if event.event_id == "bad-1":
            raise RetryableError("routed, then remembering fails")

    @handler("OrderPaid", consumer="sleeper", registry=registry)
    async def sleeper(event: Event, ctx: HandlerContext) -> None:
        nonlocal sleeper_attempts
        sleeper_attempts += 1
        await write_effect(event, ctx)
        prefilter.sleeper_paused.set()
        raise database_down(ConnectionResetError("sleeper's database went away"))  # pauses

    processor = make_processor(prefilter=prefilter, backoff=LONG_PAUSE, concurrent_consumers=True)
    batch = [
        records.event("good", aggregate_id="o-1"),
        records.event("bad-1", aggregate_id="o-2"),
        records.event("bad-2", aggregate_id="o-3"),
    ]
    before = asyncio.all_tasks()

    with pytest.raises(RuntimeError, match="bug in the failing consumer's remember"):
        await asyncio.wait_for(processor.process(batch), WITHIN_SECONDS)
    left_running = [task for task in asyncio.all_tasks() - before if not task.done()]

    assert left_running == []
    assert prefilter.remembered == ["good", "bad-1", "bad-2"]
    assert callbacks == ["good", "bad-1", "bad-2"]
    assert await db.effects("committer") == ["good", "bad-1", "bad-2"]
    # The failing consumer had committed: its failure's retry record is in the outbox.
    assert [r.topic for r in await outbox.records()] == ["order-event-topic.retry.1s"]
    assert sleeper_attempts == 1
    assert await db.effects("sleeper") == []
    assert await db.consumed("sleeper") == []
