"""A statement whose server session is gone fails within seconds; a busy session is left alone.

Contract, on PostgreSQL (asyncpg) and MariaDB (aiomysql), with the default deadlines
(statement timeout 30 s, response deadline 35 s), through ``chaos.proxy``:

- a statement sent while the proxy blackholes the connection, whose connection is then
  abandoned as a failover abandons it (the server frees the session, the client hears
  nothing, ever) and new connections work again, fails within ``FAILS_WITHIN`` seconds of
  the abandon, not at its 35 s response deadline: the session probe finds the session
  gone and drops the connection. The next statement runs on a new connection;
- a session that is alive and busy (sleeping for 15 s, or waiting 15 s for a row lock
  another connection holds) is looked up and left alone: both statements end with their
  answer, after the 15 s.

Before the probe, the abandoned statement waited its whole response deadline (35 s).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy import text

from app.db.engine import create_engine
from chaos.proxy import TcpProxy
from tests.integration.support.proxies import through

pytestmark = pytest.mark.integration

BLACKHOLE_SECONDS = 3.0
FAILS_WITHIN = 10.0
BUSY_SECONDS = 15


@pytest.fixture(params=["postgresql", "mariadb"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def timed(work: Callable[[], Awaitable[object]]) -> tuple[float, object]:
    started = time.monotonic()
    try:
        value = await asyncio.wait_for(work(), 60)
    except Exception as exc:  # what the call raised is the point
        return time.monotonic() - started, exc
    return time.monotonic() - started, value


async def test_a_statement_on_an_abandoned_connection_fails_within_seconds(
    database_url: str, proxy: TcpProxy
) -> None:
    engine = create_engine(through(database_url, proxy), 1)
    try:
        async with engine.connect() as conn:
            await conn.scalar(text("SELECT 1"))
            proxy.blackhole()
            waiting = asyncio.ensure_future(timed(lambda: conn.scalar(text("SELECT 2"))))
            await asyncio.sleep(BLACKHOLE_SECONDS)
            assert not waiting.done()
            await asyncio.to_thread(proxy.abandon)
            abandoned_at = time.monotonic()
            await asyncio.to_thread(proxy.heal)
            _, raised = await waiting
            after_abandon = time.monotonic() - abandoned_at
        assert isinstance(raised, Exception), raised
        assert after_abandon < FAILS_WITHIN, f"{after_abandon:.1f} s after the abandon: {raised!r}"

        async with engine.connect() as conn:
            assert await asyncio.wait_for(conn.scalar(text("SELECT 3")), 30) == 3
    finally:
        proxy.heal()
        await engine.dispose()


SLEEP = {"postgresql": "SELECT 7 FROM pg_sleep(:s)", "mariadb": "SELECT 7 + SLEEP(:s)"}


async def test_a_busy_session_is_probed_and_left_alone(
    database_url: str, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="effectively_once.db")
    engine = create_engine(database_url, 3)
    holder = create_engine(database_url, 1)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE stock (sku VARCHAR(16) PRIMARY KEY, n INT)"))
            await conn.execute(text("INSERT INTO stock VALUES ('a', 1)"))

        async def sleep() -> object:
            async with engine.connect() as conn:
                return await conn.scalar(text(SLEEP[backend]), {"s": BUSY_SECONDS})

        async def wait_for_the_lock() -> object:
            async with engine.begin() as conn:
                await conn.execute(text("UPDATE stock SET n = n + 1 WHERE sku = 'a'"))
                return await conn.scalar(text("SELECT n FROM stock WHERE sku = 'a'"))

        async with holder.begin() as held:
            await held.execute(text("SELECT n FROM stock WHERE sku = 'a' FOR UPDATE"))
            slept = asyncio.ensure_future(timed(sleep))
            locked = asyncio.ensure_future(timed(wait_for_the_lock))
            await asyncio.sleep(BUSY_SECONDS)
        (slept_for, slept_value), (locked_for, locked_value) = await asyncio.gather(slept, locked)
        assert slept_value == 7 and slept_for >= BUSY_SECONDS - 1
        assert locked_value == 2 and locked_for >= BUSY_SECONDS - 1
        probed = [r for r in caplog.records if "busy" in r.getMessage()]
        assert probed, "the waiting sessions were never probed"
    finally:
        await holder.dispose()
        await engine.dispose()
