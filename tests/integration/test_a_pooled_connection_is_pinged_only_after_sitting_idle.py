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

from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import ping
from app.db.engine import create_engine
from app.monitoring import readiness
from app.pipeline.classify import is_infrastructure

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def _session_pid(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def _terminate(engine: AsyncEngine, pid: int) -> None:
    async with engine.connect() as conn:
        await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})


def _engines(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[AsyncEngine, AsyncEngine, Clock, list[Any]]:
    """The engine under test (one pooled connection, a clock of the test's, pings counted),
    and a second one to end its sessions from."""
    clock = Clock()
    real = ping.ping_when_idle
    monkeypatch.setattr(
        "app.db.engine.ping_when_idle", lambda engine: real(engine, ping.IDLE_SECONDS, clock)
    )
    engine = create_engine(database_url, pool_size=1)
    pings: list[Any] = []
    dialect = engine.sync_engine.dialect
    do_ping = dialect.do_ping

    def counted(dbapi_connection: Any) -> bool:
        pings.append(dbapi_connection)
        return bool(do_ping(dbapi_connection))

    dialect.do_ping = counted  # type: ignore[method-assign]
    return engine, create_engine(database_url), clock, pings


async def test_only_a_connection_that_sat_idle_is_pinged(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, _admin, clock, pings = _engines(database_url, monkeypatch)
    try:
        first = await _session_pid(engine)  # a new connection: not pinged
        clock.now += ping.IDLE_SECONDS / 2
        assert await _session_pid(engine) == first
        assert pings == []

        clock.now += ping.IDLE_SECONDS
        assert await _session_pid(engine) == first
        assert len(pings) == 1
    finally:
        await engine.dispose()
        await _admin.dispose()


async def test_a_connection_that_died_while_idle_is_replaced_at_checkout(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, admin, clock, pings = _engines(database_url, monkeypatch)
    try:
        dead = await _session_pid(engine)
        await _terminate(admin, dead)
        clock.now += ping.IDLE_SECONDS

        replaced = await _session_pid(engine)  # no error: the ping found it dead

        assert len(pings) == 1
        assert replaced != dead
    finally:
        await engine.dispose()
        await admin.dispose()


async def test_a_connection_that_died_a_moment_ago_fails_as_infrastructure_once(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, admin, _clock, pings = _engines(database_url, monkeypatch)
    try:
        dead = await _session_pid(engine)
        await _terminate(admin, dead)

        with pytest.raises(Exception) as lost:
            await _session_pid(engine)

        assert is_infrastructure(lost.value), repr(lost.value)
        assert pings == []
        assert await _session_pid(engine) != dead
    finally:
        await engine.dispose()
        await admin.dispose()


async def test_the_readiness_check_asks_again_on_a_new_connection(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, admin, _clock, _pings = _engines(database_url, monkeypatch)
    try:
        dead = await _session_pid(engine)
        await _terminate(admin, dead)

        check = await readiness.database(engine)

        assert check.ok, check.detail
        assert await _session_pid(engine) != dead
    finally:
        await engine.dispose()
        await admin.dispose()
