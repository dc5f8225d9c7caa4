"""A batch paused on an outage is given up once it is no longer the worker's.

Contract (``BatchProcessor.process(..., holds=)``, ``pause.retry_in_place``): a batch
paused on an infrastructure failure checks, between attempts and several times a second
during each pause, that it is still this worker's (``holds``: false during a rebalance
or once the worker is stopping). Once it is not, ``process`` raises ``BatchGivenUp``
within a quarter of a second, whatever is left of the pause: the worker withholds the
batch (no ack) and the rebalance or the stop goes on, instead of waiting for the
database to come back. Nothing of the failed attempt took effect; a consumer that
committed before is not run again when the batch is read again. While ``holds`` stays
true the batch goes on pausing and retrying in place.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from app.context import HandlerContext
from app.errors import BatchGivenUp
from app.pipeline.outcomes import Kind
from app.pipeline.pause import Backoff
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, database_down, write_effect

PAUSE = 5.0  # each pause far longer than the test waits
LOST_AFTER = 0.3
WITHIN = LOST_AFTER + 0.25 + 0.5
LONG_PAUSES = Backoff(initial=PAUSE, maximum=PAUSE, jitter=0.0)


class Ownership:
    """``holds`` for a batch that stops being the worker's ``after`` seconds from now."""

    def __init__(self, after: float) -> None:
        self.until = time.monotonic() + after

    def __call__(self) -> bool:
        return time.monotonic() < self.until


class Outage:
    """The database is down until ``end`` is called."""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.down:
            raise database_down(ConnectionRefusedError("points-db:5432 refused"))


async def test_a_batch_paused_on_an_outage_is_given_up_once_it_is_not_the_workers(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    outage = Outage()

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)
        outage()

    processor = replace(make_processor(), backoff=LONG_PAUSES)
    started = time.monotonic()
    with pytest.raises(BatchGivenUp, match="no longer this worker's"):
        async with asyncio.timeout(PAUSE):
            await processor.process([records.event("e1")], holds=Ownership(LOST_AFTER))

    assert time.monotonic() - started < WITHIN
    assert outage.calls == 1  # no attempt after the batch was lost
    assert await db.effects() == []
    assert await db.consumed("points") == []
    assert await db.failed() == []


async def test_a_consumer_that_committed_is_not_run_again_when_the_batch_comes_back(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    outage = Outage()
    calls: list[str] = []

    @handler("OrderPaid", consumer="a-points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        calls.append(ctx.consumer)
        await write_effect(event, ctx)

    @handler("OrderPaid", consumer="b-notification", registry=registry)
    async def notify(event: Event, ctx: HandlerContext) -> None:
        calls.append(ctx.consumer)
        await write_effect(event, ctx)
        outage()

    batch = [records.event("e1")]
    processor = replace(make_processor(), backoff=LONG_PAUSES)
    with pytest.raises(BatchGivenUp):
        async with asyncio.timeout(PAUSE):
            await processor.process(batch, holds=Ownership(LOST_AFTER))
    assert await db.effects("a-points") == ["e1"]
    assert await db.effects("b-notification") == []

    outage.down = False  # the database is back; the partition's next owner reads the batch
    outcomes = await make_processor().process(batch, holds=lambda: True)

    assert [(o.consumer, o.kind) for o in outcomes] == [
        ("a-points", Kind.DUPLICATE),
        ("b-notification", Kind.APPLIED),
    ]
    assert calls == ["a-points", "b-notification", "b-notification"]
    assert await db.effects("a-points") == ["e1"]
    assert await db.effects("b-notification") == ["e1"]


async def test_poison_recorded_while_the_database_is_down_is_given_up_too(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    healthy = make_processor()

    def down() -> None:
        raise ConnectionResetError("database connection reset")

    processor = replace(healthy, sessions=down, backoff=LONG_PAUSES)
    with pytest.raises(BatchGivenUp, match="recording poison"):
        async with asyncio.timeout(PAUSE):
            await processor.process([records.raw(b"not json")], holds=Ownership(LOST_AFTER))
    assert await db.failed() == []


async def test_while_the_batch_is_the_workers_it_goes_on_retrying_in_place(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    outage = Outage()

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)
        if outage.calls == 2:  # back for the third attempt
            outage.down = False
        outage()

    short = Backoff(initial=0.05, maximum=0.05, jitter=0.0)
    processor = replace(make_processor(), backoff=short)
    outcomes = await processor.process([records.event("e1")], holds=lambda: True)

    assert [o.kind for o in outcomes] == [Kind.APPLIED]
    assert outage.calls == 3
    assert await db.effects() == ["e1"]
