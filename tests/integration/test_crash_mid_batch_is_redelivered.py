"""A crash mid-batch is redelivered, and applied once.

Contract: when a worker is SIGKILLed while a batch transaction is open,
nothing of that transaction is kept and its offsets do not move; the
restarted worker reads the batch again and applies it, so every consumer
ends with exactly one ``consumed_event`` row per event and the balances,
reservations and notifications are exact: none lost, none doubled (the
consumers whose transactions had committed before the kill see the
redelivered events as duplicates).

The kill is deterministic: the test-only consumer ``slow-probe``
(``tests.integration.support.slow_probe``) stalls inside its transaction on
one chosen event and creates a marker file; the test waits for the file.
The example consumers are idempotent on their own, so the test-only
``tally`` consumer counts how many times each event took effect.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order, messages
from tests.integration.support.state import CONSUMERS, Database
from tests.integration.support.waiting import path_appears
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

HANDLER_MODULES = "handlers,tests.integration.support.slow_probe,tests.integration.support.tally"
SLOW_PROBE = "slow-probe"  # not imported: that would register its handler in this process
TALLY = "tally"


async def test_sigkill_with_an_open_transaction_loses_and_doubles_nothing(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, tmp_path: Path
) -> None:
    orders = [
        Order(f"user-{n % 5}", 1_000 + 137 * n, ((f"SKU-{n % 3}", 1 + n % 4),)) for n in range(30)
    ]
    envelopes = [e for order in orders for e in (order.created(), order.paid())]
    trigger = envelopes[21]  # the OrderPaid of order 10, in the middle of a batch
    assert trigger["eventType"] == "OrderPaid"
    marker = tmp_path / "slow-probe.stalled"
    env = {"SLOW_PROBE_EVENT_ID": trigger["eventId"], "SLOW_PROBE_MARKER": str(marker)}
    await topic.send(messages(*envelopes))

    doomed = workers.start(database_url, handler_modules=HANDLER_MODULES, env=env)
    await path_appears(marker, within=60, workers=[doomed])
    doomed.kill()
    assert marker.read_text() == str(doomed.pid)
    assert trigger["eventId"] not in await db.consumed_ids(SLOW_PROBE)
    assert await topic.lag() != {}  # the open batch's offsets did not move

    restarted = workers.start(database_url, handler_modules=HANDLER_MODULES, env=env)
    await topic.drained(workers=[restarted], within=90)

    expected_points: dict[str, int] = {}
    expected_reserved: dict[str, int] = {}
    for order in orders:
        expected_points[order.user_id] = expected_points.get(order.user_id, 0) + (
            order.amount_cents // 100
        )
        for sku, qty in order.items:
            expected_reserved[sku] = expected_reserved.get(sku, 0) + qty
    assert await db.balances() == expected_points
    assert await db.reserved() == expected_reserved
    assert await db.notifications() == {order.order_id: 2 for order in orders}
    everything = sorted(e["eventId"] for e in envelopes)
    assert await db.tallies() == dict.fromkeys(everything, 1)
    for consumer in (*CONSUMERS, SLOW_PROBE, TALLY):
        assert await db.consumed_ids(consumer) == everything, consumer
    assert await db.parked_count() == 0
