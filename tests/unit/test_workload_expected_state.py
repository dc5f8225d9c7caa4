"""The expected state follows what the events mean, whatever the delivery order.

Duplicates count once, points are ``floor(amount)`` and are taken back on
cancellation, reservations are released on cancellation, stale versions and
versions after an unclosed gap take no effect.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

from app.demo.envelopes import (
    decode,
    envelope,
    order_cancelled_data,
    order_created_data,
    order_paid_data,
)
from app.demo.expected import expected_state
from app.demo.workload import Fate, generate

AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def created(order: str, user: str, cents: int, items: list[tuple[str, int]]) -> dict[str, Any]:
    data = order_created_data(order, f"SO-{order}", user, cents, items)
    return envelope("OrderCreated", order, 1, data, event_id=f"{order}-1", occurred_at=AT)


def paid(order: str, user: str, cents: int) -> dict[str, Any]:
    data = order_paid_data(order, user, cents, AT)
    return envelope("OrderPaid", order, 2, data, event_id=f"{order}-2", occurred_at=AT)


def cancelled(order: str, user: str, version: int) -> dict[str, Any]:
    data = order_cancelled_data(order, user, "customer request")
    return envelope("OrderCancelled", order, version, data, event_id=f"{order}-{version}")


def hand_checked_events() -> list[dict[str, Any]]:
    """Alice pays 10.99 and 5.50, Bob pays 20.00 then cancels, Carol cancels unpaid."""
    return [
        created("a1", "alice", 1099, [("SKU-1", 2)]),
        paid("a1", "alice", 1099),
        created("a2", "alice", 550, [("SKU-1", 1), ("SKU-2", 3)]),
        paid("a2", "alice", 550),
        created("b1", "bob", 2000, [("SKU-2", 4)]),
        paid("b1", "bob", 2000),
        cancelled("b1", "bob", 3),
        created("c1", "carol", 999, [("SKU-3", 5)]),
        cancelled("c1", "carol", 2),
    ]


def test_hand_checked_case() -> None:
    expected = expected_state(hand_checked_events())

    assert expected.points == {"alice": 10 + 5, "bob": 0}
    assert expected.reserved == {"SKU-1": 3, "SKU-2": 3, "SKU-3": 0}
    assert expected.distinct_events == 9
    assert expected.notifications == 9


def test_duplicates_count_once() -> None:
    events = hand_checked_events()

    expected = expected_state(events + events[:4] + [events[6]])

    assert expected == expected_state(events)


def test_delivery_order_does_not_matter() -> None:
    events = hand_checked_events()
    baseline = expected_state(events)

    for seed in range(20):
        shuffled = events[:]
        random.Random(seed).shuffle(shuffled)
        assert expected_state(shuffled) == baseline


def test_stale_version_with_a_new_event_id_takes_no_effect() -> None:
    events = hand_checked_events()
    replayed_payment = {**paid("a1", "alice", 1099), "eventId": "a1-2-again"}

    expected = expected_state([*events, replayed_payment])

    assert expected.points["alice"] == 15
    assert expected.distinct_events == 9


def test_version_after_an_unclosed_gap_stays_parked() -> None:
    lonely_cancel = cancelled("d1", "dave", 3)

    expected = expected_state([created("d1", "dave", 100, [("SKU-9", 1)]), lonely_cancel])

    assert expected.reserved == {"SKU-9": 1}
    assert expected.distinct_events == 1


def test_unknown_event_type_is_left_out() -> None:
    shipped = envelope("OrderShipped", "a1", 3, {"orderId": "a1"}, event_id="a1-3")

    expected = expected_state([*hand_checked_events(), shipped])

    assert expected.distinct_events == 9


def test_generated_expectation_matches_the_plans() -> None:
    workload = generate(orders=40, users=5, skus=4, seed=3)
    events_per_fate = {
        Fate.PAID: 2,
        Fate.PAID_THEN_CANCELLED: 3,
        Fate.CANCELLED_UNPAID: 2,
        Fate.OPEN: 1,
    }
    points: dict[str, int] = {}
    reserved: dict[str, int] = {}
    for plan in workload.plans:
        if plan.fate in (Fate.PAID, Fate.PAID_THEN_CANCELLED):
            earned = plan.amount_cents // 100 if plan.fate is Fate.PAID else 0
            points[plan.user_id] = points.get(plan.user_id, 0) + earned
        for sku, qty in plan.items:
            kept = plan.fate in (Fate.PAID, Fate.OPEN)
            reserved[sku] = reserved.get(sku, 0) + (qty if kept else 0)

    assert workload.expected.points == points
    assert workload.expected.reserved == reserved
    assert workload.distinct_events == sum(events_per_fate[plan.fate] for plan in workload.plans)
    assert workload.expected == expected_state(decode(m) for m in workload.messages)


def test_amounts_carry_cents_so_floor_matters() -> None:
    workload = generate(orders=200, users=20, skus=10, seed=11)

    cents = [plan.amount_cents % 100 for plan in workload.plans]

    assert sum(1 for c in cents if c) > len(cents) // 2
