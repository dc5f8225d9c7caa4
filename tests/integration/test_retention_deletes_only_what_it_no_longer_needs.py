"""Retention deletes old published outbox rows, old dedup records and old settled failures,
and nothing else, a bounded batch at a time.

Contract: with ``OUTBOX_RETENTION`` 7 days and ``DEDUP_RETENTION`` 30 days, ``clean``
deletes exactly the outbox rows ``PUBLISHED`` more than 7 days ago (not pending, dead
or newer ones, however old), the ``consumed_event`` rows applied more than 30 days
ago, and the ``failed_event`` rows ``resolved`` or ``skipped`` more than 30 days ago
(not ``dead`` or ``retrying`` ones), in batches of two rows (so many short
transactions). ``python -m app cleanup`` does the same from the settings. On each
database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, select

from app.db.engine import create_engine
from app.db.retention import Cleaned, Retention, clean
from app.db.tables import consumed_event, failed_event, outbox_event
from tests.integration.support.databases import BACKENDS
from tests.integration.support.outbox import app_command

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)
OLD, RECENT = NOW - timedelta(days=40), NOW - timedelta(days=1)


def outbox_row(name: str, status: str, created: datetime, published: datetime | None) -> Any:
    return {
        "event_id": name,
        "aggregate_type": "Order",
        "aggregate_id": name,
        "event_type": "OrderPaid",
        "topic": "orders",
        "payload": "{}",
        "status": status,
        "created_at": created,
        "updated_at": created,
        "published_at": published,
    }


def failure_row(offset: int, status: str, at: datetime) -> Any:
    return {
        "consumer_group": "points",
        "topic": "orders",
        "partition": 0,
        "offset": offset,
        "reason": "retries-exhausted",
        "exception_type": "ValueError",
        "exception_message": "no",
        "record_headers": "[]",
        "status": status,
        "attempts": 1,
        "first_failed_at": at,
        "last_failed_at": at,
    }


@pytest.mark.parametrize("backend", BACKENDS)
async def test_retention_deletes_exactly_the_expired_rows(
    backend: str, migrated_database: str
) -> None:
    engine = create_engine(migrated_database, pool_size=1)
    outbox = [outbox_row(f"old-published-{n}", "PUBLISHED", OLD, OLD) for n in range(5)]
    outbox += [
        outbox_row("old-but-published-late", "PUBLISHED", OLD, RECENT),
        outbox_row("old-pending", "PENDING", OLD, None),
        outbox_row("old-dead", "DEAD", OLD, None),
        outbox_row("recent-published", "PUBLISHED", RECENT, RECENT),
    ]
    consumed = [
        {"consumer_group": "points", "event_id": name, "event_type": "OrderPaid",
         "aggregate_type": "Order", "aggregate_id": "o-1", "applied_at": at}
        for name, at in (("c-old-1", OLD), ("c-old-2", OLD), ("c-old-3", OLD), ("c-new", RECENT))
    ]  # fmt: skip
    failed = [
        failure_row(1, "resolved", OLD),
        failure_row(2, "skipped", OLD),
        failure_row(3, "resolved", OLD),
        failure_row(4, "dead", OLD),
        failure_row(5, "retrying", OLD),
        failure_row(6, "resolved", RECENT),
    ]
    try:
        async with engine.begin() as conn:
            await conn.execute(insert(outbox_event), outbox)
            await conn.execute(insert(consumed_event), consumed)
            await conn.execute(insert(failed_event), failed)
        cleaned = await clean(engine, Retention(batch_size=2, pause_seconds=0), now=NOW)
        async with engine.connect() as conn:
            left = {
                "outbox": sorted((await conn.scalars(select(outbox_event.c.event_id))).all()),
                "consumed": sorted((await conn.scalars(select(consumed_event.c.event_id))).all()),
                "failed": sorted((await conn.scalars(select(failed_event.c.offset))).all()),
            }
    finally:
        await engine.dispose()

    assert cleaned == Cleaned(outbox_event=5, consumed_event=3, failed_event=3)
    assert left == {
        "outbox": ["old-but-published-late", "old-dead", "old-pending", "recent-published"],
        "consumed": ["c-new"],
        "failed": [4, 5, 6],
    }
    if backend == "sqlite":  # the command reads the same settings everywhere
        code, said, _ = await app_command(
            "cleanup", env={"DATABASE_URL": migrated_database, "OUTBOX_RETENTION": "12h"}
        )
        assert (code, said.strip()) == (
            0,
            "deleted 2 outbox row(s) published more than 12h ago, 0 dedup record(s) and "
            "0 settled failure(s) older than 30d",
        )
