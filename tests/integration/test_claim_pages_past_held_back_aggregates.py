"""A claim whose first page is all held back reads on past it, leaving out only those
aggregates.

Contract (``app.outbox.claim``): when every row of a page belongs to an aggregate whose
earlier row another relay holds (``PROCESSING`` under a live lease), the next page
leaves those aggregates out and claims the rows after them: those of other aggregates,
including one with the same id under another aggregate type, in id order. When every
page it may read (``MAX_SCAN_PAGES``) holds only rows waiting for their next attempt, it
still claims the due rows after them that nothing unpublished of their aggregate
precedes, and the rows of a dead relay whose lease expired, and never one behind a
waiting row (before, such a backlog held back every
other aggregate). On each database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from app.db.engine import create_engine, session_factory
from app.db.tables import outbox_event
from app.outbox import NewEvent
from app.outbox.claim import MAX_SCAN_PAGES, claim
from tests.integration.support.databases import BACKENDS
from tests.integration.support.outbox import claimed_by_a_dead_relay, rows, write

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)
HELD = [f"held-{n}" for n in range(4)]
LIMIT = len(HELD)  # one page: exactly the held aggregates' second rows


def event(aggregate_type: str, aggregate_id: str, version: int) -> NewEvent:
    return NewEvent("orders", "Counted", aggregate_type, aggregate_id, {"n": version}, version)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_page_of_held_back_rows_is_passed_and_only_their_aggregates_left_out(
    migrated_database: str,
) -> None:
    events = [event("Counter", agg, v) for v in (1, 2, 3) for agg in HELD]
    # The same id as a held aggregate under another type: free, and claimed.
    events += [event("Other", HELD[0], 1), event("Other", HELD[0], 2)]
    events += [event("Counter", "free-a", 1), event("Counter", "free-b", 1)]
    await write(migrated_database, events, per_transaction=len(events))
    by_key: dict[tuple[str, str], list[int]] = {}  # ids in order, per aggregate
    for row in await rows(migrated_database, "aggregate_type", "aggregate_id"):
        by_key.setdefault((row["aggregate_type"], row["aggregate_id"]), []).append(row["id"])
    await claimed_by_a_dead_relay(
        migrated_database,
        [by_key[("Counter", agg)][0] for agg in HELD],
        NOW + timedelta(minutes=5),
    )

    engine = create_engine(migrated_database, pool_size=1)
    try:
        async with session_factory(engine)() as session, session.begin():
            claimed = await claim(
                session, "this-relay", NOW, NOW + timedelta(seconds=60), limit=LIMIT
            )
    finally:
        await engine.dispose()

    assert [(row["aggregate_type"], row["aggregate_id"], row["id"]) for row in claimed] == [
        ("Other", HELD[0], by_key[("Other", HELD[0])][0]),
        ("Other", HELD[0], by_key[("Other", HELD[0])][1]),
        ("Counter", "free-a", by_key[("Counter", "free-a")][0]),
        ("Counter", "free-b", by_key[("Counter", "free-b")][0]),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_due_rows_past_every_page_of_rows_that_wait_are_claimed(
    migrated_database: str,
) -> None:
    limit = 3
    waiting = [event("Counter", f"waits-{n}", 1) for n in range(MAX_SCAN_PAGES * limit + 1)]
    behind = event("Counter", "waits-0", 2)  # due, but behind its aggregate's waiting row
    due = [event("Counter", "due-a", 1), event("Counter", "due-a", 2), event("Other", "x", 1)]
    orphan = event("Counter", "orphan", 1)  # a dead relay's, its lease expired
    await write(migrated_database, [*waiting, behind, *due, orphan], per_transaction=100)
    [orphan_id] = [
        row["id"]
        for row in await rows(migrated_database, "aggregate_id")
        if row["aggregate_id"] == "orphan"
    ]
    await claimed_by_a_dead_relay(migrated_database, [orphan_id], NOW - timedelta(minutes=1))
    engine = create_engine(migrated_database, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                update(outbox_event)
                .where(outbox_event.c.aggregate_id.like("waits-%"))
                .where(outbox_event.c.aggregate_version == 1)
                .values(next_retry_at=NOW + timedelta(minutes=5), retry_count=3)
            )
        async with session_factory(engine)() as session, session.begin():
            claimed = await claim(
                session, "this-relay", NOW, NOW + timedelta(seconds=60), limit=limit
            )
    finally:
        await engine.dispose()

    assert [(row["aggregate_type"], row["aggregate_id"]) for row in claimed] == [
        ("Counter", "due-a"),
        ("Other", "x"),
        ("Counter", "orphan"),
    ]
