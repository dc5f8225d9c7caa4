"""A retry record delivered again, after its batch committed, is not run again.

Contract: a retry record's batch commits the next tier's record (or the DLT's) with the
failure's attempts; if the commit of its offset then fails (the broker went away) the
record comes again. That copy, and any later one, is a duplicate for its consumer: its
handler does not run, no record is written, and the failure's row keeps its count, at
every tier and after the last (the DLT's). A replayed record, whose attempts start
afresh, is run as ever. Before, each copy ran the handler again and wrote a second
next-tier record: the event's trip forked into two chains and reached the DLT twice.
"""

from __future__ import annotations

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from dlq.topics import dlt_topic, retry_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import Db, FrozenClock, MakeProcessor, Outbox, kinds

DELAYS = (1.0, 5.0)


async def test_each_tiers_record_runs_once_however_often_it_comes(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
    clock: FrozenClock,
) -> None:
    calls: list[str] = []

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.event_id)
        raise ValueError("points service says no")

    processor = make_processor(delays=DELAYS)
    await processor.process([records.event("e1")])
    [to_tier_1] = await outbox.records()

    clock.advance(1)
    first = await processor.process([records.delivered(to_tier_1)])
    runs = len(calls)
    again = await processor.process([records.delivered(to_tier_1)])
    assert len(calls) == runs  # the handler did not run for the copy

    assert kinds(first) == [("e1", Kind.RETRIED)]
    assert kinds(again) == [("e1", Kind.DUPLICATE)]
    to_tier_2 = (await outbox.records())[-1]
    assert [r.topic for r in await outbox.records()] == [
        retry_topic(TOPIC, 1),
        retry_topic(TOPIC, 5),
    ]

    clock.advance(5)
    last = await processor.process([records.delivered(to_tier_2)])
    runs = len(calls)
    after = await processor.process([records.delivered(to_tier_2), records.delivered(to_tier_1)])
    assert len(calls) == runs

    assert kinds(last) == [("e1", Kind.DEAD_LETTERED)]
    assert kinds(after) == [("e1", Kind.DUPLICATE), ("e1", Kind.DUPLICATE)]
    assert [r.topic for r in await outbox.records()] == [
        retry_topic(TOPIC, 1),
        retry_topic(TOPIC, 5),
        dlt_topic(TOPIC),
    ]
    [row] = await db.failed("points")
    assert (row["status"], row["attempts"]) == ("dead", 3)
