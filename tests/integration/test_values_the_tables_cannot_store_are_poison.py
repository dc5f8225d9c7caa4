"""Values the tables cannot store are poison, not a database error that stops the partition.

Contract, through the batch processor on PostgreSQL, MariaDB and SQLite: an
``aggregateVersion`` of 2^31 or more (the version columns are 32-bit
``Integer``s), a NUL or other control character in ``eventId``,
``aggregateId``, ``eventType`` or ``aggregateType`` (PostgreSQL rejects NUL in
text), and an id longer than its column are each dead-lettered once as
``invalid-schema`` with a message naming the field (named by its ``eventId`` and
``eventType`` where a column holds them); the processor returns, the
good events of the same batch apply, and the batch is never re-run in place.
Before, the envelope accepted them, the dedup lookup or the version write
raised, and every owner of the partition crashed on the record, again and again.

So are the failure's own texts: a handler's exception whose message holds a NUL
(pydantic quotes a malformed UUID that way) is recorded with the NUL written
``\\x00``; a ``dlt-original-topic`` header that is no Kafka topic name (longer
than the column, or holding a NUL) makes the record ``invalid-header`` poison. Two
poison records naming the same origin in one batch (a DLT record replayed twice)
are recorded and dead-lettered once, the second as dead-lettered before, instead
of breaking the key and running the batch again for ever.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.db.engine import session_factory
from app.pipeline.outcomes import Kind
from app.pipeline.pause import Backoff
from app.pipeline.processor import BatchProcessor
from app.pipeline.route import FailureRouter
from app.registry import Registry, handler
from dlq.policy import RetryPolicy
from schemas.envelope import Event
from tests.integration.support.databases import BACKENDS
from tests.pipeline.events import TOPIC, Records, envelope
from tests.pipeline.support import (
    Db,
    Outbox,
    header_map,
    sequential_processor,
    write_effect,
)

pytestmark = pytest.mark.integration


class NoPause(Backoff):
    """A processor that would retry in place fails the test instead of waiting forever."""

    def delay(self, attempt: int) -> float:
        raise AssertionError("the batch was retried in place: the database refused a value")


UNSTORABLE = [
    pytest.param({"aggregateVersion": 2**31}, "aggregateVersion", id="version-2^31"),
    pytest.param({"aggregateVersion": 2**40}, "aggregateVersion", id="version-2^40"),
    pytest.param({"eventId": "bad\x00id"}, "eventId", id="nul-in-event-id"),
    pytest.param({"aggregateId": "o-1\x00"}, "aggregateId", id="nul-in-aggregate-id"),
    pytest.param({"eventType": "Order\x00Paid"}, "eventType", id="nul-in-event-type"),
    pytest.param({"aggregateType": "Or\x1bder"}, "aggregateType", id="escape-in-aggregate-type"),
    pytest.param({"eventId": "x" * 129}, "eventId", id="event-id-too-long"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("fields", "field"), UNSTORABLE)
async def test_an_unstorable_value_is_dead_lettered_and_the_batch_applies(
    engine: AsyncEngine, fields: dict[str, object], field: str
) -> None:
    registry, records, db, outbox = Registry(), Records(), Db(engine), Outbox(engine)

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    before = records.event("e1", version=1)
    bad = records.raw(orjson.dumps({**envelope("e2", version=2), **fields}))
    after = records.event("e3", aggregate_id="o-2", version=1)
    processor = BatchProcessor(
        session_factory(engine),
        registry,
        FailureRouter(RetryPolicy(TOPIC, (1.0,))),
        backoff=NoPause(),
        concurrent_consumers=False,
    )

    outcomes = await processor.process([before, bad, after])

    # The poison is named by its eventId, unless that is the value no column holds.
    named = None if field == "eventId" else "e2"
    assert [(o.kind, o.event_id) for o in outcomes] == [
        (Kind.POISON, named),
        (Kind.APPLIED, "e1"),
        (Kind.APPLIED, "e3"),
    ]
    assert sorted(await db.effects("points")) == ["e1", "e3"]
    [dead] = await outbox.records()
    assert header_map(dead)["dlt-reason"] == "invalid-schema"
    assert f"envelope: {field}: " in header_map(dead)["dlt-exception-message"]
    [row] = await db.failed()
    assert (row["reason"], row["offset"], row["record_value"]) == ("invalid-schema", 1, bad.value)
    assert row["event_id"] == named
    assert row["event_type"] == (None if field == "eventType" else "OrderPaid")


def _processor(engine: AsyncEngine, registry: Registry) -> BatchProcessor:
    return sequential_processor(engine, registry, (), backoff=NoPause())


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_handler_error_quoting_a_nul_is_recorded(engine: AsyncEngine) -> None:
    registry, records, db, outbox = Registry(), Records(), Db(engine), Outbox(engine)

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        if event.event_id == "e2":
            raise ValueError("orderId: found `\x00` at 1")
        await write_effect(event, ctx)

    batch = [
        records.event("e1", version=1),
        records.event("e2", version=2),
        records.event("e3", aggregate_id="o-2", version=1),
    ]
    outcomes = await asyncio.wait_for(_processor(engine, registry).process(batch), 60)

    assert sorted((o.kind, o.event_id) for o in outcomes) == [
        (Kind.APPLIED, "e1"),
        (Kind.APPLIED, "e3"),
        (Kind.DEAD_LETTERED, "e2"),
    ]
    [dead] = await outbox.records()
    assert header_map(dead)["dlt-exception-message"] == "orderId: found `\\x00` at 1"
    [row] = await db.failed("points")
    assert row["exception_message"] == "orderId: found `\\x00` at 1"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "topic", [b"t" * 250, b"orders\x00", b"my orders"], ids=["too-long", "nul", "space"]
)
async def test_an_original_topic_that_is_no_topic_name_is_invalid_header(
    engine: AsyncEngine, topic: bytes
) -> None:
    registry, records, db, outbox = Registry(), Records(), Db(engine), Outbox(engine)

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    source = records.event("e2", version=1)
    bad = source._replace(headers=(("dlt-original-topic", topic), ("dlt-original-offset", b"4")))
    good = records.event("e3", aggregate_id="o-2", version=1)

    outcomes = await asyncio.wait_for(_processor(engine, registry).process([bad, good]), 60)

    # Named by its value all the same (its eventId is fine; its header is not).
    assert [(o.kind, o.event_id) for o in outcomes] == [
        (Kind.POISON, "e2"),
        (Kind.APPLIED, "e3"),
    ]
    [dead] = await outbox.records()
    assert header_map(dead)["dlt-reason"] == "invalid-header"
    [row] = await db.failed()
    assert (row["reason"], row["topic"], row["offset"]) == ("invalid-header", TOPIC, bad.offset)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_poison_replayed_twice_into_one_batch_is_recorded_once(engine: AsyncEngine) -> None:
    registry, records, db, outbox = Registry(), Records(), Db(engine), Outbox(engine)

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    origin = (
        ("dlt-original-topic", TOPIC.encode()),
        ("dlt-original-partition", b"0"),
        ("dlt-original-offset", b"41"),
        ("dlt-replay-count", b"1"),
    )
    first = records.raw(b"{still not json", headers=origin)
    second = records.raw(b"{still not json", headers=origin)
    good = records.event("e3", version=1)

    outcomes = await asyncio.wait_for(
        _processor(engine, registry).process([first, second, good]), 60
    )

    assert [(o.kind, o.event_id) for o in outcomes] == [
        (Kind.POISON, None),
        (Kind.POISON, None),
        (Kind.APPLIED, "e3"),
    ]
    [dead] = await outbox.records()
    assert header_map(dead)["dlt-original-offset"] == "41"
    [row] = await db.failed()
    assert (row["topic"], row["offset"], row["status"]) == (TOPIC, 41, "dead")
