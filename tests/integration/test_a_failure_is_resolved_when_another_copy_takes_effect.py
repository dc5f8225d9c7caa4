"""A failure is resolved when its event takes effect through another copy, on each database.

Contract, through the batch processor on SQLite, PostgreSQL and MariaDB: a
``retrying`` ``failed_event`` row becomes ``resolved`` when a second copy of its
event (same bytes, a later offset of the main topic) applies for its consumer; a
row still open when the event is applied already (a failure committed after the
second copy's lookup) is resolved by its retry record, which finds the event a
duplicate; another consumer's row of the same event is left as it is. (Every
case, on SQLite: the test of the same name in ``tests/pipeline``.)
"""

from __future__ import annotations

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.db.engine import session_factory
from app.db.tables import failed_event
from app.pipeline.outcomes import Kind
from app.pipeline.pause import Backoff
from app.pipeline.processor import BatchProcessor
from app.pipeline.route import FailureRouter
from app.registry import Registry, handler
from dlq.policy import RetryPolicy
from schemas.envelope import Event
from tests.integration.support.databases import BACKENDS
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import Db, Outbox, header_map, kinds, write_effect

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_second_copy_resolves_the_failure_of_the_first(engine: AsyncEngine) -> None:
    registry, records, db = Registry(), Records(), Db(engine)
    failing = {"points", "billing"}

    for consumer in ("points", "billing"):

        @handler("OrderPaid", consumer=consumer, registry=registry)
        async def apply(event: Event, ctx: HandlerContext) -> None:
            if ctx.consumer in failing:
                raise ValueError("not yet")
            await write_effect(event, ctx)

    processor = BatchProcessor(
        session_factory(engine),
        registry,
        FailureRouter(RetryPolicy(TOPIC, (1.0,))),
        backoff=Backoff(initial=0.001, maximum=0.001, jitter=0.0),
        concurrent_consumers=False,
    )
    first = records.event("e1")
    await processor.process([first])
    failing.discard("points")

    second = await processor.process([records.again(first)])

    assert kinds(second, "points") == [("e1", Kind.APPLIED)]
    assert await statuses(db) == {"points": "resolved", "billing": "retrying"}

    # A failure committed after the second copy's lookup: its retry record resolves it.
    async with engine.begin() as conn:
        await conn.execute(
            update(failed_event)
            .where(failed_event.c.consumer_group == "points")
            .values(status="retrying")
        )
    [retry] = [
        r
        for r in await Outbox(engine).records()
        if header_map(r)["retry-consumer-group"] == "points"
    ]
    late = await processor.process([records.delivered(retry)])

    assert kinds(late) == [("e1", Kind.DUPLICATE)]
    assert await statuses(db) == {"points": "resolved", "billing": "retrying"}


async def statuses(db: Db) -> dict[str, str]:
    return {row["consumer_group"]: row["status"] for row in await db.failed()}
