"""points-service: a paid order earns floor(amount) points once; its cancel takes them back once.

Contract: ``OrderPaid`` adds ``floor(amount)`` to the user's balance and
records the award per order; a second ``OrderPaid`` of the same order awards
nothing. ``OrderCancelled`` of an awarded order subtracts exactly that award
and marks it revoked, so a second cancel subtracts nothing; the cancel of an
order never awarded changes nothing. The handlers run on a real SQLite
database created by the migrations, inside a transaction the test commits
(as the framework would).
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
from app.registry import HandlerFn, default_registry
from handlers.points import CONSUMER, award_points, revoke_points
from handlers.tables import points_award, user_points
from schemas.envelope import Envelope
from schemas.order import OrderCancelled, OrderPaid

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[AsyncSession]:
    """A session on a fresh, migrated SQLite database."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'points.db'}"
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


def paid(order_id: str, amount: str, user_id: str = "u-1") -> Envelope[Any]:
    payment = OrderPaid(order_id=order_id, user_id=user_id, amount=Decimal(amount), paid_at=NOW)
    return envelope(payment, 2)


def cancelled(order_id: str, user_id: str = "u-1") -> Envelope[Any]:
    return envelope(OrderCancelled(order_id=order_id, user_id=user_id, reason="test"), 3)


async def apply(session: AsyncSession, fn: HandlerFn, event: Envelope[Any]) -> None:
    """Run one handler in a transaction and commit it, as the framework does."""
    await fn(event, HandlerContext(session=session, consumer=CONSUMER))
    await session.commit()


async def balances(session: AsyncSession) -> dict[str, int]:
    rows = await session.execute(select(user_points.c.user_id, user_points.c.balance))
    return {user: int(balance) for user, balance in rows}


async def test_paid_order_earns_the_whole_units_of_its_amount(session: AsyncSession) -> None:
    await apply(session, award_points, paid("o-1", "10.9"))

    assert await balances(session) == {"u-1": 10}
    award = (await session.execute(select(points_award))).one()
    assert tuple(award) == ("o-1", "u-1", 10, None)


async def test_awards_of_several_orders_add_up(session: AsyncSession) -> None:
    await apply(session, award_points, paid("o-1", "10.9"))
    await apply(session, award_points, paid("o-2", "5"))
    await apply(session, award_points, paid("o-3", "0.99", user_id="u-2"))

    assert await balances(session) == {"u-1": 15, "u-2": 0}


async def test_a_second_payment_of_the_same_order_awards_nothing(session: AsyncSession) -> None:
    await apply(session, award_points, paid("o-1", "10.9"))
    await apply(session, award_points, paid("o-1", "10.9"))

    assert await balances(session) == {"u-1": 10}


async def test_cancel_takes_the_award_back_once(session: AsyncSession) -> None:
    await apply(session, award_points, paid("o-1", "10.9"))
    await apply(session, award_points, paid("o-2", "5"))

    await apply(session, revoke_points, cancelled("o-1"))
    assert await balances(session) == {"u-1": 5}

    await apply(session, revoke_points, cancelled("o-1"))
    assert await balances(session) == {"u-1": 5}
    revoked = await session.scalar(
        select(points_award.c.revoked_at).where(points_award.c.order_id == "o-1")
    )
    assert revoked is not None


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


def test_importing_handlers_registers_points_service() -> None:
    assert handlers.points is not None
    by_event = {
        event_type: [spec.fn for spec in default_registry.handlers_for(CONSUMER, event_type)]
        for event_type in ("OrderCreated", "OrderPaid", "OrderCancelled")
    }
    assert by_event == {
        "OrderCreated": [],
        "OrderPaid": [award_points],
        "OrderCancelled": [revoke_points],
    }
