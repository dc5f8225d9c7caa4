"""What the prefilter uses of a Redis client, as a protocol: MGET and a server-side script.

``redis.asyncio.Redis`` satisfies it (mypy checks that in ``connect``), and so
does the in-memory fake of the unit tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, Protocol


class RedisScript(Protocol):
    """A Lua script the client runs by its SHA (``EVALSHA``), loading it first if needed."""

    def __call__(
        self, keys: Sequence[str] | None = None, args: Sequence[Any] | None = None
    ) -> Awaitable[Any]:
        """Run the script on ``keys`` with ``args``; its reply."""
        ...


class RedisClient(Protocol):
    """What the prefilter needs from a Redis client."""

    def mget(self, keys: Sequence[str]) -> Awaitable[list[bytes | str | None]]:
        """``MGET keys``: one value (or ``None``) per key, in order."""
        ...

    def register_script(self, script: str) -> RedisScript:
        """``script``, callable; nothing is sent until it is called."""
        ...

    async def aclose(self) -> None:
        """Close the client's connections."""
        ...


def connect(url: str, connect_timeout_seconds: float) -> RedisClient:
    """A redis-py client for ``url`` that never retries.

    Nothing connects yet (a Redis that is down at start-up delays nothing). Retries
    are off: a failed call falls back to the database at once, and the breaker,
    not the client, decides when Redis is worth asking again. Reads keep redis-py's
    socket timeout only as a backstop: the prefilter bounds each call with a
    deadline that grows with the batch, which a fixed socket timeout cannot do.
    """
    from redis.asyncio import Redis  # optional dependency: needed only with REDIS_URL
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    return Redis.from_url(
        url, socket_connect_timeout=connect_timeout_seconds, retry=Retry(NoBackoff(), 0)
    )
