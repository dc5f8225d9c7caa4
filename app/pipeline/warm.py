"""Each consumer's database connection opened, and its batch's reads run once, at start.

A consumer's first batch would otherwise open its connection (TCP, TLS, the server's
new session, the driver's type lookups, the session's settings), compile and prepare
each of the framework's statements, and meet a server session that has read none of
the tables yet: about 25 ms more than the next batch on an idle machine, 100 ms and more
on a busy one, paid by every event that waits behind it after each start. Here every
consumer, as the batches run them (side by side unless the backend is SQLite), runs
its batch's three reads (versions, dedup records and failures, parked events) for an
aggregate and an event that do not exist, in a transaction that is rolled back: nothing
is written (on MySQL and SQLite the version read creates the missing row; the rollback
takes it away again). The connections go back to the pool, and the first batch finds
them there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.pipeline.store import ConsumerStore

# An aggregate and an event no producer names: an aggregate type is a word of the
# producer's schema, an event id a UUID or a number.
PROBE_AGGREGATE = ("~start", "~start")
PROBE_EVENT_ID = "~start"


async def warm_up(
    sessions: async_sessionmaker[AsyncSession], consumers: Sequence[str], concurrent: bool
) -> None:
    """Run each of ``consumers``' batch reads once, each on its own connection when
    ``concurrent`` (as its batches run), and roll them back."""
    if concurrent:
        await asyncio.gather(*(_reads(sessions, consumer) for consumer in consumers))
        return
    for consumer in consumers:
        await _reads(sessions, consumer)


async def _reads(sessions: async_sessionmaker[AsyncSession], consumer: str) -> None:
    async with sessions() as session:
        transaction = await session.begin()
        try:
            store = ConsumerStore(session, consumer)
            await store.read_versions([PROBE_AGGREGATE])
            await store.seen_event_ids([PROBE_EVENT_ID], parked_of=[PROBE_AGGREGATE])
            await store.parked_for([PROBE_AGGREGATE])
        finally:
            await transaction.rollback()
