"""Events without ``aggregateVersion`` are deduplicated but never parked or judged stale.

Contract: an event that carries no ``aggregateVersion`` applies on its first
delivery whatever order it arrives in, is a ``Duplicate`` on every later one,
writes a dedup row with a NULL version, creates no ``aggregate_version`` row
and neither waits for nor moves the versioned events of its aggregate.
"""

from __future__ import annotations

from app.context import HandlerContext
from app.db import tables
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds, process_bounded, write_effect


def register_recording(registry: Registry, calls: list[str]) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.event_id)
        await write_effect(event, ctx)


async def test_unversioned_events_apply_in_arrival_order_and_once(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_recording(registry, calls)
    x, y = records.event("x", version=None), records.event("y", version=None)

    first = await process_bounded(make_processor(), [y, x, records.again(y)])
    later = await process_bounded(make_processor(), [records.again(x)])

    assert kinds(first) == [("y", Kind.APPLIED), ("x", Kind.APPLIED), ("y", Kind.DUPLICATE)]
    assert kinds(later) == [("x", Kind.DUPLICATE)]
    assert calls == ["y", "x"]
    consumed = await db.rows(tables.consumed_event, consumer_group="points")
    assert sorted((r["event_id"], r["aggregate_version"]) for r in consumed) == [
        ("x", None),
        ("y", None),
    ]
    assert await db.rows(tables.aggregate_version) == []


async def test_an_unversioned_event_neither_waits_for_nor_moves_the_versioned_ones(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_recording(registry, calls)

    outcomes = await process_bounded(
        make_processor(), [records.event("v2", version=2), records.event("free", version=None)]
    )

    assert kinds(outcomes) == [("v2", Kind.PARKED), ("free", Kind.APPLIED)]
    assert calls == ["free"]
    assert await db.parked("points") == ["v2"]
    assert await db.version("points") is None
