"""Build single order events the way our users' producers emit them.

The workload generator uses these builders, and tests use them to craft edge
cases by hand: an unknown ``eventType``, a stale ``aggregateVersion``, bytes
that are not JSON at all (``Message(key, b"...")``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson

ORDER = "Order"
SOURCE = "demo-order-service"


class Message(NamedTuple):
    """One Kafka record to send: key, value and headers exactly as they go on the wire."""

    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()


def envelope(
    event_type: str,
    aggregate_id: str,
    aggregate_version: int | None,
    data: dict[str, Any],
    *,
    event_id: str | None = None,
    event_version: int = 1,
    aggregate_type: str = ORDER,
    occurred_at: datetime | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """An event envelope as a camelCase dict (``extra`` adds e.g. ``traceId=...``).

    ``event_id`` defaults to a random UUID and ``occurred_at`` to now; pass both
    for a reproducible envelope. ``aggregate_version=None`` leaves the field out.
    """
    env: dict[str, Any] = {
        "eventId": event_id or str(uuid.uuid4()),
        "eventType": event_type,
        "eventVersion": event_version,
        "aggregateType": aggregate_type,
        "aggregateId": aggregate_id,
    }
    if aggregate_version is not None:
        env["aggregateVersion"] = aggregate_version
    env["occurredAt"] = _iso(occurred_at or datetime.now(UTC))
    env.update(extra)
    env["data"] = data
    return env


def encode(env: dict[str, Any]) -> Message:
    """The record for ``env``: key = aggregateId as UTF-8, value = orjson bytes."""
    return Message(str(env["aggregateId"]).encode(), orjson.dumps(env))


def decode(message: Message) -> dict[str, Any]:
    """The envelope a message carries (for tests and tools reading a workload back)."""
    value: dict[str, Any] = orjson.loads(message.value)
    return value


def order_created_data(
    order_id: str, order_no: str, user_id: str, amount_cents: int, items: Sequence[tuple[str, int]]
) -> dict[str, Any]:
    """``OrderCreated`` v1 data; ``items`` are ``(sku, qty)`` pairs."""
    return {
        "orderId": order_id,
        "orderNo": order_no,
        "userId": user_id,
        "amount": cents_to_amount(amount_cents),
        "items": [{"sku": sku, "qty": qty} for sku, qty in items],
    }


def order_paid_data(
    order_id: str, user_id: str, amount_cents: int, paid_at: datetime
) -> dict[str, Any]:
    """``OrderPaid`` v1 data."""
    return {
        "orderId": order_id,
        "userId": user_id,
        "amount": cents_to_amount(amount_cents),
        "paidAt": _iso(paid_at),
    }


def order_cancelled_data(order_id: str, user_id: str, reason: str | None) -> dict[str, Any]:
    """``OrderCancelled`` v1 data."""
    return {"orderId": order_id, "userId": user_id, "reason": reason}


def cents_to_amount(cents: int) -> float:
    """A JSON number with two decimals (``1099`` -> ``10.99``), as producers send money.

    Dividing an integer by 100 gives the float whose shortest repr is exactly
    the two-decimal amount, so ``Decimal(str(amount))`` reads it back exactly.
    """
    return cents / 100


def _iso(moment: datetime) -> str:
    """ISO-8601 in UTC, fixed width (so that text order is time order)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
