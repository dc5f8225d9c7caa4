"""Duplicates apply once.

Contract: an event delivered again with the same eventId takes effect once
for every consumer, whether the copy follows moments later (a producer retry,
same bytes), is re-published with new bytes (a fresh occurredAt), or arrives
after the worker restarted (the dedup record lives in the database, not in
the worker's memory). That includes events without an aggregateVersion,
which no version gate protects: only the dedup record does. Each consumer
ends with exactly one ``consumed_event`` row per distinct event. This holds
with and without Redis (``REDIS_URL``), which may only ever be a shortcut in
front of the database's dedup record.

The example consumers are idempotent on their own, so the test-only
``tally`` consumer counts how many times each event took effect. A worker that keeps
running a batch again (a duplicate past the dedup check collides with its own dedup
record on every run) fails the test within seconds, saying so.
"""

from __future__ import annotations

import pytest

from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order, messages
from tests.integration.support.state import CONSUMERS, Database, every_consumer
from tests.integration.support.waiting import rerunning_forever
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

HANDLER_MODULES = "handlers,tests.integration.support.tally"
TALLY = "tally"


@pytest.mark.parametrize("redis", [False, True], ids=["without-redis", "with-redis"])
async def test_same_event_id_takes_effect_once_also_across_a_restart(
    topic: OrderTopic,
    workers: Workers,
    database_url: str,
    db: Database,
    redis: bool,
    request: pytest.FixtureRequest,
) -> None:
    env = {"REDIS_URL": request.getfixturevalue("redis_url")} if redis else {}
    alice = Order("alice", 12_345, (("SKU-A", 2),))  # 123.45 -> 123 points
    bob = Order("bob", 5_099, (("SKU-A", 1), ("SKU-B", 3)))  # 50.99 -> 50 points
    carol = Order("carol", 2_000, (("SKU-C", 1),))  # her events carry no aggregateVersion
    a_created, a_paid = alice.created(), alice.paid()
    b_created, b_paid = bob.created(), bob.paid()
    c_created, c_paid = carol.created(version=None), carol.paid(version=None)
    a_paid_republished = alice.paid(event_id=a_paid["eventId"])  # new occurredAt
    c_paid_republished = carol.paid(version=None, event_id=c_paid["eventId"])
    first_delivery = [a_created, a_paid, a_paid, b_created, a_created, b_paid, b_paid]
    first_delivery += [c_created, c_paid, c_created, c_paid_republished]
    await topic.send(messages(*first_delivery, a_paid_republished))
    worker = workers.start(database_url, handler_modules=HANDLER_MODULES, env=env)
    await topic.drained(workers=[worker], stuck=rerunning_forever([worker]))

    assert await db.balances() == {"alice": 123, "bob": 50, "carol": 20}
    assert await db.reserved() == {"SKU-A": 3, "SKU-B": 3, "SKU-C": 1}
    assert await db.notifications() == {alice.order_id: 2, bob.order_id: 2, carol.order_id: 2}
    assert await db.consumed_counts() == {**every_consumer(6), TALLY: 6}
    assert set((await db.tallies()).values()) == {1}

    worker.stop()
    restarted = workers.start(database_url, handler_modules=HANDLER_MODULES, env=env)
    b_cancelled = bob.cancelled()
    await topic.send(
        messages(a_paid, b_created, b_cancelled, c_paid, b_paid, b_cancelled, a_created, c_created)
    )
    await topic.drained(workers=[restarted], stuck=rerunning_forever([restarted]))

    # Only bob's cancel is new: his 50 points and his reservation go back, once.
    assert await db.balances() == {"alice": 123, "bob": 0, "carol": 20}
    assert await db.reserved() == {"SKU-A": 2, "SKU-B": 0, "SKU-C": 1}
    assert await db.notifications() == {alice.order_id: 2, bob.order_id: 3, carol.order_id: 2}
    distinct = [a_created, a_paid, b_created, b_paid, b_cancelled, c_created, c_paid]
    distinct_ids = sorted(e["eventId"] for e in distinct)
    assert await db.tallies() == dict.fromkeys(distinct_ids, 1)
    for consumer in (*CONSUMERS, TALLY):
        assert await db.consumed_ids(consumer) == distinct_ids, consumer
    assert await db.versions(alice.order_id) == {**every_consumer(2), TALLY: 2}
    assert await db.versions(bob.order_id) == {**every_consumer(3), TALLY: 3}
