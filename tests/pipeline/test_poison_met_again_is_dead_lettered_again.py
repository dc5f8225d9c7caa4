"""A record whose failure waits for it, met again as poison, is dead-lettered again.

Contract: a retry record for one consumer that no longer decodes (a later deploy's schema
refuses its payload) is that consumer's failure: its ``failed_event`` row goes from
``retrying`` to ``dead`` with the poison's reason and one more attempt, and its DLT
record names the consumer (``dlt-consumer-group``) and the attempts, so ``dlq list
--consumer`` finds it (before, it went to the DLT as nobody's, and the consumer's row
stayed ``retrying`` for good). A poison DLT record an operator replayed (its row
``replayed``) that is still poison goes back to the DLT as a new record and its row is
``dead`` again (before, it counted as dead-lettered before and the row stayed
``replayed``). The same record delivered once more after that (a crash before the offset
moved) is dead-lettered before: no second record.
"""

from __future__ import annotations

import orjson
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.db.tables import failed_event
from app.pipeline.outcomes import DEAD_LETTERED_BEFORE, Kind
from app.registry import Registry, handler
from dlq.records import OutRecord, replay_record
from dlq.topics import dlt_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records, envelope
from tests.pipeline.support import Db, MakeProcessor, Outbox, header_map

DLT = dlt_topic(TOPIC)
REFUSED = {"orderId": "o-1", "userId": "u-1", "amount": "-5"}  # the tightened schema's view


async def test_a_retry_record_that_no_longer_decodes_is_its_consumers_dead_letter(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, outbox: Outbox
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        raise ValueError("points service down for maintenance")

    await make_processor().process([records.event("e1", version=1)])
    [retry] = await outbox.records()
    refused = orjson.dumps(envelope("e1", version=1, data=REFUSED))
    tightened = OutRecord(retry.topic, retry.key, refused, tuple(retry.headers))

    outcomes = await make_processor().process([records.delivered(tightened)])
    redelivered = await make_processor().process([records.delivered(tightened)])

    assert [(o.kind, o.detail) for o in outcomes] == [(Kind.POISON, "invalid-schema")]
    assert [(o.kind, o.detail) for o in redelivered] == [(Kind.POISON, DEAD_LETTERED_BEFORE)]
    [dead] = await outbox.to(DLT)
    headers = header_map(dead)
    assert (headers["dlt-consumer-group"], headers["dlt-attempts"]) == ("points", "2")
    assert headers["dlt-reason"] == "invalid-schema"
    rows = [(r["consumer_group"], r["status"], r["attempts"]) for r in await db.failed()]
    assert rows == [("points", "dead", 2)]


async def test_replayed_poison_that_is_still_poison_goes_back_to_the_dlt(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
    engine: AsyncEngine,
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        pass

    await make_processor().process([records.raw(b"{half a json")])
    [first] = await outbox.to(DLT)
    async with engine.begin() as conn:  # what `python -m dlq replay` records as it replays
        await conn.execute(update(failed_event).values(status="replayed"))
    replay = records.delivered(replay_record(records.delivered(first)))

    outcomes = await make_processor().process([replay])
    redelivered = await make_processor().process([replay])

    assert [(o.kind, o.detail) for o in outcomes] == [(Kind.POISON, "undecodable")]
    assert [(o.kind, o.detail) for o in redelivered] == [(Kind.POISON, DEAD_LETTERED_BEFORE)]
    [_, second] = await outbox.to(DLT)
    assert header_map(second)["dlt-replay-count"] == "1"
    assert header_map(second)["dlt-original-offset"] == header_map(first)["dlt-original-offset"]
    [row] = await db.failed()
    assert (row["consumer_group"], row["status"]) == ("", "dead")
