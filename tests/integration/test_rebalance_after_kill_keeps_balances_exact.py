"""A rebalance after a kill keeps balances exact.

Contract: two workers share a consumer group, each owning part of the topic.
One of them is SIGKILLed mid-stream, in the middle of a batch transaction.
After the group rebalances, the survivor owns every partition and reads the
dead worker's uncommitted records again; the final points, reservations,
notifications and ``consumed_event`` rows are exactly what the events mean:
nothing lost, nothing applied twice.

Which worker dies is decided by the stream, not by chance: both run the
test-only consumer ``slow-probe``, which stalls inside its transaction on one
chosen event and writes its pid to a marker file; the worker that owns that
event's partition is the one killed. The test-only ``tally`` consumer
counts how many times each event took effect (the example consumers are
idempotent on their own, so their tables could not show a double).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.envelopes import decode
from app.demo.workload import generate
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import CONSUMERS, Database
from tests.integration.support.waiting import eventually, path_appears, split_between
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

HANDLER_MODULES = "handlers,tests.integration.support.slow_probe,tests.integration.support.tally"
SLOW_PROBE = "slow-probe"  # not imported: that would register its handler in this process
TALLY = "tally"


async def test_survivor_takes_over_a_killed_workers_partitions_exactly(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, tmp_path: Path
) -> None:
    workload = generate(orders=200, users=25, skus=8, seed=31, duplicate_ratio=0.1, swap_ratio=0.1)
    half = len(workload.messages) // 2
    first, second = workload.messages[:half], workload.messages[half:]
    seen_first = {decode(m)["eventId"] for m in first}
    trigger = next(
        env
        for env in map(decode, second)
        if env["eventType"] == "OrderPaid" and env["eventId"] not in seen_first
    )
    marker = tmp_path / "slow-probe.stalled"
    env = {"SLOW_PROBE_EVENT_ID": trigger["eventId"], "SLOW_PROBE_MARKER": str(marker)}

    one = workers.start(database_url, name="one", handler_modules=HANDLER_MODULES, env=env)
    # The second worker starts once the first has created the schema, so the
    # two never run the migration at the same time.
    await eventually(db.notifications, lambda _: True, what="schema", within=60, workers=[one])
    two = workers.start(database_url, name="two", handler_modules=HANDLER_MODULES, env=env)
    await split_between(topic.stream.topic, topic.stream.partitions, one, two)

    await topic.send(first)
    await topic.drained(workers=[one, two])
    await topic.send(second)
    await path_appears(marker, within=60, workers=[one, two])
    doomed, survivor = (one, two) if marker.read_text() == str(one.pid) else (two, one)
    assert marker.read_text() == str(doomed.pid)
    doomed.kill()

    await topic.drained(workers=[survivor], within=120)

    assert survivor.assigned_partitions(topic.stream.topic) == set(range(topic.stream.partitions))
    expected = workload.expected
    assert await db.balances() == expected.points
    assert await db.reserved() == expected.reserved
    assert await db.notification_count() == expected.notifications
    every_one = dict.fromkeys((*CONSUMERS, SLOW_PROBE, TALLY), expected.distinct_events)
    assert await db.consumed_counts() == every_one
    assert await db.tallies() == dict.fromkeys({decode(m)["eventId"] for m in workload.messages}, 1)
    assert await db.parked_count() == 0
