"""When Redis fails, the prefilter sends every event to the database, quickly, and recovers.

Contract: with Redis down (nothing listening), stalled (``DEBUG SLEEP``), a
peer that accepts but never answers, killed in the middle of a run, or
restarted empty (``FLUSHALL``), ``known`` returns an empty set within its
deadline (plus scheduling slack) and ``remember`` returns without raising.
After ``failure_threshold`` failures the circuit opens and Redis is not asked
at all; once the cool-down has passed one probe finds the restarted Redis and
closes the circuit, and the prefilter works again, knowing nothing from before.

These tests run their own ``redis-server`` on a free port (killed afterwards),
so that killing, stalling and flushing it disturbs no other test. The shared
Redis is never touched.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.demo.broker import free_port
from app.pipeline.decode import EventOf
from app.prefilter import Circuit, Prefilter
from tests.conftest import unavailable

pytestmark = pytest.mark.integration

EVENT: EventOf = ("Order", "o-1", 3)
"""The event each id below stood for (its aggregate and version)."""


def applied(*event_ids: str) -> dict[str, EventOf]:
    """``event_ids``, each as ``EVENT``: what a consumer's transaction applied."""
    return dict.fromkeys(event_ids, EVENT)


THRESHOLD = 3
COOLDOWN = 30.0
TIMEOUT = 0.05
SLACK = 0.5  # scheduling noise on a busy CI machine; a hang would take far longer
T = TypeVar("T")


class FrozenClock:
    """The breaker's clock; moves only when told to."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class PrivateRedis:
    """A ``redis-server`` of this test's own on a free port (no persistence, DEBUG allowed)."""

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        """Start it (again, on the same port) and wait until it answers PING."""
        self.process = await asyncio.create_subprocess_exec(
            self.binary,
            *("--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory)),
            *("--save", "", "--appendonly", "no", "--enable-debug-command", "yes"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        probe = Redis.from_url(self.url, socket_connect_timeout=0.2)
        try:
            for _ in range(100):
                try:
                    if await probe.ping():
                        return
                except (OSError, RedisError):
                    pass
                await asyncio.sleep(0.05)
        finally:
            await probe.aclose()
        await self.kill()
        unavailable(f"redis-server on port {self.port} did not answer within 5 s")

    async def kill(self) -> None:
        """SIGKILL it: no goodbye to the connected clients, and its data is gone."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self.process = None


@pytest.fixture
async def private_redis(tmp_path: Path) -> AsyncIterator[PrivateRedis]:
    """A running private Redis; killed at the end of the test whatever happened."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("no redis-server binary on PATH")
    server = PrivateRedis(binary, tmp_path)
    await server.start()
    yield server
    await server.kill()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
async def make_prefilter(clock: FrozenClock) -> AsyncIterator[Callable[[str], Prefilter]]:
    """``make_prefilter(url)``: a prefilter with a small threshold and a frozen breaker clock."""
    made: list[Prefilter] = []

    def make(url: str) -> Prefilter:
        prefilter = Prefilter.from_url(
            url,
            namespace="eo-test:applied",
            timeout_seconds=TIMEOUT,
            failure_threshold=THRESHOLD,
            cooldown_seconds=COOLDOWN,
            clock=clock,
        )
        made.append(prefilter)
        return prefilter

    yield make
    for prefilter in made:
        await prefilter.close()


async def timed(call: Awaitable[T]) -> tuple[T, float]:
    started = time.monotonic()
    result = await call
    return result, time.monotonic() - started


async def remembered(prefilter: Prefilter, event_id: str) -> None:
    """Remember ``event_id`` and wait until it is known (the first connection may be slow)."""
    for _ in range(50):
        await prefilter.remember("points-service", applied(event_id))
        if await prefilter.known("points-service", [event_id]) == {event_id: EVENT}:
            prefilter.counters.errors = 0
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"Redis never confirmed {event_id}")


async def test_a_redis_that_is_down_is_not_waited_for(
    make_prefilter: Callable[[str], Prefilter],
) -> None:
    prefilter = make_prefilter(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there

    _, took = await timed(prefilter.remember("points-service", applied("e1")))
    assert took < TIMEOUT + SLACK and prefilter.counters.errors == 1
    for _ in range(THRESHOLD - 1):
        found, took = await timed(prefilter.known("points-service", ["e1"]))
        assert found == {} and took < TIMEOUT + SLACK

    assert prefilter.breaker.state is Circuit.OPEN
    assert await prefilter.known("points-service", ["e1"]) == {}
    assert prefilter.counters.errors == THRESHOLD and prefilter.counters.short_circuits == 1


async def test_a_stalled_redis_costs_at_most_the_deadline(
    private_redis: PrivateRedis, make_prefilter: Callable[[str], Prefilter]
) -> None:
    prefilter = make_prefilter(private_redis.url)
    await remembered(prefilter, "e1")
    admin = Redis.from_url(private_redis.url)
    sleeping = asyncio.ensure_future(admin.execute_command("DEBUG", "SLEEP", "1"))
    await asyncio.sleep(0.1)  # the server is asleep now

    found, took = await timed(prefilter.known("points-service", ["e1"]))
    _, took_to_write = await timed(prefilter.remember("points-service", applied("e2")))

    assert found == {}
    assert took < TIMEOUT + SLACK and took_to_write < TIMEOUT + SLACK
    assert prefilter.counters.errors == 2
    await sleeping
    await admin.aclose()
    # Awake: known again, and no late reply to a timed-out call is read as this one's.
    assert await prefilter.known("points-service", ["e0", "e1"]) == {"e1": EVENT}


async def test_a_peer_that_never_answers_costs_at_most_the_deadline(
    make_prefilter: Callable[[str], Prefilter],
) -> None:
    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads until the client hangs up, answers nothing

    black_hole = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = black_hole.sockets[0].getsockname()[1]
    try:
        prefilter = make_prefilter(f"redis://127.0.0.1:{port}/0")
        found, took = await timed(prefilter.known("points-service", ["e1"]))
        _, took_to_write = await timed(prefilter.remember("points-service", applied("e1")))
    finally:
        black_hole.close()

    assert found == {}
    assert took < TIMEOUT + SLACK and took_to_write < TIMEOUT + SLACK
    assert prefilter.counters.errors == 2


async def test_killed_mid_run_it_falls_back_then_recovers_empty(
    private_redis: PrivateRedis, make_prefilter: Callable[[str], Prefilter], clock: FrozenClock
) -> None:
    prefilter = make_prefilter(private_redis.url)
    await remembered(prefilter, "e1")

    await private_redis.kill()
    for _ in range(THRESHOLD):
        found, took = await timed(prefilter.known("points-service", ["e1"]))
        assert found == {} and took < TIMEOUT + SLACK
    assert prefilter.breaker.state is Circuit.OPEN
    await prefilter.remember("points-service", applied("e2"))  # not even tried while open
    assert prefilter.counters.errors == THRESHOLD

    await private_redis.start()  # back, on the same port, with nothing in it
    assert await prefilter.known("points-service", ["e1"]) == {}  # still cooling down
    clock.advance(COOLDOWN)
    assert await prefilter.known("points-service", ["e1"]) == {}  # the probe: nothing known
    assert prefilter.breaker.state is Circuit.CLOSED

    await remembered(prefilter, "e3")
    assert await prefilter.known("points-service", ["e1", "e2", "e3"]) == {"e3": EVENT}


async def test_an_idle_prefilters_probe_closes_the_circuit_once_redis_is_back(
    private_redis: PrivateRedis, make_prefilter: Callable[[str], Prefilter], clock: FrozenClock
) -> None:
    """With no event to look up (an idle worker), the worker's probe finds Redis back once
    the cool-down is over and closes the circuit; before that, and while Redis is down,
    it leaves it open. It counts no lookup."""
    prefilter = make_prefilter(private_redis.url)
    await remembered(prefilter, "e1")
    await private_redis.kill()
    for _ in range(THRESHOLD):
        await prefilter.known("points-service", ["e1"])
    assert prefilter.breaker.state is Circuit.OPEN

    clock.advance(COOLDOWN)
    await prefilter.probe()  # Redis still down: open again, for a fresh cool-down
    assert prefilter.breaker.state is Circuit.OPEN
    await private_redis.start()
    await prefilter.probe()  # cooling down: not asked
    assert prefilter.breaker.state is Circuit.OPEN
    clock.advance(COOLDOWN)
    lookups = prefilter.counters.lookups
    await prefilter.probe()

    assert prefilter.breaker.state is Circuit.CLOSED
    assert prefilter.counters.lookups == lookups


async def test_a_flushed_redis_knows_nothing(
    private_redis: PrivateRedis, make_prefilter: Callable[[str], Prefilter]
) -> None:
    prefilter = make_prefilter(private_redis.url)
    await remembered(prefilter, "e1")
    admin = Redis.from_url(private_redis.url)
    await admin.flushall()
    await admin.aclose()

    assert await prefilter.known("points-service", ["e1"]) == {}
    assert prefilter.counters.errors == 0
    assert prefilter.breaker.state is Circuit.CLOSED
