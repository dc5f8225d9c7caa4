"""On PostgreSQL a batch's one write takes its version rows before its dedup records.

Contract: two workers holding the same events (a rebalance's zombie and the new owner)
meet on the first version row they share and the second waits there, so they cannot
each hold a row the other needs (a deadlock, a second lost before the server breaks
it). So, while one transaction holds a new version row of the batch and another a dedup
record of it (both uncommitted), the batch's write waits for the first; once that one is
gone, for the second; and it commits once both are.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import session_factory
from app.pipeline.store import BatchChanges, ConsumerStore

pytestmark = pytest.mark.integration

CONSUMER = "points"
WAIT_SECONDS = 10.0


async def blockers(
    monitor: asyncpg.Connection, names: dict[int, str], saving: asyncio.Future[None]
) -> list[str]:
    """Whom the sessions waiting for a lock wait for, as ``names`` calls them.

    A session woken by its blocker's end can still show as waiting, for nobody, until it
    runs again: such a row is not an answer. A write that ended fails the test with its
    own outcome.
    """
    for _ in range(int(WAIT_SECONDS / 0.05)):
        if saving.done():
            saving.result()
            raise AssertionError("the write ended without waiting")
        rows = await monitor.fetch(
            "SELECT pg_blocking_pids(pid) AS b FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock' "
            "AND cardinality(pg_blocking_pids(pid)) > 0"
        )
        if rows:
            return sorted(names.get(pid, str(pid)) for row in rows for pid in row["b"])
        await asyncio.sleep(0.05)
    return []


async def test_the_write_waits_on_a_version_row_before_a_dedup_record(
    engine: AsyncEngine,
) -> None:
    dsn = make_url(engine.url).set(drivername="postgresql").render_as_string(False)
    version_holder, dedup_holder, monitor = [await asyncpg.connect(dsn) for _ in range(3)]
    try:
        held_version = version_holder.transaction()
        await held_version.start()
        await version_holder.execute(
            "INSERT INTO aggregate_version (consumer_group, aggregate_type, aggregate_id, "
            "last_version, updated_at) VALUES ($1, 'Order', 'o-1', 1, now())",
            CONSUMER,
        )
        held_dedup = dedup_holder.transaction()
        await held_dedup.start()
        await dedup_holder.execute(
            "INSERT INTO consumed_event (event_id, consumer_group, event_type, aggregate_type, "
            "aggregate_id, aggregate_version, applied_at) "
            "VALUES ('e-1', $1, 'OrderPaid', 'Order', 'o-1', 1, now())",
            CONSUMER,
        )
        names = {
            await version_holder.fetchval("SELECT pg_backend_pid()"): "version row",
            await dedup_holder.fetchval("SELECT pg_backend_pid()"): "dedup record",
        }

        async def save() -> None:
            async with session_factory(engine)() as session, session.begin():
                store = ConsumerStore(session, CONSUMER)
                await store.read_versions([("Order", "o-1")])
                changes = BatchChanges.empty()
                changes.versions[("Order", "o-1")] = 1
                changes.consumed.append(
                    {
                        "consumer_group": CONSUMER,
                        "event_id": "e-1",
                        "event_type": "OrderPaid",
                        "aggregate_type": "Order",
                        "aggregate_id": "o-1",
                        "aggregate_version": 1,
                    }
                )
                await store.save(changes)

        saving = asyncio.ensure_future(save())
        assert await blockers(monitor, names, saving) == ["version row"]
        await held_version.rollback()
        assert await blockers(monitor, names, saving) == ["dedup record"]
        await held_dedup.rollback()
        await asyncio.wait_for(saving, WAIT_SECONDS)
    finally:
        for conn in (version_holder, dedup_holder, monitor):
            await conn.close()
