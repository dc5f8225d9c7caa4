"""Each consumer is its own namespace of dedup records, versions, parked events and failures.

Contract: every consumer registered in the registry processes every event of
the batch in a transaction of its own. What one consumer applied, parked or
failed says nothing about another: a consumer added later applies events the
others already consumed, and one consumer's failing handler neither stops nor
reorders another consumer's events.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import (
    Db,
    MakeProcessor,
    Outbox,
    header_map,
    kinds,
    write_effect,
)


async def test_each_consumer_writes_its_own_dedup_rows_and_versions(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    @handler("OrderCreated", consumer="inventory", registry=registry)
    async def inventory(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    outcomes = await make_processor().process(
        [
            records.event("created", version=1, event_type="OrderCreated"),
            records.event("paid", version=2),
        ]
    )

    assert [(o.consumer, o.event_id, o.kind) for o in outcomes] == [
        ("inventory", "created", Kind.APPLIED),
        ("inventory", "paid", Kind.APPLIED),
        ("points", "created", Kind.APPLIED),
        ("points", "paid", Kind.APPLIED),
    ]
    assert await db.effects("inventory") == ["created"]
    assert await db.effects("points") == ["paid"]
    for consumer in ("inventory", "points"):
        assert await db.consumed(consumer) == ["created", "paid"]
        assert await db.version(consumer) == 2


async def test_a_consumer_added_later_applies_what_the_others_already_consumed(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    batch = [records.event("e1", version=1), records.event("e2", version=2)]
    await make_processor().process(batch)

    @handler("OrderPaid", consumer="audit", registry=registry)
    async def audit(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    outcomes = await make_processor().process(batch)

    assert kinds(outcomes, "points") == [("e1", Kind.DUPLICATE), ("e2", Kind.DUPLICATE)]
    assert kinds(outcomes, "audit") == [("e1", Kind.APPLIED), ("e2", Kind.APPLIED)]
    assert await db.effects("points") == ["e1", "e2"]
    assert await db.effects("audit") == ["e1", "e2"]
    assert await db.version("audit") == 2


async def test_one_consumers_failure_parks_only_its_own_successors(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        if event.event_id == "e1":
            raise ValueError("points cannot handle e1")
        await write_effect(event, ctx)

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def notify(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    outcomes = await make_processor().process(
        [records.event("e1", version=1), records.event("e2", version=2)]
    )

    assert kinds(outcomes, "points") == [("e1", Kind.RETRIED), ("e2", Kind.PARKED)]
    assert kinds(outcomes, "notification") == [("e1", Kind.APPLIED), ("e2", Kind.APPLIED)]
    assert await db.effects("notification") == ["e1", "e2"]
    assert await db.effects("points") == []
    assert await db.parked("points") == ["e2"]
    assert await db.parked("notification") == []
    assert [f["event_id"] for f in await db.failed("points")] == ["e1"]
    assert await db.failed("notification") == []
    assert await db.version("points") is None
    assert await db.version("notification") == 2
    [retry] = await outbox.records()
    assert header_map(retry)["retry-consumer-group"] == "points"


async def test_an_event_parked_for_one_consumer_is_not_a_duplicate_for_another(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    await make_processor().process([records.event("e2", version=2)])

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def notify(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    outcomes = await make_processor().process(
        [records.event("e1", version=1), records.event("e2", version=2)]
    )

    assert kinds(outcomes, "points") == [
        ("e1", Kind.APPLIED),
        ("e2", Kind.APPLIED),
        ("e2", Kind.DUPLICATE),
    ]
    assert kinds(outcomes, "notification") == [("e1", Kind.APPLIED), ("e2", Kind.APPLIED)]
    assert await db.effects("points") == ["e1", "e2"]
    assert await db.effects("notification") == ["e1", "e2"]


async def test_a_retry_for_a_consumer_another_deployment_runs_is_left_to_it_quietly(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``CONSUMERS`` splits the consumers over deployments: a retry of points-service's read
    by the inventory deployment is not run there and is no error; a retry for a consumer
    that no handler module registers is one."""

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        raise ValueError("points cannot handle it yet")

    @handler("OrderPaid", consumer="inventory", registry=registry)
    async def inventory(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    await make_processor().process([records.event("e1", version=1)])
    [retry] = await outbox.records()
    back = records.delivered(retry)
    only_inventory = registry.only(["inventory"])

    with caplog.at_level(logging.ERROR):
        quiet = await replace(make_processor(), registry=only_inventory).process([back])
    assert quiet == []
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []

    unknown = Registry()
    handler("OrderPaid", consumer="inventory", registry=unknown)(inventory)
    with caplog.at_level(logging.ERROR):
        assert await replace(make_processor(), registry=unknown).process([back]) == []
    [error] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "targets consumer 'points'" in error.getMessage()
    assert await db.effects("points") == []
