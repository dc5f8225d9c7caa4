"""The worker and the relay run through PgBouncer in transaction mode with ``pgbouncer=true``.

Contract: with a PgBouncer (``pool_mode = transaction``, fewer server connections than
its clients hold) between them and PostgreSQL, and ``?pgbouncer=true`` on the URL:

- the migrations run, a worker applies a small workload exactly (a duplicate included)
  and its in-worker relay ships the dead letter of a poison record;
- ``python -m app relay`` ships the rows an order service wrote to the outbox, each once;
- nothing the framework sets stays on a server connection for the next client: a
  plain client through the pooler afterwards finds the server's own
  ``statement_timeout`` and ``plan_cache_mode``.

Without the parameter the same URL fails at the first statements (asyncpg's named
prepared statements land on another client's server connection): an infrastructure
failure (a pause in place, never a dead letter), and the first connection says, in one
warning, that a pooler is in between and ``pgbouncer=true`` is what transaction mode needs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.db.engine import create_engine
from app.db.migrate import upgrade_to_head
from app.db.urls import normalise_database_url
from app.pipeline.classify import is_infrastructure
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.pgbouncer import PgBouncer
from tests.integration.support.small_run import relay_ships_the_outbox, worker_applies_a_few_orders
from tests.integration.support.state import Database
from tests.integration.support.workers import Stream, Workers

pytestmark = pytest.mark.integration


@pytest.fixture
async def database_name(make_database: Callable[[str], Awaitable[str]]) -> str:
    """A fresh database on the shared PostgreSQL, behind the pooler."""
    return (await make_database("postgresql")).rsplit("/", 1)[1]


async def test_worker_and_relay_work_through_pgbouncer(
    pgbouncer: PgBouncer,
    database_name: str,
    stream: Stream,
    topic: OrderTopic,
    workers: Workers,
    tmp_path: Path,
) -> None:
    pooled = pgbouncer.url(database_name)
    url = normalise_database_url(pooled)
    await upgrade_to_head(url, ["handlers"])
    worker = workers.start(pooled)
    db = Database(url)
    try:
        await worker_applies_a_few_orders(worker, stream, topic, db)
    finally:
        await db.dispose()
    assert worker.stop() == 0
    assert "prepared statement" not in worker.log(), worker.tail()
    await relay_ships_the_outbox(stream, url, tmp_path, relay_url=pooled)

    [pool] = [p for p in pgbouncer.admin("SHOW POOLS") if p["database"] == database_name]
    assert pool["pool_mode"] == "transaction", pool
    await nothing_left_on_the_server_connections(pgbouncer, database_name)


async def nothing_left_on_the_server_connections(pgbouncer: PgBouncer, database: str) -> None:
    """Every server connection of the pool, as the next client finds it, holds the server's
    defaults (the pool has ``POOL_SIZE`` of them: one transaction each, held together)."""
    clients = [await pgbouncer.connect(database) for _ in range(3)]
    try:
        found = set()
        for client in clients:
            await client.execute("BEGIN")
        for client in clients:
            found.add(
                (
                    await client.fetchval("SHOW statement_timeout"),
                    await client.fetchval("SHOW plan_cache_mode"),
                )
            )
        assert found == {("0", "auto")}
    finally:
        for client in clients:
            await client.close()


async def test_without_the_parameter_prepared_statements_fail(
    pgbouncer: PgBouncer, database_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = normalise_database_url(pgbouncer.url(database_name).replace("?pgbouncer=true", ""))
    engine = create_engine(url, pool_size=5)

    async def one(n: int) -> None:
        async with engine.begin() as conn:
            await conn.execute(text("SELECT count(*) FROM pg_class WHERE relpages > :n"), {"n": n})

    try:
        with (
            caplog.at_level(logging.WARNING, logger="effectively_once.db"),
            pytest.raises(DBAPIError, match="prepared statement") as failed,
        ):
            for _ in range(10):  # five clients on three server connections: collide at once
                await asyncio.gather(*(one(n) for n in range(100)))
    finally:
        await engine.dispose()
    # A pause in place, never an event's fault (no DLT); the connect said what to add.
    assert is_infrastructure(failed.value)
    hints = [r.getMessage() for r in caplog.records if "pgbouncer=true" in r.getMessage()]
    assert len(hints) == 1, hints
