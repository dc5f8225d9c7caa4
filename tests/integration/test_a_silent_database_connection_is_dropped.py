"""A database connection that stops answering is given up on within its deadline and dropped.

Contract, on PostgreSQL (asyncpg) and MariaDB (aiomysql), through a TCP proxy
that stops forwarding without closing anything (``chaos.proxy``'s blackhole):
a statement on a connection made before the blackhole raises ``TimeoutError``
within the response deadline (plus the driver's close) instead of waiting
forever; connecting during the blackhole fails within the connect deadline;
and once the proxy forwards again the next statement works, on a new
connection (the silent one was closed, not returned to the pool). The server
side gets its statement timeout on every connection. SQLite has no network
and is not concerned.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.db.engine import create_engine
from app.db.timeouts import DbTimeouts
from chaos.proxy import TcpProxy

pytestmark = pytest.mark.integration

TIMEOUTS = DbTimeouts(connect=1.5, statement=1.0, response=1.5)
# The deadline, the driver's own close of a connection that does not answer (asyncpg
# tries a graceful close for 2 s), and a margin for a loaded machine.
GIVES_UP_WITHIN = TIMEOUTS.response + 2.0 + 3.0


@pytest.fixture(params=["postgresql", "mariadb"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def proxy(database_url: str) -> Iterator[TcpProxy]:
    url = make_url(database_url)
    with TcpProxy(url.host or "127.0.0.1", url.port or _DEFAULT_PORTS[url.get_backend_name()]) as p:
        yield p


_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}


async def timed(work: Callable[[], Awaitable[object]]) -> tuple[float, BaseException | None]:
    started = time.monotonic()
    try:
        await asyncio.wait_for(work(), 60)
    except BaseException as exc:  # what the call raised is the point
        return time.monotonic() - started, exc
    return time.monotonic() - started, None


async def test_a_blackholed_connection_times_out_is_dropped_and_the_next_one_works(
    database_url: str, proxy: TcpProxy, backend: str
) -> None:
    through = make_url(database_url).set(host="127.0.0.1", port=proxy.port)
    engine = create_engine(through.render_as_string(hide_password=False), 1, TIMEOUTS)
    try:
        async with engine.connect() as conn:
            timeout = await conn.scalar(text(STATEMENT_TIMEOUT[backend]))
        assert float(timeout) == STATEMENT_TIMEOUT_VALUE[backend]
        before = proxy.stats.connections

        async def select_one() -> object:
            async with engine.connect() as conn:
                return await conn.scalar(text("SELECT 1"))

        async with engine.connect() as conn:
            await conn.scalar(text("SELECT 1"))
            proxy.blackhole()
            took, raised = await timed(lambda: conn.scalar(text("SELECT 2")))
        assert isinstance(raised, TimeoutError), raised
        assert took < GIVES_UP_WITHIN

        took, raised = await timed(select_one)  # a new connection: the pool holds none
        assert isinstance(raised, TimeoutError | OSError), raised
        assert took < GIVES_UP_WITHIN

        proxy.heal()
        took, raised = await timed(select_one)
        assert raised is None
        assert proxy.stats.connections > before + 1
    finally:
        proxy.heal()
        await engine.dispose()


STATEMENT_TIMEOUT = {
    "postgresql": "SELECT setting FROM pg_settings WHERE name = 'statement_timeout'",
    "mariadb": "SELECT @@max_statement_time",
}
STATEMENT_TIMEOUT_VALUE = {"postgresql": 1000.0, "mariadb": 1.0}
