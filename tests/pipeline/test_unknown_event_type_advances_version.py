"""An event no consumer acts on still takes its version, so the aggregate never stalls.

Contract: an event whose ``eventType`` has no payload model (a type this
deployment does not know yet) is ``Applied`` for every consumer without running
anything: it writes its dedup row and advances the aggregate's version, so the
next version is not parked behind it forever. The same holds for a known type
that a consumer registered no handler for.
"""

from __future__ import annotations

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds


async def test_an_unknown_event_type_advances_the_version_of_every_consumer(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[tuple[str, str]] = []

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        calls.append((ctx.consumer, event.event_id))

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def notify(event: Event, ctx: HandlerContext) -> None:
        calls.append((ctx.consumer, event.event_id))

    batch = [
        records.event("shipped", version=1, event_type="OrderShipped", data={"carrier": "X"}),
        records.event("paid", version=2),
    ]

    outcomes = await make_processor().process(batch)

    for consumer in ("notification", "points"):
        assert kinds(outcomes, consumer) == [("shipped", Kind.APPLIED), ("paid", Kind.APPLIED)]
        assert await db.consumed(consumer) == ["paid", "shipped"]
        assert await db.version(consumer) == 2
    assert sorted(calls) == [("notification", "paid"), ("points", "paid")]


async def test_an_unknown_event_type_arriving_last_closes_the_gap(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.event_id)

    await make_processor().process([records.event("paid", version=2)])

    outcomes = await make_processor().process(
        [records.event("mystery", version=1, event_type="OrderAudited", data={})]
    )

    assert kinds(outcomes) == [("mystery", Kind.APPLIED), ("paid", Kind.APPLIED)]
    assert calls == ["paid"]
    assert await db.parked("points") == []
    assert await db.version("points") == 2


async def test_a_known_event_type_a_consumer_has_no_handler_for_advances_its_version(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.event_id)

    batch = [
        records.event("created", version=1, event_type="OrderCreated"),
        records.event("paid", version=2),
        records.event("cancelled", version=3, event_type="OrderCancelled"),
    ]

    outcomes = await make_processor().process(batch)

    assert kinds(outcomes) == [
        ("created", Kind.APPLIED),
        ("paid", Kind.APPLIED),
        ("cancelled", Kind.APPLIED),
    ]
    assert calls == ["paid"]
    assert await db.consumed("points") == ["cancelled", "created", "paid"]
    assert await db.version("points") == 3
