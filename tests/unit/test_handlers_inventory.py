"""inventory-service: a created order reserves its items once; its cancel releases them once.

Contract: ``OrderCreated`` records one reservation per (order, sku), summing
lines that name the same sku, and adds each quantity to the sku's
``reserved`` stock; a second ``OrderCreated`` of the same order reserves
nothing more. ``OrderCancelled`` subtracts exactly the order's reservation
from stock and deletes its rows, so a second cancel, or the cancel of an
order never reserved, changes nothing. The handlers run on a real SQLite
database created by the migrations, inside a transaction the test commits.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

import handlers
from app.context import HandlerContext
from app.db.engine import create_engine, session_factory
from app.db.migrate import upgrade_to_head
from app.errors import PermanentError
from app.registry import HandlerFn, default_registry
from handlers.inventory import CONSUMER, release_items, reserve_items
from handlers.tables import inventory_reservation, inventory_stock
from schemas.envelope import Envelope
from schemas.order import OrderCancelled, OrderCreated, OrderItem

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[AsyncSession]:
    """A session on a fresh, migrated SQLite database."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'inventory.db'}"
    await upgrade_to_head(url)
    engine = create_engine(url)
    async with session_factory(engine)() as db_session:
        yield db_session
    await engine.dispose()


def envelope(data: BaseModel, version: int) -> Envelope[Any]:
    """An Order event around ``data`` with a fresh eventId."""
    return Envelope[Any](
        event_id=str(uuid.uuid4()),
        event_type=type(data).__name__,
        event_version=1,
        aggregate_type="Order",
        aggregate_id=data.order_id,  # type: ignore[attr-defined]
        aggregate_version=version,
        occurred_at=NOW,
        data=data,
    )


def created(order_id: str, *items: tuple[str, int]) -> Envelope[Any]:
    lines = [OrderItem(sku=sku, qty=qty) for sku, qty in items]
    order = OrderCreated(
        order_id=order_id,
        order_no=f"no-{order_id}",
        user_id="u-1",
        amount=Decimal("9.5"),
        items=lines,
    )
    return envelope(order, 1)


def cancelled(order_id: str) -> Envelope[Any]:
    return envelope(OrderCancelled(order_id=order_id, user_id="u-1"), 2)


async def apply(session: AsyncSession, fn: HandlerFn, event: Envelope[Any]) -> None:
    """Run one handler in a transaction and commit it, as the framework does."""
    await fn(event, HandlerContext(session=session, consumer=CONSUMER))
    await session.commit()


async def stock(session: AsyncSession) -> dict[str, int]:
    rows = await session.execute(select(inventory_stock.c.sku, inventory_stock.c.reserved))
    return {sku: int(reserved) for sku, reserved in rows}


async def reservations(session: AsyncSession) -> dict[tuple[str, str], int]:
    rows = await session.execute(select(inventory_reservation))
    return {(row.order_id, row.sku): int(row.qty) for row in rows}


async def test_created_order_reserves_each_sku_summing_repeated_lines(
    session: AsyncSession,
) -> None:
    await apply(session, reserve_items, created("o-1", ("A", 2), ("B", 1), ("A", 3)))

    assert await stock(session) == {"A": 5, "B": 1}
    assert await reservations(session) == {("o-1", "A"): 5, ("o-1", "B"): 1}


async def test_reservations_of_several_orders_add_up(session: AsyncSession) -> None:
    await apply(session, reserve_items, created("o-1", ("A", 2), ("B", 1)))
    await apply(session, reserve_items, created("o-2", ("B", 4), ("C", 1)))

    assert await stock(session) == {"A": 2, "B": 5, "C": 1}


async def test_a_second_creation_of_the_same_order_reserves_nothing(
    session: AsyncSession,
) -> None:
    await apply(session, reserve_items, created("o-1", ("A", 2)))
    await apply(session, reserve_items, created("o-1", ("A", 2)))

    assert await stock(session) == {"A": 2}


async def test_a_second_creation_with_other_items_is_a_permanent_error(
    session: AsyncSession,
) -> None:
    await apply(session, reserve_items, created("o-1", ("A", 2)))

    with pytest.raises(PermanentError):
        await apply(session, reserve_items, created("o-1", ("A", 2), ("B", 1)))
    await session.rollback()

    assert await stock(session) == {"A": 2}
    assert await reservations(session) == {("o-1", "A"): 2}


async def test_cancel_releases_the_order_once(session: AsyncSession) -> None:
    await apply(session, reserve_items, created("o-1", ("A", 2), ("B", 1), ("A", 1)))
    await apply(session, reserve_items, created("o-2", ("B", 4)))

    await apply(session, release_items, cancelled("o-1"))
    assert await stock(session) == {"A": 0, "B": 4}
    assert await reservations(session) == {("o-2", "B"): 4}

    await apply(session, release_items, cancelled("o-1"))
    assert await stock(session) == {"A": 0, "B": 4}


async def test_cancel_of_an_order_never_reserved_changes_nothing(session: AsyncSession) -> None:
    await apply(session, reserve_items, created("o-1", ("A", 2)))

    await apply(session, release_items, cancelled("o-unknown"))

    assert await stock(session) == {"A": 2}
    assert await reservations(session) == {("o-1", "A"): 2}


async def test_an_order_without_items_reserves_nothing(session: AsyncSession) -> None:
    await apply(session, reserve_items, created("o-empty"))

    assert await stock(session) == {}
    assert await reservations(session) == {}


def test_importing_handlers_registers_inventory_service() -> None:
    assert handlers.inventory is not None
    assert [s.fn for s in default_registry.handlers_for(CONSUMER, "OrderCreated")] == [
        reserve_items
    ]
    assert [s.fn for s in default_registry.handlers_for(CONSUMER, "OrderCancelled")] == [
        release_items
    ]
    assert default_registry.handlers_for(CONSUMER, "OrderPaid") == []
