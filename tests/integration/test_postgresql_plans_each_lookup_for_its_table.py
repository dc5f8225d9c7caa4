"""On PostgreSQL every run of a framework statement is planned for the table as it is.

The driver prepares each statement once per connection; after five runs the server
may switch to a generic plan chosen from the table sizes of that moment and keep it
for the connection's life. Chosen while ``consumed_event`` was nearly empty (a new
deployment, a new consumer), that plan scanned the whole table, and the dedup lookup
grew to seconds per batch as the table filled (the bench's latency run: p99 above 7 s).
The engine asks for a custom plan on every run; this test runs the dedup lookup many
times against a nearly empty table and reads the server's own count of generic plans.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import engine as engine_module
from app.db import tables
from app.db.engine import create_engine, session_factory
from app.pipeline.store import ConsumerStore

pytestmark = pytest.mark.integration

CONSUMER = "points-service"
RUNS = 12  # the server considers a generic plan from the sixth run on
LOOKUP = 200  # eventIds per lookup, half of them applied
APPLIED_AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(database_url, pool_size=1)
    async with eng.begin() as conn:
        await conn.run_sync(tables.metadata.create_all)
    yield eng
    await eng.dispose()


async def test_the_dedup_lookup_is_never_run_with_a_generic_plan(engine: AsyncEngine) -> None:
    async with session_factory(engine)() as session, session.begin():
        store = ConsumerStore(session, CONSUMER)
        for run in range(RUNS):
            applied = [f"event-{run}-{i}" for i in range(LOOKUP // 2)]
            await session.execute(insert(tables.consumed_event), [_row(e) for e in applied])
            unseen = [f"new-{run}-{i}" for i in range(LOOKUP // 2)]
            assert (await store.seen_event_ids(applied + unseen)).consumed == set(applied)
        plans = (
            await session.execute(
                text(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                    "WHERE statement LIKE 'SELECT consumed_event.event_id%'"
                )
            )
        ).all()
    assert plans, "the dedup lookup ran as a prepared statement"
    assert sum(custom for _, custom in plans) >= RUNS
    assert sum(generic for generic, _ in plans) == 0


def _row(event_id: str) -> dict[str, object]:
    return {
        "consumer_group": CONSUMER,
        "event_id": event_id,
        "event_type": "OrderPaid",
        "aggregate_type": "Order",
        "aggregate_id": event_id,
        "aggregate_version": 1,
        "applied_at": APPLIED_AT,
    }


async def test_a_rolled_back_transaction_keeps_the_setting(engine: AsyncEngine) -> None:
    show = text("SHOW plan_cache_mode")
    for _ in range(2):  # one pooled connection, rolled back when returned
        async with session_factory(engine)() as session:
            assert (await session.execute(show)).scalar() == "force_custom_plan"
            await session.rollback()


async def test_a_server_without_the_setting_still_serves(
    database_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(engine_module, "CUSTOM_PLANS", "SET no_such_setting_anywhere = 1")
    eng = create_engine(database_url, pool_size=1)
    try:
        for _ in range(2):
            async with session_factory(eng)() as session:
                assert (await session.execute(text("SELECT 1"))).scalar() == 1
    finally:
        await eng.dispose()
    refused = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 1  # once per connection, and the pool kept its one connection
    assert "no_such_setting_anywhere" in refused[0].getMessage()
