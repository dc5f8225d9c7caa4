"""A retry tier waiting for a far-off due time never keeps a rebalance (and a new worker) waiting.

Contract: while a worker's retry tier holds a batch that waits for its
records' ``retry-due-at`` (here 22 s away), a second worker joining the group
gets its share of the partitions promptly: the first gives the sleeping batch
up (withheld, neither processed nor acked) instead of holding the rebalance
until the due time. Nothing is lost and nothing applies twice: the retry
record applies once, at its due time, on whichever worker owns its partition
then, and the main topic's events sent before and after the join apply once
each (the ``tally`` consumer's counters).
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from app.demo.envelopes import encode
from app.demo.produce import ensure_topic
from dlq import headers as h
from dlq.topics import retry_topic
from dlq.trip import iso
from tests.integration.support.dlq import produce
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Stream, WorkerProcess, Workers

pytestmark = pytest.mark.integration

MODULES = "handlers,tests.integration.support.tally"  # the example brings user_points
TIER_SECONDS = 30
DUE_IN_SECONDS = 22
ENV = {"CONSUMERS": "tally", "RETRY_DELAYS": str(TIER_SECONDS)}
# From the second worker's start to its first assignment: its start-up, and the broker
# holding the join for half the session timeout. Held by the sleeping batch, it took
# until the due time.
PROMPTLY_SECONDS = 14


async def a_far_future_retry(stream: Stream, order: Order) -> str:
    """Put an event on the tier, for the tally, due in ``DUE_IN_SECONDS``; its eventId."""
    tier = retry_topic(stream.topic, TIER_SECONDS)
    await ensure_topic(stream.bootstrap, tier, stream.partitions)
    now = datetime.now(UTC)
    event = order.created()
    headers = [
        (h.RETRY_CONSUMER_GROUP, b"tally"),
        (h.RETRY_ATTEMPT, b"1"),
        (h.RETRY_FIRST_FAILURE_AT, iso(now).encode()),
        (h.RETRY_DUE_AT, iso(now + timedelta(seconds=DUE_IN_SECONDS)).encode()),
        (h.DLT_ORIGINAL_TOPIC, stream.topic.encode()),
        (h.DLT_ORIGINAL_PARTITION, b"0"),
        (h.DLT_ORIGINAL_OFFSET, b"1000000"),
    ]
    await produce(replace(stream, topic=tier), [encode(event)], headers)
    return str(event["eventId"])


async def sleeping(worker: WorkerProcess) -> bool:
    return "record(s) due in" in worker.log()


async def test_a_worker_joining_while_a_tier_sleeps_gets_its_partitions_promptly(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    stream = topic.stream
    first = workers.start(database_url, handler_modules=MODULES, env=ENV)
    before = [encode(Order(f"u-{n}", 100 + n).created()) for n in range(8)]
    await topic.send(before)
    await topic.drained(workers=[first], within=60)
    retried = await a_far_future_retry(stream, Order("u-retry", 100))
    produced = time.monotonic()
    await eventually(
        lambda: sleeping(first),
        bool,
        what="the tier to wait for the retry's due time",
        within=20,
        workers=[first],
    )

    second = workers.start(database_url, handler_modules=MODULES, env=ENV)
    joined = time.monotonic()
    await eventually(
        lambda: _assigned(second, stream.topic),
        bool,
        what="the second worker's first assignment",
        within=PROMPTLY_SECONDS,
        workers=[first, second],
    )
    assert time.monotonic() - joined < PROMPTLY_SECONDS
    assert time.monotonic() - produced < DUE_IN_SECONDS, "too slow a machine to tell"

    after = [encode(Order(f"v-{n}", 200 + n).created()) for n in range(8)]
    await topic.send(after)
    tallies = await eventually(
        db.tallies,
        lambda counted: retried in counted and len(counted) == 1 + len(before) + len(after),
        what="every event, the retried one at its due time, to apply",
        within=DUE_IN_SECONDS + 30,
        workers=[first, second],
    )
    assert set(tallies.values()) == {1}
    assert await db.failures() == []


async def _assigned(worker: WorkerProcess, topic: str) -> set[int]:
    return worker.assigned_partitions(topic) or set()
