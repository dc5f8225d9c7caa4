"""Retention: delete what the framework no longer needs, a bounded batch at a time.

- ``outbox_event`` rows ``PUBLISHED`` longer ago than ``OUTBOX_RETENTION``;
- ``consumed_event`` (dedup records) applied longer ago than ``DEDUP_RETENTION``;
- ``failed_event`` rows settled (``resolved``, ``skipped``) longer ago than
  ``DEDUP_RETENTION``.

Each batch (``CLEANUP_BATCH_SIZE`` rows) is its own short transaction, with
``CLEANUP_PAUSE_SECONDS`` between two: never one long transaction holding locks
or bloating the log while the workers write. Published outbox rows are walked in
id order (the relay's index) and the walk stops at the first batch created after
the cut-off; dedup records are found by ``applied_at`` (its own index).

A dedup record must outlive every redelivery of its event: once it is gone, the
same event delivered again applies again (a versioned event is still stopped by
its aggregate's version, an unversioned one is not). So ``DEDUP_RETENTION`` must
exceed the topic's retention and any window in which its records may be replayed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select, tuple_
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app import metrics
from app.db.engine import session_factory
from app.db.tables import consumed_event, failed_event, outbox_event
from app.outbox.status import OutboxStatus
from app.outbox.written import aware
from app.settings import Settings
from dlq.dead import FailureStatus

log = logging.getLogger("effectively_once.retention")
SETTLED = (FailureStatus.RESOLVED.value, FailureStatus.SKIPPED.value)


@dataclass(frozen=True)
class Retention:
    """How long rows are kept, and how the deletes are paced."""

    outbox: timedelta = timedelta(days=7)
    dedup: timedelta = timedelta(days=30)
    batch_size: int = 1_000
    pause_seconds: float = 0.1

    @classmethod
    def of(cls, settings: Settings) -> Retention:
        """``OUTBOX_RETENTION``, ``DEDUP_RETENTION`` and the ``CLEANUP_*`` pacing."""
        return cls(
            settings.outbox_retention,
            settings.dedup_retention,
            settings.cleanup_batch_size,
            settings.cleanup_pause_seconds,
        )


@dataclass
class Cleaned:
    """Rows deleted, per table."""

    outbox_event: int = 0
    consumed_event: int = 0
    failed_event: int = 0


async def clean(engine: AsyncEngine, retention: Retention, now: datetime | None = None) -> Cleaned:
    """Delete what ``retention`` no longer keeps; returns how many rows of each table."""
    now = now or datetime.now(UTC)
    sessions = session_factory(engine)
    cleaned = Cleaned()
    published, applied = now - retention.outbox, now - retention.dedup
    cleaned.outbox_event = await _batches(
        sessions, retention, lambda s, after: _published(s, published, after, retention)
    )
    cleaned.consumed_event = await _batches(
        sessions, retention, lambda s, _: _consumed(s, applied, retention)
    )
    cleaned.failed_event = await _batches(
        sessions, retention, lambda s, _: _settled(s, applied, retention)
    )
    for table in ("outbox_event", "consumed_event", "failed_event"):
        metrics.cleaned(table, getattr(cleaned, table))
    return cleaned


Batch = Callable[[AsyncSession, int], Awaitable[tuple[int, int | None]]]


async def _batches(sessions: Callable[[], AsyncSession], retention: Retention, one: Batch) -> int:
    """Run ``one`` batch after another, each in its own transaction, until it says done
    (``None`` as where to go on from); returns the rows deleted."""
    total, after = 0, 0
    while True:
        async with sessions() as session, session.begin():
            deleted, resume = await one(session, after)
        total += deleted
        if resume is None:
            return total
        after = resume
        await asyncio.sleep(retention.pause_seconds)


async def _published(
    session: AsyncSession, cutoff: datetime, after: int, retention: Retention
) -> tuple[int, int | None]:
    t = outbox_event
    found = (
        await session.execute(
            select(t.c.id, t.c.published_at, t.c.created_at)
            .where(t.c.status == OutboxStatus.PUBLISHED.value, t.c.id > after)
            .order_by(t.c.id)
            .limit(retention.batch_size)
        )
    ).all()
    doomed = [row_id for row_id, published, _ in found if published and aware(published) < cutoff]
    if doomed:
        await session.execute(
            delete(t).where(t.c.id.in_(doomed), t.c.status == OutboxStatus.PUBLISHED.value)
        )
    newer = all(aware(created) >= cutoff for _, _, created in found)
    done = len(found) < retention.batch_size or newer
    return len(doomed), None if done else found[-1][0]


async def _consumed(
    session: AsyncSession, cutoff: datetime, retention: Retention
) -> tuple[int, int | None]:
    t = consumed_event
    keys = (
        await session.execute(
            select(t.c.event_id, t.c.consumer_group)
            .where(t.c.applied_at < cutoff)
            .limit(retention.batch_size)
        )
    ).all()
    if keys:
        await session.execute(
            delete(t).where(
                tuple_(t.c.event_id, t.c.consumer_group).in_([tuple(k) for k in keys]),
                t.c.applied_at < cutoff,
            )
        )
    return len(keys), None if len(keys) < retention.batch_size else 0


async def _settled(
    session: AsyncSession, cutoff: datetime, retention: Retention
) -> tuple[int, int | None]:
    t = failed_event
    key = (t.c.consumer_group, t.c.topic, t.c.partition, t.c.offset)
    keys = (
        await session.execute(
            select(*key)
            .where(t.c.status.in_(SETTLED), t.c.last_failed_at < cutoff)
            .limit(retention.batch_size)
        )
    ).all()
    if keys:
        await session.execute(
            delete(t).where(tuple_(*key).in_([tuple(k) for k in keys]), t.c.status.in_(SETTLED))
        )
    return len(keys), None if len(keys) < retention.batch_size else 0


async def keep_cleaning(engine: AsyncEngine, retention: Retention, interval: float) -> None:
    """``clean`` every ``interval`` seconds until cancelled (a failure is logged, not fatal)."""
    while True:
        await asyncio.sleep(interval)
        try:
            cleaned = await clean(engine, retention)
        except Exception as exc:
            log.warning("retention run failed, trying again in %.0fs: %r", interval, exc)
        else:
            log.info(
                "retention deleted %d published outbox row(s), %d dedup record(s), "
                "%d settled failure(s)",
                cleaned.outbox_event,
                cleaned.consumed_event,
                cleaned.failed_event,
            )
