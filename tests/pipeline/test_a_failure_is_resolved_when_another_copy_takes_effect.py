"""A failure is resolved when its event takes effect for its consumer, through any copy.

Contract: a ``failed_event`` row (``retrying`` or ``dead``) becomes ``resolved``
as soon as its event is applied for its consumer through another copy (a
producer's second copy on the main topic), in that copy's transaction; the
failed copy's retry record, arriving later, is a duplicate and leaves it
``resolved``. A row still open when its event is found applied already (a failure
committed after the other copy's lookup) is resolved by the record that finds it
so, the retry record, even when the Redis prefilter knows the event (a retry or
replay record always reaches the database). A row stays as it is while its event
has not taken effect for its consumer: another consumer applying it, or a second
copy in the failing batch (a duplicate of a copy that failed), changes nothing.
Before, such a row stayed ``retrying`` (or ``dead``) for good: ``dlq list`` showed
a failure that never was, ``replay`` left it alone, retention never deleted it.
"""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.db.tables import failed_event
from app.errors import PermanentError
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, KnowingRedis, MakeProcessor, Outbox, kinds, write_effect


class Failing:
    """``points`` fails (with ``error``) until ``fixed`` is called (a deploy, a dependency
    that came back), then succeeds."""

    def __init__(self, registry: Registry, error: type[Exception] = ValueError) -> None:
        self.failing = True

        @handler("OrderPaid", consumer="points", registry=registry)
        async def points(event: Event, ctx: HandlerContext) -> None:
            if self.failing:
                raise error(f"{event.event_id}: not yet")
            await write_effect(event, ctx)

    def fixed(self) -> None:
        self.failing = False


async def statuses(db: Db, consumer: str = "points") -> list[tuple[int, str]]:
    return [(row["offset"], row["status"]) for row in await db.failed(consumer)]


async def test_a_retrying_failure_is_resolved_when_a_second_copy_applies(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, outbox: Outbox
) -> None:
    points = Failing(registry)
    processor = make_processor()
    first = records.event("e1")
    await processor.process([first])
    assert await statuses(db) == [(0, "retrying")]
    points.fixed()

    second = await processor.process([records.again(first)])

    assert kinds(second) == [("e1", Kind.APPLIED)]
    assert await statuses(db) == [(0, "resolved")]

    [retry] = await outbox.records()
    late = await processor.process([records.delivered(retry)])

    assert kinds(late) == [("e1", Kind.DUPLICATE)]
    assert await statuses(db) == [(0, "resolved")]
    assert await db.effects() == ["e1"]


async def test_a_dead_failure_is_resolved_when_a_second_copy_applies(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    points = Failing(registry, PermanentError)
    processor = make_processor()
    first = records.event("e1")
    assert kinds(await processor.process([first])) == [("e1", Kind.DEAD_LETTERED)]
    points.fixed()

    second = await processor.process([records.again(first)])

    assert kinds(second) == [("e1", Kind.APPLIED)]
    assert await statuses(db) == [(0, "resolved")]


async def test_a_failure_left_open_is_resolved_by_its_retry_finding_the_event_applied(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
    engine: AsyncEngine,
) -> None:
    points = Failing(registry)
    redis = KnowingRedis()
    processor = make_processor(prefilter=redis)
    first = records.event("e1")
    await processor.process([first])
    points.fixed()
    await processor.process([records.again(first)])
    # The failure committed after the second copy's lookup (another worker, a race).
    await reopen(engine)
    assert ("points", "e1") in redis.keys

    [retry] = await outbox.records()
    late = await processor.process([records.delivered(retry)])

    assert kinds(late) == [("e1", Kind.DUPLICATE)]
    assert await statuses(db) == [(0, "resolved")]


async def test_a_failure_stays_open_while_its_event_has_not_taken_effect_for_its_consumer(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    Failing(registry)

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def notify(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    processor = make_processor()
    first = records.event("e1")

    outcomes = await processor.process([first, records.again(first)])

    assert kinds(outcomes, "points") == [("e1", Kind.RETRIED), ("e1", Kind.DUPLICATE)]
    assert kinds(outcomes, "notification") == [("e1", Kind.APPLIED), ("e1", Kind.DUPLICATE)]
    assert await statuses(db) == [(0, "retrying")]


async def reopen(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(update(failed_event).values(status="retrying"))
