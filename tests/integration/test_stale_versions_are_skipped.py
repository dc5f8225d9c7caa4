"""Stale versions are skipped.

Contract: an event with a new eventId whose aggregateVersion is at or below
the aggregate's last applied version takes no effect for any consumer: no
points revoked, no stock released, no notification, no ``consumed_event``
row, no version change, nothing parked. The aggregate is not stuck: its real
next version still applies.
"""

from __future__ import annotations

import pytest

from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order, messages
from tests.integration.support.state import CONSUMERS, Database, every_consumer
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


async def test_new_event_id_at_an_applied_version_has_no_effect(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    alice = Order("alice", 12_345, (("SKU-A", 2),))
    created, paid = alice.created(), alice.paid()
    stale = [
        alice.cancelled(version=2),  # same version as the applied OrderPaid
        alice.cancelled(version=1),  # below it
        Order("alice", 99_900, (("SKU-B", 7),), order_id=alice.order_id).created(version=1),
    ]
    worker = workers.start(database_url)
    await topic.send(messages(created, paid, *stale))
    await topic.drained(workers=[worker])

    # Applied, the stale cancels would have taken the 123 points and the 2 units back.
    assert await db.balances() == {"alice": 123}
    assert await db.reserved() == {"SKU-A": 2}
    assert await db.notifications() == {alice.order_id: 2}
    assert await db.versions(alice.order_id) == every_consumer(2)
    assert await db.parked_count() == 0
    for consumer in CONSUMERS:
        assert await db.consumed_ids(consumer) == sorted([created["eventId"], paid["eventId"]])

    cancelled = alice.cancelled(version=3)
    await topic.send(messages(cancelled))
    await topic.drained(workers=[worker])

    assert await db.balances() == {"alice": 0}
    assert await db.reserved() == {"SKU-A": 0}
    assert await db.notifications() == {alice.order_id: 3}
    assert await db.versions(alice.order_id) == every_consumer(3)
    assert await db.consumed_counts() == every_consumer(3)
