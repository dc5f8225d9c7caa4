"""A new eventId whose version the aggregate has already passed is skipped, not applied.

Contract: for each consumer, an event with ``aggregateVersion <= last applied``
and an eventId never seen before is ``Stale``: no handler runs, no dedup row is
written, and the aggregate's version does not move. Likewise a second event
claiming a version that another event already holds while parked.
"""

from __future__ import annotations

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds, write_effect


def register_recording(registry: Registry, calls: list[str]) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.event_id)
        await write_effect(event, ctx)


async def test_new_events_at_old_versions_in_a_later_batch_are_stale(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_recording(registry, calls)
    await make_processor().process([records.event("e1", version=1), records.event("e2", version=2)])

    outcomes = await make_processor().process(
        [records.event("late-2", version=2), records.event("late-1", version=1)]
    )

    assert kinds(outcomes) == [("late-2", Kind.STALE), ("late-1", Kind.STALE)]
    assert outcomes[0].detail == "version 2 <= last applied 2"
    assert calls == ["e1", "e2"]
    assert await db.consumed("points") == ["e1", "e2"]
    assert await db.version("points") == 2


async def test_a_second_event_for_a_version_just_applied_in_the_same_batch_is_stale(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_recording(registry, calls)

    outcomes = await make_processor().process(
        [records.event("first", version=1), records.event("second", version=1)]
    )

    assert kinds(outcomes) == [("first", Kind.APPLIED), ("second", Kind.STALE)]
    assert calls == ["first"]
    assert await db.consumed("points") == ["first"]
    assert await db.version("points") == 1


async def test_a_second_event_for_a_version_already_parked_is_stale(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_recording(registry, calls)
    await make_processor().process([records.event("holder", version=2)])

    claim = await make_processor().process([records.event("rival", version=2)])
    closing = await make_processor().process([records.event("e1", version=1)])

    assert kinds(claim) == [("rival", Kind.STALE)]
    assert claim[0].detail == "another event already holds version 2"
    assert kinds(closing) == [("e1", Kind.APPLIED), ("holder", Kind.APPLIED)]
    assert calls == ["e1", "holder"]
    assert await db.parked("points") == []


async def test_a_second_event_for_a_version_parked_earlier_in_the_batch_is_stale(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_recording(registry, calls)

    outcomes = await make_processor().process(
        [
            records.event("holder", version=2),
            records.event("rival", version=2),
            records.event("e1", version=1),
        ]
    )

    assert kinds(outcomes) == [
        ("holder", Kind.PARKED),
        ("rival", Kind.STALE),
        ("e1", Kind.APPLIED),
        ("holder", Kind.APPLIED),
    ]
    assert calls == ["e1", "holder"]
    assert await db.consumed("points") == ["e1", "holder"]
    assert await db.version("points") == 2
