"""Two relays over one outbox publish every row once, each aggregate's rows in order.

Contract: with two ``python -m app relay`` processes claiming small batches from
one table at once, and rows still being added, every row ends ``PUBLISHED``, every
event is on the topic exactly once (no crash, so no copy), and each aggregate's
events are on the topic in the order they were written (versions 1, 2, 3...):
a relay never takes a later row of an aggregate while the other holds an earlier
one (``app.outbox.claim``). On PostgreSQL, MariaDB and SQLite.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.support.databases import BACKENDS
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import (
    copies,
    out_of_order,
    shipped,
    statuses,
    versions_of,
    write,
)
from tests.integration.support.relays import Relays
from tests.integration.support.waiting import eventually

pytestmark = pytest.mark.integration

PUBLISHED = re.compile(r"stopped: (\d+) row\(s\) published")
AGGREGATES = 40
VERSIONS = 20


@pytest.mark.parametrize("backend", BACKENDS)
async def test_two_relays_publish_every_row_once_and_in_aggregate_order(
    topic: OrderTopic, migrated_database: str, tmp_path: Path
) -> None:
    stream = topic.stream
    events = versions_of(stream.topic, AGGREGATES, VERSIONS, burst=5)
    half = len(events) // 2
    await write(migrated_database, events[:half])
    relays = Relays(tmp_path / "relays")
    try:
        # Batches of different sizes cut the aggregates' chains at different rows.
        running = [
            relays.start(
                migrated_database,
                stream.broker_url,
                {"RELAY_BATCH_SIZE": size, "RELAY_POLL_INTERVAL_SECONDS": "0.01"},
            )
            for size in ("7", "25")
        ]
        await write(migrated_database, events[half:], per_transaction=10)
        await eventually(
            lambda: statuses(migrated_database),
            lambda found: found == {"PUBLISHED": len(events)},
            what="every row published",
            within=90,
            workers=[],
        )
        assert [relay.stop() for relay in running] == [0, 0]  # SIGTERM: a clean exit
        published = [int(PUBLISHED.findall(relay.log())[-1]) for relay in running]
    finally:
        relays.kill_all()
    on_topic = await shipped(stream, stream.topic)
    assert copies(on_topic) == {}
    assert len(on_topic) == len(events)
    assert out_of_order(on_topic) == []
    assert sum(published) == len(events)
    assert min(published) > 0, published  # both relays took part
