"""Two workers that hold the same events at the same time (a rebalance's zombie and the
partition's new owner) never apply one twice, and never strand a parked event.

Contract, on PostgreSQL and MariaDB, with two processors on one database: worker A
stops inside a handler with its transaction open while worker B processes the same
aggregate; then A goes on. However the database orders them (MariaDB: B waits for
A's version locks; PostgreSQL: B commits first and A, finding an aggregate's version
row changed since it read it, runs its batch again), every event's effect lands once,
each event has one dedup record, and:

- the same event in both: one ``APPLIED`` and one ``DUPLICATE``;
- the same event without ``aggregateVersion`` (it claims no version row, so nothing
  makes B wait or A notice before its dedup insert): A's insert meets B's dedup
  record (23505, 1062), A's batch runs again instead of crashing, and finds a
  duplicate;
- A parks version 2 while B applies version 1: version 2 is applied (by B's drain or by
  A's second run), nothing stays parked, the aggregate ends at version 2.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.metrics import REGISTRY
from app.pipeline.outcomes import Kind, Outcome
from app.pipeline.processor import BatchProcessor
from app.records import RawRecord
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, sequential_processor, write_effect

pytestmark = pytest.mark.integration

RACING_BACKENDS = ("postgresql", "mariadb")
B_MAY_WAIT_SECONDS = 2.0  # MariaDB: B waits for A's locks, so A must go on first
TEST_TIMEOUT_SECONDS = 60.0


class Stall:
    """Holds the first handler call for ``event_id`` until ``release``; later calls pass."""

    def __init__(self, event_id: str) -> None:
        self.event_id: str | None = event_id
        self.inside = asyncio.Event()
        self.go_on = asyncio.Event()

    async def __call__(self, event: Event) -> None:
        if event.event_id == self.event_id:
            self.event_id = None
            self.inside.set()
            await self.go_on.wait()


def points_consumer(registry: Registry, stall: Stall) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)
        await stall(event)


def processor(engine: AsyncEngine, registry: Registry) -> BatchProcessor:
    return sequential_processor(engine, registry, (1.0,))


async def race(
    stall: Stall,
    a: Callable[[], Awaitable[list[Outcome]]],
    b: Callable[[], Awaitable[list[Outcome]]],
) -> list[Outcome]:
    """Run ``a`` until it stalls, then ``b`` (for a while, alone); then let ``a`` go on."""

    async def both() -> list[Outcome]:
        first = asyncio.ensure_future(a())
        await stall.inside.wait()
        second = asyncio.ensure_future(b())
        await asyncio.wait({second}, timeout=B_MAY_WAIT_SECONDS)
        stall.go_on.set()
        return [*await first, *await second]

    return await asyncio.wait_for(both(), TEST_TIMEOUT_SECONDS)


def conflicts() -> float:
    """How many batches of ``points`` ran again after a conflict, in this process."""
    sample = REGISTRY.get_sample_value(
        "effectively_once_batch_reruns_total", {"consumer": "points", "reason": "conflict"}
    )
    return sample or 0.0


def by_event(outcomes: list[Outcome]) -> list[tuple[str | None, Any]]:
    return sorted((o.event_id, o.kind) for o in outcomes)


@pytest.mark.parametrize("backend", RACING_BACKENDS)
@pytest.mark.parametrize("history", [0, 1], ids=["new-aggregate", "aggregate-with-history"])
async def test_the_same_event_in_two_workers_applies_once(
    engine: AsyncEngine, backend: str, history: int
) -> None:
    registry, records, db = Registry(), Records(), Db(engine)
    event_id = f"e{history + 1}"
    stall = Stall(event_id)
    points_consumer(registry, stall)
    earlier = [records.event(f"e{version}", version=version) for version in range(1, history + 1)]
    if earlier:
        await processor(engine, registry).process(earlier)
    first = records.event(event_id, version=history + 1)
    again = records.again(first)
    conflicts_before = conflicts()

    outcomes = await race(
        stall,
        lambda: processor(engine, registry).process([first]),
        lambda: processor(engine, registry).process([again]),
    )

    assert by_event(outcomes) == sorted([(event_id, Kind.APPLIED), (event_id, Kind.DUPLICATE)])
    # PostgreSQL lets B commit first, and A's batch runs again; MariaDB makes B wait.
    assert conflicts() - conflicts_before == (1 if backend == "postgresql" else 0)
    assert await db.effects("points") == [f"e{v}" for v in range(1, history + 2)]
    assert await db.consumed("points") == [f"e{v}" for v in range(1, history + 2)]
    assert await db.version("points") == history + 1


@pytest.mark.parametrize("backend", RACING_BACKENDS)
@pytest.mark.parametrize("history", [0, 1], ids=["new-aggregate", "aggregate-with-history"])
async def test_a_version_parked_while_its_predecessor_applies_is_not_stranded(
    engine: AsyncEngine, backend: str, history: int
) -> None:
    registry, records, db = Registry(), Records(), Db(engine)
    stall = Stall("other")
    points_consumer(registry, stall)
    earlier = [records.event(f"e{version}", version=version) for version in range(1, history + 1)]
    if earlier:
        await processor(engine, registry).process(earlier)
    # With history, A finds the aggregate's version row and parks; only that row, written
    # by B meanwhile, tells A that its parked event could apply now.
    later = records.event(f"e{history + 2}", version=history + 2)
    other: RawRecord = records.event("other", aggregate_id="o-2", version=1)
    first = records.event(f"e{history + 1}", version=history + 1)

    outcomes = await race(
        stall,
        lambda: processor(engine, registry).process([later, other]),
        lambda: processor(engine, registry).process([first]),
    )

    applied = [o.event_id for o in outcomes if o.kind is Kind.APPLIED]
    every = [f"e{v}" for v in range(1, history + 3)]
    assert sorted(applied) == sorted([*every[history:], "other"])
    assert sorted(await db.effects("points")) == sorted([*every, "other"])
    assert await db.consumed("points") == sorted([*every, "other"])
    assert await db.parked("points") == []
    assert await db.version("points") == history + 2
    assert await db.version("points", "o-2") == 1


@pytest.mark.parametrize("backend", RACING_BACKENDS)
async def test_the_same_unversioned_event_in_two_workers_applies_once(
    engine: AsyncEngine, backend: str
) -> None:
    registry, records, db = Registry(), Records(), Db(engine)
    stall = Stall("e1")
    points_consumer(registry, stall)
    first = records.event("e1", version=None)
    again = records.again(first)
    conflicts_before = conflicts()

    outcomes = await race(
        stall,
        lambda: processor(engine, registry).process([first]),
        lambda: processor(engine, registry).process([again]),
    )

    assert by_event(outcomes) == sorted([("e1", Kind.APPLIED), ("e1", Kind.DUPLICATE)])
    assert conflicts() - conflicts_before == 1
    assert await db.effects("points") == ["e1"]
    assert await db.consumed("points") == ["e1"]
