"""The example handlers issue a fixed number of statements per call, however many events it holds.

Contract: with up to 500 orders in one call (one ``IN (...)`` list), doing
all their work, ``award_points``, ``revoke_points``, ``reserve_items`` and
``release_items`` issue three statements each, and each notification
handler two: one call of 499 events costs what one call of one event costs.
Statements are counted as the SQLAlchemy engine sends them (an executemany
is one); the handlers run on a real database created by the migrations.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from app.context import HandlerContext
from app.registry import HandlerFn
from handlers.inventory import release_items, reserve_items
from handlers.notification import order_cancelled, order_placed, payment_received
from handlers.points import award_points, revoke_points
from schemas.envelope import Envelope
from schemas.order import OrderCancelled, OrderCreated, OrderItem, OrderPaid
from tests.sent_statements import sent

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


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


def lifecycle(order_id: str, user_id: str) -> tuple[Envelope[Any], ...]:
    """An order's created, paid and cancelled events; two skus, one named twice."""
    items = [OrderItem(sku="A", qty=1), OrderItem(sku=f"S-{user_id}", qty=2)]
    items.append(OrderItem(sku="A", qty=3))
    amount = Decimal("12.5")
    return (
        envelope(
            OrderCreated(
                order_id=order_id, order_no="n", user_id=user_id, amount=amount, items=items
            ),
            1,
        ),
        envelope(OrderPaid(order_id=order_id, user_id=user_id, amount=amount, paid_at=NOW), 2),
        envelope(OrderCancelled(order_id=order_id, user_id=user_id), 3),
    )


async def statements_of(session: AsyncSession, fn: HandlerFn, events: list[Envelope[Any]]) -> int:
    """How many statements one call of ``fn`` on ``events`` sends, its transaction begun."""
    await session.connection()  # BEGIN before counting: it is the framework's, not the handler's
    with sent(session.get_bind()) as statements:
        await fn(events, HandlerContext(session=session, consumer="test"))
    await session.commit()
    return len(statements)


@pytest.mark.parametrize("orders", [1, 499])
async def test_each_handler_sends_the_same_few_statements_for_one_event_or_many(
    session: AsyncSession, orders: int
) -> None:
    created, paid, cancelled = zip(
        *(lifecycle(f"o-{n}", f"u-{n % 7}") for n in range(orders)), strict=True
    )
    calls: list[tuple[HandlerFn, tuple[Envelope[Any], ...]]] = [
        (reserve_items, created),
        (order_placed, created),
        (award_points, paid),
        (payment_received, paid),
        (release_items, cancelled),
        (revoke_points, cancelled),
        (order_cancelled, cancelled),
    ]

    counts = {fn.__name__: await statements_of(session, fn, list(events)) for fn, events in calls}

    assert counts == {
        "reserve_items": 3,
        "order_placed": 2,
        "award_points": 3,
        "payment_received": 2,
        "release_items": 3,
        "revoke_points": 3,
        "order_cancelled": 2,
    }


async def test_events_with_nothing_left_to_do_cost_only_the_read(session: AsyncSession) -> None:
    created, paid, cancelled = lifecycle("o-1", "u-1")
    await statements_of(session, reserve_items, [created])
    await statements_of(session, award_points, [paid])

    counts = [
        await statements_of(session, reserve_items, [created]),
        await statements_of(session, award_points, [paid]),
        await statements_of(
            session, release_items, [envelope(OrderCancelled(order_id="o-2", user_id="u"), 2)]
        ),
        await statements_of(session, order_cancelled, [cancelled]),
        await statements_of(session, order_cancelled, [cancelled]),
    ]

    assert counts == [1, 1, 1, 2, 1]
