"""An eventId a producer reused for another event is dead-lettered, not dropped as a duplicate.

Contract: a consumer's dedup record (or parked row) names the event it is of: its
aggregate and version. A record whose eventId has such a record of another aggregate or
version is no duplicate: it is another event under a reused id, which cannot take effect
under that id (a consumer's id takes effect once). It goes to the DLT at once (reason
``non-retryable``, exception ``EventIdReused`` naming both events); its handlers do not
run and its version is not taken, so its aggregate's later versions park behind it, as
behind any dead event. That holds whether the first event was applied in an earlier
batch (found through the version rows' shortcut too, the reused event being ahead of its
aggregate's version), parked, or applied earlier in the same batch. A true duplicate
(same aggregate and version) stays a duplicate. An operator's skip of the dead record
takes its version without a dedup record, and its aggregate's parked successor applies.
With the Redis prefilter, Redis keeps each applied eventId with its event: a record
reusing a known id goes to the database all the same (and so to the DLT), while a true
duplicate is skipped without it.
"""

from __future__ import annotations

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.prefilter.stage import SKIPPED
from app.registry import Registry, handler
from dlq import headers as h
from dlq.records import replay_record
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import (
    Db,
    KnowingRedis,
    MakeProcessor,
    Outbox,
    effect,
    kinds,
    write_effect,
)

CONSUMER = "points"


def register(registry: Registry) -> None:
    @handler("OrderPaid", consumer=CONSUMER, registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)


async def effects_by_aggregate(db: Db) -> list[tuple[str, str]]:
    rows = await db.rows(effect)
    return sorted((r["event_id"], r["aggregate_id"]) for r in rows)


async def test_a_reused_id_on_another_aggregate_goes_to_the_dlt_naming_both(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, outbox: Outbox
) -> None:
    register(registry)
    await make_processor().process([records.event("1001", aggregate_id="o-100", version=1)])

    outcomes = await make_processor().process(
        [records.event("1001", aggregate_id="o-900", version=1)]
    )

    assert kinds(outcomes) == [("1001", Kind.DEAD_LETTERED)]
    assert await effects_by_aggregate(db) == [("1001", "o-100")]
    assert await db.version(CONSUMER, "o-900") is None
    [dead] = await outbox.records()
    headers = dict(dead.headers)
    assert headers[h.DLT_REASON] == b"non-retryable"
    assert headers[h.DLT_EXCEPTION_TYPE] == b"app.errors.EventIdReused"
    said = headers[h.DLT_EXCEPTION_MESSAGE].decode()
    assert "eventId 1001 is Order:o-100@1's" in said and "this event is Order:o-900@1" in said


async def test_a_reused_id_at_another_version_of_the_same_aggregate_too(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    register(registry)
    await make_processor().process([records.event("e1", version=1)])

    outcomes = await make_processor().process(
        [records.event("e1", version=2), records.event("e1", version=1)]
    )

    assert kinds(outcomes) == [("e1", Kind.DEAD_LETTERED), ("e1", Kind.DUPLICATE)]
    assert await db.effects() == ["e1"]


async def test_in_one_batch_and_behind_a_parked_event(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    register(registry)

    outcomes = await make_processor().process(
        [
            records.event("a", aggregate_id="o-1", version=1),
            records.event("a", aggregate_id="o-2", version=1),
            records.event("p", aggregate_id="o-3", version=2),  # parked: waits for 1
        ]
    )
    again = await make_processor().process([records.event("p", aggregate_id="o-4", version=1)])

    assert kinds(outcomes) == [
        ("a", Kind.APPLIED),
        ("a", Kind.DEAD_LETTERED),
        ("p", Kind.PARKED),
    ]
    assert kinds(again) == [("p", Kind.DEAD_LETTERED)]
    assert await effects_by_aggregate(db) == [("a", "o-1")]


async def test_a_skip_of_it_takes_its_version_and_its_successor_applies(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, outbox: Outbox
) -> None:
    register(registry)
    await make_processor().process([records.event("1001", aggregate_id="o-100", version=1)])
    first = await make_processor().process(
        [
            records.event("1001", aggregate_id="o-900", version=1),
            records.event("1002", aggregate_id="o-900", version=2),
        ]
    )
    assert kinds(first) == [("1001", Kind.DEAD_LETTERED), ("1002", Kind.PARKED)]
    [dead] = await outbox.records()

    skip = records.delivered(replay_record(records.delivered(dead), skip=True))
    outcomes = await make_processor().process([skip])

    assert kinds(outcomes) == [("1001", Kind.SKIPPED), ("1002", Kind.APPLIED)]
    assert await db.version(CONSUMER, "o-900") == 2
    assert await effects_by_aggregate(db) == [("1001", "o-100"), ("1002", "o-900")]


async def test_redis_knowing_the_id_does_not_hide_its_reuse(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, outbox: Outbox
) -> None:
    register(registry)
    redis = KnowingRedis()
    first = records.event("1001", aggregate_id="o-100", version=1)
    await make_processor(prefilter=redis).process([first])
    assert redis.keys == {(CONSUMER, "1001"): ("Order", "o-100", 1)}

    outcomes = await make_processor(prefilter=redis).process(
        [records.event("1001", aggregate_id="o-900", version=1), records.again(first)]
    )

    assert [(o.event_id, o.kind, o.detail) for o in outcomes] == [
        ("1001", Kind.DUPLICATE, SKIPPED),  # the same event: Redis's answer stands
        ("1001", Kind.DEAD_LETTERED, "non-retryable"),
    ]
    assert await effects_by_aggregate(db) == [("1001", "o-100")]
    [dead] = await outbox.records()
    assert dict(dead.headers)[h.DLT_EXCEPTION_TYPE] == b"app.errors.EventIdReused"
    assert redis.keys == {(CONSUMER, "1001"): ("Order", "o-100", 1)}
