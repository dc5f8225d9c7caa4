"""Events a handler emits with ``ctx.emit`` are written if and only if its effects commit, once.

Contract (consume, transform, produce, effectively once): in a batch where every
handler succeeds, each event emits one outbox row; an event whose handler fails
leaves no emitted row (its savepoint takes them back) while its failure's retry
record is written; a batch rolled back whole (an infrastructure failure) and run
again leaves each event's row once, not twice; a redelivered event emits nothing.
On each database, through the batch processor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from app.context import HandlerContext
from app.db.engine import create_engine, session_factory
from app.outbox import NewEvent
from app.pipeline.outcomes import Kind, Outcome
from app.pipeline.pause import Backoff
from app.pipeline.processor import BatchProcessor
from app.pipeline.route import FailureRouter
from app.registry import Registry, handler
from dlq.policy import RetryPolicy
from schemas.envelope import Event
from tests.integration.support.databases import BACKENDS
from tests.integration.support.outbox import rows
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import database_down, kinds

pytestmark = pytest.mark.integration

FOLLOW_UPS = "points-awarded"


def register(registry: Registry, fails: Callable[[str], BaseException | None]) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def award(event: Event, ctx: HandlerContext) -> None:
        ctx.emit(
            NewEvent(
                FOLLOW_UPS,
                "PointsAwarded",
                "User",
                event.data.user_id,
                {"orderId": event.aggregate_id},
                causation_id=event.event_id,
            )
        )
        error = fails(event.event_id)
        if error is not None:
            raise error


@pytest.mark.parametrize("backend", BACKENDS)
async def test_emitted_rows_follow_the_handlers_commit(migrated_database: str) -> None:
    registry = Registry()
    attempts: dict[str, int] = {}

    def fails(event_id: str) -> BaseException | None:
        attempts[event_id] = attempts.get(event_id, 0) + 1
        if event_id == "e2":
            return ValueError("points service says no")
        if event_id == "e3" and attempts[event_id] == 1:
            # The whole batch runs again: a database gone under a handler's statement.
            return database_down(ConnectionResetError("database went away"))
        return None

    register(registry, fails)
    engine = create_engine(migrated_database, pool_size=2)
    processor = BatchProcessor(
        session_factory(engine),
        registry,
        FailureRouter(RetryPolicy(TOPIC, (1.0,))),
        concurrent_consumers=False,
        backoff=Backoff(0.001, 0.001),
    )
    records = Records()
    batch = [records.event(f"e{n}", aggregate_id=f"o-{n}", version=1) for n in (1, 2, 3)]
    try:
        outcomes = await processor.process(batch)
        assert kinds(outcomes) == [("e1", Kind.APPLIED), ("e2", Kind.RETRIED), ("e3", Kind.APPLIED)]
        assert await processor.process([records.again(batch[0])]) == [
            Outcome(Kind.DUPLICATE, "points", "e1", "OrderPaid", "", "")
        ]
    finally:
        await engine.dispose()

    written = await rows(migrated_database, "topic", "payload", "aggregate_type")
    emitted = [orjson.loads(r["payload"]) for r in written if r["topic"] == FOLLOW_UPS]
    assert sorted(e["causationId"] for e in emitted) == ["e1", "e3"]
    assert all(e["eventType"] == "PointsAwarded" for e in emitted)
    routed: list[Any] = [r for r in written if r["topic"] != FOLLOW_UPS]
    assert [(r["topic"], r["aggregate_type"]) for r in routed] == [
        (f"{TOPIC}.retry.1s", "effectively-once")
    ]
