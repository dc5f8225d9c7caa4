"""Replicas as a deployment runs them: spares are ready, and a static member's restart
does not rebalance the group.

Contract: of two workers on a topic with one partition, one owns it and the other is a
spare; once the group settled both answer ``/ready`` with 200, the spare's
``partitions`` check saying it is one; once the topic is deleted under them, both answer
503, the check naming the missing topic (each had called itself a spare before). Two
workers with ``GROUP_INSTANCE_ID`` set (static membership) split a topic; one is stopped
(SIGTERM) and started again under the same id within the session timeout: it gets its
own partitions back, and the other worker sees no rebalance (its log shows one
assignment, not two), nor a warning of faust's about the member's URL. Tests run where
the broker supports static membership (Apache Kafka).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from tests.integration.support.http import readiness_is
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.session_broker import broker_kind
from tests.integration.support.waiting import split_between
from tests.integration.support.workers import Stream, Workers

pytestmark = pytest.mark.integration

ASSIGNED = "Setting newly assigned partitions"


async def test_a_replica_beyond_the_partition_count_is_a_ready_spare(
    stream: Stream, make_database: Callable[[str], Awaitable[str]], tmp_path: Path
) -> None:
    one_partition = replace(stream, partitions=1)
    database_url = await make_database("postgresql")
    workers = Workers(one_partition, tmp_path / "workers")
    try:
        async with OrderTopic(one_partition):
            first = workers.start(database_url, name="first")
            await readiness_is(first, 200, within=60)
            spare = workers.start(database_url, name="spare")
            bodies = [await readiness_is(w, 200, within=60) for w in (first, spare)]
            details = [body["checks"]["partitions"]["detail"] for body in bodies]
            assert sum("spare" in detail for detail in details) == 1, details
            # The owner holds the topic's partition and one of each retry tier's.
            assert sum(detail.endswith(" assigned") for detail in details) == 1, details

            # The topic deleted under them: no member is a spare then, every one is red.
            admin = AIOKafkaAdminClient(bootstrap_servers=one_partition.bootstrap)
            await admin.start()
            try:
                await admin.delete_topics([one_partition.topic])
            finally:
                await admin.close()
            for worker in (first, spare):
                body = await readiness_is(worker, 503, within=60)
                detail = body["checks"]["partitions"]["detail"]
                assert detail.startswith(f"the broker has no topic {one_partition.topic!r}"), body
    finally:
        workers.kill_all()


async def test_a_static_member_restarts_without_a_rebalance(
    topic: OrderTopic, workers: Workers, database_url: str
) -> None:
    if broker_kind() != "kafka":
        pytest.skip("static membership is Apache Kafka's (KIP-345)")
    stream = topic.stream
    calm = workers.start(database_url, name="calm", env={"GROUP_INSTANCE_ID": "calm"})
    await readiness_is(calm, 200, within=60)
    moving = workers.start(database_url, name="moving", env={"GROUP_INSTANCE_ID": "moving"})

    _, moving_had = await split_between(stream.topic, stream.partitions, calm, moving)
    rebalances = calm.log().count(ASSIGNED)
    assert moving.stop() == 0
    again = workers.start(database_url, name="moving-again", env={"GROUP_INSTANCE_ID": "moving"})
    await readiness_is(again, 200, within=60)
    assert again.assigned_partitions(stream.topic) == moving_had
    await asyncio.sleep(2)  # a rebalance the restart caused would reach the other member now
    assert calm.log().count(ASSIGNED) == rebalances, calm.tail(40)
    # No warning of faust's about the member's URL, set for static membership.
    assert "AlreadyConfiguredWarning" not in calm.log() + again.log()
