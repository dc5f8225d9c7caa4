"""aiomysql connections whose handshake and every answer they wait for are bounded.

aiomysql's ``connect_timeout`` covers opening the TCP connection only, and it has
no timeout for a command: a server that stops answering (see ``timeouts``) holds
the caller forever. Used through SQLAlchemy's ``async_creator_fn``.

A connection asked to use TLS (``ssl=``) never goes on without it: aiomysql would log in
in plaintext to a server that does not offer TLS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiomysql
from pymysql.constants import CLIENT, CR
from pymysql.err import OperationalError


def bounded_connect(
    connect_timeout: float, response_timeout: float
) -> Callable[..., Awaitable[aiomysql.Connection]]:
    """A replacement of ``aiomysql.connect`` (same arguments) with both bounds."""

    async def connect(*args: Any, **kwargs: Any) -> aiomysql.Connection:
        kwargs.setdefault("connect_timeout", connect_timeout)
        connection = BoundedConnection(*args, **kwargs)
        connection.response_timeout = response_timeout or None
        try:
            async with asyncio.timeout(connect_timeout):
                await connection._connect()
        except BaseException:
            connection.close()
            raise
        return connection

    return connect


class BoundedConnection(aiomysql.Connection):
    """aiomysql's connection, its two ways of reading the server's answer to a command
    bounded by ``response_timeout``. A timeout cancels the read, which closes the
    connection (aiomysql's own reaction to a cancelled read)."""

    response_timeout: float | None = None

    async def _request_authentication(self) -> None:
        if self._ssl_context is not None and not self.server_capabilities & CLIENT.SSL:
            raise OperationalError(
                CR.CR_SSL_CONNECTION_ERROR,
                "the server does not offer TLS, which the database URL asks for",
            )
        await super()._request_authentication()

    async def _read_query_result(self, unbuffered: bool = False) -> None:
        async with asyncio.timeout(self.response_timeout):
            await super()._read_query_result(unbuffered)

    async def _read_ok_packet(self) -> bool:
        async with asyncio.timeout(self.response_timeout):
            return bool(await super()._read_ok_packet())
