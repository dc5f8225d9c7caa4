"""A connection the pool pings before handing it out counts as waiting for the ping's answer.

SQLAlchemy's pool pings a connection (``pool_pre_ping``) before it fires the connection's
``checkout`` event. A connection handed out again within a jiffy of its last answer (the
next batch, at once) sent its ping as fast as that answer came, so the kernel's times
could not tell it waiting; not checked out yet, it did not count as waiting at all, and
the session watch never probed it. In the chaos soak such pings, sent into the database
blackhole, waited out their whole 35 s response deadline (60 s without progress in three
of fifteen short runs).

Contract (``app.db.liveness.SessionWatch.listen``): the engine's ping marks its
connection as checked out before the ping is sent, so the watch counts it as waiting
from then on.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from app.db import liveness
from app.db.liveness import SessionWatch
from app.db.timeouts import DEFAULT_TIMEOUTS

NOW = 1_000.0
SINCE = 5.0  # the ping went out as the last answer came in, this long ago


class Transport:
    def is_closing(self) -> bool:
        return False


async def test_a_ping_marks_its_connection_checked_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(liveness, "last_traffic", lambda _sock: (SINCE, SINCE))
    engine = create_async_engine("sqlite+aiosqlite://")
    pinged: list[Any] = []
    engine.sync_engine.dialect.do_ping = lambda connection: pinged.append(connection) or True  # type: ignore[method-assign]
    clock = [NOW - SINCE]
    watch = SessionWatch(
        "postgresql+asyncpg://probe@127.0.0.1:1/db",
        "postgresql",
        DEFAULT_TIMEOUTS,
        clock=lambda: clock[0],
    )
    watch.listen(engine)
    dbapi_connection = object()
    watched = liveness._Connection(7, Transport(), None)
    watch._connections[id(dbapi_connection)] = watched
    assert watched.silent_for(NOW) == (0.0, False)  # idle in the pool: not waiting

    assert engine.sync_engine.dialect.do_ping(dbapi_connection) is True

    assert pinged == [dbapi_connection]
    assert watched.checked_out_at == NOW - SINCE
    clock[0] = NOW
    assert watched.silent_for(NOW) == (SINCE, False)  # waiting, the ping unanswered
    await engine.dispose()
