"""A dedup or parking record the database keeps refusing is routed, not re-run without end.

Contract, through the batch processor on MariaDB with the tables of revision 0004
(``utf8mb4_bin``, a PAD SPACE collation: ``'e1' = 'e1 '``, so the database refuses a
record for ``e1 `` beside ``e1`` although the lookup, compared in Python, found none):
a batch whose dedup (or parked) record meets a duplicate key runs again at once once,
then after a back-off (``Backoff.delay`` of the conflicts so far), and after
``escalate_after`` conflicts in a row it runs event by event, each event's record
written in the event's own savepoint: the event whose record is refused goes to
the retry tier (its effects rolled back, the failure recorded with the database's
error), the others of the batch apply, and the processor returns. Before, the batch
ran again at once, without a pause or an end, and the partition stayed blocked.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.db.engine import create_engine, session_factory
from app.db.migrate import alembic_config, migration_lock
from app.pipeline.outcomes import Kind
from app.pipeline.pause import Backoff
from app.pipeline.processor import BatchProcessor
from app.pipeline.route import FailureRouter
from app.registry import Registry, handler
from dlq.policy import RetryPolicy
from dlq.topics import retry_topic
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import Db, Outbox, kinds, test_metadata, write_effect

pytestmark = pytest.mark.integration

# A processor that loops on the same batch fails the test instead of hanging it.
WITHIN_SECONDS = 20
ESCALATE_AFTER = 3


@dataclass(frozen=True)
class CountedBackoff(Backoff):
    """A millisecond's pause, noting each attempt it was asked to wait after."""

    asked: list[int] = field(default_factory=list, compare=False)

    def delay(self, attempt: int) -> float:
        self.asked.append(attempt)
        return 0.001


@pytest.fixture
async def padded(make_database: Callable[[str], Awaitable[str]]) -> AsyncIterator[AsyncEngine]:
    """A MariaDB database with the framework's tables as revision 0004 left them."""
    engine = create_engine(await make_database("mariadb"), pool_size=2)

    def upgrade(sync: Connection) -> None:
        config: Config = alembic_config()
        config.attributes["connection"] = sync
        command.upgrade(config, "0004")

    async with engine.begin() as conn, migration_lock(conn):
        await conn.run_sync(upgrade)
    async with engine.begin() as conn:
        await conn.run_sync(test_metadata.create_all)
    yield engine
    await engine.dispose()


def processor_over(engine: AsyncEngine, backoff: Backoff) -> BatchProcessor:
    registry = Registry()

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    return BatchProcessor(
        session_factory(engine),
        registry,
        FailureRouter(RetryPolicy(TOPIC, (1.0,))),
        backoff=backoff,
        concurrent_consumers=False,
        escalate_after=ESCALATE_AFTER,
    )


async def test_a_refused_dedup_record_routes_its_event_after_backing_off(
    padded: AsyncEngine,
) -> None:
    backoff = CountedBackoff()
    processor, records, db = processor_over(padded, backoff), Records(), Db(padded)
    await processor.process([records.event("e1", aggregate_id="o-1")])

    spaced = records.event("e1 ", aggregate_id="o-2")

    outcomes = await asyncio.wait_for(
        processor.process([spaced, records.event("g1", aggregate_id="o-3")]), WITHIN_SECONDS
    )

    assert kinds(outcomes) == [("e1 ", Kind.RETRIED), ("g1", Kind.APPLIED)]
    assert backoff.asked == [1, 2]  # at once after the first conflict, then backing off
    assert await db.effects("points") == ["e1", "g1"]
    [failed] = await db.failed("points")
    assert (failed["event_id"], failed["status"]) == ("e1 ", "retrying")
    assert failed["exception_type"] == "sqlalchemy.exc.IntegrityError"
    [retry] = await Outbox(padded).to(retry_topic(TOPIC, 1.0))
    assert retry.value == spaced.value


async def test_a_refused_parking_record_routes_its_event_after_backing_off(
    padded: AsyncEngine,
) -> None:
    backoff = CountedBackoff()
    processor, records, db = processor_over(padded, backoff), Records(), Db(padded)
    await processor.process([records.event("p1", aggregate_id="o-1", version=3)])

    outcomes = await asyncio.wait_for(
        processor.process(
            [
                records.event("p1 ", aggregate_id="o-2", version=3),
                records.event("g1", aggregate_id="o-3"),
            ]
        ),
        WITHIN_SECONDS,
    )

    assert kinds(outcomes) == [("p1 ", Kind.RETRIED), ("g1", Kind.APPLIED)]
    assert backoff.asked == [1, 2]
    assert await db.parked("points") == ["p1"]
    assert await db.effects("points") == ["g1"]
    [failed] = await db.failed("points")
    assert (failed["event_id"], failed["status"]) == ("p1 ", "retrying")
