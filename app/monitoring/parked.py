"""Sample ``parked_event`` for the parking gauges: a periodic query, not a per-batch cost.

Events wait there for an earlier version of their aggregate; an old parked
event means a version never arrived (lost upstream, or stuck in a retry tier).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.db.tables import parked_event
from app.metrics import ParkedStats
from app.monitoring import sampling

SAMPLE_INTERVAL_SECONDS = 10.0


async def sample_parked(
    engine: AsyncEngine, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> dict[str, ParkedStats]:
    """Parked events, distinct aggregates and the oldest event's age, per consumer."""
    t = parked_event
    totals = select(t.c.consumer_group, func.count(), func.min(t.c.parked_at)).group_by(
        t.c.consumer_group
    )
    aggregates = select(t.c.consumer_group, t.c.aggregate_type, t.c.aggregate_id).distinct()
    per_consumer = aggregates.subquery()
    aggregate_counts = select(per_consumer.c.consumer_group, func.count()).group_by(
        per_consumer.c.consumer_group
    )
    async with engine.connect() as conn:
        total_rows = (await conn.execute(totals)).all()
        aggregate_rows: dict[str, int] = {
            consumer: int(count) for consumer, count in await conn.execute(aggregate_counts)
        }
    now = clock()
    return {
        consumer: ParkedStats(
            events=int(count),
            aggregates=int(aggregate_rows.get(consumer, 0)),
            oldest_age_seconds=_age(now, oldest),
        )
        for consumer, count, oldest in total_rows
    }


async def keep_sampling(engine: AsyncEngine, interval: float = SAMPLE_INTERVAL_SECONDS) -> None:
    """Publish a parking sample every ``interval`` seconds until cancelled."""
    await sampling.keep_sampling(
        "parking", lambda: sample_parked(engine), metrics.set_parked, interval
    )


def _age(now: datetime, then: datetime | str | None) -> float:
    if then is None:
        return 0.0
    if isinstance(then, str):  # a driver that hands the column back as text
        then = datetime.fromisoformat(then)
    if then.tzinfo is None:  # SQLite and MySQL keep no zone: the framework writes UTC
        then = then.replace(tzinfo=UTC)
    return max(0.0, (now - then).total_seconds())
