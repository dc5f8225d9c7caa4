"""The small run a connection setting is proved with: a worker applies a few orders exactly
and dead-letters a poison record, then ``python -m app relay`` ships what an order
service wrote to the outbox. Used by the tests of secured brokers, database TLS and
PgBouncer, each with the worker's and the relay's settings under test."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import orjson

from app.demo.envelopes import Message
from app.demo.produce import ensure_topic
from app.outbox import NewEvent
from tests.integration.support.dlq import dead_letters, records
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order, messages
from tests.integration.support.outbox import statuses, write
from tests.integration.support.relays import RelayProcess, Relays
from tests.integration.support.state import Database, every_consumer
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Stream, WorkerProcess

SHIPPED = 5
POISON = Message(b"poison-key", b"not json at all")
ALICE, BOB = Order("alice", 12_345), Order("bob", 5_099)
A_CREATED, A_PAID, B_CREATED, B_PAID = ALICE.created(), ALICE.paid(), BOB.created(), BOB.paid()


async def worker_applies_a_few_orders(
    worker: WorkerProcess, stream: Stream, topic: OrderTopic, db: Database
) -> None:
    """Two orders (one event twice) and a poison record: each order's effect once, the
    poison's dead letter on the DLT (shipped by the worker's own relay)."""
    await topic.send([*messages(A_CREATED, A_PAID, A_PAID, B_CREATED, B_PAID), POISON])
    await topic.drained(workers=[worker])
    assert await db.balances() == {"alice": 123, "bob": 50}
    assert await db.consumed_counts() == every_consumer(4)
    [dead] = await dead_letters(stream, 1, [worker])
    assert dead.value == POISON.value


async def relay_ships_the_outbox(
    stream: Stream,
    database_url: str,
    tmp_path: Path,
    relay_url: str | None = None,
    env: Mapping[str, str] | None = None,
) -> RelayProcess:
    """``SHIPPED`` rows written to the outbox at ``database_url`` (async driver's URL)
    reach their topic once each through ``python -m app relay`` (its ``DATABASE_URL``:
    ``relay_url``, default ``database_url``), which then stops cleanly with no ERROR.
    The worker's dead letter, if any, counts among the rows published."""
    shipped_topic = f"{stream.topic}-shipped"
    await ensure_topic(stream.bootstrap, shipped_topic, 2)
    events = [
        NewEvent(shipped_topic, "Shipped", "Parcel", f"parcel-{n}", {"n": n})
        for n in range(SHIPPED)
    ]
    await write(database_url, events)
    relays = Relays(tmp_path / "relays")
    relay = relays.start(relay_url or database_url, stream.broker_url, env=env)
    try:
        await eventually(
            lambda: statuses(database_url),
            lambda found: found.get("PUBLISHED", 0) >= SHIPPED + 1,  # and the dead letter's
            what="every outbox row PUBLISHED by the relay process",
            within=60,
        )
        assert relay.stop() == 0, relay.log()
    finally:
        relays.kill_all()
    on_topic = await records(stream, shipped_topic)
    assert sorted(orjson.loads(r.value or b"")["data"]["n"] for r in on_topic) == list(
        range(SHIPPED)
    )
    assert "ERROR" not in relay.log(), relay.log()
    return relay
