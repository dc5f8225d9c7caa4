"""Services reading one topic share its retry tiers and DLT: each takes its own records.

Contract: a worker's retry and DLT records say its deployment (``dlt-app-id: <APP_ID>``).
A retry, replay or skip record that names another deployment is left alone by this one,
even for a consumer of the same name: no handler runs, no version is taken, no outcome
is counted, nothing is written (billing's operator skipping billing's ``audit`` never
makes shipping's ``audit`` skip). Its own deployment's record, and one written before
records said whose they are (no ``dlt-app-id``), is taken as before.
"""

from __future__ import annotations

from dataclasses import replace

from app.context import HandlerContext
from app.errors import PermanentError
from app.pipeline.outcomes import Kind
from app.pipeline.processor import BatchProcessor
from app.registry import Registry, handler
from dlq.records import replay_record
from dlq.topics import dlt_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import Db, MakeProcessor, Outbox, kinds, write_effect

SHIPPING = "shipping"
BILLING = "billing"


def deployment(make_processor: MakeProcessor, app_id: str) -> BatchProcessor:
    """A processor of the deployment ``app_id``, its failures' records saying so."""
    processor = make_processor(app_id=app_id)
    processor.router = replace(processor.router, app_id=app_id)
    return processor


async def test_a_skip_of_another_deployment_is_left_alone(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    outbox: Outbox,
) -> None:
    broken = {"e1"}

    @handler("OrderPaid", consumer="audit", registry=registry)
    async def audit(event: Event, ctx: HandlerContext) -> None:
        if event.event_id in broken:
            raise PermanentError("no audit trail for o-1")
        await write_effect(event, ctx)

    def shipping() -> BatchProcessor:
        return deployment(make_processor, SHIPPING)

    batch = [records.event("e1", version=1), records.event("e2", version=2)]
    first = await shipping().process(batch)
    assert kinds(first, "audit") == [("e1", Kind.DEAD_LETTERED), ("e2", Kind.PARKED)]
    [dead] = await outbox.to(dlt_topic(TOPIC))
    assert dict(dead.headers)["dlt-app-id"] == SHIPPING.encode()
    from_the_dlt = records.delivered(dead)

    # Billing's operator skips billing's failure of e1 for its own consumer "audit".
    theirs = records.delivered(replay_record(from_the_dlt, True, "audit", BILLING))
    assert await shipping().process([theirs]) == []
    assert await db.parked("audit") == ["e2"]
    assert await db.consumed("audit") == []
    assert len(await outbox.records()) == 1

    ours = records.delivered(replay_record(from_the_dlt, True, "audit", SHIPPING))
    taken = await shipping().process([ours])
    assert kinds(taken, "audit") == [("e1", Kind.SKIPPED), ("e2", Kind.APPLIED)]


async def test_a_record_that_names_no_deployment_is_taken_as_before(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, outbox: Outbox
) -> None:
    handler("OrderPaid", consumer="audit", registry=registry)(write_effect)
    main = records.event("e1", version=1)
    await deployment(make_processor, SHIPPING).process([main])
    legacy = records.delivered(replay_record(records.again(main), True, "audit"))
    assert b"dlt-app-id" not in b"".join(name.encode() for name, _ in legacy.headers)

    taken = await deployment(make_processor, SHIPPING).process([legacy])

    assert kinds(taken, "audit") == [("e1", Kind.DUPLICATE)]
