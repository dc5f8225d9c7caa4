"""points-service: a paid order earns one point per whole unit of its amount.

Effects are idempotent per order, not only per event: the ``points_award`` row
of an order is written once, so a second ``OrderPaid`` for the same order
awards nothing, and a cancel takes back exactly what was awarded, once.
A balance may go below zero when the points were spent before the cancel;
that debt is the business's to settle, not the consumer's to hide.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from sqlalchemy import select, update

from app.context import HandlerContext
from app.db.dialect import add_to_counter, insert_missing
from app.registry import handler
from handlers.tables import points_award, user_points
from schemas.envelope import Envelope
from schemas.order import OrderCancelled, OrderPaid

CONSUMER = "points-service"


@handler("OrderPaid", consumer=CONSUMER)
async def award_points(event: Envelope[OrderPaid], ctx: HandlerContext) -> None:
    """Record the order's award, then add ``floor(amount)`` to the user's balance.

    Two statements; the second only when the award is new.
    """
    paid = event.data
    points = math.floor(paid.amount)
    award = {"order_id": paid.order_id, "user_id": paid.user_id, "points": points}
    if await insert_missing(ctx.session, points_award, [award]) == 0:
        return  # this order was awarded (or awarded and revoked) before
    balance = {"user_id": paid.user_id, "balance": points}
    await add_to_counter(ctx.session, user_points, "user_id", "balance", [balance])


@handler("OrderCancelled", consumer=CONSUMER)
async def revoke_points(event: Envelope[OrderCancelled], ctx: HandlerContext) -> None:
    """Subtract the order's unrevoked award from its user's balance and mark it revoked.

    Two statements whatever the state; an order never awarded (or already
    revoked) matches no row in either, so the cancel is a no-op.
    """
    order_id = event.data.order_id
    live = (points_award.c.order_id == order_id, points_award.c.revoked_at.is_(None))
    # The award's own user_id, not the event's: the points go back where they went.
    owner = select(points_award.c.user_id).where(*live).scalar_subquery()
    points = select(points_award.c.points).where(*live).scalar_subquery()
    # Order matters: the balance update reads the award before it is marked revoked.
    await ctx.session.execute(
        update(user_points)
        .where(user_points.c.user_id == owner)
        .values(balance=user_points.c.balance - points)
    )
    await ctx.session.execute(
        update(points_award).where(*live).values(revoked_at=datetime.now(UTC))
    )
