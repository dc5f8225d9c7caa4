"""SIGTERM stops a worker cleanly.

Contract: a worker that was consuming and is sent SIGTERM (a deploy, a scale-down,
``docker stop``) shuts down with exit code 0 and logs no crash: an orchestrator
must be able to tell a stop it asked for from a crash, and alerts on crash lines
must not fire on every deploy. Its work is committed: the events it consumed
took effect.
"""

from __future__ import annotations

import pytest

from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order, messages
from tests.integration.support.state import Database, every_consumer
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


async def test_sigterm_exits_zero_without_a_crash(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    dave = Order("dave", 4_200, (("SKU-D", 2),))
    await topic.send(messages(dave.created(), dave.paid()))
    worker = workers.start(database_url)
    await topic.drained(workers=[worker])

    code = worker.stop()

    assert code == 0, worker.tail(40)
    loud = [line for line in worker.log().splitlines() if "[ERROR]" in line or "[CRITICAL]" in line]
    assert loud == [], worker.tail(40)
    assert await db.balances() == {"dave": 42}
    assert await db.consumed_counts() == every_consumer(2)
