"""Out-of-order versions converge.

Contract: when an aggregate's versions arrive out of order (v3, v2, then v1),
the later ones wait in ``parked_event`` until the gap closes, and the final
state is the one in-order delivery gives: created, paid, cancelled means no
points and no reservation left (applying in arrival order would leave both).
Other aggregates do not wait for the gap. ``parked_event`` ends empty.
"""

from __future__ import annotations

import pytest

from tests.integration.support.databases import BACKENDS
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order, messages
from tests.integration.support.state import CONSUMERS, Database, every_consumer
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("backend", BACKENDS)
async def test_reversed_versions_wait_for_the_gap_then_apply_in_order(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    xavier = Order("xavier", 12_345, (("SKU-X", 2),))  # 123 points if paid, never cancelled
    yvonne = Order("yvonne", 5_099, (("SKU-Y", 1),))  # in order, after xavier's gap
    zoe = Order("zoe", 7_750, (("SKU-Z", 4),))  # v2 before v1
    x1, x2, x3 = xavier.created(), xavier.paid(), xavier.cancelled()
    y1, y2, z1, z2 = yvonne.created(), yvonne.paid(), zoe.created(), zoe.paid()
    worker = workers.start(database_url)
    await topic.send(messages(x3, x2, y1, y2, z2, z1))
    await topic.drained(workers=[worker])

    # xavier waits for v1, in every consumer; yvonne and zoe did not wait for him.
    assert await db.parked_count() == 2 * len(CONSUMERS)
    assert await db.balances() == {"yvonne": 50, "zoe": 77}
    assert await db.reserved() == {"SKU-Y": 1, "SKU-Z": 4}
    assert await db.notifications() == {yvonne.order_id: 2, zoe.order_id: 2}
    assert await db.versions(yvonne.order_id) == every_consumer(2)
    assert await db.versions(zoe.order_id) == every_consumer(2)
    assert xavier.order_id not in await db.notifications()

    await topic.send(messages(x1))
    await topic.drained(workers=[worker])

    assert await db.parked_count() == 0
    assert await db.balances() == {"xavier": 0, "yvonne": 50, "zoe": 77}
    assert await db.reserved() == {"SKU-X": 0, "SKU-Y": 1, "SKU-Z": 4}
    assert await db.notifications() == {xavier.order_id: 3, yvonne.order_id: 2, zoe.order_id: 2}
    assert await db.versions(xavier.order_id) == every_consumer(3)
    everything = sorted(e["eventId"] for e in (x1, x2, x3, y1, y2, z1, z2))
    for consumer in CONSUMERS:
        assert await db.consumed_ids(consumer) == everything, consumer
