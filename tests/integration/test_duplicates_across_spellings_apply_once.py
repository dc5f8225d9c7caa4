"""The same event written two ways is one event: it applies once.

Contract: an event sent once with ``"orderId": 100001`` and once with
``"orderId": "100001"``, and with its ``eventId`` once a JSON integer and once
a JSON string, in one batch or across batches, takes effect once for every
consumer: one dedup record, one tally, one award, one notification; the
aggregate in the key or in the value is one aggregate, so the next version
applies after it and nothing waits. With and without the Redis prefilter.
``python -m app trace`` finds the event by ``700001`` and by ``"700001"``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import orjson
import pytest

from app.demo.envelopes import Message
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import CONSUMERS, Database, every_consumer
from tests.integration.support.workers import REPO_ROOT, Workers

pytestmark = pytest.mark.integration

HANDLER_MODULES = "handlers,tests.integration.support.tally"
TALLY = "tally"


def created(event_id: Any, order_id: Any, user_id: Any) -> dict[str, Any]:
    return {
        "eventId": event_id,
        "eventType": "OrderCreated",
        "eventVersion": 1,
        "aggregateVersion": 1,
        "occurredAt": "2026-07-16T10:30:00Z",
        "data": {
            "orderId": order_id,
            "orderNo": "ORD1",
            "userId": user_id,
            "amount": 199.00,
            "items": [{"sku": "SKU-1", "qty": 2}],
        },
    }


def paid(event_id: Any, order_id: Any, user_id: Any, amount: Any) -> dict[str, Any]:
    return {
        "eventId": event_id,
        "eventType": "OrderPaid",
        "eventVersion": 1,
        "aggregateVersion": 2,
        "occurredAt": "2026-07-16T10:31:00Z",
        "data": {
            "orderId": order_id,
            "userId": user_id,
            "amount": amount,
            "paidAt": "2026-07-16T10:31:00Z",
        },
    }


def sent(env: dict[str, Any], key: bytes, aggregate_in_value: Any = None) -> Message:
    if aggregate_in_value is not None:
        env = {**env, "aggregateId": aggregate_in_value}
    return Message(key, orjson.dumps(env))


@pytest.mark.parametrize("redis", [False, True], ids=["without-redis", "with-redis"])
async def test_one_event_spelled_twice_applies_once(
    topic: OrderTopic,
    workers: Workers,
    database_url: str,
    db: Database,
    redis: bool,
    request: pytest.FixtureRequest,
) -> None:
    env = {"REDIS_URL": request.getfixturevalue("redis_url")} if redis else {}
    worker = workers.start(database_url, handler_modules=HANDLER_MODULES, env=env)
    first = [
        sent(created(700001, 100001, 20001), b"100001"),
        sent(created("700001", "100001", "20001"), b'"100001"'),
        sent(created(700001, "100001", 20001), b"100001", aggregate_in_value=100001),
    ]
    await topic.send(first)
    await topic.drained(workers=[worker])
    again = [
        sent(paid("700002", "100001", "20001", "199.00"), b"100001", aggregate_in_value="100001"),
        sent(created("700001", 100001, "20001"), b"100001"),
        sent(paid(700002, 100001, 20001, 199.00), b'"100001"'),
    ]
    await topic.send(again)
    await topic.drained(workers=[worker])

    assert await db.failures() == []
    assert await db.tallies() == {"700001": 1, "700002": 1}
    assert await db.consumed_counts() == {**every_consumer(2), TALLY: 2}
    for consumer in (*CONSUMERS, TALLY):
        assert await db.consumed_ids(consumer) == ["700001", "700002"], consumer
    assert await db.balances() == {"20001": 199}
    assert await db.reserved() == {"SKU-1": 2}
    assert await db.notifications() == {"100001": 2}
    assert await db.consumed_aggregates() == {("ORDER", "100001")}
    assert await db.parked_count() == 0
    for typed in ("700001", '"700001"'):
        found = await trace(database_url, typed)
        assert (found["eventId"], found["found"]) == ("700001", True), typed
        assert {c["state"] for c in found["consumers"]} == {"applied"}, typed


async def trace(database_url: str, event_id: str) -> Any:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "trace",
        event_id,
        "--json",
        "--database-url",
        database_url,
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, out
    return orjson.loads(out)
