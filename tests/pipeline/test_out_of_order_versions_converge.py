"""Versions of one aggregate apply in version order, whatever order they arrive in.

Contract: for each consumer, an event whose ``aggregateVersion`` is ahead of
the aggregate's next version is ``Parked`` (its raw record stored in
``parked_event``) and runs no handler; when the missing version applies, the
parked successors apply in version order in the same transaction and leave
``parked_event``. Parked events live in the database, so they survive between
batches and across processor instances. Aggregates do not wait for each other.
"""

from __future__ import annotations

from app.context import HandlerContext
from app.db import tables
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds, write_effect


def register_recording(registry: Registry, calls: list[tuple[str, int | None]]) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        calls.append((event.aggregate_id, event.aggregate_version))
        await write_effect(event, ctx)


async def test_versions_reversed_in_one_batch_apply_in_version_order(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[tuple[str, int | None]] = []
    register_recording(registry, calls)
    batch = [records.event(f"e{v}", version=v) for v in (3, 2, 1)]

    outcomes = await make_processor().process(batch)

    assert kinds(outcomes) == [
        ("e3", Kind.PARKED),
        ("e2", Kind.PARKED),
        ("e1", Kind.APPLIED),
        ("e2", Kind.APPLIED),
        ("e3", Kind.APPLIED),
    ]
    assert calls == [("o-1", 1), ("o-1", 2), ("o-1", 3)]
    assert await db.effects() == ["e1", "e2", "e3"]
    assert await db.parked("points") == []
    assert await db.version("points") == 3
    assert await db.consumed("points") == ["e1", "e2", "e3"]


async def test_versions_reversed_across_batches_wait_in_the_database_until_the_gap_closes(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[tuple[str, int | None]] = []
    register_recording(registry, calls)

    # Every batch gets a new processor, as after a restart: only the database remembers.
    third = await make_processor().process([records.event("e3", version=3)])
    assert kinds(third) == [("e3", Kind.PARKED)]
    assert await db.parked("points") == ["e3"]
    assert await db.version("points") is None

    second = await make_processor().process([records.event("e2", version=2)])
    assert kinds(second) == [("e2", Kind.PARKED)]
    assert await db.parked("points") == ["e2", "e3"]
    assert calls == []

    first = await make_processor().process([records.event("e1", version=1)])

    assert kinds(first) == [("e1", Kind.APPLIED), ("e2", Kind.APPLIED), ("e3", Kind.APPLIED)]
    assert calls == [("o-1", 1), ("o-1", 2), ("o-1", 3)]
    assert await db.effects() == ["e1", "e2", "e3"]
    assert await db.parked("points") == []
    assert await db.version("points") == 3
    assert await db.consumed("points") == ["e1", "e2", "e3"]


async def test_a_gap_closed_by_a_later_batch_drains_parked_and_new_events_together(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[tuple[str, int | None]] = []
    register_recording(registry, calls)
    await make_processor().process([records.event("e2", version=2), records.event("e4", version=4)])

    await make_processor().process([records.event("e3", version=3), records.event("e1", version=1)])

    assert [version for _, version in calls] == [1, 2, 3, 4]
    assert await db.parked("points") == []
    assert await db.version("points") == 4


async def test_a_parked_event_stays_parked_while_its_gap_is_still_open(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[tuple[str, int | None]] = []
    register_recording(registry, calls)
    await make_processor().process([records.event("e3", version=3)])

    outcomes = await make_processor().process([records.event("e1", version=1)])

    assert kinds(outcomes) == [("e1", Kind.APPLIED)]
    assert calls == [("o-1", 1)]
    assert await db.parked("points") == ["e3"]
    assert await db.version("points") == 1


async def test_a_parked_aggregate_does_not_hold_up_another_aggregate(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[tuple[str, int | None]] = []
    register_recording(registry, calls)
    batch = [
        records.event("a2", aggregate_id="o-a", version=2),
        records.event("b1", aggregate_id="o-b", version=1),
        records.event("b2", aggregate_id="o-b", version=2),
    ]

    outcomes = await make_processor().process(batch)

    assert kinds(outcomes) == [("a2", Kind.PARKED), ("b1", Kind.APPLIED), ("b2", Kind.APPLIED)]
    assert calls == [("o-b", 1), ("o-b", 2)]
    assert await db.parked("points") == ["a2"]
    assert await db.version("points", "o-a") is None
    assert await db.version("points", "o-b") == 2


async def test_a_drained_event_keeps_its_original_record(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    seen: list[Event] = []

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        seen.append(event)

    early = records.event(
        "e2",
        version=2,
        traceId="trace-2",
        data={
            "orderId": "o-1",
            "userId": "u-9",
            "amount": "12.50",
            "paidAt": "2024-05-02T08:00:00Z",
        },
    )
    await make_processor().process([early])
    parked = await db.rows(tables.parked_event, event_id="e2")

    await make_processor().process([records.event("e1", version=1)])

    assert parked[0]["record_value"] == early.value
    assert parked[0]["record_key"] == early.key
    assert parked[0]["offset"] == early.offset
    drained = seen[1]
    assert drained.event_id == "e2"
    assert drained.trace_id == "trace-2"
    assert drained.data.user_id == "u-9"
    assert str(drained.data.amount) == "12.50"
