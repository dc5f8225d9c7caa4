"""The prefilter: which events Redis already knows a consumer applied.

Keys are ``{namespace}:{consumer}:{event_id}`` with a TTL; the value is the event
the id stood for, as the dedup record keeps it: its aggregate type and id and its
version, a JSON array (``["order","o-1",3]``). A record is skipped only when it is
that event: one reusing the id for another goes to the database, which dead-letters
it (``EventIdReused``). A value that is no such array (``1``, as an earlier release
wrote) is no answer. ``namespace`` must name the database whose dedup records the
keys mirror (at least the app id): two deployments, or a database dropped and
created again, must never read each other's keys, or an event would be skipped that
this database never applied.

Invariants:

- ``remember`` is called only after the transaction that applied the events
  committed, so Redis never knows an event the database does not. Expiry, a
  flush or a lost write only ever send an event to the database's dedup again.
- ``known`` and ``remember`` never raise and never take longer than their
  deadline: on any failure ``known`` returns "nothing known" (fail open) and
  ``remember`` drops the write.

Both calls cost the worker little per event id: the lookup is one MGET (its
reply parsed by hiredis, about 1 us per value; redis-py's pure-Python parser,
without hiredis, about 4-8 us), the write one script call that sets every key
with its value and TTL inside Redis (about 2 us per id, most of it Redis's own work;
a pipeline of SETs costs 15-25 us per id in redis-py's command packing alone,
which three consumers pay three times per event).

The deadline of a call is ``timeout_seconds`` (what a Redis that answers at once
may take, the round trip included) plus ``PER_ID_SECONDS`` per event id, so
that a batch of a few thousand events does not fail open for its size alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import orjson

from app.pipeline.decode import EventOf
from app.prefilter.breaker import CircuitBreaker, Clock, OnStateChange
from app.prefilter.client import RedisClient, connect

T = TypeVar("T")
log = logging.getLogger("effectively_once.prefilter")

DEFAULT_TTL_SECONDS = 24 * 3600
DEFAULT_TIMEOUT_SECONDS = 0.05
DEFAULT_FAILURE_THRESHOLD = 5
DEFAULT_COOLDOWN_SECONDS = 30.0
PER_ID_SECONDS = 20e-6
# The write: every key set to its value (ARGV[i + 1]) with the TTL (ARGV[1]), in one call.
_REMEMBER = """
for i, key in ipairs(KEYS) do
    redis.call('SET', key, ARGV[i + 1], 'EX', ARGV[1])
end
return #KEYS
"""
_REMEMBER_CHUNK = 10_000  # keys per script call: Redis runs a script to its end, alone


@dataclass
class PrefilterCounters:
    """Running totals, read by the metrics module."""

    lookups: int = 0
    """Event ids Redis answered for (hit or miss)."""
    hits: int = 0
    """Looked-up event ids Redis knew: they skip the database."""
    remembered: int = 0
    """Event ids written to Redis after their commit."""
    errors: int = 0
    """Redis calls that failed or timed out (each fell back to the database)."""
    short_circuits: int = 0
    """Calls not made because the circuit was open."""


class Prefilter:
    """A fast path in front of the database's dedup record, never a replacement for it."""

    def __init__(
        self,
        client: RedisClient,
        *,
        namespace: str,
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        if not namespace:
            raise ValueError("namespace must name the database the keys mirror")
        if ttl_seconds < 1:
            raise ValueError(f"ttl_seconds must be >= 1, not {ttl_seconds}")
        if timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be > 0, not {timeout_seconds}")
        self.namespace = namespace
        self.ttl_seconds = ttl_seconds
        self.timeout_seconds = timeout_seconds
        self.breaker = breaker or CircuitBreaker(
            DEFAULT_FAILURE_THRESHOLD, DEFAULT_COOLDOWN_SECONDS
        )
        self.counters = PrefilterCounters()
        self._client = client
        self._remember = client.register_script(_REMEMBER)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        namespace: str,
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
        cooldown_seconds: float = DEFAULT_COOLDOWN_SECONDS,
        clock: Clock = time.monotonic,
        on_state_change: OnStateChange | None = None,
    ) -> Prefilter:
        """A prefilter on the Redis at ``url``; connects lazily, so a Redis that is down
        at start-up delays nothing."""
        breaker = CircuitBreaker(failure_threshold, cooldown_seconds, clock, on_state_change)
        return cls(
            connect(url, timeout_seconds),
            namespace=namespace,
            ttl_seconds=ttl_seconds,
            timeout_seconds=timeout_seconds,
            breaker=breaker,
        )

    def key(self, consumer: str, event_id: str) -> str:
        """The Redis key saying that ``consumer`` applied ``event_id``."""
        return f"{self.namespace}:{consumer}:{event_id}"

    def deadline(self, ids: int) -> float:
        """How long a call about ``ids`` event ids may take before it fails open."""
        return self.timeout_seconds + ids * PER_ID_SECONDS

    async def known(self, consumer: str, event_ids: Sequence[str]) -> dict[str, EventOf]:
        """Which of ``event_ids`` Redis knows ``consumer`` applied, and the event each stood
        for, in one MGET.

        Empty when Redis is down, slow or the circuit is open: the database decides.
        Takes at most ``deadline(len(event_ids))``.
        """
        ids = list(dict.fromkeys(event_ids))
        if not ids or not self._allowed():
            return {}

        async def lookup() -> dict[str, EventOf]:
            values = await self._client.mget([self.key(consumer, i) for i in ids])
            found = {}
            for event_id, value in zip(ids, values, strict=True):
                if value is not None and (event := _event_of(value)) is not None:
                    found[event_id] = event
            return found

        found = await self._guarded("lookup", len(ids), lookup)
        if found is None:
            return {}
        self.counters.lookups += len(ids)
        self.counters.hits += len(found)
        return found

    async def remember(self, consumer: str, applied: Mapping[str, EventOf]) -> None:
        """Record that ``consumer`` applied each event of ``applied`` (by eventId): SET EX of
        each, in one script call per ``_REMEMBER_CHUNK`` ids.

        Call only after the transaction that applied them committed. A failure is
        counted and dropped: the database's dedup record still holds.
        """
        ids = list(applied)
        if not ids or not self._allowed():
            return

        async def write() -> bool:
            keys = [self.key(consumer, event_id) for event_id in ids]
            values = [orjson.dumps(applied[event_id]) for event_id in ids]
            for start in range(0, len(keys), _REMEMBER_CHUNK):
                end = start + _REMEMBER_CHUNK
                await self._remember(
                    keys=keys[start:end], args=[self.ttl_seconds, *values[start:end]]
                )
            return True

        # A write lost is safe: the database's dedup record still holds.
        if await self._guarded("write", len(ids), write):
            self.counters.remembered += len(ids)

    async def probe(self) -> None:
        """While the circuit is open and its cool-down over, ask Redis once (an MGET of a key
        the framework never writes): an idle worker's circuit closes once Redis is back,
        not at the next event (its gauge, and the alert on it, said Redis was down)."""
        if not self.breaker.is_open or not self.breaker.allow():
            return

        async def ask() -> bool:
            await self._client.mget([f"{self.namespace}:probe"])
            return True

        await self._guarded("probe", 1, ask)

    async def keep_probing(self) -> None:
        """``probe`` at every cool-down (at least each second), until cancelled."""
        while True:
            await asyncio.sleep(max(self.breaker.cooldown_seconds, 1.0))
            await self.probe()

    async def close(self) -> None:
        """Close the Redis connections (never raises)."""
        try:
            await self._client.aclose()
        except Exception as exc:
            log.debug("closing the Redis prefilter client: %r", exc)

    async def _guarded(self, what: str, ids: int, call: Callable[[], Awaitable[T]]) -> T | None:
        """``call()`` within ``deadline(ids)``, its outcome told to the circuit breaker: its
        result, or None when it failed (counted and logged at DEBUG: the caller fails open,
        the database decides). A cancellation is neither: the call was abandoned."""
        try:
            async with asyncio.timeout(self.deadline(ids)):
                result = await call()
        except asyncio.CancelledError:
            self.breaker.abandoned()
            raise
        except Exception as exc:
            self._failed(what, exc)
            return None
        self.breaker.succeeded()
        return result

    def _allowed(self) -> bool:
        if self.breaker.allow():
            return True
        self.counters.short_circuits += 1
        return False

    def _failed(self, what: str, exc: Exception) -> None:
        self.counters.errors += 1
        error = f"{what}: {exc!r}" if not isinstance(exc, TimeoutError) else f"{what}: timed out"
        log.debug("Redis prefilter %s", error)
        self.breaker.failed(error)


def _event_of(value: bytes | str) -> EventOf | None:
    """The event a key's value names, or ``None`` for a value that names none."""
    try:
        found = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if type(found) is not list or len(found) != 3:
        return None
    aggregate_type, aggregate_id, version = found
    return (aggregate_type, aggregate_id, version)
