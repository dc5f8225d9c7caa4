"""The design document's example event, verbatim, applies.

Contract: the ``OrderCreated`` the design document shows (ids as JSON numbers,
no ``aggregateType`` or ``aggregateId`` in the value, no ``items``), keyed by
its order id, followed by that order's ``OrderPaid`` written the same way,
applies through the real broker and a worker: the order is the aggregate
``ORDER 100001``, user ``20001`` gets 199 points, each event writes its
notification, nothing is reserved and nothing is dead-lettered.
"""

from __future__ import annotations

import pytest

from app.demo.envelopes import Message
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import CONSUMERS, Database
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

KEY = b"100001"
CREATED = (
    b'{"eventId": "01JY1N5H2J3Q8A5W9M7K2D4P6R", "eventType": "OrderCreated", "eventVersion": 1,\n'
    b' "occurredAt": "2026-07-16T10:30:00Z",\n'
    b' "data": {"orderId": 100001, "orderNo": "ORD202607160001", "userId": 20001,'
    b' "amount": 199.00}}'
)
PAID = (
    b'{"eventId": "01JY1N5H2J3Q8A5W9M7K2D4P7S", "eventType": "OrderPaid", "eventVersion": 1,\n'
    b' "occurredAt": "2026-07-16T10:31:00Z",\n'
    b' "data": {"orderId": 100001, "userId": 20001, "amount": 199.00,'
    b' "paidAt": "2026-07-16T10:31:00Z"}}'
)


async def test_the_example_event_and_its_payment_apply(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    worker = workers.start(database_url)

    await topic.send([Message(KEY, CREATED), Message(KEY, PAID)])
    await topic.drained(workers=[worker])

    assert worker.alive
    assert await db.failures() == []
    assert await db.balances() == {"20001": 199}
    assert await db.notifications() == {"100001": 2}
    assert await db.reserved() == {}
    for consumer in CONSUMERS:
        assert await db.consumed_ids(consumer) == [
            "01JY1N5H2J3Q8A5W9M7K2D4P6R",
            "01JY1N5H2J3Q8A5W9M7K2D4P7S",
        ]
    assert await db.consumed_aggregates() == {("ORDER", "100001")}
