"""An unknown event type advances the version.

Contract: an event whose eventType no schema knows (``OrderShipped``, say,
published by a newer producer) is not an error: it takes effect for nobody,
yet every consumer records it (a ``consumed_event`` row) and moves the
aggregate's version past it, so the version after it applies instead of
waiting forever. Nothing is parked and nothing is recorded as failed.
"""

from __future__ import annotations

import pytest

from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order, messages
from tests.integration.support.state import CONSUMERS, Database, every_consumer
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


async def test_unknown_v3_takes_its_version_so_v4_applies(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    alice = Order("alice", 12_345, (("SKU-A", 2),))
    created, paid = alice.created(), alice.paid()
    shipped = alice.event(
        "OrderShipped", 3, {"orderId": alice.order_id, "carrier": "DHL", "trackingNo": "JD0001"}
    )
    cancelled = alice.cancelled(version=4)
    worker = workers.start(database_url)
    await topic.send(messages(created, paid, shipped, cancelled))
    await topic.drained(workers=[worker])

    # Had v4 waited for a v3 nobody took, the points and the 2 units would still be there.
    assert await db.balances() == {"alice": 0}
    assert await db.reserved() == {"SKU-A": 0}
    assert await db.notifications() == {alice.order_id: 3}
    assert await db.versions(alice.order_id) == every_consumer(4)
    assert await db.parked_count() == 0
    assert await db.failures() == []
    everything = sorted(e["eventId"] for e in (created, paid, shipped, cancelled))
    for consumer in CONSUMERS:
        assert await db.consumed_ids(consumer) == everything, consumer
