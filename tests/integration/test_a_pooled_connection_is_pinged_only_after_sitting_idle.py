"""A pooled connection is pinged at checkout only after it sat idle; one that died is replaced.

Contract (``app.db.ping``, on a real PostgreSQL):

- a connection handed out again right after it went back to the pool is not pinged (its
  batch's statements are the first to reach the server); one that sat in the pool
  ``IDLE_SECONDS`` or longer is pinged before it is handed out;
- a connection whose session the server ended while it sat idle is found dead by that
  ping and replaced: the caller's statement runs on a new session, without an error;
- one that died a moment after it went back (not pinged) fails its first statement as a
  lost connection, which the pipeline takes for infrastructure (it pauses and runs the
  batch again), and the next checkout gets a new, working session; ``/ready``'s database
  check asks again on that new session, so one lost connection neither turns it red nor
  hides what a new connection meets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import ping
from app.db.engine import create_engine
from app.monitoring import readiness
from app.pipeline.classify import is_infrastructure

pytestmark = pytest.mark.integration


@dataclass
class Pool:
    """The engine under test (one pooled connection, the test's clock, its pings counted),
    and a second engine to end its sessions from."""

    engine: AsyncEngine
    admin: AsyncEngine
    now: float
    pings: list[Any] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    async def session_pid(self) -> int:
        async with self.engine.connect() as conn:
            return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())

    async def end_session(self, pid: int) -> None:
        async with self.admin.connect() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})


@pytest.fixture
async def pool(database_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Pool]:
    clocks: list[Any] = []
    real = ping.ping_when_idle
    monkeypatch.setattr(
        "app.db.engine.ping_when_idle",
        lambda engine: real(engine, ping.IDLE_SECONDS, lambda: clocks[0]()),
    )
    under_test = Pool(create_engine(database_url, pool_size=1), create_engine(database_url), 1e3)
    clocks.append(under_test.clock)
    dialect = under_test.engine.sync_engine.dialect
    do_ping = dialect.do_ping

    def counted(dbapi_connection: Any) -> bool:
        under_test.pings.append(dbapi_connection)
        return bool(do_ping(dbapi_connection))

    dialect.do_ping = counted  # type: ignore[method-assign]
    yield under_test
    await under_test.engine.dispose()
    await under_test.admin.dispose()


async def test_only_a_connection_that_sat_idle_is_pinged(pool: Pool) -> None:
    first = await pool.session_pid()  # a new connection: not pinged
    pool.now += ping.IDLE_SECONDS / 2
    assert await pool.session_pid() == first
    assert pool.pings == []

    pool.now += ping.IDLE_SECONDS
    assert await pool.session_pid() == first
    assert len(pool.pings) == 1


async def test_a_connection_that_died_while_idle_is_replaced_at_checkout(pool: Pool) -> None:
    dead = await pool.session_pid()
    await pool.end_session(dead)
    pool.now += ping.IDLE_SECONDS

    replaced = await pool.session_pid()  # no error: the ping found it dead

    assert len(pool.pings) == 1
    assert replaced != dead


async def test_a_connection_that_died_a_moment_ago_fails_as_infrastructure_once(
    pool: Pool,
) -> None:
    dead = await pool.session_pid()
    await pool.end_session(dead)

    with pytest.raises(Exception) as lost:
        await pool.session_pid()

    assert is_infrastructure(lost.value), repr(lost.value)
    assert pool.pings == []
    assert await pool.session_pid() != dead


async def test_the_readiness_check_asks_again_on_a_new_connection(pool: Pool) -> None:
    dead = await pool.session_pid()
    await pool.end_session(dead)

    check = await readiness.database(pool.engine)

    assert check.ok, check.detail
    assert await pool.session_pid() != dead
