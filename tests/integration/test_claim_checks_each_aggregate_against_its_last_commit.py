"""The claim's last check finds, per aggregate, an unpublished row before the chain it locked.

Contract (``app.outbox.claim.waiting_behind``): given each locked chain's first id, the
aggregates that have a row before it that is ``PENDING`` or ``PROCESSING`` as last
committed are named, and no other: a ``PUBLISHED`` or ``DEAD`` row ahead holds nothing
back, nor does an unpublished row of another aggregate type with the same id, nor
one after the head. It is what keeps the order when the scan missed a row (each of its
statements sees its own moment); on PostgreSQL it probes the aggregate index once per
aggregate. On each database.
"""

from __future__ import annotations

import pytest
from sqlalchemy import update

from app.db.dialect import backend as backend_of
from app.db.engine import create_engine, session_factory
from app.db.tables import outbox_event
from app.outbox import NewEvent
from app.outbox.claim import waiting_behind
from tests.integration.support.databases import BACKENDS
from tests.integration.support.outbox import rows, write

pytestmark = pytest.mark.integration

# aggregate -> the status of its first row; its second row is the locked chain's head
AHEAD = {
    "published": "PUBLISHED",
    "pending": "PENDING",
    "processing": "PROCESSING",
    "dead": "DEAD",
}


def event(aggregate_type: str, aggregate_id: str, version: int) -> NewEvent:
    return NewEvent("orders", "Counted", aggregate_type, aggregate_id, {"n": version}, version)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_only_aggregates_with_an_unpublished_row_ahead_are_waiting(
    migrated_database: str,
) -> None:
    events = [event("Counter", agg, v) for v in (1, 2) for agg in AHEAD]
    # The same id under another type, unpublished and before every head: not ours.
    events.insert(0, event("Other", "solo", 1))
    events.append(event("Counter", "solo", 1))
    # A later unpublished row of an aggregate whose head comes first: not ahead of it.
    events.append(event("Counter", "published", 3))
    await write(migrated_database, events, per_transaction=len(events))
    by_aggregate: dict[tuple[str, str], list[int]] = {}  # ids in order, per aggregate
    for row in await rows(migrated_database, "aggregate_type", "aggregate_id"):
        by_aggregate.setdefault((row["aggregate_type"], row["aggregate_id"]), []).append(row["id"])

    sessions = session_factory(engine := create_engine(migrated_database, pool_size=1))
    try:
        async with sessions() as session, session.begin():
            for agg, status in AHEAD.items():
                first = by_aggregate[("Counter", agg)][0]
                await session.execute(
                    update(outbox_event).where(outbox_event.c.id == first).values(status=status)
                )
        heads = {("Counter", agg): by_aggregate[("Counter", agg)][1] for agg in AHEAD}
        heads[("Counter", "solo")] = by_aggregate[("Counter", "solo")][0]
        async with sessions() as session, session.begin():
            waiting = await waiting_behind(session, backend_of(session), heads)
    finally:
        await engine.dispose()

    assert waiting == {("Counter", "pending"), ("Counter", "processing")}
