"""The example service (``handlers``) under the public harness, as its author would test it.

Contract: fed an order's events as producers send them (``app.testing``, SQLite, no
broker), the example's three consumers leave the state the events mean: the stock
reserved on ``OrderCreated``, ``floor(amount)`` points on ``OrderPaid``, one notification
per event; a payment delivered twice counts once (``duplicate`` for every consumer); a
payment that arrives before its order is parked and applied once the order comes; ids
sent as numbers are the same orders as their strings; the cancel gives the points and
the stock back. Nothing is emitted and nothing routed.
"""

from __future__ import annotations

from typing import Any

from app.testing import Harness, Kind, event
from handlers.tables import inventory_stock, notification, user_points

CONSUMERS = ["inventory-service", "notification-service", "points-service"]


def created(order: str | int, version: int = 1) -> dict[str, Any]:
    data = {
        "orderId": order,
        "orderNo": f"N-{order}",
        "userId": 7,
        "amount": "19.90",
        "items": [{"sku": "sku-1", "qty": 2}],
    }
    return event("OrderCreated", order, version, data)


def paid(order: str | int, amount: str = "19.90") -> dict[str, Any]:
    data = {"orderId": order, "userId": 7, "amount": amount, "paidAt": "2024-05-01T12:00:00Z"}
    return event("OrderPaid", order, 2, data)


def cancelled(order: str | int) -> dict[str, Any]:
    return event("OrderCancelled", order, 3, {"orderId": order, "userId": 7, "reason": "test"})


async def state(h: Harness) -> dict[str, Any]:
    return {
        "points": {r["user_id"]: r["balance"] for r in await h.rows(user_points)},
        "reserved": {r["sku"]: r["reserved"] for r in await h.rows(inventory_stock)},
        "notified": sorted((r["order_id"], r["kind"]) for r in await h.rows(notification)),
    }


async def test_an_order_paid_twice_counts_once_for_every_consumer() -> None:
    payment = paid("o-1")
    async with Harness("handlers") as h:
        assert h.registry.consumers == CONSUMERS
        await h.send(created("o-1"), payment)
        again = await h.send(payment)

        assert {(o.consumer, o.kind) for o in again} == {(c, Kind.DUPLICATE) for c in CONSUMERS}
        assert await state(h) == {
            "points": {"7": 19},
            "reserved": {"sku-1": 2},
            "notified": [("o-1", "order_placed"), ("o-1", "payment_received")],
        }
        assert await h.emitted() == [] and await h.records() == []


async def test_a_payment_before_its_order_waits_and_numeric_ids_are_the_same_orders() -> None:
    async with Harness("handlers") as h:
        early = await h.send(paid(100001))
        assert {o.kind for o in early} == {Kind.PARKED}

        await h.send(created("100001"))
        assert (await state(h))["points"] == {"7": 19}

        await h.send(cancelled(100001))
        assert await state(h) == {
            "points": {"7": 0},
            "reserved": {"sku-1": 0},
            "notified": [
                ("100001", "order_cancelled"),
                ("100001", "order_placed"),
                ("100001", "payment_received"),
            ],
        }


async def test_one_consumers_outcomes_and_poison_when_it_is_named() -> None:
    """``send(..., consumer=C)`` and ``retry(consumer=C)`` return C's outcomes, in order, and
    poison's (no consumer's), so that a package's test reads the same when another
    consumer joins it."""
    payment = paid("o-2")
    async with Harness("handlers") as h:
        outcomes = await h.send(
            created("o-2"), payment, payment, b"not json", consumer="points-service"
        )

        assert [(o.consumer, o.kind) for o in outcomes] == [
            ("", Kind.POISON),
            ("points-service", Kind.APPLIED),
            ("points-service", Kind.APPLIED),
            ("points-service", Kind.DUPLICATE),
        ]
        assert await h.retry(consumer="points-service") == []
