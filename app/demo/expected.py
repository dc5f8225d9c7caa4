"""What the three example consumers' tables must hold once a set of events took effect.

The answer comes from what the events *mean*, not from how they were delivered:
duplicates (same ``eventId``) count once, and each aggregate's events are
applied in ``aggregateVersion`` order, whatever order they arrived in. That
mirrors the framework's guarantees under the ``from-one`` policy:

- version ``n`` applies only after ``1..n-1`` applied;
- an event whose version was already applied by a different ``eventId`` is
  stale and takes no effect;
- an event after a gap that never closes stays parked and takes no effect;
- an event without ``aggregateVersion`` is not gated.

Ids are compared as Python compares strings, byte for byte: ``customer-1`` and
``customer-1 `` are two aggregates (and two users), ``e1`` and ``e1 `` two events.

Only the three Order event types at ``eventVersion`` 1 are modelled; anything
else is left out (it is poison, or a test's own edge case to account for).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

CONSUMERS = ("points-service", "inventory-service", "notification-service")
ORDER_EVENT_TYPES = frozenset({"OrderCreated", "OrderPaid", "OrderCancelled"})


@dataclass(frozen=True)
class Expected:
    """The final state the events mean.

    ``points`` maps user -> balance (users whose points were all taken back
    appear with 0); ``reserved`` maps sku -> reserved quantity (0 included);
    ``distinct_events`` is the number of events that take effect, so every
    consumer ends with that many ``consumed_event`` rows.
    """

    points: dict[str, int] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)
    notifications: int = 0
    distinct_events: int = 0


def expected_state(envelopes: Iterable[Mapping[str, Any]]) -> Expected:
    """Fold ``envelopes`` (in delivery order, duplicates included) into the expected state."""
    applied = [env for history in _histories(envelopes).values() for env in _gate(history)]
    points: dict[str, int] = defaultdict(int)
    reserved: dict[str, int] = defaultdict(int)
    awarded: dict[str, tuple[str, int]] = {}
    reservations: dict[str, list[tuple[str, int]]] = {}
    for env in applied:
        data = env["data"]
        order_id = str(data["orderId"])
        if env["eventType"] == "OrderCreated":
            items = [(str(item["sku"]), int(item["qty"])) for item in data["items"]]
            reservations[order_id] = items
            for sku, qty in items:
                reserved[sku] += qty
        elif env["eventType"] == "OrderPaid":
            earned = floor_amount(data["amount"])
            awarded[order_id] = (str(data["userId"]), earned)
            points[str(data["userId"])] += earned
        else:  # OrderCancelled
            if order_id in awarded:
                user, earned = awarded.pop(order_id)
                points[user] -= earned
            for sku, qty in reservations.pop(order_id, []):
                reserved[sku] -= qty
    return Expected(dict(points), dict(reserved), len(applied), len(applied))


def floor_amount(amount: Any) -> int:
    """Whole points for a money amount, read exactly as pydantic's ``Decimal`` reads it."""
    return math.floor(Decimal(str(amount)))


def _histories(
    envelopes: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """Distinct modelled events per aggregate, first delivery wins, in delivery order."""
    seen: set[str] = set()
    histories: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for env in envelopes:
        if env["eventId"] in seen:
            continue
        seen.add(env["eventId"])
        if env["eventType"] in ORDER_EVENT_TYPES and env.get("eventVersion") == 1:
            histories[(env["aggregateType"], env["aggregateId"])].append(env)
    return histories


def _gate(history: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The events of one aggregate that take effect, in the order they take effect.

    Replays delivery: the next version applies and releases any parked
    successors; a later version parks; an earlier one is stale; an event
    without a version applies on arrival.
    """
    applied: list[Mapping[str, Any]] = []
    parked: dict[int, Mapping[str, Any]] = {}
    next_version = 1
    for env in history:
        version = env.get("aggregateVersion")
        if version is None:
            applied.append(env)
            continue
        if int(version) > next_version:
            parked.setdefault(int(version), env)  # first delivered wins a tie
        elif int(version) == next_version:
            applied.append(env)
            next_version += 1
            while next_version in parked:
                applied.append(parked.pop(next_version))
                next_version += 1
    return applied
