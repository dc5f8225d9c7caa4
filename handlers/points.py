"""points-service: a paid order earns one point per whole unit of its amount.

Effects are idempotent per order, not only per event: the ``points_award`` row
of an order is written once, so a second ``OrderPaid`` for the same order
awards nothing, and a cancel takes back exactly what was awarded, once.
A balance may go below zero when the points were spent before the cancel;
that debt is the business's to settle, not the consumer's to hide.

Both handlers are batch handlers: one call covers many orders in three
statements, whatever their number (on MySQL and SQLite one more per 500 orders, see
``app.db.dialect.list_size``).
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime

from sqlalchemy import select, update

from app import (
    Envelope,
    HandlerContext,
    add_to_counter,
    execute_where_in,
    handler,
    insert_rows,
    rows_where_in,
)
from handlers.tables import points_award, user_points
from schemas.order import OrderCancelled, OrderPaid

CONSUMER = "points-service"


@handler("OrderPaid", consumer=CONSUMER, batch=True)
async def award_points(events: list[Envelope[OrderPaid]], ctx: HandlerContext) -> None:
    """Record each newly paid order's award, then add ``floor(amount)`` to its user's balance.

    Three statements: read which of the orders hold an award, insert the new
    awards, add each user's total to their balance. An order awarded before
    (even if revoked since) earns nothing.
    """
    awarded = {
        row.order_id
        for row in await rows_where_in(
            ctx.session,
            select(points_award.c.order_id),
            points_award.c.order_id,
            (event.data.order_id for event in events),
        )
    }
    awards: list[dict[str, object]] = []
    by_user = Counter[str]()
    for event in events:
        paid = event.data
        if paid.order_id in awarded:
            continue  # awarded before, or earlier in this list
        awarded.add(paid.order_id)
        points = math.floor(paid.amount)
        awards.append({"order_id": paid.order_id, "user_id": paid.user_id, "points": points})
        by_user[paid.user_id] += points  # kept at 0 too: a paid order opens a balance
    if not awards:
        return
    # A plain INSERT: a row that appeared since the read is an error (the batch
    # is then re-run), never an award counted twice.
    await insert_rows(ctx.session, points_award, awards)
    await add_to_counter(ctx.session, user_points, "user_id", "balance", _balances(by_user))


@handler("OrderCancelled", consumer=CONSUMER, batch=True)
async def revoke_points(events: list[Envelope[OrderCancelled]], ctx: HandlerContext) -> None:
    """Subtract the orders' unrevoked awards from their users' balances and mark them revoked.

    Three statements; orders never awarded (or already revoked) are not read,
    so their cancels are no-ops.
    """
    live = await rows_where_in(
        ctx.session,
        select(points_award.c.order_id, points_award.c.user_id, points_award.c.points).where(
            points_award.c.revoked_at.is_(None)
        ),
        points_award.c.order_id,
        (event.data.order_id for event in events),
    )
    if not live:
        return
    by_user = Counter[str]()
    for award in live:
        # The award's own user_id, not the event's: the points go back where they went.
        by_user[award.user_id] -= award.points
    # The user's balance row was written with the award, so this upsert only updates.
    await add_to_counter(ctx.session, user_points, "user_id", "balance", _balances(by_user))
    await execute_where_in(
        ctx.session,
        update(points_award)
        .where(points_award.c.revoked_at.is_(None))
        .values(revoked_at=datetime.now(UTC)),
        points_award.c.order_id,
        (award.order_id for award in live),
    )


def _balances(by_user: Counter[str]) -> list[dict[str, object]]:
    """One counter row per user, sorted so concurrent transactions lock balances in one order."""
    return [{"user_id": user, "balance": by_user[user]} for user in sorted(by_user)]
