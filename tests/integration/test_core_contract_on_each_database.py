"""The core contract holds on each database.

Contract: a realistic stream of a few hundred orders (some events sent twice,
some consecutive versions swapped, amounts with cents), consumed through the
real broker by a real worker, leaves exactly the state the events mean on
SQLite, PostgreSQL and MariaDB alike: every balance, every sku's reserved
quantity, the notification count, one ``consumed_event`` row per distinct
event per consumer, every aggregate at its last version, nothing parked,
nothing failed. The test-only ``tally`` consumer shows that each event
took effect exactly once (the example consumers would hide a double, being
idempotent on their own).
"""

from __future__ import annotations

import pytest

from app.demo.envelopes import decode
from app.demo.workload import generate
from tests.integration.support.databases import BACKENDS
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import CONSUMERS, Database, every_consumer
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

HANDLER_MODULES = "handlers,tests.integration.support.tally"
TALLY = "tally"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_workload_with_duplicates_and_swaps_ends_in_the_exact_state(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    workload = generate(
        orders=300, users=40, skus=12, seed=2024, duplicate_ratio=0.1, swap_ratio=0.1
    )
    assert workload.duplicates > 0 and workload.swapped_aggregates > 0
    last_versions: dict[str, int] = {}
    distinct_ids = set()
    for env in map(decode, workload.messages):
        distinct_ids.add(env["eventId"])
        version = int(env["aggregateVersion"])
        last_versions[env["aggregateId"]] = max(version, last_versions.get(env["aggregateId"], 0))

    worker = workers.start(database_url, handler_modules=HANDLER_MODULES)
    await topic.send(workload.messages)
    await topic.drained(workers=[worker], within=90)

    expected = workload.expected
    assert await db.balances() == expected.points
    assert await db.reserved() == expected.reserved
    assert await db.notification_count() == expected.notifications
    assert await db.consumed_counts() == {
        **every_consumer(expected.distinct_events),
        TALLY: expected.distinct_events,
    }
    assert await db.tallies() == dict.fromkeys(distinct_ids, 1)
    assert await db.all_versions() == {
        (consumer, aggregate): version
        for consumer in (*CONSUMERS, TALLY)
        for aggregate, version in last_versions.items()
    }
    assert await db.parked_count() == 0
    assert await db.failures() == []
