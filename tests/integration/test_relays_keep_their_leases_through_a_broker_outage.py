"""Three relays on one outbox keep their leases through a broker outage longer than them.

Contract: three ``python -m app relay`` processes share one database's outbox
(``RELAY_LEASE_SECONDS=3``) while the broker is unreachable for 12 s (connections
reset, new ones refused) in the middle of shipping. Each relay renews the lease of the
rows it holds while it waits, whatever it waits on, so no relay takes over another's
rows: every row ends ``PUBLISHED``, none ``DEAD``, and on the topic each aggregate's
versions run 1, 2, 3... with at most a copy right after itself (a publish repeated
after the outage), never an earlier version after a later one. On PostgreSQL and
MariaDB, whose row locks let the relays claim side by side, and on two brokers:
Apache Kafka, whose producer holds what it could not send and retries it, and Tansu,
whose reset connections fail the sends (the relay then retries them itself, after a
pause longer than the lease).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.support.brokers import own_broker
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import out_of_order, shipped, statuses, versions_of, write
from tests.integration.support.relays import Relays
from tests.integration.support.waiting import eventually

pytestmark = pytest.mark.integration

OUTAGE_SECONDS = 12
RELAY = {
    "RELAY_LEASE_SECONDS": "3",
    "RELAY_BATCH_SIZE": "40",
    "RELAY_MAX_ATTEMPTS": "2",
    "INFRA_RETRY_INITIAL_SECONDS": "0.5",
    "INFRA_RETRY_MAX_SECONDS": "4",
}


@pytest.mark.parametrize("kind", ["kafka", "tansu"])
@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
async def test_no_relay_takes_over_rows_another_still_ships(
    kind: str, migrated_database: str, tmp_path: Path
) -> None:
    async with own_broker(tmp_path, kind) as broker, OrderTopic(broker.stream) as topic:
        stream = topic.stream
        events = versions_of(stream.topic, 40, 15, burst=3)
        await write(migrated_database, events[:300])
        relays = Relays(tmp_path / "relays")
        try:
            idempotent = broker.broker.idempotent  # Tansu 0.6 refuses idempotent producers
            for _ in range(3):
                env = {**RELAY, "RELAY_IDEMPOTENT": str(idempotent).lower()}
                relays.start(migrated_database, stream.broker_url, env)
            await eventually(
                lambda: statuses(migrated_database),
                lambda found: found.get("PUBLISHED", 0) >= 60,
                what="the relays shipping",
                within=60,
            )
            broker.take_down()
            await write(migrated_database, events[300:])
            await asyncio.sleep(OUTAGE_SECONDS)
            assert all(relay.alive for relay in relays.started)
            broker.restore()
            await eventually(
                lambda: statuses(migrated_database),
                lambda found: found == {"PUBLISHED": len(events)},
                what="every row published",
                within=120,
            )
        finally:
            relays.kill_all()
        on_topic = await shipped(stream, stream.topic)

    assert len({e["eventId"] for e in on_topic}) == len(events)
    assert out_of_order(on_topic, copies=True) == []
