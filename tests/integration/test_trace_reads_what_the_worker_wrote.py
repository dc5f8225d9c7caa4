"""``python -m app trace`` reads what a real worker wrote.

Contract: against the database a worker on PostgreSQL filled, ``trace --json``
reports an applied event as applied for every consumer, an early version as
parked for every consumer waiting for version 1, and an event whose payload
violates its schema as dead-lettered poison with its reason; an unknown eventId
exits 1.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import orjson
import pytest

from app.demo.envelopes import encode
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import CONSUMERS
from tests.integration.support.workers import REPO_ROOT, Workers

pytestmark = pytest.mark.integration


async def trace(database_url: str, event_id: str) -> tuple[int, Any]:
    env = {**os.environ, "DATABASE_URL": database_url}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "app", "trace", event_id, "--json"],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=60,
    )
    return done.returncode, orjson.loads(done.stdout) if done.stdout else None


async def test_trace_tells_applied_parked_and_poison_apart(
    topic: OrderTopic, workers: Workers, database_url: str
) -> None:
    alice, bob = Order("alice", 1_000), Order("bob", 2_000)
    created, early = alice.created(), bob.paid()
    bad = alice.event("OrderPaid", None, {"orderId": alice.order_id, "amount": "lots"})
    worker = workers.start(database_url)
    await topic.send([encode(created), encode(early), encode(bad)])
    await topic.drained(workers=[worker])

    code, applied = await trace(database_url, created["eventId"])
    assert code == 0
    assert applied["aggregateVersion"] == 1
    assert {c["consumer"]: c["state"] for c in applied["consumers"]} == dict.fromkeys(
        CONSUMERS, "applied"
    )

    code, parked = await trace(database_url, early["eventId"])
    assert code == 0
    for consumer in parked["consumers"]:
        assert (consumer["state"], consumer["waiting_for_version"]) == ("parked", 1)
    assert {c["consumer"] for c in parked["consumers"]} == set(CONSUMERS)

    code, poison = await trace(database_url, bad["eventId"])
    assert code == 0
    [finding] = poison["consumers"]
    assert (finding["consumer"], finding["state"], finding["reason"]) == (
        "",
        "dead",
        "invalid-schema",
    )

    code, _ = await trace(database_url, "no-such-event")
    assert code == 1
