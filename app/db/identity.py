"""The database's identity: one random id in ``database_identity``, made with the tables.

The Redis prefilter remembers which events a consumer applied *in one
database*. Its keys are namespaced by this id, so that a worker pointed at
another database (a fresh one, or one restored from a backup and given a new
id) finds none of them and asks its own dedup records instead of skipping
events that database never applied. Read once at start.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.tables import database_identity


async def read_identity(engine: AsyncEngine) -> str:
    """The database's id; made now if the table is empty (tables made without the
    migrations, or an id deleted by hand)."""
    async with engine.begin() as conn:
        found = await _current(conn)
        if found is None:
            await conn.execute(insert(database_identity).values(_new_row()))
            found = await _current(conn)
    assert found is not None
    return found


async def renew_identity(engine: AsyncEngine) -> str:
    """Give the database a new id (after restoring it from a backup): every key Redis
    holds for the old one is then never read again. Returns the new id."""
    async with engine.begin() as conn:
        await conn.execute(delete(database_identity))
        row = _new_row()
        await conn.execute(insert(database_identity).values(row))
    return str(row["id"])


async def _current(conn: AsyncConnection) -> str | None:
    # The smallest, should two workers have made one at once: all agree on it.
    found = await conn.scalar(select(func.min(database_identity.c.id)))
    return str(found) if found is not None else None


def _new_row() -> dict[str, object]:
    return {"id": uuid.uuid4().hex, "created_at": datetime.now(UTC)}
