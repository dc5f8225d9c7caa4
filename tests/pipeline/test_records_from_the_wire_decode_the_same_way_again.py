"""A record as a foreign producer wrote it is stored and forwarded as it came, and decodes the
same way every time.

Contract: a Debezium-router record (schema-wrapped JSON string value, schema-wrapped
key, JSON-quoted headers with the event id and type) whose handler fails goes to
its retry tier with its key, value and original headers byte for byte; delivered
back, it decodes to the same event (id from the header, aggregate from the key)
and applies once. An event whose aggregate comes from the key and the configured
default (no ``aggregateId`` or ``aggregateType`` in the value) parks as it came;
when its gap closes in a later batch, its stored bytes decode again with the same
default, and every dedup record and version names that one aggregate.
"""

from __future__ import annotations

from typing import Any

import orjson

from app.context import HandlerContext
from app.db import tables
from app.pipeline.outcomes import Kind
from app.records import RawRecord
from app.registry import Registry, handler
from dlq.records import original_headers
from schemas.envelope import Event
from tests.pipeline.events import Records, envelope
from tests.pipeline.support import Db, MakeProcessor, Outbox, kinds, write_effect

WRAPPED = b'{"schema":{"type":"string","optional":false},"payload":'


def router_record(records: Records, env: dict[str, Any], offset_key: str) -> RawRecord:
    payload = {k: v for k, v in env.items() if k not in ("eventId", "aggregateId")}
    source = records.raw(WRAPPED + orjson.dumps(orjson.dumps(payload).decode()) + b"}")
    return source._replace(
        key=WRAPPED + orjson.dumps(offset_key) + b"}",
        headers=(
            ("__debezium.context.connectorName", b'"postgresql"'),
            ("id", orjson.dumps(env["eventId"])),
            ("eventType", orjson.dumps(env["eventType"])),
        ),
    )


async def test_a_router_record_is_retried_byte_for_byte_and_decodes_the_same_way(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    failing = {"e1"}

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        if event.event_id in failing:
            raise RuntimeError("not yet")
        await write_effect(event, ctx)

    source = router_record(records, envelope("e1", aggregate_id="o-1", version=1), "o-1")
    first = await make_processor().process([source])

    assert kinds(first) == [("e1", Kind.RETRIED)]
    [retry] = await outbox.records()
    assert (retry.key, retry.value) == (source.key, source.value)
    assert tuple(original_headers(records.delivered(retry))) == source.headers

    failing.clear()
    again = await make_processor().process([records.delivered(retry)])

    assert kinds(again) == [("e1", Kind.APPLIED)]
    assert await db.effects("points") == ["e1"]
    assert await db.version("points", "o-1") == 1


async def test_a_parked_event_decodes_again_with_the_same_default_aggregate_type(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    def keyed(event_id: str, version: int) -> RawRecord:
        env = envelope(event_id, aggregate_id="o-7", version=version)
        del env["aggregateId"], env["aggregateType"]
        return records.raw(orjson.dumps(env), key=b"o-7")

    second, first = keyed("e2", 2), keyed("e1", 1)

    parked = await make_processor(default_aggregate_type="SHOP").process([second])
    drained = await make_processor(default_aggregate_type="SHOP").process([first])

    assert kinds(parked) == [("e2", Kind.PARKED)]
    assert kinds(drained) == [("e1", Kind.APPLIED), ("e2", Kind.APPLIED)]
    assert await db.effects("points") == ["e1", "e2"]
    rows = await db.rows(tables.consumed_event)
    assert {(r["aggregate_type"], r["aggregate_id"]) for r in rows} == {("SHOP", "o-7")}
    assert [r["aggregate_type"] for r in await db.rows(tables.aggregate_version)] == ["SHOP"]
