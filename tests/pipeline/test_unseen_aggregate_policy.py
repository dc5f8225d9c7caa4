"""Where the version gate starts for an aggregate it has never seen.

Contract: with ``UnseenAggregatePolicy.FROM_ONE`` (the default) an unseen
aggregate starts before version 1, so a first event at version 5 is
``Parked`` waiting for version 1. With ``FROM_FIRST_SEEN`` the first version
seen is the start: it applies, and from then on the aggregate is gated as
usual (older versions stale, gaps parked). A failure of that first event does
not make its successor the new start: the aggregate waits for it.
"""

from __future__ import annotations

import pytest

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from app.settings import UnseenAggregatePolicy
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds

FROM_ONE = UnseenAggregatePolicy.FROM_ONE
FROM_FIRST_SEEN = UnseenAggregatePolicy.FROM_FIRST_SEEN


def register_recording(registry: Registry, calls: list[int | None]) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        if event.event_id.startswith("broken"):
            raise ValueError("cannot handle this one")
        calls.append(event.aggregate_version)


async def test_from_one_parks_a_first_event_at_version_five(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[int | None] = []
    register_recording(registry, calls)

    outcomes = await make_processor(policy=FROM_ONE).process([records.event("e5", version=5)])

    assert kinds(outcomes) == [("e5", Kind.PARKED)]
    assert outcomes[0].detail == "Order o-1 at version 5, waiting for version 1"
    assert calls == []
    assert await db.parked("points") == ["e5"]
    assert await db.version("points") is None


async def test_from_one_is_the_default(
    make_processor: MakeProcessor, registry: Registry, records: Records
) -> None:
    register_recording(registry, [])

    outcomes = await make_processor().process([records.event("e5", version=5)])

    assert kinds(outcomes) == [("e5", Kind.PARKED)]


async def test_from_first_seen_accepts_a_first_event_at_version_five_as_the_start(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[int | None] = []
    register_recording(registry, calls)

    outcomes = await make_processor(policy=FROM_FIRST_SEEN).process(
        [records.event("e5", version=5), records.event("e6", version=6)]
    )

    assert kinds(outcomes) == [("e5", Kind.APPLIED), ("e6", Kind.APPLIED)]
    assert calls == [5, 6]
    assert await db.parked("points") == []
    assert await db.version("points") == 6


async def test_from_first_seen_gates_the_aggregate_as_usual_once_it_has_started(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    calls: list[int | None] = []
    register_recording(registry, calls)
    processor = make_processor(policy=FROM_FIRST_SEEN)
    await processor.process([records.event("e5", version=5)])

    outcomes = await processor.process(
        [
            records.event("e4", version=4),
            records.event("e7", version=7),
            records.event("e6", version=6),
        ]
    )

    assert kinds(outcomes) == [
        ("e4", Kind.STALE),
        ("e7", Kind.PARKED),
        ("e6", Kind.APPLIED),
        ("e7", Kind.APPLIED),
    ]
    assert calls == [5, 6, 7]
    assert await db.version("points") == 7


@pytest.mark.parametrize("start", [5, 1])
async def test_from_first_seen_keeps_the_aggregate_waiting_for_a_first_event_that_failed(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, start: int
) -> None:
    calls: list[int | None] = []
    register_recording(registry, calls)
    processor = make_processor(policy=FROM_FIRST_SEEN)

    first = await processor.process([records.event(f"broken-{start}", version=start)])
    later = await processor.process([records.event("next", version=start + 1)])

    assert kinds(first) == [(f"broken-{start}", Kind.RETRIED)]
    # The first version seen is the aggregate's start and has not applied: the next one
    # must wait for it (version 1 too: before, its start 0 was not kept, and 2 applied).
    assert kinds(later) == [("next", Kind.PARKED)]
    assert calls == []
    assert await db.parked("points") == ["next"]
