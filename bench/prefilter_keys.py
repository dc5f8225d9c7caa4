"""The Redis the prefilter scenarios use: check it answers, and remove the keys they left.

Every Redis-on worker of a run gets ``PREFILTER_KEY_PREFIX=eo-bench:<run tag>``,
so whatever the framework puts after that prefix, the run's keys are exactly
those under it.
"""

from __future__ import annotations

from typing import Any

from bench.session import BenchError

DELETE_CHUNK = 1_000


def _client(url: str) -> Any:
    from redis.asyncio import Redis  # optional dependency: needed only for these scenarios

    return Redis.from_url(url, socket_connect_timeout=3)


async def require_redis(url: str) -> None:
    """Fail now, not after minutes of measuring, if Redis does not answer."""
    from redis.exceptions import RedisError

    client = _client(url)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        raise BenchError(
            f"Redis at {url} does not answer ({exc!r}); start it, pass --redis-url, "
            "or leave storm-redis out of --scenarios"
        ) from exc
    finally:
        await client.aclose()


async def forget(url: str, prefix: str) -> int:
    """Delete every key under ``prefix:``; returns how many there were."""
    client = _client(url)
    deleted = 0
    try:
        batch: list[Any] = []
        async for key in client.scan_iter(match=f"{prefix}:*", count=DELETE_CHUNK):
            batch.append(key)
            if len(batch) >= DELETE_CHUNK:
                deleted += await client.unlink(*batch)
                batch.clear()
        if batch:
            deleted += await client.unlink(*batch)
    finally:
        await client.aclose()
    return deleted
