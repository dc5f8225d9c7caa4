"""A relay SIGKILLed in the middle of a batch loses nothing; the consumers' state is exact.

Contract: an order service's outbox (a few hundred orders, some versions written
swapped) is being shipped when the relay is killed while it holds claimed rows
whose publishes the broker has not acknowledged: cut off by a proxy that then
drops what it held (never sent), and again with a second relay, whose held
records the proxy delivers after the kill (the broker took them, nobody marked
them published). A relay started afterwards claims the rows once the dead relays'
leases expired, finds on the topic the records the broker took and sends the rest:
every row ends ``PUBLISHED``, every event reaches the topic once, and the consumers,
reading the topic, end with the exact balances, reservations and notifications,
each event taking effect once. On each database.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.demo.envelopes import decode
from app.demo.workload import generate
from tests.integration.support.brokers import OwnBroker, own_broker
from tests.integration.support.databases import BACKENDS
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import (
    as_rows,
    copies,
    insert_raw,
    rows,
    shipped,
    statuses,
)
from tests.integration.support.relays import Relays
from tests.integration.support.state import Database, every_consumer
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

HANDLER_MODULES = "handlers,tests.integration.support.tally"
RELAY = {"RELAY_BATCH_SIZE": "20", "RELAY_LEASE_SECONDS": "2"}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_relay_killed_mid_batch_loses_nothing(
    migrated_database: str, db: Database, tmp_path: Path
) -> None:
    workload = generate(orders=600, users=30, skus=10, seed=16, duplicate_ratio=0, swap_ratio=0.1)
    async with own_broker(tmp_path) as broker, OrderTopic(broker.stream) as topic:
        stream = topic.stream
        written = as_rows(stream.topic, map(decode, workload.messages))
        await insert_raw(migrated_database, *written, per_transaction=25)
        relays = Relays(tmp_path / "relays")
        workers = Workers(stream, tmp_path / "workers")
        try:
            claimed: set[str] = set()
            for deliver in (False, True):
                claimed |= await kill_mid_batch(migrated_database, relays, broker, deliver)
            relays.start(migrated_database, stream.broker_url, RELAY)
            await eventually(
                lambda: statuses(migrated_database),
                lambda found: found == {"PUBLISHED": len(written)},
                what="every row published",
                within=60,
            )
            worker = workers.start(migrated_database, handler_modules=HANDLER_MODULES)
            expected = workload.expected
            await eventually(
                db.consumed_counts,
                lambda found: (
                    found
                    == {
                        **every_consumer(expected.distinct_events),
                        "tally": expected.distinct_events,
                    }
                ),
                what="every event consumed",
                within=90,
                workers=[worker],
            )
        finally:
            relays.kill_all()
            workers.kill_all()
        on_topic = await shipped(stream, stream.topic)

    assert {e["eventId"] for e in on_topic} == {r["event_id"] for r in written}
    # What the broker took from a dead relay is found on the topic, not sent again.
    assert claimed and not copies(on_topic)
    assert await db.balances() == expected.points
    assert await db.reserved() == expected.reserved
    assert await db.notification_count() == expected.notifications
    assert await db.tallies() == dict.fromkeys((r["event_id"] for r in written), 1)
    assert await db.parked_count() == 0


async def kill_mid_batch(
    database_url: str, relays: Relays, broker: OwnBroker, deliver: bool
) -> set[str]:
    """Start a relay, cut it off from the broker once it shipped sixty more rows, SIGKILL it
    while it holds claimed rows; then drop what it had sent, or ``deliver`` it. Returns the
    eventIds it held."""
    before = (await statuses(database_url)).get("PUBLISHED", 0)
    doomed = relays.start(database_url, broker.stream.broker_url, RELAY)
    await eventually(
        lambda: statuses(database_url),
        lambda found: found.get("PUBLISHED", 0) >= before + 60,
        what="sixty more rows published",
        within=60,
    )
    broker.cut_off()
    await eventually(
        lambda: statuses(database_url),
        lambda found: found.get("PROCESSING", 0) > 0,
        what="rows claimed and not acknowledged",
        within=10,
    )
    await asyncio.sleep(0.3)
    doomed.kill()
    # Read after the kill: a relay still running could settle what it held and claim
    # more (its sends into the cut proxy) between a read and the kill.
    held = await rows(database_url, "event_id", "status")
    if deliver:
        broker.deliver_held()
    else:
        broker.restore()
    assert {r["status"] for r in held} >= {"PENDING", "PROCESSING", "PUBLISHED"}
    return {r["event_id"] for r in held if r["status"] == "PROCESSING"}
