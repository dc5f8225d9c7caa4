"""One connection that let its deadline pass retires every pooled connection made before it.

Contract, on PostgreSQL and MariaDB through ``chaos.proxy``: when the connections of
a pool go silent together (a blackhole, then abandoned as a failover abandons them)
and a statement on one of them raises ``TimeoutError`` at its response deadline, the
pool drops every connection made before that moment, so the next checkout connects
anew (after closing the old one) instead of pre-pinging another silent connection for
a whole deadline.
Before, each idle silent connection cost a deadline of its own, one after another:
a worker of the cluster soak spent 142 s, four deadlines, recording one poison record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.db.engine import create_engine
from app.db.timeouts import DbTimeouts
from chaos.proxy import TcpProxy

pytestmark = pytest.mark.integration

TIMEOUTS = DbTimeouts(connect=1.5, statement=1.0, response=1.5)
POOL = 3
# The connection replaced at checkout is closed first (asyncpg tries a graceful close for
# 2 s), and a margin for a loaded machine; well below the two deadlines it cost before.
REPLACED_WITHIN = 2.0 + 3.0
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}


@pytest.fixture(params=["postgresql", "mariadb"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def proxy(database_url: str) -> Iterator[TcpProxy]:
    url = make_url(database_url)
    with TcpProxy(url.host or "127.0.0.1", url.port or _DEFAULT_PORTS[url.get_backend_name()]) as p:
        yield p


async def test_the_next_checkout_does_not_wait_on_another_silent_connection(
    database_url: str, proxy: TcpProxy
) -> None:
    through = make_url(database_url).set(host="127.0.0.1", port=proxy.port)
    engine = create_engine(through.render_as_string(hide_password=False), POOL, TIMEOUTS)
    try:
        async with engine.connect() as busy:
            await busy.scalar(text("SELECT 1"))
            idle = [await engine.connect() for _ in range(POOL - 1)]
            for conn in idle:
                await conn.scalar(text("SELECT 1"))
            for conn in idle:
                await conn.close()  # back to the pool, open
            proxy.blackhole()
            await asyncio.to_thread(proxy.abandon)  # every connection silent for good
            proxy.heal()  # new connections work
            with pytest.raises(TimeoutError):
                await busy.scalar(text("SELECT 2"))

        started = time.monotonic()
        async with engine.connect() as conn:
            assert await asyncio.wait_for(conn.scalar(text("SELECT 3")), 30) == 3
        assert time.monotonic() - started < REPLACED_WITHIN
    finally:
        proxy.heal()
        await engine.dispose()
