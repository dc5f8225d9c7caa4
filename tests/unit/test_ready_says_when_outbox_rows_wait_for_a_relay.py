"""A worker without a relay of its own says on ``/ready`` when outbox rows wait for one.

Contract of ``app.monitoring.readiness.outbox`` (the check ``/ready`` adds with
``RELAY_ENABLED=false``): with no due ``PENDING`` row, or only rows younger than the
limit, it passes; once the oldest due row has waited longer (no relay ships this
database: the worker's retry and dead-letter records would never leave), it fails,
saying how long and asking whether a relay runs. A row waiting for its next attempt
is not counted; a database that cannot be read fails the check with why.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert, update

from app.db import tables
from app.db.engine import create_engine
from app.monitoring import readiness


def row(event_id: str, age: float, due_in: float | None = None) -> dict[str, object]:
    now = datetime.now(UTC)
    return {
        "event_id": event_id,
        "aggregate_type": "effectively-once",
        "aggregate_id": "orders:0:1",
        "event_type": "RetryRecord",
        "topic": "orders.retry.1s",
        "payload": "{}",
        "status": "PENDING",
        "retry_count": 0,
        "next_retry_at": None if due_in is None else now + timedelta(seconds=due_in),
        "created_at": now - timedelta(seconds=age),
        "updated_at": now,
    }


async def test_rows_waiting_past_the_limit_fail_the_check(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'w.db'}")
    async with engine.begin() as conn:
        await conn.run_sync(tables.metadata.create_all)
    try:
        empty = await readiness.outbox(engine, limit=120)
        async with engine.begin() as conn:
            await conn.execute(insert(tables.outbox_event), [row("later", 600, due_in=60)])
            await conn.execute(insert(tables.outbox_event), [row("fresh", 5)])
        young = await readiness.outbox(engine, limit=120)
        async with engine.begin() as conn:  # five minutes on, nothing shipped it
            aged = datetime.now(UTC) - timedelta(seconds=300)
            t = tables.outbox_event
            await conn.execute(update(t).where(t.c.event_id == "fresh").values(created_at=aged))
        old = await readiness.outbox(engine, limit=120)
    finally:
        await engine.dispose()

    assert (empty.ok, empty.detail) == (True, "no row waits for a relay")
    assert young.ok and "5s old" in young.detail
    assert not old.ok and old.name == "outbox"
    assert "has waited 300s for a relay" in old.detail and "is a relay running" in old.detail


async def test_an_outbox_it_cannot_read_fails_the_check(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'no-tables.db'}")
    try:
        found = await readiness.outbox(engine, limit=120)
    finally:
        await engine.dispose()

    assert not found.ok and found.detail.startswith("cannot read the outbox")
