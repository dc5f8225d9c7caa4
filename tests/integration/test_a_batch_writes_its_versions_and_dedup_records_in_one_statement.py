"""On PostgreSQL a consumer's batch writes its version rows and dedup records in one statement.

Contract: a batch of events of aggregates with a version row, of a new aggregate, and
without a version, for a consumer whose handler issues no statement, sends three
statements: the version read, the dedup lookup (which also names the aggregates with
parked events: none, so no parked rows are read), and one write that updates the
changed version rows, inserts the new one and inserts every dedup record. What it
wrote is what the three statements it replaces wrote.
"""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.db.engine import session_factory
from app.pipeline.outcomes import Kind
from app.pipeline.processor import BatchProcessor
from app.pipeline.route import FailureRouter
from app.registry import Registry, handler
from dlq.policy import RetryPolicy
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import Db
from tests.sent_statements import sent

pytestmark = pytest.mark.integration


async def test_versions_and_dedup_records_go_in_one_statement(engine: AsyncEngine) -> None:
    registry, records, db = Registry(), Records(), Db(engine)

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        return None

    processor = BatchProcessor(
        session_factory(engine), registry, FailureRouter(RetryPolicy(TOPIC, (1.0,)))
    )
    await processor.process(
        [records.event(f"{agg}-1", aggregate_id=agg, version=1) for agg in ("o-1", "o-2")]
    )
    batch = [
        records.event("o-1-2", aggregate_id="o-1", version=2),
        records.event("o-2-2", aggregate_id="o-2", version=2),
        records.event("o-1-3", aggregate_id="o-1", version=3),
        records.event("o-3-1", aggregate_id="o-3", version=1),
        records.event("loose", aggregate_id="o-4", version=None),
    ]

    with sent(engine.sync_engine) as statements:
        outcomes = await processor.process(batch)

    assert [o.kind for o in outcomes] == [Kind.APPLIED] * 5
    writes = [s for s, _ in statements if not s.lstrip().upper().startswith("SELECT")]
    assert len(writes) == 1, writes
    assert len(statements) == 3, [s for s, _ in statements]
    assert await db.version("points", "o-1") == 3
    assert await db.version("points", "o-2") == 2
    assert await db.version("points", "o-3") == 1
    assert await db.consumed("points") == sorted(
        ["o-1-1", "o-2-1", "o-1-2", "o-2-2", "o-1-3", "o-3-1", "loose"]
    )
