"""inventory-service: a created order reserves its items; a cancelled one releases them.

Effects are idempotent per order: the reservation rows of an order are
written once, and the stock counters move only when they are.
"""

from __future__ import annotations

from collections import Counter

from sqlalchemy import delete, select, update

from app.context import HandlerContext
from app.db.dialect import add_to_counter, insert_missing
from app.errors import PermanentError
from app.registry import handler
from handlers.tables import inventory_reservation, inventory_stock
from schemas.envelope import Envelope
from schemas.order import OrderCancelled, OrderCreated

CONSUMER = "inventory-service"


@handler("OrderCreated", consumer=CONSUMER)
async def reserve_items(event: Envelope[OrderCreated], ctx: HandlerContext) -> None:
    """Record one reservation per (order, sku), then add each quantity to the sku's stock.

    Two statements (each one round trip however many items). Lines naming
    the same sku are summed first.
    """
    order = event.data
    qty_by_sku = Counter[str]()
    for item in order.items:
        qty_by_sku[item.sku] += item.qty
    # Sorted by sku so that concurrent transactions lock stock rows in one
    # order and cannot deadlock on each other.
    skus = sorted(qty_by_sku)
    reservations = [{"order_id": order.order_id, "sku": s, "qty": qty_by_sku[s]} for s in skus]
    inserted = await insert_missing(ctx.session, inventory_reservation, reservations)
    if inserted == 0:
        return  # this order was reserved before (or has no items)
    if inserted != len(reservations):
        raise PermanentError(
            f"order {order.order_id} already holds a reservation for some of its skus only"
        )
    stock = [{"sku": s, "reserved": qty_by_sku[s]} for s in skus]
    await add_to_counter(ctx.session, inventory_stock, "sku", "reserved", stock)


@handler("OrderCancelled", consumer=CONSUMER)
async def release_items(event: Envelope[OrderCancelled], ctx: HandlerContext) -> None:
    """Subtract the order's reserved quantities from stock and delete its reservation rows.

    Two statements; an order without reservation rows (never created here, or
    already released) is a no-op.
    """
    order_id = event.data.order_id
    mine = inventory_reservation.c.order_id == order_id
    reserved_qty = (
        select(inventory_reservation.c.qty)
        .where(mine, inventory_reservation.c.sku == inventory_stock.c.sku)
        .scalar_subquery()
    )
    # Order matters: the stock update reads the reservation rows before they go.
    await ctx.session.execute(
        update(inventory_stock)
        .where(inventory_stock.c.sku.in_(select(inventory_reservation.c.sku).where(mine)))
        .values(reserved=inventory_stock.c.reserved - reserved_qty)
    )
    await ctx.session.execute(delete(inventory_reservation).where(mine))
