"""A deterministic, realistic stream of order events, with the state it must produce.

Used by the demo, the integration tests and the benchmark. The same arguments
(seed included) always give the same bytes in the same order. The stream is
deliberately imperfect the way real producers are:

- some events are sent twice or more (same ``eventId``, same bytes, later on);
- for some orders two consecutive versions are sent in swapped order
  (e.g. ``OrderPaid`` v2 before ``OrderCreated`` v1);
- amounts carry cents, so ``floor()`` matters for points.

Each order follows one ``Fate``; ``Workload.expected`` is computed from the
distinct events' meaning (see ``app.demo.expected``), not from delivery order.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from app.demo.envelopes import (
    SOURCE,
    Message,
    encode,
    envelope,
    order_cancelled_data,
    order_created_data,
    order_paid_data,
)
from app.demo.expected import Expected, expected_state

EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
CANCEL_REASONS = ("customer request", "payment timeout", "out of stock", "fraud check")


class Fate(StrEnum):
    """What happens to an order, and so which events it emits."""

    PAID = "paid"  # Created v1, Paid v2
    PAID_THEN_CANCELLED = "paid-then-cancelled"  # Created v1, Paid v2, Cancelled v3
    CANCELLED_UNPAID = "cancelled-unpaid"  # Created v1, Cancelled v2
    OPEN = "open"  # Created v1 only


@dataclass(frozen=True)
class OrderPlan:
    """One order as the generator intended it (for tests to check ``expected`` against)."""

    order_id: str
    user_id: str
    items: tuple[tuple[str, int], ...]
    amount_cents: int
    fate: Fate


@dataclass(frozen=True)
class Workload:
    """The messages to send, in order, and what the consumers' tables must then hold."""

    messages: list[Message]
    expected: Expected
    plans: list[OrderPlan]
    duplicates: int
    swapped_aggregates: int

    @property
    def distinct_events(self) -> int:
        """Events that take effect (each consumer's ``consumed_event`` row count)."""
        return self.expected.distinct_events


def generate(
    orders: int = 2_000,
    users: int = 200,
    skus: int = 30,
    seed: int = 7,
    duplicate_ratio: float = 0.10,
    swap_ratio: float = 0.05,
    cancel_ratio: float = 0.20,
    cancel_before_pay_ratio: float = 0.25,
    open_ratio: float = 0.05,
    max_items: int = 3,
    max_qty: int = 5,
) -> Workload:
    """A workload of ``orders`` orders over ``users`` users and ``skus`` skus.

    ``cancel_ratio`` of orders are cancelled, ``cancel_before_pay_ratio`` of
    those before payment; ``open_ratio`` are never paid. ``duplicate_ratio``
    of distinct events are sent a second time; ``swap_ratio`` of orders have
    two consecutive versions sent in swapped order. Counts are rounded.
    """
    _check_ratios(duplicate_ratio, swap_ratio, cancel_ratio, cancel_before_pay_ratio, open_ratio)
    if min(orders, users, skus, max_items, max_qty) < 1:
        raise ValueError("orders, users, skus, max_items and max_qty must be at least 1")
    rng = random.Random(seed)
    prices = {f"SKU-{n:03d}": rng.randint(199, 9_999) for n in range(1, skus + 1)}
    plans = [
        _plan(rng, users, prices, max_items, max_qty, fate)
        for fate in _fates(rng, orders, cancel_ratio, cancel_before_pay_ratio, open_ratio)
    ]
    histories = [_events(rng, n, plan, orders) for n, plan in enumerate(plans)]
    stream = sorted((env for history in histories for env in history), key=_occurred)
    swapped = _swap(rng, stream, histories, round(orders * swap_ratio))
    sent = _duplicate(rng, stream, round(len(stream) * duplicate_ratio))
    return Workload(
        messages=[encode(env) for env in sent],
        expected=expected_state(sent),
        plans=plans,
        duplicates=len(sent) - len(stream),
        swapped_aggregates=swapped,
    )


def _check_ratios(*ratios: float) -> None:
    if any(not 0.0 <= ratio <= 1.0 for ratio in ratios):
        raise ValueError(f"ratios must be between 0 and 1, got {ratios}")


def _fates(
    rng: random.Random, orders: int, cancel: float, before_pay: float, open_: float
) -> list[Fate]:
    """Exactly the requested share of each fate, in a seeded random order."""
    cancelled = round(orders * cancel)
    unpaid = round(cancelled * before_pay)
    opened = min(round(orders * open_), orders - cancelled)
    fates = (
        [Fate.CANCELLED_UNPAID] * unpaid
        + [Fate.PAID_THEN_CANCELLED] * (cancelled - unpaid)
        + [Fate.OPEN] * opened
    )
    fates += [Fate.PAID] * (orders - len(fates))
    rng.shuffle(fates)
    return fates


def _plan(
    rng: random.Random,
    users: int,
    prices: dict[str, int],
    max_items: int,
    max_qty: int,
    fate: Fate,
) -> OrderPlan:
    skus = rng.sample(sorted(prices), k=rng.randint(1, min(max_items, len(prices))))
    items = tuple((sku, rng.randint(1, max_qty)) for sku in skus)
    return OrderPlan(
        order_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        user_id=f"user-{rng.randint(1, users):04d}",
        items=items,
        amount_cents=sum(prices[sku] * qty for sku, qty in items),
        fate=fate,
    )


def _events(rng: random.Random, n: int, plan: OrderPlan, orders: int) -> list[dict[str, Any]]:
    """The order's events in version order, spread over a window of ``orders`` seconds."""
    created_at = EPOCH + timedelta(seconds=rng.uniform(0, orders))
    paid_at = created_at + timedelta(seconds=rng.uniform(1, 120))
    cancelled_at = paid_at + timedelta(seconds=rng.uniform(1, 300))
    steps: list[tuple[str, datetime, dict[str, Any]]] = [
        (
            "OrderCreated",
            created_at,
            order_created_data(
                plan.order_id, f"SO-{n + 1:06d}", plan.user_id, plan.amount_cents, plan.items
            ),
        )
    ]
    if plan.fate in (Fate.PAID, Fate.PAID_THEN_CANCELLED):
        steps.append(
            (
                "OrderPaid",
                paid_at,
                order_paid_data(plan.order_id, plan.user_id, plan.amount_cents, paid_at),
            )
        )
    if plan.fate in (Fate.PAID_THEN_CANCELLED, Fate.CANCELLED_UNPAID):
        reason = rng.choice(CANCEL_REASONS)
        steps.append(
            (
                "OrderCancelled",
                cancelled_at,
                order_cancelled_data(plan.order_id, plan.user_id, reason),
            )
        )
    trace_id = f"{rng.getrandbits(128):032x}"
    events: list[dict[str, Any]] = []
    for version, (event_type, at, data) in enumerate(steps, start=1):
        extra: dict[str, Any] = {"traceId": trace_id, "tenantId": "demo", "source": SOURCE}
        extra["correlationId"] = plan.order_id
        if events:
            extra["causationId"] = events[-1]["eventId"]
        event_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        events.append(
            envelope(
                event_type, plan.order_id, version, data, event_id=event_id, occurred_at=at, **extra
            )
        )
    return events


def _occurred(env: dict[str, Any]) -> str:
    return str(env["occurredAt"])  # ISO-8601 in UTC with a fixed format sorts as text


def _swap(
    rng: random.Random,
    stream: list[dict[str, Any]],
    histories: list[list[dict[str, Any]]],
    count: int,
) -> int:
    """Swap the stream positions of two consecutive versions of ``count`` orders."""
    candidates = [history for history in histories if len(history) >= 2]
    chosen = rng.sample(candidates, k=min(count, len(candidates)))
    position = {id(env): index for index, env in enumerate(stream)}
    for history in chosen:
        first = rng.randrange(len(history) - 1)
        a, b = position[id(history[first])], position[id(history[first + 1])]
        stream[a], stream[b] = stream[b], stream[a]
    return len(chosen)


def _duplicate(
    rng: random.Random, stream: list[dict[str, Any]], count: int
) -> list[dict[str, Any]]:
    """``stream`` with ``count`` of its events sent again at a later random point."""
    slots: list[tuple[float, dict[str, Any]]] = [(float(i), env) for i, env in enumerate(stream)]
    for index in rng.sample(range(len(stream)), k=min(count, len(stream))):
        slots.append((rng.uniform(index + 0.5, len(stream)), stream[index]))
    slots.sort(key=lambda slot: slot[0])
    return [env for _, env in slots]
