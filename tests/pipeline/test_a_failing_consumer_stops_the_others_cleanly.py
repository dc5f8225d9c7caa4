"""When one consumer's run fails, the others stop cleanly: nothing is cut off after a commit.

Contract: consumers of a batch run concurrently; when one of them raises (a
bug: here its publisher refuses with a ``RuntimeError``), the processor cancels
the others and waits for them before it raises that error. A consumer whose
transaction has not committed is cancelled (a pause it was sleeping in ends,
nothing of it is committed). A consumer that has committed finishes what
follows its commit first: every one of its retry records is published (none
cut off mid-publish), its after-commit callbacks run. When ``process`` raises,
no task of the batch is left running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from app.context import HandlerContext
from app.errors import RetryableError
from app.pipeline.pause import Backoff
from app.registry import Registry, handler
from dlq import headers as h
from dlq.records import OutRecord
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, write_effect

WITHIN_SECONDS = 10
# Long enough that "cancelled" and "still sleeping" cannot be confused.
LONG_PAUSE = Backoff(initial=60.0, maximum=60.0, jitter=0.0)


class Broker:
    """Publishes committer's records one at a time, holding the second until the failing
    consumer has refused; the failing consumer's publish raises a bug, once the committer
    is publishing and the sleeper is paused."""

    def __init__(self) -> None:
        self.published: list[OutRecord] = []
        self.committer_publishing = asyncio.Event()
        self.committer_may_go_on = asyncio.Event()
        self.sleeper_paused = asyncio.Event()

    async def publish(self, records: Sequence[OutRecord]) -> None:
        consumer = dict(records[0].headers)[h.RETRY_CONSUMER_GROUP].decode()
        if consumer == "failing":
            await self.committer_publishing.wait()
            await self.sleeper_paused.wait()
            self.committer_may_go_on.set()
            raise RuntimeError("bug in the failing consumer's publish")
        first, *rest = records
        self.published.append(first)
        self.committer_publishing.set()
        await self.committer_may_go_on.wait()
        await asyncio.sleep(0.05)  # the rest goes out a moment later
        self.published.extend(rest)


async def test_a_failing_consumer_cancels_the_uncommitted_and_lets_the_committed_finish(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    callbacks: list[str] = []
    sleeper_attempts = 0

    @handler("OrderPaid", consumer="committer", registry=registry)
    async def committer(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

        async def note() -> None:
            callbacks.append(event.event_id)

        ctx.after_commit(note)
        if event.event_id in ("bad-1", "bad-2"):
            raise RetryableError("try later")

    @handler("OrderPaid", consumer="failing", registry=registry)
    async def failing(event: Event, ctx: HandlerContext) -> None:
        if event.event_id == "bad-1":
            raise RetryableError("routed, then the publish fails")

    @handler("OrderPaid", consumer="sleeper", registry=registry)
    async def sleeper(event: Event, ctx: HandlerContext) -> None:
        nonlocal sleeper_attempts
        sleeper_attempts += 1
        await write_effect(event, ctx)
        broker.sleeper_paused.set()
        raise ConnectionResetError("sleeper's database went away")  # pauses LONG_PAUSE

    broker = Broker()
    processor = make_processor(
        publisher=broker, backoff=LONG_PAUSE, concurrent_consumers=True
    )
    batch = [
        records.event("good", aggregate_id="o-1"),
        records.event("bad-1", aggregate_id="o-2"),
        records.event("bad-2", aggregate_id="o-3"),
    ]
    before = asyncio.all_tasks()

    with pytest.raises(RuntimeError, match="bug in the failing consumer's publish"):
        await asyncio.wait_for(processor.process(batch), WITHIN_SECONDS)
    left_running = [task for task in asyncio.all_tasks() - before if not task.done()]

    assert left_running == []
    assert [dict(r.headers)[h.RETRY_CONSUMER_GROUP] for r in broker.published] == [
        b"committer",
        b"committer",
    ]
    assert callbacks == ["good"]
    assert await db.effects("committer") == ["good"]
    assert sleeper_attempts == 1
    assert await db.effects("sleeper") == []
    assert await db.consumed("sleeper") == []
