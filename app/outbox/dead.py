"""Reads and the two writes behind ``python -m app outbox``: list, show, re-queue and give up.

A ``DEAD`` row failed ``RELAY_MAX_ATTEMPTS`` publishes; its ``last_error`` says why.
Re-queuing puts it back to ``PENDING`` with its attempts counted afresh, once the
cause is fixed (the topic created, the payload corrected). Only ``DEAD`` rows are
re-queued: a row a relay holds or already published is left alone. A re-queued row
is published after the later rows of its aggregate that shipped while it was dead.
Giving up is the other way: a ``PENDING`` row an operator knows will never go (its topic
removed for good, a payload no consumer must see) goes ``DEAD`` at once, rather than
after its attempts, and the later rows of its aggregate, which wait for it, go.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.dialect import in_lists, list_size, one_of
from app.db.tables import outbox_event as t
from app.outbox.by_status import status_in
from app.outbox.status import OutboxStatus

LISTED = (
    *("id", "event_id", "aggregate_type", "aggregate_id", "aggregate_version", "event_type"),
    *("topic", "status", "retry_count", "created_at", "updated_at", "last_error"),
)


async def list_rows(
    conn: AsyncConnection,
    statuses: Sequence[str] = (OutboxStatus.DEAD,),
    topic: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Rows in ``statuses`` (of ``topic``), oldest first, without their payloads."""
    query = select(*(t.c[name] for name in LISTED)).where(status_in(*statuses)).order_by(t.c.id)
    if topic is not None:
        query = query.where(t.c.topic == topic)
    if limit is not None:
        query = query.limit(limit)
    return [dict(row) for row in (await conn.execute(query)).mappings()]


async def one_row(
    conn: AsyncConnection, row_id: int | None = None, event_id: str | None = None
) -> dict[str, Any] | None:
    """The whole row with ``row_id``, or with ``event_id``; None if there is none."""
    where = t.c.id == row_id if row_id is not None else t.c.event_id == event_id
    found = (await conn.execute(select(t).where(where))).mappings().first()
    return dict(found) if found is not None else None


async def existing(conn: AsyncConnection, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` are rows of the outbox."""
    return await in_status(conn, ids, None)


async def in_status(
    conn: AsyncConnection, ids: Sequence[int], status: OutboxStatus | None
) -> set[int]:
    """Which of ``ids`` are rows of the outbox in ``status`` (``None``: in any)."""
    dialect = conn.dialect.name
    found: set[int] = set()
    for chunk in in_lists(ids, list_size(dialect)):
        query = select(t.c.id).where(one_of(dialect, t.c.id, chunk))
        if status is not None:
            query = query.where(t.c.status == status.value)
        found.update(row_id for (row_id,) in await conn.execute(query))
    return found


async def requeue(conn: AsyncConnection, ids: Sequence[int]) -> list[int]:
    """Put the ``DEAD`` rows among ``ids`` back to ``PENDING``, attempts afresh; which ones."""
    return await _move(
        conn,
        ids,
        OutboxStatus.DEAD,
        status=OutboxStatus.PENDING.value,
        retry_count=0,
        next_retry_at=None,
        lease_owner=None,
        lease_expires_at=None,
    )


async def give_up(
    conn: AsyncConnection, ids: Sequence[int], why: str, held: bool = False
) -> list[int]:
    """Mark the ``PENDING`` rows among ``ids`` ``DEAD``, ``last_error`` saying an operator
    gave them up and why; which ones. The later rows of their aggregates then go.

    ``held``: the ``PROCESSING`` ones too (a relay holds them: one waiting in place on a
    write its ACLs deny, say). Their lease is taken from the relay, which learns it at its
    next renewal (within a third of ``RELAY_LEASE_SECONDS``) and sends nothing more of
    them; a record already on its way may still be published."""
    values = {
        "status": OutboxStatus.DEAD.value,
        "next_retry_at": None,
        "last_error": f"{GIVEN_UP}: {why}",
    }
    done = await _move(conn, ids, OutboxStatus.PENDING, **values)
    if held:
        done += await _move(
            conn, ids, OutboxStatus.PROCESSING, lease_owner=None, lease_expires_at=None, **values
        )
    return sorted(done)


GIVEN_UP = "given up by an operator (python -m app outbox give-up)"


async def _move(
    conn: AsyncConnection, ids: Sequence[int], source: OutboxStatus, **values: Any
) -> list[int]:
    """Set ``values`` on the rows among ``ids`` in ``source``; which ones. Any number of
    them: a lookup of ``list_size`` ids at a time (a driver takes some tens of thousands of
    parameters in one statement at most). Each is locked first, so that a row a relay
    claims meanwhile (no longer in ``source``) is neither changed nor counted."""
    dialect = conn.dialect.name
    moved: list[int] = []
    for chunk in in_lists(ids, list_size(dialect)):
        query = select(t.c.id).where(one_of(dialect, t.c.id, chunk), t.c.status == source.value)
        if dialect != "sqlite":
            query = query.with_for_update()
        found = [row_id for (row_id,) in await conn.execute(query)]
        if found:
            await conn.execute(
                update(t)
                .where(one_of(dialect, t.c.id, found), t.c.status == source.value)
                .values(**values, updated_at=datetime.now(UTC))
            )
        moved += found
    return moved
