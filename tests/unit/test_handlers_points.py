"""points-service: a paid order earns floor(amount) points once; its cancel takes them back once.

Contract: ``OrderPaid`` adds ``floor(amount)`` to the user's balance and
records the award per order; a second ``OrderPaid`` of the same order awards
nothing. ``OrderCancelled`` of an awarded order subtracts exactly that award
and marks it revoked, so a second cancel subtracts nothing; the cancel of an
order never awarded changes nothing. Both are batch handlers: a list of many
orders in one call leaves the same state as one call per order, the awards
of one user's orders summed into their balance. The handlers run on a real
database created by the migrations (SQLite here; PostgreSQL and MariaDB in
``tests/integration/test_example_handlers_on_each_database.py``), inside a
transaction the test commits (as the framework would).
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
from app.registry import HandlerFn, default_registry
from handlers.points import CONSUMER, award_points, revoke_points
from handlers.tables import points_award, user_points
from schemas.envelope import Envelope
from schemas.order import OrderCancelled, OrderPaid

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


def paid(order_id: str, amount: str, user_id: str = "u-1") -> Envelope[Any]:
    payment = OrderPaid(order_id=order_id, user_id=user_id, amount=Decimal(amount), paid_at=NOW)
    return envelope(payment, 2)


def cancelled(order_id: str, user_id: str = "u-1") -> Envelope[Any]:
    return envelope(OrderCancelled(order_id=order_id, user_id=user_id, reason="test"), 3)


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


async def balances(session: AsyncSession) -> dict[str, int]:
    rows = await session.execute(select(user_points.c.user_id, user_points.c.balance))
    return {user: int(balance) for user, balance in rows}


async def revoked(session: AsyncSession) -> dict[str, bool]:
    """Whether each order's award is revoked."""
    rows = await session.execute(select(points_award.c.order_id, points_award.c.revoked_at))
    return {order_id: revoked_at is not None for order_id, revoked_at in rows}


async def test_paid_order_earns_the_whole_units_of_its_amount(session: AsyncSession) -> None:
    await apply(session, award_points, paid("o-1", "10.9"))

    assert await balances(session) == {"u-1": 10}
    award = (await session.execute(select(points_award))).one()
    assert tuple(award) == ("o-1", "u-1", 10, None)


@ONE_CALL_OR_EACH
async def test_awards_of_several_orders_add_up(session: AsyncSession, together: bool) -> None:
    events = [paid("o-1", "10.9"), paid("o-2", "5"), paid("o-3", "0.99", user_id="u-2")]
    await apply_all(session, award_points, events, together)

    assert await balances(session) == {"u-1": 15, "u-2": 0}


async def test_two_orders_of_one_user_paid_in_one_call_sum_into_the_balance(
    session: AsyncSession,
) -> None:
    await apply(session, award_points, paid("o-1", "10.9"), paid("o-2", "5.5"))

    assert await balances(session) == {"u-1": 15}
    awards = await session.execute(select(points_award.c.order_id, points_award.c.points))
    assert sorted(awards) == [("o-1", 10), ("o-2", 5)]


async def test_a_second_payment_of_the_same_order_awards_nothing(session: AsyncSession) -> None:
    await apply(session, award_points, paid("o-1", "10.9"))
    await apply(session, award_points, paid("o-1", "10.9"))

    assert await balances(session) == {"u-1": 10}


async def test_a_list_naming_an_order_twice_awards_it_once(session: AsyncSession) -> None:
    await apply(session, award_points, paid("o-1", "10.9"), paid("o-1", "10.9"))

    assert await balances(session) == {"u-1": 10}


@ONE_CALL_OR_EACH
async def test_cancel_takes_the_award_back_once(session: AsyncSession, together: bool) -> None:
    await apply_all(session, award_points, [paid("o-1", "10.9"), paid("o-2", "5")], together)

    await apply(session, revoke_points, cancelled("o-1"))
    assert await balances(session) == {"u-1": 5}

    await apply(session, revoke_points, cancelled("o-1"))
    assert await balances(session) == {"u-1": 5}
    revoked_at = await session.scalar(
        select(points_award.c.revoked_at).where(points_award.c.order_id == "o-1")
    )
    assert revoked_at is not None


async def test_payment_after_cancel_does_not_award_again(session: AsyncSession) -> None:
    await apply(session, award_points, paid("o-1", "7"))
    await apply(session, revoke_points, cancelled("o-1"))
    await apply(session, award_points, paid("o-1", "7"))

    assert await balances(session) == {"u-1": 0}


async def test_cancel_of_an_order_never_awarded_changes_nothing(session: AsyncSession) -> None:
    await apply(session, award_points, paid("o-1", "3"))

    await apply(session, revoke_points, cancelled("o-unpaid"))

    assert await balances(session) == {"u-1": 3}
    assert (await session.execute(select(points_award.c.order_id))).scalars().all() == ["o-1"]


async def test_one_call_awards_only_the_orders_never_awarded(session: AsyncSession) -> None:
    await apply(session, award_points, paid("o-awarded", "4"), paid("o-revoked", "8"))
    await apply(session, revoke_points, cancelled("o-revoked"))

    await apply(
        session,
        award_points,
        paid("o-awarded", "4"),
        paid("o-new", "2", user_id="u-2"),
        paid("o-revoked", "8"),
    )

    assert await balances(session) == {"u-1": 4, "u-2": 2}


@ONE_CALL_OR_EACH
async def test_cancels_take_back_each_users_awards_summed(
    session: AsyncSession, together: bool
) -> None:
    await apply(
        session,
        award_points,
        paid("o-1", "10"),
        paid("o-2", "5"),
        paid("o-3", "7", user_id="u-2"),
        paid("o-4", "3"),
    )
    await apply(session, revoke_points, cancelled("o-4"))

    cancels = [cancelled("o-1"), cancelled("o-3", user_id="u-2"), cancelled("o-4")]
    await apply_all(session, revoke_points, [*cancels, cancelled("o-unpaid")], together)

    assert await balances(session) == {"u-1": 5, "u-2": 0}
    assert await revoked(session) == {"o-1": True, "o-2": False, "o-3": True, "o-4": True}


async def test_a_call_longer_than_one_in_list_awards_and_revokes_every_order(
    session: AsyncSession,
) -> None:
    orders = [f"o-{n:04}" for n in range(1201)]
    await apply(
        session, award_points, *(paid(o, "2", user_id=f"u-{n % 7}") for n, o in enumerate(orders))
    )
    await apply(session, revoke_points, *(cancelled(o) for o in orders[::2]))

    kept = orders[1::2]
    expected: dict[str, int] = {}
    for n, _ in enumerate(orders):
        expected[f"u-{n % 7}"] = expected.get(f"u-{n % 7}", 0) + (2 if n % 2 else 0)
    assert await balances(session) == expected
    assert sorted(o for o, gone in (await revoked(session)).items() if not gone) == kept


def test_importing_handlers_registers_points_service_as_batch_handlers() -> None:
    assert handlers.points is not None
    by_event = {
        event_type: [
            (spec.fn, spec.batch) for spec in default_registry.handlers_for(CONSUMER, event_type)
        ]
        for event_type in ("OrderCreated", "OrderPaid", "OrderCancelled")
    }
    assert by_event == {
        "OrderCreated": [],
        "OrderPaid": [(award_points, True)],
        "OrderCancelled": [(revoke_points, True)],
    }
