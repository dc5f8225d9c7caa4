"""A payload is validated only where a handler reads it; an envelope always is.

Contract: a worker validates an event's ``data`` against its model only if one of
its consumers has a handler for the event's type. An event of a type none of them
handles has its envelope checked (a broken envelope is poison as ever) and is
otherwise taken as it is, payload and ``eventVersion`` alike: it applies for every
consumer without running anything and advances the aggregate's version, never
reaching the DLT. The worker (or ``CONSUMERS`` deployment) whose consumer handles
the type dead-letters the same record as poison.
"""

from __future__ import annotations

import orjson

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.records import RawRecord
from app.registry import Registry, handler
from dlq.topics import dlt_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records, envelope
from tests.pipeline.support import Db, MakeProcessor, Outbox, header_map, kinds

# OrderCreated without its order number, items and amount: its model refuses it.
BROKEN_CREATED = {"orderId": "o-1", "userId": "u-1"}


def created_records(records: Records) -> list[RawRecord]:
    return [
        records.event("created", version=1, event_type="OrderCreated", data=BROKEN_CREATED),
        records.event(
            "created-v9", aggregate_id="o-2", version=1, event_type="OrderCreated", event_version=9
        ),
        records.event("paid", version=2),
    ]


async def test_a_payload_no_handler_reads_is_not_validated_and_advances_the_version(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    calls: list[str] = []

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.event_id)

    outcomes = await make_processor().process(created_records(records))

    assert kinds(outcomes, "points") == [
        ("created", Kind.APPLIED),
        ("created-v9", Kind.APPLIED),
        ("paid", Kind.APPLIED),
    ]
    assert calls == ["paid"]
    assert await outbox.records() == []
    assert await db.failed() == []
    assert await db.version("points") == 2
    assert await db.version("points", "o-2") == 1


async def test_the_same_records_are_poison_where_a_handler_reads_them(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    outbox: Outbox,
) -> None:
    @handler("OrderCreated", consumer="inventory", registry=registry)
    async def reserve(event: Event, ctx: HandlerContext) -> None:
        raise AssertionError("a broken payload must not reach a handler")

    outcomes = await make_processor().process(created_records(records))

    assert kinds(outcomes, "") == [("created", Kind.POISON), ("created-v9", Kind.POISON)]
    assert [header_map(r)["dlt-reason"] for r in await outbox.to(dlt_topic(TOPIC))] == [
        "invalid-schema",
        "unsupported-version",
    ]


async def test_a_broken_envelope_is_poison_whoever_reads_the_type(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    outbox: Outbox,
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        pass

    env = envelope("created", event_type="OrderCreated", data=BROKEN_CREATED)
    del env["occurredAt"]

    outcomes = await make_processor().process([records.raw(orjson.dumps(env))])

    # An envelope it could not read, named by the eventId it holds.
    assert kinds(outcomes, "") == [("created", Kind.POISON)]
    [dead] = await outbox.records()
    assert header_map(dead)["dlt-reason"] == "invalid-schema"
