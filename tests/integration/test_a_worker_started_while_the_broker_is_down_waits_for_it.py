"""A worker started while its broker is down waits for the broker, then works.

Contract: with the broker gone (a proxy before it resets every connection and refuses
new ones), a worker that starts neither exits nor crash-loops: it says, once per try,
that it waits for the broker. Meanwhile its web port answers: ``/health`` 200 (a liveness
probe must not restart a worker that waits) and ``/ready`` 503 naming the broker. Once
the broker is back it joins the group, and every event sent afterwards takes effect
exactly once. (faust's own start ended the worker with ``Unable to bootstrap``, exit
code 1; then the wait came before the web server started, and nothing answered on its
port.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.support.brokers import own_broker
from tests.integration.support.http import get_json
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import created_and_paid
from tests.integration.support.state import Database
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

TALLY = "handlers,tests.integration.support.tally"  # the example brings user_points
DOWN_SECONDS = 8.0


async def test_the_worker_waits_for_the_broker_and_then_applies_each_event_once(
    database_url: str, db: Database, tmp_path: Path
) -> None:
    async with own_broker(tmp_path) as broker, OrderTopic(broker.stream) as topic:
        workers = Workers(broker.stream, tmp_path / "workers")
        try:
            broker.take_down()
            worker = workers.start(database_url, handler_modules=TALLY, env={"CONSUMERS": "tally"})
            await asyncio.sleep(DOWN_SECONDS)
            assert worker.alive, worker.tail()
            assert "the worker waits for the broker before it starts" in worker.log(), worker.tail()
            assert await get_json(worker, "/health") == (200, {"status": "alive"})
            status, body = await get_json(worker, "/ready")
            assert status == 503, body
            assert "broker" in body["failed"], body
            assert "cannot reach the broker" in body["checks"]["broker"]["detail"], body

            broker.restore()
            events = created_and_paid(10)
            await topic.send(events)
            await topic.drained(workers=[worker], within=90)
            tallies = await db.tallies()
            assert len(tallies) == len(events)
            assert set(tallies.values()) == {1}
            assert worker.alive
        finally:
            workers.kill_all()
