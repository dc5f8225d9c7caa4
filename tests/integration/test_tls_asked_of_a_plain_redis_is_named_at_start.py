"""``rediss://`` (TLS) to a Redis that speaks plain Redis is a mistake named at start.

Contract: the check the worker makes before it starts (``app.prefilter.client.refusal``)
says, in one line naming the address and nothing else of the URL, that the server
speaks plain Redis while the URL asks for TLS, and what to change. Before, the TLS
handshake waited for an answer that never came, as a silent server's would: the check
passed, and the prefilter timed out on every call. A server that answers nothing at
all is still not refused (down is not a mistake).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.prefilter.client import refusal

pytestmark = pytest.mark.integration

WITHIN = 2.0


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A port whose server accepts connections and never answers."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def test_tls_asked_of_a_plain_redis_is_refused_with_what_to_change(redis_url: str) -> None:
    tls = "rediss://:secret-password@" + redis_url.split("://", 1)[1]

    said = await refusal(tls, WITHIN)

    assert said is not None
    assert said.startswith("cannot use Redis at 127.0.0.1:6379 (REDIS_URL): it speaks plain")
    assert "use redis://" in said, said
    assert "secret-password" not in said


async def test_a_server_that_answers_nothing_is_not_refused(silent_port: int) -> None:
    assert await refusal(f"rediss://127.0.0.1:{silent_port}/0", WITHIN) is None
