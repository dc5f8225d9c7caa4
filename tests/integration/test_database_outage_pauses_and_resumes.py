"""A database outage pauses the worker; when the database returns, nothing is lost.

Contract: while the worker's PostgreSQL database refuses connections (its
sessions terminated, new ones refused), the worker keeps running, reports
itself paused on ``/metrics`` and dead-letters nothing; once the database
accepts connections again the worker resumes where it stopped, and the
state is exactly what the events mean: every balance, every reserved sku,
one ``consumed_event`` row per distinct event per consumer, nothing parked,
nothing in ``failed_event`` and nothing on the DLT.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.demo.workload import generate
from dlq.topics import dlt_topic
from tests.integration.support.dlq import records
from tests.integration.support.http import get
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.state import Database, every_consumer
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


async def _allow_connections(database_url: str, allowed: bool) -> None:
    """Open or close ``database_url``'s database; closing also ends its sessions."""
    url = make_url(database_url)
    admin = await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database="postgres"
    )
    try:
        await admin.execute(
            f'ALTER DATABASE "{url.database}" WITH ALLOW_CONNECTIONS {str(allowed).lower()}'
        )
        if not allowed:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                url.database,
            )
    finally:
        await admin.close()


async def test_the_worker_pauses_while_the_database_is_away_and_loses_nothing(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    workload = generate(orders=200, users=30, skus=10, seed=77)
    half = len(workload.messages) // 2
    worker = workers.start(
        database_url, env={"INFRA_RETRY_INITIAL_SECONDS": "0.2", "INFRA_RETRY_MAX_SECONDS": "1"}
    )
    await topic.send(workload.messages[:half])
    await topic.drained(workers=[worker], within=90)

    await _allow_connections(database_url, False)
    try:
        await topic.send(workload.messages[half:])

        async def metrics() -> str:
            return (await get(worker, "/metrics"))[1]

        await eventually(
            metrics,
            lambda body: "effectively_once_paused 1.0" in body,
            what="the worker to report itself paused",
            within=45,
            workers=[worker],
        )
        await asyncio.sleep(2)
        assert worker.process.poll() is None, "the worker must keep running through the outage"
        assert await topic.lag(), "nothing may be committed while the database is away"
    finally:
        await _allow_connections(database_url, True)

    await topic.drained(workers=[worker], within=90)
    expected = workload.expected
    assert await db.balances() == expected.points
    assert await db.reserved() == expected.reserved
    assert await db.consumed_counts() == every_consumer(expected.distinct_events)
    assert await db.parked_count() == 0
    assert await db.failures() == []
    assert await records(topic.stream, dlt_topic(topic.stream.topic)) == []
