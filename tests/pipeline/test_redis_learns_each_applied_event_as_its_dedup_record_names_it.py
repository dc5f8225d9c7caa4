"""Redis learns each event a consumer's transaction applied, as its dedup record names it.

Contract: after a consumer's transaction commits, the prefilter is told every event it
applied, by eventId, each with its aggregate and version (``ConsumerBatch.applied``):
the batch's own, and the parked events a batch's missing version released (their
records came in an earlier batch). A parked event is not told while it waits, a
failed one never. Of two records with one eventId for different events, Redis learns
the one applied, not the one dead-lettered as reusing its id.
"""

from __future__ import annotations

from app.context import HandlerContext
from app.errors import PermanentError
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import KnowingRedis, MakeProcessor, kinds, write_effect

CONSUMER = "points"


def register(registry: Registry) -> None:
    @handler("OrderPaid", consumer=CONSUMER, registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        if event.event_id.startswith("bad"):
            raise PermanentError(f"{event.event_id} cannot apply")
        await write_effect(event, ctx)


async def test_a_parked_event_is_learned_once_its_gap_closes(
    make_processor: MakeProcessor, registry: Registry, records: Records
) -> None:
    register(registry)
    redis = KnowingRedis()

    waiting = await make_processor(prefilter=redis).process([records.event("e2", version=2)])
    assert kinds(waiting) == [("e2", Kind.PARKED)]
    assert redis.keys == {}

    closing = await make_processor(prefilter=redis).process([records.event("e1", version=1)])

    assert kinds(closing) == [("e1", Kind.APPLIED), ("e2", Kind.APPLIED)]
    assert redis.keys == {
        (CONSUMER, "e1"): ("Order", "o-1", 1),
        (CONSUMER, "e2"): ("Order", "o-1", 2),
    }


async def test_a_failed_event_and_a_reused_id_are_not_learned(
    make_processor: MakeProcessor, registry: Registry, records: Records
) -> None:
    register(registry)
    redis = KnowingRedis()

    outcomes = await make_processor(prefilter=redis).process(
        [
            records.event("a", aggregate_id="o-1", version=1),
            records.event("a", aggregate_id="o-2", version=1),
            records.event("bad", aggregate_id="o-3", version=1),
        ]
    )

    assert kinds(outcomes) == [
        ("a", Kind.APPLIED),
        ("a", Kind.DEAD_LETTERED),
        ("bad", Kind.DEAD_LETTERED),
    ]
    assert redis.keys == {(CONSUMER, "a"): ("Order", "o-1", 1)}
