"""A batch's first attempt looks up dedup records only where the version rows leave it open.

Contract of ``ConsumerBatch`` with ``trust_versions`` (every batch's first attempt):
only an applied event takes its aggregate's version, so a versioned event ahead of
its aggregate's stored version (or of an aggregate with none) cannot have been
applied, and its eventId is not looked up among the applied: only unversioned events
and versioned ones at or below the stored version are. Parked events and open
failures are still looked up for every eventId. An eventId a producer reused for
another aggregate, ahead of that aggregate's version, collides with its dedup record:
the batch runs again once with every eventId looked up, and the event is found to be
another event under a reused id: dead-lettered, applied nowhere.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import pytest

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.pipeline.store import ConsumerStore, Seen
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import (
    Db,
    MakeProcessor,
    conflict_reruns,
    kinds,
    process_bounded,
    write_effect,
)


def register(registry: Registry) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[set[str] | None]:
    """The eventIds each dedup lookup asked the applied table for (``None``: all)."""
    calls: list[set[str] | None] = []
    original = ConsumerStore.seen_event_ids

    async def spy(
        self: ConsumerStore,
        event_ids: Sequence[str],
        applied_asked: Collection[str] | None = None,
        **more: Any,
    ) -> Seen:
        calls.append(None if applied_asked is None else set(applied_asked))
        return await original(self, event_ids, applied_asked, **more)

    monkeypatch.setattr(ConsumerStore, "seen_event_ids", spy)
    return calls


async def test_only_events_the_versions_leave_open_are_looked_up(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    asked: list[Any],
) -> None:
    register(registry)
    await process_bounded(make_processor(), [records.event("a1", version=1)])
    assert asked == [set()]

    again = [
        records.event("a1", version=1),  # at the stored version: looked up, a duplicate
        records.event("a2", version=2),  # ahead: cannot have been applied
        records.event("b1", aggregate_id="o-2", version=1),  # no version row yet
        records.event("free", version=None),  # no version to go by
    ]
    outcomes = await process_bounded(make_processor(), again)

    assert asked[1] == {"a1", "free"}
    assert kinds(outcomes) == [
        ("a1", Kind.DUPLICATE),
        ("a2", Kind.APPLIED),
        ("b1", Kind.APPLIED),
        ("free", Kind.APPLIED),
    ]
    assert await db.effects("points") == ["a1", "a2", "b1", "free"]


async def test_an_event_id_reused_for_another_aggregate_is_found_on_the_second_attempt(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    asked: list[Any],
) -> None:
    register(registry)
    await process_bounded(make_processor(), [records.event("e", version=1)])
    before = conflict_reruns()

    reused = records.event("e", aggregate_id="o-2", version=1)
    outcomes = await process_bounded(make_processor(), [reused, records.event("f", version=2)])

    assert kinds(outcomes) == [("e", Kind.DEAD_LETTERED), ("f", Kind.APPLIED)]
    assert await db.effects("points") == ["e", "f"]
    assert await db.consumed("points") == ["e", "f"]
    assert conflict_reruns() - before == 1  # the first attempt collided, the second looked
    assert asked[1:] == [set(), None]
