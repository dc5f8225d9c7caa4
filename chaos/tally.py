"""The soak's own consumer ``chaos-tally``: counts how many times each event took effect.

The example consumers are idempotent per order, so their tables cannot show an
event applied twice. This one deliberately is not: each call adds 1 to a row
keyed by the event id, inside the framework's transaction. After the soak every
good event must have exactly one row holding 1; a 2 is an effect applied twice,
a missing row an effect lost.

The soak's workers load it with ``HANDLER_MODULES=handlers,chaos.tally``; its table
is created by the soak (``create_table``), not by the framework's migrations.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, MetaData, Table, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

import schemas.order  # noqa: F401  (the example's models: the events this consumer counts)
from app import Event, HandlerContext, add_to_counter, handler
from app.db.tables import EVENT_ID, binary_id

CONSUMER = "chaos-tally"

tally_metadata = MetaData()

chaos_tally = Table(
    "chaos_tally",
    tally_metadata,
    # As the framework's own: on MariaDB, ``e1`` and ``e1 `` (or ``E1``) are two rows.
    Column("event_id", binary_id(EVENT_ID), primary_key=True),
    Column("applied", BigInteger, nullable=False),
)


@handler("OrderCreated", consumer=CONSUMER, batch=True)
@handler("OrderPaid", consumer=CONSUMER, batch=True)
@handler("OrderCancelled", consumer=CONSUMER, batch=True)
async def count(events: list[Event], ctx: HandlerContext) -> None:
    """Add 1 to each event's row (one statement for the batch)."""
    rows = [{"event_id": event.event_id, "applied": 1} for event in events]
    await add_to_counter(ctx.session, chaos_tally, "event_id", "applied", rows)


async def create_table(engine: AsyncEngine) -> None:
    """Create ``chaos_tally`` in the soak's database."""
    async with engine.begin() as conn:
        await conn.run_sync(tally_metadata.create_all)


async def tallies(engine: AsyncEngine) -> dict[str, int]:
    """event id -> how many times it took effect."""
    async with engine.connect() as conn:
        rows = await conn.execute(select(chaos_tally.c.event_id, chaos_tally.c.applied))
        return {event_id: int(applied) for event_id, applied in rows}


async def applied_total(engine: AsyncEngine) -> int:
    """The sum of every row (one per effect applied)."""
    async with engine.connect() as conn:
        total = await conn.scalar(select(func.coalesce(func.sum(chaos_tally.c.applied), 0)))
        return int(total or 0)
