"""An operator's skip lets an aggregate move on without its dead event.

Contract: a dead-lettered version 1 keeps its aggregate's version 2 parked.
A skip record (what ``python -m dlq skip`` publishes: the DLT record's key and
value on the original topic, with ``retry-consumer-group: <consumer>`` and
``retry-action: skip``) takes version 1 for that consumer without running any
of its handlers (outcome ``SKIPPED``), which drains version 2 (``APPLIED``);
the ``failed_event`` row becomes ``skipped``. Other consumers are not run.
From then on the skipped event is a ``DUPLICATE`` for that consumer: replaying
it (any number of times) or redelivering it runs no handler and leaves the row
``skipped``.
"""

from __future__ import annotations

from app.context import HandlerContext
from app.errors import PermanentError
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from dlq.records import replay_record
from dlq.topics import dlt_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import Db, MakeProcessor, Outbox, kinds, write_effect


async def test_a_skip_takes_the_dead_version_without_its_handler_and_drains_the_next(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    broken = {"e1"}
    calls: list[tuple[str, str]] = []

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        calls.append((ctx.consumer, event.event_id))
        if event.event_id in broken:
            raise PermanentError("order o-1 has no points account")
        await write_effect(event, ctx)

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def notify(event: Event, ctx: HandlerContext) -> None:
        calls.append((ctx.consumer, event.event_id))
        await write_effect(event, ctx)

    main = records.event("e1", version=1)
    first = await make_processor().process([main, records.event("e2", version=2)])
    assert kinds(first, "points") == [("e1", Kind.DEAD_LETTERED), ("e2", Kind.PARKED)]
    [dead] = await outbox.records()
    assert dead.topic == dlt_topic(TOPIC)
    assert await db.parked("points") == ["e2"]

    # The operator gives up on e1 for points; e1 itself would now succeed.
    broken.clear()
    calls.clear()
    from_the_dlt = records.delivered(dead)
    skip = records.delivered(replay_record(from_the_dlt, skip=True))
    assert (skip.topic, skip.header("retry-consumer-group"), skip.header("retry-action")) == (
        TOPIC,
        b"points",
        b"skip",
    )

    outcomes = await make_processor().process([skip])

    assert [(o.consumer, o.event_id, o.kind) for o in outcomes] == [
        ("points", "e1", Kind.SKIPPED),
        ("points", "e2", Kind.APPLIED),
    ]
    assert calls == [("points", "e2")]
    assert await db.effects("points") == ["e2"]
    assert await db.parked("points") == []
    assert await db.consumed("points") == ["e1", "e2"]
    assert await db.version("points") == 2
    [row] = await db.failed("points")
    assert (row["event_id"], row["status"]) == ("e1", "skipped")
    assert (row["topic"], row["offset"]) == (main.topic, main.offset)

    # Replayed twice, and redelivered as it first arrived: applied never, never run.
    again = [
        await make_processor().process([records.delivered(replay_record(from_the_dlt))]),
        await make_processor().process([records.delivered(replay_record(from_the_dlt))]),
        await make_processor().process([records.again(main)]),
    ]

    assert [kinds(o, "points") for o in again] == [[("e1", Kind.DUPLICATE)]] * 3
    assert calls == [("points", "e2")]
    assert await db.effects("points") == ["e2"]
    assert await db.effects("notification") == ["e1", "e2"]
    [row] = await db.failed("points")
    assert row["status"] == "skipped"
    assert len(await outbox.records()) == 1
