"""Read back what the workers wrote: the example consumers' tables and the framework's own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.db.tables import aggregate_version, consumed_event, failed_event, parked_event
from app.demo.expected import Expected
from handlers.tables import inventory_stock, notification, user_points

CONSUMERS = ("points-service", "inventory-service", "notification-service")
TALLY = "tally:"  # the prefix of tests.integration.support.tally's counter rows (not imported:
# importing it would register its handlers in the test process)


class Database:
    """A read-only view of one test database."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine: AsyncEngine = create_engine(url, pool_size=1)

    async def dispose(self) -> None:
        """Close the connections."""
        await self.engine.dispose()

    async def _rows(self, query: Any) -> list[Any]:
        async with self.engine.connect() as conn:
            return list((await conn.execute(query)).all())

    async def balances(self) -> dict[str, int]:
        """points-service: user -> balance (the ``tally`` consumer's counters left out)."""
        rows = await self._rows(select(user_points.c.user_id, user_points.c.balance))
        return {user: int(balance) for user, balance in rows if not user.startswith(TALLY)}

    async def tallies(self) -> dict[str, int]:
        """``tally`` consumer: eventId -> how many times the event took effect."""
        rows = await self._rows(
            select(user_points.c.user_id, user_points.c.balance).where(
                user_points.c.user_id.startswith(TALLY, autoescape=True)
            )
        )
        return {user.removeprefix(TALLY): int(count) for user, count in rows}

    async def reserved(self) -> dict[str, int]:
        """inventory-service: sku -> reserved quantity."""
        rows = await self._rows(select(inventory_stock.c.sku, inventory_stock.c.reserved))
        return {sku: int(qty) for sku, qty in rows}

    async def notifications(self) -> dict[str, int]:
        """notification-service: order -> number of notification rows."""
        rows = await self._rows(
            select(notification.c.order_id, func.count()).group_by(notification.c.order_id)
        )
        return {order: int(count) for order, count in rows}

    async def notification_count(self) -> int:
        """notification-service: all notification rows."""
        return sum((await self.notifications()).values())

    async def consumed_counts(self) -> dict[str, int]:
        """consumer -> ``consumed_event`` rows (consumers without rows are absent)."""
        rows = await self._rows(
            select(consumed_event.c.consumer_group, func.count()).group_by(
                consumed_event.c.consumer_group
            )
        )
        return {consumer: int(count) for consumer, count in rows}

    async def consumed_ids(self, consumer: str) -> list[str]:
        """The eventIds of ``consumer``'s ``consumed_event`` rows, sorted (a repeat would show)."""
        rows = await self._rows(
            select(consumed_event.c.event_id)
            .where(consumed_event.c.consumer_group == consumer)
            .order_by(consumed_event.c.event_id)
        )
        return [event_id for (event_id,) in rows]

    async def consumed_aggregates(self) -> set[tuple[str, str]]:
        """The (aggregateType, aggregateId) of every ``consumed_event`` row, all consumers."""
        columns = (consumed_event.c.aggregate_type, consumed_event.c.aggregate_id)
        return {(kind, aggregate) for kind, aggregate in await self._rows(select(*columns))}

    async def versions(self, aggregate_id: str) -> dict[str, int | None]:
        """consumer -> ``last_version`` of the Order aggregate ``aggregate_id``."""
        rows = await self._rows(
            select(aggregate_version.c.consumer_group, aggregate_version.c.last_version).where(
                aggregate_version.c.aggregate_type == "Order",
                aggregate_version.c.aggregate_id == aggregate_id,
            )
        )
        return dict(rows)

    async def all_versions(self) -> dict[tuple[str, str], int | None]:
        """(consumer, Order aggregate id) -> ``last_version``, for every row."""
        rows = await self._rows(
            select(
                aggregate_version.c.consumer_group,
                aggregate_version.c.aggregate_id,
                aggregate_version.c.last_version,
            ).where(aggregate_version.c.aggregate_type == "Order")
        )
        return {(consumer, aggregate): last for consumer, aggregate, last in rows}

    async def parked_count(self) -> int:
        """Rows in ``parked_event``, all consumers."""
        rows = await self._rows(select(func.count()).select_from(parked_event))
        return int(rows[0][0])

    async def failures(self) -> list[Mapping[str, Any]]:
        """Every ``failed_event`` row (the columns tests check), in offset order."""
        columns = ("consumer_group", "partition", "offset", "event_id", "reason")
        columns += ("exception_type", "exception_message", "record_value")
        query = select(*(failed_event.c[name] for name in columns)).order_by(
            failed_event.c.partition, failed_event.c.offset, failed_event.c.consumer_group
        )
        async with self.engine.connect() as conn:
            return [dict(row) for row in (await conn.execute(query)).mappings()]


async def final_state(db: Database) -> dict[str, Any]:
    """What a workload leaves in the example consumers' tables and the framework's, in the
    shape of ``expected_final_state``."""
    return {
        "points": await db.balances(),
        "reserved": await db.reserved(),
        "notifications": await db.notification_count(),
        "consumed": await db.consumed_counts(),
        "parked": await db.parked_count(),
        "failures": len(await db.failures()),
    }


def expected_final_state(expected: Expected) -> dict[str, Any]:
    """What ``expected`` means for ``final_state``: nothing parked, nothing failed."""
    return {
        "points": expected.points,
        "reserved": expected.reserved,
        "notifications": expected.notifications,
        "consumed": every_consumer(expected.distinct_events),
        "parked": 0,
        "failures": 0,
    }


def every_consumer(value: int) -> dict[str, int]:
    """``{consumer: value}`` for the three example consumers (an expected mapping)."""
    return dict.fromkeys(CONSUMERS, value)
