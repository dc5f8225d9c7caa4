"""Read what the example consumers wrote, and wait until they have consumed everything.

Read-only: nothing here writes to the database. Tables that do not exist yet
(the worker has not migrated) read as empty.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.db.urls import normalise_database_url
from app.demo.expected import CONSUMERS, Expected


@dataclass(frozen=True)
class DbState:
    """The consumers' tables as read at one moment."""

    points: dict[str, int] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)
    notifications: int = 0
    consumed: dict[str, int] = field(default_factory=dict)

    def consumed_by(self, consumer: str) -> int:
        """``consumed_event`` rows of ``consumer`` (0 when it has none)."""
        return self.consumed.get(consumer, 0)


class IncompleteError(TimeoutError):
    """The consumers did not reach the expected count in time; ``state`` is the last read."""

    def __init__(self, message: str, state: DbState) -> None:
        super().__init__(message)
        self.state = state


async def read_state(database_url: str) -> DbState:
    """One snapshot of the consumers' tables at ``database_url``."""
    engine = create_engine(normalise_database_url(database_url), pool_size=1)
    try:
        return await _read(engine)
    finally:
        await engine.dispose()


async def wait_until_complete(
    database_url: str,
    expected: Expected,
    timeout: float,  # noqa: ASYNC109 - our own deadline, so the error can carry the last counts
    *,
    consumers: Sequence[str] = CONSUMERS,
    interval: float = 0.5,
    on_poll: Callable[[DbState], None] | None = None,
    check_alive: Callable[[], None] | None = None,
) -> DbState:
    """Poll until every consumer has ``expected.distinct_events`` consumed events.

    ``on_poll`` sees each snapshot (for a progress display); ``check_alive``
    runs before each poll and may raise to stop waiting (e.g. the worker
    died). Raises ``IncompleteError`` after ``timeout`` seconds.
    """
    engine = create_engine(normalise_database_url(database_url), pool_size=1)
    deadline = time.monotonic() + timeout
    try:
        while True:
            if check_alive is not None:
                check_alive()
            state = await _read(engine)
            if on_poll is not None:
                on_poll(state)
            if all(state.consumed_by(c) >= expected.distinct_events for c in consumers):
                return state
            if time.monotonic() >= deadline:
                counts = ", ".join(f"{c}={state.consumed_by(c)}" for c in consumers)
                raise IncompleteError(
                    f"after {timeout:.0f}s consumed events are {counts}; "
                    f"expected {expected.distinct_events} each",
                    state,
                )
            await asyncio.sleep(interval)
    finally:
        await engine.dispose()


async def _read(engine: AsyncEngine) -> DbState:
    """One snapshot, read table by table.

    ``consumed_event`` is read first, on purpose: a consumer's effects commit
    in the same transaction as its ``consumed_event`` rows, so once the counts
    are complete every effect is visible to the reads that follow. Read in the
    other order, a complete count could come with balances from before it.
    """
    consumed = await _rows(
        engine, "SELECT consumer_group, COUNT(*) FROM consumed_event GROUP BY consumer_group"
    )
    points = await _rows(engine, "SELECT user_id, balance FROM user_points")
    reserved = await _rows(engine, "SELECT sku, reserved FROM inventory_stock")
    notifications = await _rows(engine, "SELECT 'all', COUNT(*) FROM notification")
    return DbState(
        points={str(k): int(v) for k, v in points},
        reserved={str(k): int(v) for k, v in reserved},
        notifications=int(notifications[0][1]) if notifications else 0,
        consumed={str(k): int(v) for k, v in consumed},
    )


async def _rows(engine: AsyncEngine, sql: str) -> list[tuple[Any, Any]]:
    """The rows of ``sql``, or none if its table does not exist yet.

    Each query gets its own connection so that a failed one (missing table)
    cannot poison the next one's transaction on PostgreSQL.
    """
    try:
        async with engine.connect() as conn:
            result = await conn.execute(text(sql))
            return [(row[0], row[1]) for row in result]
    except DBAPIError as exc:
        if _is_missing_table(exc):
            return []
        raise


def _is_missing_table(exc: DBAPIError) -> bool:
    message = str(exc.orig).lower()
    return any(
        hint in message
        for hint in ("no such table", "does not exist", "doesn't exist", "undefinedtable")
    )
