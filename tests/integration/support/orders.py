"""Hand-written order histories for edge cases the generated workload does not isolate."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.demo.envelopes import (
    Message,
    encode,
    envelope,
    order_cancelled_data,
    order_created_data,
    order_paid_data,
)

PAID_AT = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Order:
    """One order; its events default to the usual versions (created 1, paid 2, cancelled 3).

    Every call builds a new envelope with a fresh eventId unless ``event_id`` is given.
    """

    user_id: str
    amount_cents: int
    items: tuple[tuple[str, int], ...] = (("SKU-A", 1),)
    order_id: str = field(default_factory=lambda: f"order-{uuid.uuid4()}")

    def created(self, version: int | None = 1, **kwargs: Any) -> dict[str, Any]:
        """``OrderCreated`` v1: reserves ``items``."""
        data = order_created_data(
            self.order_id, "SO-1", self.user_id, self.amount_cents, self.items
        )
        return envelope("OrderCreated", self.order_id, version, data, **kwargs)

    def paid(self, version: int | None = 2, **kwargs: Any) -> dict[str, Any]:
        """``OrderPaid`` v1: awards ``floor(amount)`` points."""
        data = order_paid_data(self.order_id, self.user_id, self.amount_cents, PAID_AT)
        return envelope("OrderPaid", self.order_id, version, data, **kwargs)

    def cancelled(self, version: int | None = 3, **kwargs: Any) -> dict[str, Any]:
        """``OrderCancelled`` v1: releases the reservation and takes back awarded points."""
        data = order_cancelled_data(self.order_id, self.user_id, "customer request")
        return envelope("OrderCancelled", self.order_id, version, data, **kwargs)

    def event(
        self, event_type: str, version: int | None, data: dict[str, Any], **kwargs: Any
    ) -> dict[str, Any]:
        """Any other event on this order's aggregate (an unknown type, a bad payload)."""
        return envelope(event_type, self.order_id, version, data, **kwargs)

    def raw(self, value: bytes) -> Message:
        """Arbitrary bytes keyed like this order's events (same partition)."""
        return Message(self.order_id.encode(), value)


def messages(*envelopes: dict[str, Any]) -> list[Message]:
    """The records for ``envelopes``, in the order given."""
    return [encode(env) for env in envelopes]


def created_and_paid(count: int, users: int = 7) -> list[Message]:
    """``count`` orders, each created then paid, spread over ``users`` users."""
    records = []
    for n in range(count):
        order = Order(user_id=f"u-{n % users}", amount_cents=1_000 + n)
        records += messages(order.created(), order.paid())
    return records
