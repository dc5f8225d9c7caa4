"""The relay's writes after a publish: published, failed (an attempt), released, lease renewed.

Every statement names the relay's lease (``lease_owner``): a relay whose lease
expired and was taken over changes nothing, and learns it from the row count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.dialect import backend, one_of
from app.db.tables import outbox_event as t
from app.outbox.status import OutboxStatus
from app.pipeline.pause import Backoff

ERROR_LIMIT = 4_000
_NO_SYNC = {"synchronize_session": False}


@dataclass(frozen=True, slots=True)
class Failed:
    """A row whose publish failed for a reason of its own (it counts as an attempt);
    ``final``: one no attempt can mend (the row's columns are no record), ``DEAD`` at once."""

    id: int
    retry_count: int
    error: str
    final: bool = False


async def _update_held(session: AsyncSession, owner: str, ids: Sequence[int], **values: Any) -> int:
    """Set ``values`` on the rows of ``ids`` this relay still holds; how many it held."""
    if not ids:
        return 0
    result = await session.execute(
        update(t)
        .where(
            one_of(backend(session), t.c.id, list(ids)),
            t.c.lease_owner == owner,
            t.c.status == OutboxStatus.PROCESSING.value,
        )
        .values(**values),
        execution_options=_NO_SYNC,
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


async def mark_published(
    session: AsyncSession, owner: str, ids: Sequence[int], now: datetime
) -> int:
    """``PUBLISHED`` at ``now``; how many rows this relay still held."""
    return await _update_held(
        session,
        owner,
        ids,
        status=OutboxStatus.PUBLISHED.value,
        published_at=now,
        updated_at=now,
        lease_owner=None,
        lease_expires_at=None,
    )


async def release(session: AsyncSession, owner: str, ids: Sequence[int], now: datetime) -> int:
    """Back to ``PENDING`` without counting an attempt (not sent, or not known to be)."""
    return await _update_held(
        session,
        owner,
        ids,
        status=OutboxStatus.PENDING.value,
        updated_at=now,
        lease_owner=None,
        lease_expires_at=None,
    )


async def renew(
    session: AsyncSession, owner: str, ids: Sequence[int], until: datetime, now: datetime
) -> int:
    """Extend this relay's lease on ``ids``; how many it still held."""
    return await _update_held(session, owner, ids, lease_expires_at=until, updated_at=now)


async def held(session: AsyncSession, owner: str, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` this relay still holds (``PROCESSING`` under its lease)."""
    if not ids:
        return set()
    result = await session.execute(
        select(t.c.id).where(
            one_of(backend(session), t.c.id, list(ids)),
            t.c.lease_owner == owner,
            t.c.status == OutboxStatus.PROCESSING.value,
        )
    )
    return {int(row_id) for row_id in result.scalars()}


async def record_failures(
    session: AsyncSession,
    owner: str,
    failures: Sequence[Failed],
    now: datetime,
    max_attempts: int,
    backoff: Backoff,
) -> list[int]:
    """Count one failed attempt for each row: ``PENDING`` until its next attempt is due, or
    ``DEAD`` after ``max_attempts``. Returns the ids that went ``DEAD``."""
    if not failures:
        return []
    params = []
    dead = []
    for failure in failures:
        attempts = failure.retry_count + 1
        final = failure.final or attempts >= max_attempts
        if final:
            dead.append(failure.id)
        params.append(
            {
                "b_id": failure.id,
                "b_status": (OutboxStatus.DEAD if final else OutboxStatus.PENDING).value,
                "b_count": attempts,
                "b_due": None if final else now + timedelta(seconds=backoff.delay(attempts)),
                "b_error": failure.error[:ERROR_LIMIT],
            }
        )
    stmt = (
        update(t)
        .where(
            t.c.id == bindparam("b_id"),
            t.c.lease_owner == owner,
            t.c.status == OutboxStatus.PROCESSING.value,
        )
        .values(
            status=bindparam("b_status"),
            retry_count=bindparam("b_count"),
            next_retry_at=bindparam("b_due"),
            last_error=bindparam("b_error"),
            updated_at=now,
            lease_owner=None,
            lease_expires_at=None,
        )
    )
    await session.execute(stmt, params, execution_options=_NO_SYNC)
    return dead
