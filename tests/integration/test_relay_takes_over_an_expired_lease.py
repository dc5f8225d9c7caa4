"""Rows a relay claimed before it died ship once its lease expired, not before.

Contract: while a dead relay's lease runs, its ``PROCESSING`` rows stay where they
are and so do the later rows of their aggregates (they wait behind them), while
every other aggregate ships at once. Once the lease expired a relay claims the
rows again and everything ships, each aggregate's events in order, once. On each
database.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.support.databases import BACKENDS
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import (
    claimed_by_a_dead_relay,
    copies,
    out_of_order,
    relay_on,
    rows,
    shipped,
    until_idle,
    versions_of,
    write,
)

pytestmark = pytest.mark.integration

LEASE_SECONDS = 2.0


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_expired_lease_is_taken_over_and_a_live_one_is_not(
    topic: OrderTopic, migrated_database: str
) -> None:
    stream = topic.stream
    await write(migrated_database, versions_of(stream.topic, aggregates=4, versions=3))
    found = await rows(migrated_database, "aggregate_id", "aggregate_version", "status")
    held = {"agg-0", "agg-1"}
    heads = [r["id"] for r in found if r["aggregate_id"] in held and r["aggregate_version"] == 1]
    expiry = datetime.now(UTC) + timedelta(seconds=LEASE_SECONDS)
    await claimed_by_a_dead_relay(migrated_database, heads, expiry)

    async with relay_on(migrated_database, stream.broker_url) as relay:
        await until_idle(relay)
        state = {
            (r["aggregate_id"], r["aggregate_version"]): r["status"]
            for r in await rows(migrated_database, "aggregate_id", "aggregate_version", "status")
        }
        assert state == {
            (f"agg-{a}", v): (
                "PUBLISHED" if f"agg-{a}" not in held else "PROCESSING" if v == 1 else "PENDING"
            )
            for a in range(4)
            for v in (1, 2, 3)
        }
        await asyncio.sleep(max(0.0, (expiry - datetime.now(UTC)).total_seconds()) + 0.1)
        await until_idle(relay)

    assert {r["status"] for r in await rows(migrated_database, "status")} == {"PUBLISHED"}
    on_topic = await shipped(stream, stream.topic)
    assert len(on_topic) == 12
    assert copies(on_topic) == {}
    assert out_of_order(on_topic) == []
