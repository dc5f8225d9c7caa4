"""What the demo reports about the outbox: rows by status and how fast they shipped."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select

from app.db.engine import create_engine
from app.db.tables import outbox_event as t
from app.outbox.written import aware


@dataclass(frozen=True)
class OutboxFigures:
    """Rows by status; created-to-published latency of the published ones, in seconds."""

    by_status: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)

    @property
    def unpublished(self) -> int:
        """Rows not yet published (pending or claimed)."""
        return self.by_status.get("PENDING", 0) + self.by_status.get("PROCESSING", 0)

    def percentile(self, share: float) -> float:
        """The latency below which ``share`` of the published rows shipped (0 if none)."""
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def read_outbox(database_url: str) -> OutboxFigures:
    """One reading of ``outbox_event``."""
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(select(t.c.status, t.c.created_at, t.c.published_at))).all()
    finally:
        await engine.dispose()
    by_status: dict[str, int] = {}
    latencies = []
    for status, created, published in rows:
        by_status[status] = by_status.get(status, 0) + 1
        if published is not None:
            latencies.append((_moment(published) - _moment(created)).total_seconds())
    return OutboxFigures(by_status, latencies)


async def until_shipped(database_url: str, timeout: float) -> OutboxFigures:  # noqa: ASYNC109
    """Read the outbox until no row waits (or ``timeout`` seconds passed)."""
    deadline = time.monotonic() + timeout
    while True:
        figures = await read_outbox(database_url)
        if not figures.unpublished or time.monotonic() > deadline:
            return figures
        await asyncio.sleep(0.2)


def _moment(value: datetime | str) -> datetime:
    return aware(datetime.fromisoformat(value) if isinstance(value, str) else value)
