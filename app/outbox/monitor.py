"""Sample ``outbox_event`` for the outbox gauges: a periodic query, not a per-row cost.

Rows not yet published (and dead ones) are counted by status; ``PUBLISHED`` rows,
the bulk of the table until retention removes them, are not (the relay counts
what it publishes). An old pending row means nothing ships it: no relay runs,
the broker is gone, or its aggregate waits behind a row that keeps failing. The
worker's own retry and dead-letter records among the dead rows are counted apart:
each is a failed event in no topic (``python -m dlq list`` shows it).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics
from app.db.tables import outbox_event as t
from app.monitoring import sampling
from app.outbox.by_status import status_in
from app.outbox.status import RECORD_AGGREGATE_TYPE, UNPUBLISHED, OutboxStatus
from app.outbox.written import write_time, written_at

SAMPLE_INTERVAL_SECONDS = 10.0


async def sample_outbox(
    engine: AsyncEngine, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> tuple[dict[str, int], float, int]:
    """Rows per status (not ``PUBLISHED``), the oldest unpublished row's age in seconds, and
    how many of the dead rows are the worker's own retry and dead-letter records."""
    watched = [*UNPUBLISHED, OutboxStatus.DEAD]
    query = (
        select(t.c.status, func.count(), func.min(written_at(t)))
        .where(status_in(*watched))
        .group_by(t.c.status)
    )
    ours = select(func.count()).where(
        status_in(OutboxStatus.DEAD), t.c.aggregate_type == RECORD_AGGREGATE_TYPE
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
        counts = {status: int(count) for status, count, _ in rows}
        # Asked only when some row is dead: while all is well the sample stays one query.
        dead = counts.get(OutboxStatus.DEAD.value)
        failure_records = int(await conn.scalar(ours) or 0) if dead else 0
    # Text on SQLite; never before WRITTEN_SINCE (``written_at`` leaves such times out).
    found = (write_time(first) for status, _, first in rows if status in UNPUBLISHED)
    oldest = [moment for moment in found if moment is not None]
    age = max(0.0, (clock() - min(oldest)).total_seconds()) if oldest else 0.0
    return counts, age, failure_records


async def keep_sampling(engine: AsyncEngine, interval: float = SAMPLE_INTERVAL_SECONDS) -> None:
    """Publish an outbox sample every ``interval`` seconds until cancelled."""
    await sampling.keep_sampling(
        "outbox", lambda: sample_outbox(engine), lambda found: metrics.set_outbox(*found), interval
    )
