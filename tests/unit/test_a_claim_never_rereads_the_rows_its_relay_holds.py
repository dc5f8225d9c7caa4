"""A claim takes the rows its relay holds as the relay knows them, and reads none of them.

Contract: ``claim(..., held=...)`` (the relay's cycles not settled yet, each row with its
aggregate) leaves every held row alone and every later row of a held row's aggregate,
even when the database shows the held row's lease expired (a settlement that waited);
it takes the other aggregates' rows; and none of the rows its statements return is a
held one (a relay with a backlog holds two cycles' rows at every claim).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.db.engine import session_factory
from app.db.tables import outbox_event as t
from app.outbox.claim import claim

NOW = datetime.now(UTC)
EXPIRED = NOW - timedelta(seconds=1)


async def write(engine: AsyncEngine, *rows: tuple[str, str]) -> dict[str, int]:
    """Outbox rows ``(event_id, aggregate_id)`` in this order; their ids by event_id."""
    async with engine.begin() as conn:
        for event_id, agg in rows:
            await conn.execute(
                insert(t).values(
                    event_id=event_id,
                    aggregate_type="Order",
                    aggregate_id=agg,
                    event_type="OrderPaid",
                    topic="orders",
                    event_key=agg,
                    payload="{}",
                )
            )
    async with engine.connect() as conn:
        return {e: i for i, e in await conn.execute(select(t.c.id, t.c.event_id))}


class Watching:
    """A session that notes the ``id`` of every row its statements return."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.ids: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    async def execute(self, statement: Any, *args: Any, **kwargs: Any) -> Any:
        result = await self.session.execute(statement, *args, **kwargs)
        if not getattr(result, "returns_rows", False):
            return result
        frozen = result.freeze()
        self.ids.update(row.id for row in frozen() if "id" in row._fields)
        return frozen()


async def claim_holding(
    engine: AsyncEngine, held: dict[int, tuple[str, str]]
) -> tuple[list[int], set[int]]:
    """Claim with ``held``: the ids claimed, and every id the claim's statements read."""
    async with session_factory(engine)() as session, session.begin():
        watching = Watching(session)
        rows = await claim(watching, "relay-1", NOW, NOW + timedelta(minutes=1), 10, held=held)  # type: ignore[arg-type]
    return [row["id"] for row in rows], watching.ids


async def test_held_rows_and_their_aggregates_wait_and_are_never_read(
    engine: AsyncEngine,
) -> None:
    ids = await write(engine, ("a1", "A"), ("b1", "B"), ("a2", "A"), ("c1", "C"), ("b2", "B"))
    # a1 was claimed by this relay, its settlement still waits, its lease ran out meanwhile.
    async with engine.begin() as conn:
        await conn.execute(
            update(t)
            .where(t.c.id == ids["a1"])
            .values(status="PROCESSING", lease_owner="relay-1", lease_expires_at=EXPIRED)
        )

    claimed, read = await claim_holding(engine, {ids["a1"]: ("Order", "A")})

    assert claimed == [ids["b1"], ids["c1"], ids["b2"]]  # a2 waits for a1
    assert ids["a1"] not in read
    assert ids["a2"] in read  # read, planned behind a1, left


async def test_without_held_rows_an_expired_lease_is_taken_over(engine: AsyncEngine) -> None:
    ids = await write(engine, ("a1", "A"), ("a2", "A"))
    async with engine.begin() as conn:
        await conn.execute(
            update(t)
            .where(t.c.id == ids["a1"])
            .values(status="PROCESSING", lease_owner="relay-0", lease_expires_at=EXPIRED)
        )

    claimed, read = await claim_holding(engine, {})

    assert claimed == [ids["a1"], ids["a2"]]
    assert ids["a1"] in read
