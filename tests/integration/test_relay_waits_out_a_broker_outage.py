"""While the broker is down the relay waits: no row goes DEAD for it, and all ship after.

Contract: with the broker unreachable for 20 s (connections reset, new ones refused)
while relays are shipping, and rows still being written, no row is counted a failed
attempt (``RELAY_MAX_ATTEMPTS=2`` would make two of them ``DEAD``), the relays stay
up, and once the broker is back every row is ``PUBLISHED`` and on the topic, each
aggregate's events in order (a publish repeated after the outage may leave a copy
right after itself, which consumers absorb), and each relay's log says it waited on
the broker, as does its ``effectively_once_relay_failures_total{kind="broker"}`` by the
outage's end (before, a wait for acknowledgements that did not come counted nothing).
One relay per database, PostgreSQL, MariaDB and SQLite, through the same outage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.demo.broker import free_port
from tests.integration.support.brokers import own_broker
from tests.integration.support.databases import BACKENDS
from tests.integration.support.http import get_at
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import (
    out_of_order,
    rows,
    shipped,
    statuses,
    versions_of,
    write,
)
from tests.integration.support.relays import Relays
from tests.integration.support.waiting import eventually

pytestmark = pytest.mark.integration

OUTAGE_SECONDS = 20
RELAY = {
    "RELAY_MAX_ATTEMPTS": "2",
    "RELAY_BACKOFF_INITIAL_SECONDS": "0.2",
    "RELAY_LEASE_SECONDS": "3",
    "RELAY_BATCH_SIZE": "50",
    "INFRA_RETRY_MAX_SECONDS": "2",
}


async def test_rows_wait_out_a_broker_outage_and_all_ship_after(
    make_database: Callable[[str], Awaitable[str]], tmp_path: Path
) -> None:
    from app.db.migrate import upgrade_to_head

    databases = {backend: await make_database(backend) for backend in BACKENDS}
    for url in databases.values():
        await upgrade_to_head(url)
    async with own_broker(tmp_path) as broker, OrderTopic(broker.stream) as topic:
        stream = topic.stream
        batches = {
            backend: versions_of(stream.topic, 30, 12, burst=3, prefix=backend)
            for backend in BACKENDS
        }
        relays = Relays(tmp_path / "relays")
        ports = {backend: free_port() for backend in BACKENDS}
        try:
            for backend, url in databases.items():
                await write(url, batches[backend][:180])
                port = {"RELAY_METRICS_PORT": str(ports[backend])}
                relays.start(url, stream.broker_url, RELAY | port)
            await eventually(
                lambda: asyncio.gather(*(statuses(url) for url in databases.values())),
                lambda found: all(s.get("PUBLISHED", 0) >= 50 for s in found),
                what="every relay shipping",
                within=60,
            )
            broker.take_down()
            for backend, url in databases.items():
                await write(url, batches[backend][180:])
            await asyncio.sleep(OUTAGE_SECONDS)
            during = {b: await statuses(url) for b, url in databases.items()}
            counted = {b: await broker_failures(port) for b, port in ports.items()}
            attempts = {
                b: {r["retry_count"] for r in await rows(url, "retry_count")}
                for b, url in databases.items()
            }
            assert all(relay.alive for relay in relays.started)
            broker.restore()
            for backend, url in databases.items():
                await eventually(
                    lambda url=url: statuses(url),
                    lambda found, backend=backend: found == {"PUBLISHED": len(batches[backend])},
                    what=f"every {backend} row published",
                    within=90,
                )
            logs = [relay.log() for relay in relays.started]
        finally:
            relays.kill_all()
        on_topic = await shipped(stream, stream.topic)

    assert attempts == {backend: {0} for backend in BACKENDS}  # the outage counted nothing
    assert all(found > 0 for found in counted.values()), counted
    for backend, found in during.items():
        assert "DEAD" not in found, (backend, found)
        assert found.get("PENDING", 0) + found.get("PROCESSING", 0) > 0, (backend, found)
    assert len({e["eventId"] for e in on_topic}) == sum(len(rows) for rows in batches.values())
    assert out_of_order(on_topic, copies=True) == []
    # Each relay said what it waited for: a broker call that failed (Tansu resets its
    # sends at once) or acknowledgements that did not come (Apache Kafka's producer holds
    # and retries its requests).
    said = ("broker unreachable?", "for the broker to acknowledge")
    assert all(any(words in log for words in said) for log in logs), logs


async def broker_failures(port: int) -> float:
    """A relay's ``effectively_once_relay_failures_total{kind="broker"}`` (0 if absent)."""
    _, text = await get_at(port, "/metrics")
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == "effectively_once_relay_failures_total" and found.labels == {
                "kind": "broker"
            }:
                return float(found.value)
    return 0.0
