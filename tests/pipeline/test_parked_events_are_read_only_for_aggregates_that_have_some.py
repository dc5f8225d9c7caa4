"""A batch reads parked events only of its aggregates that have some.

Contract of ``ConsumerBatch`` and ``ConsumerStore.seen_event_ids``: the dedup lookup's
statement also names which of the batch's aggregates have parked events, and only
those aggregates' parked events are read (nearly always none: no statement). An
aggregate whose gap closes still drains what waited for it, whatever else the batch
holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.pipeline.store import Aggregate, ConsumerStore, ParkedRow
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds, process_bounded, write_effect


def register(registry: Registry) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)


@pytest.fixture
def parked_reads(monkeypatch: pytest.MonkeyPatch) -> list[list[Aggregate]]:
    """The aggregates each read of parked events asked for."""
    calls: list[list[Aggregate]] = []
    original = ConsumerStore.parked_for

    async def spy(
        self: ConsumerStore, aggregates: Sequence[Aggregate]
    ) -> dict[Aggregate, dict[int, ParkedRow]]:
        calls.append(sorted(aggregates))
        return await original(self, aggregates)

    monkeypatch.setattr(ConsumerStore, "parked_for", spy)
    return calls


async def test_only_aggregates_with_parked_events_have_them_read(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    parked_reads: list[Any],
) -> None:
    register(registry)
    first = [
        records.event("a1", aggregate_id="o-1", version=1),
        records.event("b2", aggregate_id="o-2", version=2),  # parks: o-2's 1 is missing
    ]
    assert kinds(await process_bounded(make_processor(), first)) == [
        ("a1", Kind.APPLIED),
        ("b2", Kind.PARKED),
    ]
    assert parked_reads == []  # nothing parked before the batch: no read

    second = [
        records.event("a2", aggregate_id="o-1", version=2),
        records.event("b1", aggregate_id="o-2", version=1),  # closes o-2's gap
        records.event("c1", aggregate_id="o-3", version=1),
    ]
    outcomes = await process_bounded(make_processor(), second)

    assert parked_reads == [[("Order", "o-2")]]
    assert kinds(outcomes) == [
        ("a2", Kind.APPLIED),
        ("b1", Kind.APPLIED),
        ("b2", Kind.APPLIED),
        ("c1", Kind.APPLIED),
    ]
    assert sorted(await db.effects("points")) == ["a1", "a2", "b1", "b2", "c1"]


async def test_aggregates_of_many_types_beyond_one_list_are_all_asked(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    parked_reads: list[Any],
) -> None:
    register(registry)
    # Three types of 300 aggregates: more aggregates than one list of ids holds, and more
    # lists of them than of the batch's eventIds.
    aggregates = [(kind, f"{kind}-{n}") for kind in ("Cart", "Order", "Refund") for n in range(300)]

    def events(version: int) -> list[Any]:
        return [
            records.event(f"{agg_id}-v{version}", aggregate_id=agg_id, version=version,
                          aggregateType=kind)
            for kind, agg_id in aggregates
        ]  # fmt: skip

    parked = await process_bounded(make_processor(), events(2))
    assert {kind for _, kind in kinds(parked)} == {Kind.PARKED}
    assert parked_reads == []

    outcomes = await process_bounded(make_processor(), events(1))

    assert parked_reads == [sorted(aggregates)]
    assert len(outcomes) == 2 * len(aggregates)
    assert {kind for _, kind in kinds(outcomes)} == {Kind.APPLIED}
    assert len(await db.effects("points")) == 2 * len(aggregates)
