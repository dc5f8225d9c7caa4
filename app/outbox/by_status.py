"""Outbox reads by status, written so that PostgreSQL's partial indexes serve them.

``ix_outbox_event_status_id`` and ``ix_outbox_event_aggregate`` hold only the rows not
``PUBLISHED`` (migration 0006). A planner uses such an index only for a query whose
conditions imply the index's own, and ``status = $1`` implies nothing until the value
is known: a prepared statement planned once for every value (a generic plan, which
PostgreSQL may switch to after five runs) would read the table instead. The statuses
are the code's own constants, so they go into the statement as literals.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, literal_column, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.tables import outbox_event as t
from app.outbox.status import UNPUBLISHED, OutboxStatus


def status_in(*statuses: str) -> ColumnElement[bool]:
    """``outbox_event.status`` is one of ``statuses``, written as literals (each must be an
    ``OutboxStatus``: nothing else is ever written into the statement)."""
    values: list[ColumnElement[Any]] = [
        literal_column(f"'{OutboxStatus(status).value}'") for status in statuses
    ]
    return t.c.status == values[0] if len(values) == 1 else t.c.status.in_(values)


async def topics_waited_for(session: AsyncSession, topics: set[str]) -> set[str]:
    """Those of ``topics`` that rows not yet published (``PENDING``, ``PROCESSING``) are for."""
    query = select(t.c.topic).where(status_in(*UNPUBLISHED), t.c.topic.in_(sorted(topics)))
    return set((await session.execute(query.distinct())).scalars())
