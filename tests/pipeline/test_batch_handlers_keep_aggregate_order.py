"""A batch handler sees each aggregate at most once per call, and its versions in order.

Contract: through ``BatchProcessor``, a ``batch=True`` handler receives lists
of events of its type in which no aggregate appears twice; an aggregate's
versions in one batch (in order, reversed, interleaved with other
aggregates, or partly parked by an earlier batch) reach the consumer's
handlers, batch or not, of every event type, in version order across calls;
every applied event reaches its handlers exactly once, and the batch handler
is called no more often than the longest run of one aggregate's events.
"""

from __future__ import annotations

from collections import Counter

import pytest

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds, write_effect

Call = list[tuple[str, str, int | None]]  # (event type, aggregate id, version) per event

# The event type of each version: v1 and v3 share one, so that calling a batch
# handler once per type could not put the versions in order by accident.
TYPES = {1: "OrderPaid", 2: "OrderCreated", 3: "OrderPaid"}


def register_batch_recorders(registry: Registry, calls: list[Call]) -> None:
    """A batch handler per order event type in consumer ``points``, recording every call."""
    for event_type in ("OrderCreated", "OrderPaid", "OrderCancelled"):

        @handler(event_type, consumer="points", batch=True, registry=registry)
        async def record(events: list[Event], ctx: HandlerContext) -> None:
            calls.append([(e.event_type, e.aggregate_id, e.aggregate_version) for e in events])
            for event in events:
                await write_effect(event, ctx)


def per_aggregate(calls: list[Call]) -> dict[str, list[int | None]]:
    """Each aggregate's versions in the order the handlers saw them."""
    seen: dict[str, list[int | None]] = {}
    for call in calls:
        for _, aggregate_id, version in call:
            seen.setdefault(aggregate_id, []).append(version)
    return seen


async def test_a_call_never_holds_two_events_of_one_aggregate(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[Call] = []
    register_batch_recorders(registry, calls)
    arrival = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2), ("a", 3), ("c", 2), ("d", 1)]
    batch = [
        records.event(f"{agg}{v}", aggregate_id=agg, version=v, event_type="OrderPaid")
        for agg, v in arrival
    ]

    outcomes = await make_processor().process(batch)

    assert {kind for _, kind in kinds(outcomes)} == {Kind.APPLIED}
    for call in calls:
        assert len({aggregate_id for _, aggregate_id, _ in call}) == len(call), call
    assert per_aggregate(calls) == {"a": [1, 2, 3], "b": [1, 2], "c": [1, 2], "d": [1]}
    assert len(calls) == 3  # "a" has three events: no fewer calls possible, and no more taken
    assert sorted(await db.effects()) == sorted(f"{agg}{v}" for agg, v in arrival)


@pytest.mark.parametrize(
    "arrival",
    [
        [("o-1", 1), ("o-1", 2), ("o-1", 3)],
        [("o-1", 3), ("o-1", 1), ("o-1", 2)],
        [("o-1", 2), ("o-2", 2), ("o-1", 3), ("o-2", 1), ("o-1", 1), ("o-2", 3)],
    ],
    ids=["in-order", "last-first", "interleaved-shuffled"],
)
async def test_versions_in_one_batch_reach_the_handlers_in_version_order(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    arrival: list[tuple[str, int]],
) -> None:
    calls: list[Call] = []
    register_batch_recorders(registry, calls)
    batch = [
        records.event(f"{agg}:{v}", aggregate_id=agg, version=v, event_type=TYPES[v])
        for agg, v in arrival
    ]

    await make_processor().process(batch)

    aggregates = {agg for agg, _ in arrival}
    assert per_aggregate(calls) == {agg: [1, 2, 3] for agg in aggregates}
    for call in calls:
        assert len({aggregate_id for _, aggregate_id, _ in call}) == len(call), call
        # The version decides the type here, so the handler of each type saw its own.
        assert all(event_type == TYPES[v or 0] for event_type, _, v in call)
    assert Counter(await db.effects()) == Counter(f"{agg}:{v}" for agg, v in arrival)
    for agg in aggregates:
        assert await db.version("points", agg) == 3
    assert await db.parked("points") == []


async def test_versions_parked_by_an_earlier_batch_are_drained_in_order(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[Call] = []
    register_batch_recorders(registry, calls)
    await make_processor().process(
        [
            records.event("o-1:3", version=3, event_type=TYPES[3]),
            records.event("o-2:1", aggregate_id="o-2"),
        ]
    )
    assert await db.parked("points") == ["o-1:3"]
    calls.clear()

    await make_processor().process(
        [
            records.event("o-1:2", version=2, event_type=TYPES[2]),
            records.event("o-2:2", aggregate_id="o-2", version=2, event_type=TYPES[2]),
            records.event("o-1:1", version=1, event_type=TYPES[1]),
        ]
    )

    assert per_aggregate(calls) == {"o-1": [1, 2, 3], "o-2": [2]}
    assert Counter(await db.effects()) == Counter(["o-2:1", "o-1:1", "o-1:2", "o-1:3", "o-2:2"])
    assert await db.parked("points") == []
    assert await db.version("points", "o-1") == 3


async def test_batch_and_per_event_handlers_of_one_consumer_see_the_same_order(
    make_processor: MakeProcessor, registry: Registry, records: Records
) -> None:
    batched: list[Call] = []
    single: list[tuple[str, int | None]] = []
    register_batch_recorders(registry, batched)

    @handler("OrderPaid", consumer="points", registry=registry)
    async def one_by_one(event: Event, ctx: HandlerContext) -> None:
        single.append((event.aggregate_id, event.aggregate_version))

    await make_processor().process(
        [
            records.event("a2", aggregate_id="a", version=2),
            records.event("a1", aggregate_id="a", version=1),
            records.event("b1", aggregate_id="b", version=1),
            records.event("b2", aggregate_id="b", version=2),
        ]
    )

    assert per_aggregate(batched) == {"a": [1, 2], "b": [1, 2]}
    assert [v for agg, v in single if agg == "a"] == [1, 2]
    assert [v for agg, v in single if agg == "b"] == [1, 2]
