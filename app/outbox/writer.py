"""Add events to the outbox inside the caller's own transaction (async or sync SQLAlchemy).

The writer only inserts: it never commits, flushes nothing else and opens no
transaction of its own, so the rows commit or roll back with the caller's
changes. One INSERT per call, however many events::

    async with session.begin():
        session.add(order)
        await add_events(session, [NewEvent("orders", "OrderPaid", "Order", order.id, data)])

Returns the events' eventIds, in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm import Session

from app.db.tables import outbox_event
from app.outbox.event import NewEvent


def rows_of(events: Iterable[NewEvent], now: datetime | None = None) -> list[dict[str, Any]]:
    """The ``outbox_event`` rows of ``events`` (raises ``InvalidOutboxEvent`` on the first
    event no row can hold, before anything is written)."""
    stamp = now or datetime.now(UTC)
    return [event.row(stamp) for event in events]


async def add_events(
    session: AsyncSession | AsyncConnection, events: Iterable[NewEvent]
) -> list[str]:
    """Insert ``events`` into ``outbox_event`` in ``session``'s transaction; their eventIds."""
    rows = rows_of(events)
    if rows:
        await session.execute(insert(outbox_event), rows)
    return [row["event_id"] for row in rows]


def add_events_sync(session: Session | Any, events: Iterable[NewEvent]) -> list[str]:
    """``add_events`` for a sync ``Session`` or ``Connection``."""
    rows = rows_of(events)
    if rows:
        session.execute(insert(outbox_event), rows)
    return [row["event_id"] for row in rows]
