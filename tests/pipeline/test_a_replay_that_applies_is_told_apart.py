"""A replay that applies is told apart from every other applied event, so that it can be counted.

Contract: a dead-lettered version 1 replayed while its handler still fails is
dead-lettered again (no ``APPLIED``); replayed once the handler is fixed, it
is ``APPLIED`` with the detail ``replayed`` for the consumer that failed it,
and the parked version 2 it releases is ``APPLIED`` without it (it was never
dead). Replayed again, it is a ``DUPLICATE``. These outcomes are what
``effectively_once_replays_total`` counts.
"""

from __future__ import annotations

from app.context import HandlerContext
from app.errors import PermanentError
from app.pipeline.outcomes import REPLAYED, Kind, Outcome
from app.registry import Registry, handler
from dlq.records import replay_record
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import MakeProcessor, Outbox, write_effect


async def test_only_the_replay_that_applies_is_marked(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    outbox: Outbox,
) -> None:
    broken = {"e1"}

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        if event.event_id in broken:
            raise PermanentError("not yet")
        await write_effect(event, ctx)

    await make_processor().process([records.event("e1", version=1), records.event("e2", version=2)])
    [dead] = await outbox.records()
    replay = replay_record(records.delivered(dead))

    too_early = await make_processor().process([records.delivered(replay)])
    broken.clear()
    fixed = await make_processor().process([records.delivered(replay)])
    again = await make_processor().process([records.delivered(replay)])

    def seen(outcomes: list[Outcome]) -> list[tuple[str | None, Kind, str]]:
        return [(o.event_id, o.kind, o.detail) for o in outcomes if o.consumer == "points"]

    assert [(e, k) for e, k, _ in seen(too_early)] == [("e1", Kind.DEAD_LETTERED)]
    assert seen(fixed) == [("e1", Kind.APPLIED, REPLAYED), ("e2", Kind.APPLIED, "")]
    assert seen(again) == [("e1", Kind.DUPLICATE, "")]
