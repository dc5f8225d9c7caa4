"""What the prefilter uses of a Redis client, as a protocol: MGET and a server-side script.

``redis.asyncio.Redis`` satisfies it (mypy checks that in ``connect``), and so
does the in-memory fake of the unit tests. ``refusal`` tells, at start, a Redis that
refuses the URL's settings (its TLS certificate not trusted or not naming the host,
a TLS file that cannot be read, the login refused, TLS asked of a server that speaks
plain Redis: a mistake to mend) from one that is down or silent (the prefilter fails
open and its breaker waits for it).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit

from app.certificate_words import certificate_refused


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


async def refusal(url: str, within: float) -> str | None:
    """Why the Redis at ``url`` refuses its settings, in one line naming its address but
    nothing else of the URL (it may hold a password); None when it answers ``PING``, or
    cannot be reached or does not answer within ``within`` seconds (down is not refused)."""
    from redis.asyncio import Redis
    from redis.exceptions import AuthenticationError, ResponseError

    parts = urlsplit(url)
    where = f"cannot use Redis at {parts.hostname}:{parts.port or 6379} (REDIS_URL)"
    client = Redis.from_url(url, socket_connect_timeout=within, socket_timeout=within)
    try:
        async with asyncio.timeout(within):
            await client.ping()
    except AuthenticationError as exc:
        return f"{where}: the login was refused ({exc}); check the user and password in REDIS_URL"
    except ResponseError as exc:
        if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
            return f"{where}: the login was refused ({exc}); check the password in REDIS_URL"
        if "DB index" in str(exc):  # SELECT of a database the server does not have
            return f"{where}: it has no such database ({exc}); check the /<db> of REDIS_URL"
        return None
    except Exception as exc:
        why = _tls_refusal(exc, parts.hostname or "") if parts.scheme == "rediss" else None
        if why is None and parts.scheme == "rediss":
            why = await _plain_instead(parts.hostname or "localhost", parts.port or 6379, within)
        return f"{where}: {why}" if why else None
    finally:
        await client.aclose()
    return None


async def _plain_instead(host: str, port: int, within: float) -> str | None:
    """Why a ``rediss://`` URL fails when the server at ``host:port`` speaks plain Redis:
    its TLS handshake then waits for an answer that never comes, as a silent server's
    would, but a plain ``PING`` is answered. None when it is not answered either."""
    try:
        async with asyncio.timeout(within):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(b"PING\r\n")
                answer = await reader.readline()
            finally:
                writer.close()
    except (OSError, TimeoutError):
        return None
    if not answer.startswith((b"+PONG", b"-NOAUTH", b"-WRONGPASS")):
        return None
    return (
        "it speaks plain Redis, without TLS, and REDIS_URL's rediss:// asks for TLS; "
        "use redis://, or turn TLS on at the server"
    )


def _tls_refusal(exc: BaseException, host: str) -> str | None:
    """The TLS reason in ``exc``'s chain, in words; None when there is none."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            reason = seen.verify_message or str(seen)
            return certificate_refused(
                seen.verify_code,
                reason,
                misnamed=f"its certificate does not name {host} ({reason}); connect by a name "
                "it has",
                untrusted=f"its certificate is not trusted ({reason}); ssl_ca_certs in "
                "REDIS_URL must name the CA that signed it",
            )
        if isinstance(seen, ssl.SSLError):
            return f"TLS failed ({seen.reason or seen}); check the ssl_* options of REDIS_URL"
        if isinstance(seen, FileNotFoundError | PermissionError):
            return f"a TLS file of REDIS_URL cannot be read ({seen.strerror})"
        seen = seen.__cause__ or seen.__context__
    return None
