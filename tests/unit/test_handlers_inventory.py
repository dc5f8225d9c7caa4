"""inventory-service: a created order reserves its items once; its cancel releases them once.

Contract: ``OrderCreated`` records one reservation per (order, sku), summing
lines that name the same sku, and adds each quantity to the sku's
``reserved`` stock; a second ``OrderCreated`` of the same order reserves
nothing more, and one naming only some of the reserved skus is a
``PermanentError``. ``OrderCancelled`` subtracts exactly the order's
reservation from stock and deletes its rows, so a second cancel, or the
cancel of an order never reserved, changes nothing. Both are batch handlers:
a list of many orders in one call leaves the same state as one call per
order, the quantities of one sku across orders summed into its stock. The
handlers run on a real database created by the migrations (SQLite here;
PostgreSQL and MariaDB in
``tests/integration/test_example_handlers_on_each_database.py``), inside a
transaction the test commits.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

import handlers
from app.context import HandlerContext
from app.errors import PermanentError
from app.registry import HandlerFn, default_registry
from handlers.inventory import CONSUMER, release_items, reserve_items
from handlers.tables import inventory_reservation, inventory_stock
from schemas.envelope import Envelope
from schemas.order import OrderCancelled, OrderCreated, OrderItem

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)

# Several orders' events in one call, or in one call (and transaction) each.
ONE_CALL_OR_EACH = pytest.mark.parametrize("together", [True, False], ids=["one-call", "each"])


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


async def apply(session: AsyncSession, fn: HandlerFn, *events: Envelope[Any]) -> None:
    """Run one batch handler on ``events`` in one call and commit, as the framework does."""
    await fn(list(events), HandlerContext(session=session, consumer=CONSUMER))
    await session.commit()


async def apply_all(
    session: AsyncSession, fn: HandlerFn, events: list[Envelope[Any]], together: bool
) -> None:
    """``events`` in one call, or one call each."""
    for call in [events] if together else [[event] for event in events]:
        await apply(session, fn, *call)


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


@ONE_CALL_OR_EACH
async def test_reservations_of_several_orders_add_up(session: AsyncSession, together: bool) -> None:
    events = [created("o-1", ("A", 2), ("B", 1)), created("o-2", ("B", 4), ("C", 1))]
    await apply_all(session, reserve_items, events, together)

    assert await stock(session) == {"A": 2, "B": 5, "C": 1}


async def test_one_sku_in_several_orders_of_one_call_sums_into_its_stock(
    session: AsyncSession,
) -> None:
    await apply(
        session,
        reserve_items,
        created("o-1", ("A", 2), ("B", 1), ("A", 1)),
        created("o-2", ("A", 4)),
        created("o-3", ("B", 2), ("A", 1)),
    )

    assert await stock(session) == {"A": 8, "B": 3}
    assert await reservations(session) == {
        ("o-1", "A"): 3,
        ("o-1", "B"): 1,
        ("o-2", "A"): 4,
        ("o-3", "A"): 1,
        ("o-3", "B"): 2,
    }


async def test_a_second_creation_of_the_same_order_reserves_nothing(
    session: AsyncSession,
) -> None:
    await apply(session, reserve_items, created("o-1", ("A", 2)))
    await apply(session, reserve_items, created("o-1", ("A", 2)))

    assert await stock(session) == {"A": 2}


async def test_one_call_reserves_only_the_orders_not_reserved_before(
    session: AsyncSession,
) -> None:
    await apply(session, reserve_items, created("o-1", ("A", 2)))

    await apply(
        session,
        reserve_items,
        created("o-1", ("A", 2)),
        created("o-2", ("A", 1), ("B", 1)),
        created("o-2", ("A", 1), ("B", 1)),
    )

    assert await stock(session) == {"A": 3, "B": 1}
    assert await reservations(session) == {("o-1", "A"): 2, ("o-2", "A"): 1, ("o-2", "B"): 1}


async def test_a_second_creation_with_other_items_is_a_permanent_error(
    session: AsyncSession,
) -> None:
    await apply(session, reserve_items, created("o-1", ("A", 2)))

    with pytest.raises(PermanentError):
        await apply(session, reserve_items, created("o-1", ("A", 2), ("B", 1)))
    await session.rollback()

    assert await stock(session) == {"A": 2}
    assert await reservations(session) == {("o-1", "A"): 2}


async def test_a_partial_repeat_fails_the_whole_call_it_is_in(session: AsyncSession) -> None:
    """The framework then rolls back and re-runs the events one by one, to fail only it."""
    await apply(session, reserve_items, created("o-1", ("A", 2)))

    with pytest.raises(PermanentError, match="o-1"):
        await apply(
            session,
            reserve_items,
            created("o-2", ("B", 1)),
            created("o-1", ("A", 2), ("B", 1)),
        )
    await session.rollback()

    assert await stock(session) == {"A": 2}


@ONE_CALL_OR_EACH
async def test_cancel_releases_the_order_once(session: AsyncSession, together: bool) -> None:
    orders = [created("o-1", ("A", 2), ("B", 1), ("A", 1)), created("o-2", ("B", 4))]
    await apply_all(session, reserve_items, orders, together)

    await apply(session, release_items, cancelled("o-1"))
    assert await stock(session) == {"A": 0, "B": 4}
    assert await reservations(session) == {("o-2", "B"): 4}

    await apply(session, release_items, cancelled("o-1"))
    assert await stock(session) == {"A": 0, "B": 4}


@ONE_CALL_OR_EACH
async def test_cancels_of_several_orders_release_each_sku_summed(
    session: AsyncSession, together: bool
) -> None:
    await apply(
        session,
        reserve_items,
        created("o-1", ("A", 2), ("B", 1)),
        created("o-2", ("A", 4)),
        created("o-3", ("B", 2), ("C", 5)),
    )
    await apply(session, release_items, cancelled("o-3"))

    cancels = [cancelled("o-1"), cancelled("o-3"), cancelled("o-never"), cancelled("o-2")]
    await apply_all(session, release_items, cancels, together)

    assert await stock(session) == {"A": 0, "B": 0, "C": 0}
    assert await reservations(session) == {}


async def test_cancel_of_an_order_never_reserved_changes_nothing(session: AsyncSession) -> None:
    await apply(session, reserve_items, created("o-1", ("A", 2)))

    await apply(session, release_items, cancelled("o-unknown"))

    assert await stock(session) == {"A": 2}
    assert await reservations(session) == {("o-1", "A"): 2}


async def test_an_order_without_items_reserves_nothing(session: AsyncSession) -> None:
    await apply(session, reserve_items, created("o-empty"))

    assert await stock(session) == {}
    assert await reservations(session) == {}


async def test_a_call_longer_than_one_in_list_reserves_and_releases_every_order(
    session: AsyncSession,
) -> None:
    orders = [f"o-{n:04}" for n in range(1201)]
    await apply(
        session,
        reserve_items,
        *(created(o, (f"S{n % 5}", 1), ("X", 2)) for n, o in enumerate(orders)),
    )
    await apply(session, release_items, *(cancelled(o) for o in orders[::2]))

    kept = range(1, 1201, 2)
    expected = {f"S{s}": sum(1 for n in kept if n % 5 == s) for s in range(5)}
    assert await stock(session) == {**expected, "X": 2 * len(kept)}
    assert len(await reservations(session)) == 2 * len(kept)


def test_importing_handlers_registers_inventory_service_as_batch_handlers() -> None:
    assert handlers.inventory is not None
    assert [(s.fn, s.batch) for s in default_registry.handlers_for(CONSUMER, "OrderCreated")] == [
        (reserve_items, True)
    ]
    assert [(s.fn, s.batch) for s in default_registry.handlers_for(CONSUMER, "OrderCancelled")] == [
        (release_items, True)
    ]
    assert default_registry.handlers_for(CONSUMER, "OrderPaid") == []
