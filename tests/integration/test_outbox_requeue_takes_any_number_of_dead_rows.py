"""``python -m app outbox requeue --all`` takes any number of DEAD rows.

Contract: with 40,000 DEAD rows (more parameters than asyncpg takes in one statement,
32,767), the dry run says it would re-queue all of them, and
``--execute`` puts every one back to ``PENDING`` with its attempts counted afresh; each
line lists 20 ids and counts the rest. Before, both failed on PostgreSQL, a parameter
per id. On PostgreSQL and SQLite.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import func, insert, select

from app.db.engine import create_engine
from app.db.tables import outbox_event
from tests.integration.support.outbox import app_command

pytestmark = pytest.mark.integration

DEAD_ROWS = 40_000


async def _dead_rows(url: str) -> None:
    now = datetime.now(UTC)
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                insert(outbox_event),
                [
                    {
                        "event_id": f"e-{i}",
                        "aggregate_type": "Order",
                        "aggregate_id": f"o-{i}",
                        "event_type": "OrderCreated",
                        "topic": "orders",
                        "payload": "{}",
                        "status": "DEAD",
                        "retry_count": 10,
                        "created_at": now,
                        "updated_at": now,
                        "last_error": "the topic did not exist",
                    }
                    for i in range(DEAD_ROWS)
                ],
            )
    finally:
        await engine.dispose()


async def _by_status(url: str) -> dict[tuple[str, int], int]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            found = await conn.execute(
                select(outbox_event.c.status, outbox_event.c.retry_count, func.count()).group_by(
                    outbox_event.c.status, outbox_event.c.retry_count
                )
            )
            return {(status, retries): count for status, retries, count in found}
    finally:
        await engine.dispose()


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
async def test_every_dead_row_is_requeued(migrated_database: str, backend: str) -> None:
    await _dead_rows(migrated_database)
    url = ["--database-url", migrated_database]

    code, out, err = await app_command("outbox", "requeue", "--all", *url)
    assert code == 0, err
    assert f"would re-queue {DEAD_ROWS} of {DEAD_ROWS} row(s)" in out, out
    assert f"and {DEAD_ROWS - 20:,} more" in out, out
    assert await _by_status(migrated_database) == {("DEAD", 10): DEAD_ROWS}

    code, out, err = await app_command("outbox", "requeue", "--all", "--execute", *url)
    assert code == 0, err
    assert f"re-queued {DEAD_ROWS} of {DEAD_ROWS} row(s)" in out, out
    assert await _by_status(migrated_database) == {("PENDING", 0): DEAD_ROWS}
