"""inventory-service: a created order reserves its items; a cancelled one releases them.

Effects are idempotent per order: the reservation rows of an order are
written once, and the stock counters move only when they are.

Both handlers are batch handlers: one call covers many orders in three
statements, whatever their number (on MySQL and SQLite one more per 500 orders, see
``app.db.dialect.list_size``).
"""

from __future__ import annotations

from collections import Counter

from sqlalchemy import delete, select

from app import (
    Envelope,
    HandlerContext,
    PermanentError,
    add_to_counter,
    execute_where_in,
    handler,
    insert_rows,
    rows_where_in,
)
from handlers.tables import inventory_reservation, inventory_stock
from schemas.order import OrderCancelled, OrderCreated

CONSUMER = "inventory-service"


@handler("OrderCreated", consumer=CONSUMER, batch=True)
async def reserve_items(events: list[Envelope[OrderCreated]], ctx: HandlerContext) -> None:
    """Record one reservation per (order, sku), then add each sku's total to its stock.

    Three statements: read the orders' existing reservations, insert the new
    ones, add to the stock counters. Lines naming the same sku are summed. An
    order that holds all its skus already reserves nothing; one that holds
    only some of them raises ``PermanentError``.
    """
    held: dict[str, set[str]] = {}
    for row in await rows_where_in(
        ctx.session,
        select(inventory_reservation.c.order_id, inventory_reservation.c.sku),
        inventory_reservation.c.order_id,
        (event.data.order_id for event in events),
    ):
        held.setdefault(row.order_id, set()).add(row.sku)
    reservations: list[dict[str, object]] = []
    by_sku = Counter[str]()
    for event in events:
        order = event.data
        qty_by_sku = Counter[str]()
        for item in order.items:
            qty_by_sku[item.sku] += item.qty
        skus = held.setdefault(order.order_id, set())
        new = qty_by_sku.keys() - skus
        if not new:
            continue  # this order was reserved before (or has no items)
        if len(new) != len(qty_by_sku):
            raise PermanentError(
                f"order {order.order_id} already holds a reservation for some of its skus only"
            )
        skus.update(new)
        for sku in sorted(qty_by_sku):
            reservations.append({"order_id": order.order_id, "sku": sku, "qty": qty_by_sku[sku]})
        by_sku.update(qty_by_sku)
    if not reservations:
        return
    # A plain INSERT: a row that appeared since the read is an error (the batch
    # is then re-run), never stock reserved twice.
    await insert_rows(ctx.session, inventory_reservation, reservations)
    await add_to_counter(ctx.session, inventory_stock, "sku", "reserved", _stock(by_sku))


@handler("OrderCancelled", consumer=CONSUMER, batch=True)
async def release_items(events: list[Envelope[OrderCancelled]], ctx: HandlerContext) -> None:
    """Subtract the orders' reserved quantities from stock and delete their reservation rows.

    Three statements; an order without reservation rows (never created here,
    or already released) is a no-op.
    """
    held = await rows_where_in(
        ctx.session,
        select(
            inventory_reservation.c.order_id,
            inventory_reservation.c.sku,
            inventory_reservation.c.qty,
        ),
        inventory_reservation.c.order_id,
        (event.data.order_id for event in events),
    )
    if not held:
        return
    by_sku = Counter[str]()
    for row in held:
        by_sku[row.sku] -= row.qty
    # The sku's stock row was written with its first reservation, so this upsert only updates.
    await add_to_counter(ctx.session, inventory_stock, "sku", "reserved", _stock(by_sku))
    await execute_where_in(
        ctx.session,
        delete(inventory_reservation),
        inventory_reservation.c.order_id,
        (row.order_id for row in held),
    )


def _stock(by_sku: Counter[str]) -> list[dict[str, object]]:
    """One counter row per sku, sorted so concurrent transactions lock stock rows in one order."""
    return [{"sku": sku, "reserved": by_sku[sku]} for sku in sorted(by_sku)]
