"""An aggregate whose event went to a retry tier waits for it; other aggregates do not.

Contract: when version 1 of an aggregate fails and is routed to a retry tier,
its versions 2 and 3 park (their handlers do not run) while another aggregate's
events apply. When the retry record comes back and the handler now succeeds,
version 1 applies and then 2 and 3, in version order (handler call order), in
that one batch: nothing stays parked, every event applies once, the version is
3 and the ``failed_event`` row of version 1 is marked ``resolved``.
"""

from __future__ import annotations

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from dlq.topics import retry_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import Db, MakeProcessor, Outbox, kinds, write_effect


async def test_successors_park_behind_the_retried_event_and_apply_in_order_after_it(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    broken = {"a1"}
    calls: list[str] = []

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        if event.event_id in broken:
            raise ValueError("points service is not ready for a1")
        calls.append(event.event_id)
        await write_effect(event, ctx)

    first = await make_processor().process(
        [
            records.event("a1", aggregate_id="o-a", version=1),
            records.event("a2", aggregate_id="o-a", version=2),
            records.event("b1", aggregate_id="o-b", version=1),
            records.event("a3", aggregate_id="o-a", version=3),
        ]
    )

    assert kinds(first) == [
        ("a1", Kind.RETRIED),
        ("a2", Kind.PARKED),
        ("b1", Kind.APPLIED),
        ("a3", Kind.PARKED),
    ]
    assert set(calls) == {"b1"}  # parked events never reach a handler
    assert await db.parked("points") == ["a2", "a3"]
    assert await db.version("points", "o-a") is None
    [retry] = await outbox.records()
    assert retry.topic == retry_topic(TOPIC, 1)

    broken.clear()
    calls.clear()
    second = await make_processor().process([records.delivered(retry)])

    assert kinds(second) == [("a1", Kind.APPLIED), ("a2", Kind.APPLIED), ("a3", Kind.APPLIED)]
    assert calls == ["a1", "a2", "a3"]
    assert await db.effects() == ["b1", "a1", "a2", "a3"]
    assert await db.parked("points") == []
    assert await db.consumed("points") == ["a1", "a2", "a3", "b1"]
    assert await db.version("points", "o-a") == 3
    [row] = await db.failed("points")
    assert (row["event_id"], row["status"], row["attempts"]) == ("a1", "resolved", 1)
    assert len(await outbox.records()) == 1
