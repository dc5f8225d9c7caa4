"""A worker whose topics do not exist yet consumes its order topic from its first assignment.

Contract: started on a broker that has none of its topics (the order topic, its retry
tiers, its DLT), a worker is assigned every partition of the order topic in the group's
first assignment, and an event sent once it is ready is applied, without waiting for
a rebalance. (faust declares each agent's topic while its consumer already joins the
group; the worker creates them all before that. On a broker just started, the first
assignment came before the order topic was listed in one of two runs by hand, and
nothing was consumed for minutes; the test broker, busy already, shows it seldom.)
"""

from __future__ import annotations

import pytest

from app.demo.envelopes import encode, envelope
from tests.integration.support.http import ready
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Stream, Workers

pytestmark = pytest.mark.integration

# Many tiers: the order topic is declared after all of them, as late as it gets.
TIERS = ",".join(str(n) for n in range(1, 13))


async def test_the_first_assignment_holds_the_order_topic(
    stream: Stream, workers: Workers, database_url: str, db: Database
) -> None:
    worker = workers.start(database_url, env={"RETRY_DELAYS": TIERS})
    await ready(worker)

    assert worker.assigned_partitions(stream.topic) == set(range(stream.partitions))
    async with OrderTopic(stream) as topic:  # exists already: sends, creates nothing
        data = {"orderId": "o-1", "userId": "u-1", "amount": "12.00", "paidAt": "2025-01-01"}
        paid = envelope("OrderPaid", "o-1", 1, data)
        await topic.send([encode(paid)])
        await eventually(
            db.balances,
            lambda found: found == {"u-1": 12},
            what="the payment's points",
            within=30,
            workers=[worker],
        )
