"""/ready follows the database; /health only says the process is alive.

Contract: a worker answers ``/ready`` with 200 once its database answers and its
partitions are assigned. When the database goes away (here: its connections cut and new
ones refused, its data kept, as in an outage) ``/ready`` answers 503 within seconds, with
a JSON body that names ``database`` as the failed check and the others as passing
(``progress`` too: nothing waits), while ``/health`` still answers 200. When the
database is back, ``/ready`` is 200 again, without a restart. A worker whose
database does not answer at all (nothing listens on its port) is alive, not
ready, and on ``/metrics`` paused on the ``database`` dependency while it waits
to migrate.
"""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.demo.broker import free_port
from tests.integration.support.databases import POSTGRES_SERVER
from tests.integration.support.http import get_json, metric_families, readiness_is
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration


async def on_postgres_server(statement: str) -> None:
    server = make_url(POSTGRES_SERVER)
    conn = await asyncpg.connect(
        host=server.host,
        port=server.port or 5432,
        user=server.username,
        password=server.password,
        database="postgres",
    )
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def test_ready_is_503_while_the_database_is_gone_and_200_when_it_is_back(
    topic: OrderTopic, workers: Workers, database_url: str
) -> None:
    name = make_url(database_url).database
    worker = workers.start(database_url)
    body = await readiness_is(worker, 200, within=60)
    assert body["failed"] == []
    assert set(body["checks"]) == {
        "database",
        "broker",
        "start",
        "partitions",
        "progress",
        "retry tiers",
        "relay",
    }
    assert await get_json(worker, "/health") == (200, {"status": "alive"})

    await on_postgres_server(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    try:
        await on_postgres_server(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
        )
        body = await readiness_is(worker, 503, within=15)
        assert body["status"] == "not ready"
        assert body["failed"] == ["database"]
        assert body["checks"]["broker"]["ok"] and body["checks"]["partitions"]["ok"]
        assert body["checks"]["progress"]["ok"]  # nothing waits: no stall
        # 'database "..." is not currently accepting connections'
        assert name in body["checks"]["database"]["detail"]
        assert (await get_json(worker, "/health"))[0] == 200
    finally:
        await on_postgres_server(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    body = await readiness_is(worker, 200, within=15)
    assert body["checks"]["database"]["ok"]
    assert worker.alive


async def test_a_worker_without_its_database_is_alive_paused_and_not_ready(
    topic: OrderTopic, workers: Workers, database_url: str
) -> None:
    nowhere = f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/nothing"
    worker = workers.start(database_url, env={"DATABASE_URL": nowhere})
    body = await readiness_is(worker, 503, within=60)
    assert "database" in body["failed"]
    assert not body["checks"]["database"]["ok"]
    assert (await get_json(worker, "/health"))[0] == 200

    async def pause_state() -> dict[str, float]:
        found = {}
        for family in await metric_families(worker):
            for s in family.samples:
                if s.name == "effectively_once_paused" or s.labels.get("dependency") == "database":
                    found[s.name] = s.value
        return found

    state = await eventually(
        pause_state,
        lambda found: (
            found.get("effectively_once_paused") == 1
            and found.get("effectively_once_infrastructure_pauses_total", 0) >= 1
        ),
        what="the worker to report a pause on the database",
        within=30,
        workers=[worker],
    )
    assert state["effectively_once_infrastructure_pause_seconds_total"] > 0
    assert worker.alive
