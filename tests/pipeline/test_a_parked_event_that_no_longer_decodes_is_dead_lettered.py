"""A parked event that no longer decodes when its turn comes goes to the DLT, not away.

Contract: an event is parked as it decoded on arrival; if the schemas change before
its gap closes (a deploy tightened a model or dropped a version) and its stored
record no longer decodes, the drain dead-letters it for the consumer that parked
it: one DLT record with the stored key, value and headers, ``dlt-consumer-group``
that consumer and ``dlt-reason`` the decode error's reason; one ``failed_event``
row of that consumer, status ``dead``; outcome ``POISON`` for that consumer, under
its ``eventType``. The
parked row is gone (the event now lives in ``failed_event`` and on the DLT), the
version stays where the drain stopped, and the aggregate's later versions wait
for it, as they do for any dead event. Other consumers are not affected.
"""

from __future__ import annotations

import orjson
from sqlalchemy import update

from app.context import HandlerContext
from app.db.tables import parked_event
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from dlq.topics import dlt_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records, envelope
from tests.pipeline.support import (
    Db,
    MakeProcessor,
    Outbox,
    header_map,
    write_effect,
)


async def test_a_parked_event_that_no_longer_decodes_is_dead_lettered_for_its_consumer(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    second = records.event("e2", version=2)
    first = records.event("e1", version=1)
    parked = await make_processor().process([second])
    assert [(o.event_id, o.kind) for o in parked] == [("e2", Kind.PARKED)]

    # What the model of today refuses: a negative amount (the schema changed meanwhile).
    unreadable = orjson.dumps(
        envelope("e2", version=2, data={"orderId": "o-1", "userId": "u-1", "amount": "-5"})
    )
    async with db.engine.begin() as conn:
        await conn.execute(
            update(parked_event)
            .where(parked_event.c.event_id == "e2")
            .values(record_value=unreadable)
        )

    outcomes = await make_processor().process([first])

    assert [(o.consumer, o.event_id, o.kind, o.event_type) for o in outcomes] == [
        ("points", "e1", Kind.APPLIED, "OrderPaid"),
        ("points", "e2", Kind.POISON, "OrderPaid"),
    ]
    [dead] = await outbox.records()
    headers = header_map(dead)
    assert dead.topic == dlt_topic(TOPIC)
    assert (dead.key, dead.value) == (second.key, unreadable)
    assert headers["dlt-consumer-group"] == "points"
    assert headers["dlt-reason"] == "invalid-schema"
    assert headers["traceparent"] == "00-abc-01"
    [row] = await db.failed("points")
    assert (row["event_id"], row["status"], row["reason"]) == ("e2", "dead", "invalid-schema")
    assert (row["topic"], row["offset"], row["record_value"]) == (TOPIC, second.offset, unreadable)
    assert await db.failed("") == []
    assert await db.parked("points") == []
    assert await db.effects("points") == ["e1"]
    assert await db.version("points") == 1

    # Version 3 waits for the dead version 2.
    later = await make_processor().process([records.event("e3", version=3)])
    assert [(o.event_id, o.kind) for o in later] == [("e3", Kind.PARKED)]
    assert await db.version("points") == 1
