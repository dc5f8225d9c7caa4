"""The prefilter can only send an event to the database's dedup, never wrongly skip one.

Contract: ``known`` returns only event ids that ``remember`` was given for the
same consumer and namespace, within their TTL, each with the event (aggregate and
version) it was given with, in one MGET per call; a key whose value names no event
(``1``, as an earlier release wrote) is not known. ``remember`` writes exactly the
ids it was given, each with its event, with the TTL, in one script call (Redis sets
the keys itself).
Whenever Redis fails, stalls or the circuit is open, ``known`` returns an empty
set within its deadline (``timeout_seconds`` plus a little per id) and
``remember`` drops the write: neither raises (cancellation excepted), and a
dead Redis stops being asked after ``failure_threshold`` failures. Counters say
what happened.

The Redis here is an in-memory fake with a frozen clock; the same contract
against a real Redis is in ``tests/integration/test_prefilter_*.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from app.pipeline.decode import EventOf
from app.prefilter import Circuit, CircuitBreaker, Prefilter
from app.prefilter.prefilter import PER_ID_SECONDS

TTL = 3600
THRESHOLD = 3
COOLDOWN = 30.0
TIMEOUT = 0.02


class FrozenClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeRedis:
    """Redis's MGET and the prefilter's SET EX script, in memory, expiring on a frozen clock.

    ``fault`` makes every command raise it; ``stall`` makes every command hang
    (a Redis that stopped answering). ``round_trips`` names each command sent.
    """

    def __init__(self, clock: FrozenClock) -> None:
        self.clock = clock
        self.values: dict[str, tuple[bytes, float]] = {}
        self.fault: Exception | None = None
        self.stall = False
        self.round_trips: list[str] = []
        self.closed = False

    async def mget(self, keys: Sequence[str]) -> list[bytes | str | None]:
        await self.round_trip("MGET")
        return [self.values[k][0] if self.ttl(k) is not None else None for k in keys]

    def register_script(self, script: str) -> FakeSetScript:
        assert "redis.call('SET', key, ARGV[i + 1], 'EX', ARGV[1])" in script
        return FakeSetScript(self)

    async def aclose(self) -> None:
        self.closed = True

    def ttl(self, key: str) -> float | None:
        """Seconds ``key`` has left, or ``None`` when it does not exist."""
        found = self.values.get(key)
        if found is None or found[1] <= self.clock():
            return None
        return found[1] - self.clock()

    async def round_trip(self, command: str) -> None:
        self.round_trips.append(command)
        if self.stall:
            await asyncio.Event().wait()
        if self.fault is not None:
            raise self.fault


class FakeSetScript:
    """The write script: SET each key to its value in ``args[1:]`` with the TTL in
    ``args[0]``, in one round trip."""

    def __init__(self, redis: FakeRedis) -> None:
        self.redis = redis

    async def __call__(
        self, keys: Sequence[str] | None = None, args: Sequence[object] | None = None
    ) -> int:
        keys, args = keys or [], args or []
        await self.redis.round_trip(f"EVALSHA x{len(keys)}")
        ttl, *values = args
        assert isinstance(ttl, int) and len(values) == len(keys)
        for key, value in zip(keys, values, strict=True):
            assert isinstance(value, bytes)
            self.redis.values[key] = (value, self.redis.clock() + ttl)
        return len(keys)


EVENT: EventOf = ("Order", "o-1", 3)
"""The event each id below stood for (its aggregate and version)."""


def applied(*event_ids: str) -> dict[str, EventOf]:
    """``event_ids``, each as ``EVENT``: what a consumer's transaction applied."""
    return dict.fromkeys(event_ids, EVENT)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def redis(clock: FrozenClock) -> FakeRedis:
    return FakeRedis(clock)


@pytest.fixture
def prefilter(redis: FakeRedis, clock: FrozenClock) -> Prefilter:
    breaker = CircuitBreaker(THRESHOLD, COOLDOWN, clock)
    return Prefilter(
        redis,
        namespace="eo:applied:test",
        ttl_seconds=TTL,
        timeout_seconds=TIMEOUT,
        breaker=breaker,
    )


# -- it knows only what it was told -------------------------------------------------------


async def test_it_knows_what_was_remembered_and_nothing_else(prefilter: Prefilter) -> None:
    await prefilter.remember("points", applied("e1", "e2"))

    assert await prefilter.known("points", ["e1", "e2", "e3"]) == {"e1": EVENT, "e2": EVENT}
    assert prefilter.counters.lookups == 3 and prefilter.counters.hits == 2


async def test_remember_writes_exactly_the_ids_given_with_the_ttl(
    prefilter: Prefilter, redis: FakeRedis
) -> None:
    await prefilter.remember("points", {"e1": EVENT, "e2": ("Order", "7", None)})

    assert redis.values["eo:applied:test:points:e1"][0] == b'["Order","o-1",3]'
    assert redis.values["eo:applied:test:points:e2"][0] == b'["Order","7",null]'
    assert set(redis.values) == {"eo:applied:test:points:e1", "eo:applied:test:points:e2"}
    assert redis.ttl("eo:applied:test:points:e1") == TTL
    assert prefilter.counters.remembered == 2


async def test_a_key_naming_no_event_is_not_known(prefilter: Prefilter, redis: FakeRedis) -> None:
    redis.values["eo:applied:test:points:e1"] = (b"1", float("inf"))  # an earlier release's
    redis.values["eo:applied:test:points:e2"] = (b'["Order"]', float("inf"))
    await prefilter.remember("points", applied("e3"))

    assert await prefilter.known("points", ["e1", "e2", "e3"]) == {"e3": EVENT}


async def test_each_consumer_knows_only_its_own_events(prefilter: Prefilter) -> None:
    await prefilter.remember("points", applied("e1"))

    assert await prefilter.known("inventory", ["e1"]) == {}


async def test_another_namespace_knows_nothing(prefilter: Prefilter, redis: FakeRedis) -> None:
    await prefilter.remember("points", applied("e1"))
    other_database = Prefilter(redis, namespace="eo:applied:other")

    assert await other_database.known("points", ["e1"]) == {}


async def test_an_expired_event_is_no_longer_known(
    prefilter: Prefilter, clock: FrozenClock
) -> None:
    await prefilter.remember("points", applied("e1"))
    clock.advance(TTL - 1)
    assert await prefilter.known("points", ["e1"]) == {"e1": EVENT}
    clock.advance(1)

    assert await prefilter.known("points", ["e1"]) == {}


async def test_one_round_trip_per_call_and_none_for_nothing(
    prefilter: Prefilter, redis: FakeRedis
) -> None:
    ids = [f"e{i}" for i in range(500)]
    await prefilter.remember("points", applied(*ids))
    await prefilter.known("points", [*ids, *ids])
    await prefilter.known("points", [])
    await prefilter.remember("points", {})

    assert redis.round_trips == ["EVALSHA x500", "MGET"]


# -- it fails open ---------------------------------------------------------------------------


FAULTS = [
    ConnectionRefusedError("connection refused"),
    TimeoutError(),
    OSError("network unreachable"),
    RuntimeError("WRONGTYPE Operation against a key holding the wrong kind of value"),
]


@pytest.mark.parametrize("fault", FAULTS, ids=lambda e: type(e).__name__)
async def test_known_fails_open(prefilter: Prefilter, redis: FakeRedis, fault: Exception) -> None:
    await prefilter.remember("points", applied("e1"))
    redis.fault = fault

    assert await prefilter.known("points", ["e1"]) == {}
    assert prefilter.counters.errors == 1 and prefilter.counters.hits == 0


@pytest.mark.parametrize("fault", FAULTS, ids=lambda e: type(e).__name__)
async def test_remember_drops_the_write_on_failure(
    prefilter: Prefilter, redis: FakeRedis, fault: Exception
) -> None:
    redis.fault = fault
    await prefilter.remember("points", applied("e1"))

    assert redis.values == {}
    assert prefilter.counters.errors == 1 and prefilter.counters.remembered == 0


async def test_a_stalled_redis_costs_at_most_the_timeout(
    prefilter: Prefilter, redis: FakeRedis
) -> None:
    redis.stall = True
    started = time.monotonic()
    assert await prefilter.known("points", ["e1"]) == {}
    await prefilter.remember("points", applied("e1"))
    elapsed = time.monotonic() - started

    assert elapsed < 10 * TIMEOUT
    assert prefilter.counters.errors == 2


def test_the_deadline_grows_with_the_batch(prefilter: Prefilter) -> None:
    assert prefilter.deadline(0) == TIMEOUT
    assert prefilter.deadline(1_000) == pytest.approx(TIMEOUT + 1_000 * PER_ID_SECONDS)


async def test_cancellation_is_not_swallowed(prefilter: Prefilter, redis: FakeRedis) -> None:
    redis.stall = True
    prefilter.timeout_seconds = 60  # so that the cancel below, not the timeout, ends the call
    lookup = asyncio.ensure_future(prefilter.known("points", ["e1"]))
    await asyncio.sleep(0)
    lookup.cancel()

    with pytest.raises(asyncio.CancelledError):
        await lookup


async def test_a_cancelled_probe_does_not_stop_later_probes(
    prefilter: Prefilter, redis: FakeRedis, clock: FrozenClock
) -> None:
    redis.fault = ConnectionRefusedError()
    for _ in range(THRESHOLD):
        await prefilter.known("points-service", ["e1"])
    clock.advance(COOLDOWN)
    redis.fault, redis.stall = None, True
    prefilter.timeout_seconds = 60
    probe = asyncio.ensure_future(prefilter.known("points-service", ["e1"]))
    await asyncio.sleep(0)
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe

    redis.stall = False
    await prefilter.remember("points-service", applied("e1"))  # the next call probes, and succeeds
    assert prefilter.breaker.state is Circuit.CLOSED
    assert await prefilter.known("points-service", ["e1"]) == {"e1": EVENT}


async def test_a_dead_redis_stops_being_asked_until_the_probe(
    prefilter: Prefilter, redis: FakeRedis, clock: FrozenClock
) -> None:
    await prefilter.remember("points", applied("e1"))
    redis.fault = ConnectionRefusedError()
    redis.round_trips.clear()
    for _ in range(THRESHOLD):
        assert await prefilter.known("points", ["e1"]) == {}
    assert prefilter.breaker.state is Circuit.OPEN

    for _ in range(20):  # batches while open: no round trip, still nothing known
        assert await prefilter.known("points", ["e1"]) == {}
        await prefilter.remember("points", applied("e2"))
    assert redis.round_trips == ["MGET"] * THRESHOLD
    assert prefilter.counters.short_circuits == 40

    redis.fault = None  # Redis is back; the cool-down passes; the next call probes
    clock.advance(COOLDOWN)
    assert await prefilter.known("points", ["e1"]) == {"e1": EVENT}
    assert prefilter.breaker.state is Circuit.CLOSED
    assert prefilter.counters.errors == THRESHOLD


async def test_a_write_failure_counts_towards_the_circuit(
    prefilter: Prefilter, redis: FakeRedis
) -> None:
    redis.fault = OSError("down")
    for _ in range(THRESHOLD):
        await prefilter.remember("points", applied("e1"))

    assert prefilter.breaker.state is Circuit.OPEN


async def test_close_closes_the_client_and_never_raises(
    prefilter: Prefilter, redis: FakeRedis
) -> None:
    await prefilter.close()
    assert redis.closed

    async def broken_close() -> None:
        raise ConnectionResetError()

    redis.aclose = broken_close  # type: ignore[method-assign]
    await prefilter.close()


@pytest.mark.parametrize(
    "bad",
    [{"namespace": ""}, {"ttl_seconds": 0}, {"timeout_seconds": 0}],
    ids=["no-namespace", "no-ttl", "no-timeout"],
)
def test_nonsense_settings_are_refused(redis: FakeRedis, bad: dict[str, object]) -> None:
    arguments: dict[str, object] = {"namespace": "eo:applied:test", **bad}
    with pytest.raises(ValueError):
        Prefilter(redis, **arguments)  # type: ignore[arg-type]
