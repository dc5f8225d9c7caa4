"""The benchmark's workload: the demo's generator, shaped as the throughput issue describes.

Every order is created (v1) and paid (v2); a fifth are then cancelled (v3).
10 % of the distinct events are sent a second time and 5 % of the orders have
two consecutive versions sent swapped, so that dedup, parking and draining
all run. About ten orders per user and a hundred skus keep some rows hot.
"""

from __future__ import annotations

from app.demo.workload import Workload, generate

CANCEL_RATIO = 0.20
DUPLICATE_RATIO = 0.10
SWAP_RATIO = 0.05
ORDERS_PER_USER = 10
SKUS = 100
SEED = 7
# Records on the topic per order: (created + paid + a fifth cancelled) x (1 + duplicates).
MESSAGES_PER_ORDER = (2 + CANCEL_RATIO) * (1 + DUPLICATE_RATIO)


def orders_for(messages: float) -> int:
    """Orders whose workload has about ``messages`` records."""
    return max(1, round(messages / MESSAGES_PER_ORDER))


def make_workload(orders: int, seed: int = SEED) -> Workload:
    """The workload of ``orders`` orders; the same arguments always give the same bytes."""
    return generate(
        orders=orders,
        users=max(1, orders // ORDERS_PER_USER),
        skus=SKUS,
        seed=seed,
        duplicate_ratio=DUPLICATE_RATIO,
        swap_ratio=SWAP_RATIO,
        cancel_ratio=CANCEL_RATIO,
        cancel_before_pay_ratio=0.0,  # every cancel follows the payment: v3
        open_ratio=0.0,
    )


def describe(workload: Workload, seed: int = SEED) -> dict[str, int]:
    """The workload's size and imperfections, for the JSON file."""
    return {
        "orders": len(workload.plans),
        "users": len({plan.user_id for plan in workload.plans}),
        "messages": len(workload.messages),
        "distinct_events": workload.distinct_events,
        "duplicate_sends": workload.duplicates,
        "swapped_aggregates": workload.swapped_aggregates,
        "seed": seed,
    }
