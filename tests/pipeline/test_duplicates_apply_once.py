"""A duplicate eventId takes effect once per consumer, within a batch and across batches.

Contract: for each consumer, the first delivery of an eventId runs the handlers
and writes one ``consumed_event`` row in the same transaction as the effects;
every later delivery of that eventId (same batch, a redelivered batch, a
producer retry at a new offset, or a copy of an event still parked), with or
without an ``aggregateVersion``, is a ``Duplicate`` outcome, runs no handler and
writes nothing. Every batch is processed within seconds: one that a duplicate keeps
running again (its dedup record already there) fails the test at once, saying so.
"""

from __future__ import annotations

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds, process_bounded, write_effect


def register_counting(registry: Registry, calls: list[str]) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.event_id)
        await write_effect(event, ctx)


async def test_the_same_event_twice_in_one_batch_applies_once(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_counting(registry, calls)
    first = records.event("e1", version=1)

    outcomes = await process_bounded(make_processor(), [first, records.again(first), first])

    assert kinds(outcomes) == [("e1", Kind.APPLIED), ("e1", Kind.DUPLICATE), ("e1", Kind.DUPLICATE)]
    assert calls == ["e1"]
    assert await db.effects() == ["e1"]
    assert await db.consumed("points") == ["e1"]
    assert await db.version("points") == 1


async def test_a_redelivered_batch_applies_nothing_again(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_counting(registry, calls)
    batch = [records.event("e1", version=1), records.event("e2", version=2)]
    await process_bounded(make_processor(), batch)

    # A new processor, as after a restart: only the database remembers.
    outcomes = await process_bounded(make_processor(), batch)

    assert kinds(outcomes) == [("e1", Kind.DUPLICATE), ("e2", Kind.DUPLICATE)]
    assert calls == ["e1", "e2"]
    assert await db.effects() == ["e1", "e2"]
    assert await db.consumed("points") == ["e1", "e2"]
    assert await db.version("points") == 2


async def test_a_producer_retry_at_a_new_offset_in_a_later_batch_is_a_duplicate(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_counting(registry, calls)
    first = records.event("e1", version=1)
    await process_bounded(make_processor(), [first])

    outcomes = await process_bounded(make_processor(), [records.again(first)])

    assert kinds(outcomes) == [("e1", Kind.DUPLICATE)]
    assert calls == ["e1"]
    assert await db.consumed("points") == ["e1"]
    assert await db.effects() == ["e1"]


async def test_an_unversioned_copy_in_a_later_batch_is_a_duplicate(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_counting(registry, calls)
    first = records.event("e1", version=None)  # no version gate: only the dedup record
    await process_bounded(make_processor(), [first])

    outcomes = await process_bounded(make_processor(), [records.again(first)])

    assert kinds(outcomes) == [("e1", Kind.DUPLICATE)]
    assert calls == ["e1"]
    assert await db.consumed("points") == ["e1"]
    assert await db.effects() == ["e1"]


async def test_a_copy_of_a_parked_event_is_a_duplicate_and_it_still_applies_once(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_counting(registry, calls)
    early = records.event("e2", version=2)
    await process_bounded(make_processor(), [early])

    outcomes = await process_bounded(make_processor(), [records.again(early), records.event("e1")])

    assert kinds(outcomes) == [
        ("e2", Kind.DUPLICATE),
        ("e1", Kind.APPLIED),
        ("e2", Kind.APPLIED),
    ]
    assert calls == ["e1", "e2"]
    assert await db.parked("points") == []
    assert await db.consumed("points") == ["e1", "e2"]


async def test_a_batch_larger_than_one_statement_chunk_is_deduplicated_as_a_whole(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[str] = []
    register_counting(registry, calls)
    # 1,200 aggregates and eventIds: more than one IN list of the store's reads.
    batch = [records.event(f"e{n}", aggregate_id=f"o-{n}", version=1) for n in range(1200)]

    first = await process_bounded(make_processor(), batch)
    again = await process_bounded(make_processor(), batch)

    assert [o.kind for o in first] == [Kind.APPLIED] * 1200
    assert [o.kind for o in again] == [Kind.DUPLICATE] * 1200
    assert len(calls) == 1200
    assert len(await db.consumed("points")) == 1200
