"""Against a real Redis, the prefilter knows what it was told, and forgets it on expiry.

Contract: after ``remember(consumer, applied)`` a ``known`` lookup for that
consumer and namespace returns exactly those ids, each with its event (another
consumer or namespace: none), each key carrying the TTL; once the TTL has passed the id is
no longer known, so the event goes to the database's dedup again. A batch of a
couple of thousand ids is one MGET and one script call, well inside the timeout.

Runs on the shared Redis (``redis_url``), in a namespace of its own whose keys
are deleted afterwards; failures of Redis are in
``test_prefilter_fails_open_when_redis_does.py``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from app.pipeline.decode import EventOf
from app.prefilter import Circuit, Prefilter

pytestmark = pytest.mark.integration

EVENT: EventOf = ("Order", "o-1", 3)
"""The event each id below stood for (its aggregate and version)."""


def applied(*event_ids: str) -> dict[str, EventOf]:
    """``event_ids``, each as ``EVENT``: what a consumer's transaction applied."""
    return dict.fromkeys(event_ids, EVENT)


MakePrefilter = Callable[..., Prefilter]


@pytest.fixture
async def admin(redis_url: str) -> AsyncIterator[Redis]:
    """A plain client on the shared Redis, to look at what the prefilter wrote."""
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def make_prefilter(redis_url: str, admin: Redis) -> AsyncIterator[MakePrefilter]:
    """``make_prefilter(**options)``: a prefilter in a fresh namespace; its keys and
    connections are gone after the test."""
    made: list[Prefilter] = []

    def make(**options: object) -> Prefilter:
        options.setdefault("namespace", f"eo-test:{uuid.uuid4().hex}")
        options.setdefault("timeout_seconds", 1.0)  # generous: these tests are not about speed
        prefilter = Prefilter.from_url(redis_url, **options)  # type: ignore[arg-type]
        made.append(prefilter)
        return prefilter

    yield make
    for prefilter in made:
        await prefilter.close()
        keys = [key async for key in admin.scan_iter(match=f"{prefilter.namespace}:*")]
        if keys:
            await admin.delete(*keys)


async def test_it_knows_exactly_what_was_remembered(make_prefilter: MakePrefilter) -> None:
    prefilter = make_prefilter()
    await prefilter.remember("points-service", applied("e1", "e2"))

    assert await prefilter.known("points-service", ["e1", "e2", "e3"]) == {"e1": EVENT, "e2": EVENT}
    assert await prefilter.known("inventory-service", ["e1", "e2"]) == {}
    assert await make_prefilter().known("points-service", ["e1", "e2"]) == {}
    assert prefilter.counters.errors == 0
    assert prefilter.breaker.state is Circuit.CLOSED


async def test_each_key_carries_the_ttl(make_prefilter: MakePrefilter, admin: Redis) -> None:
    prefilter = make_prefilter(ttl_seconds=600)
    await prefilter.remember("points-service", applied("e1"))

    key = prefilter.key("points-service", "e1")
    assert await admin.get(key) == b'["Order","o-1",3]'
    assert 590 <= await admin.ttl(key) <= 600


async def test_an_expired_event_is_no_longer_known(make_prefilter: MakePrefilter) -> None:
    prefilter = make_prefilter(ttl_seconds=1)
    await prefilter.remember("points-service", applied("e1"))
    assert await prefilter.known("points-service", ["e1"]) == {"e1": EVENT}

    await asyncio.sleep(1.1)

    assert await prefilter.known("points-service", ["e1"]) == {}


async def test_a_large_batch_fits_in_its_deadline(make_prefilter: MakePrefilter) -> None:
    prefilter = make_prefilter(timeout_seconds=0.05)
    ids = [str(uuid.uuid4()) for _ in range(2_000)]
    await prefilter.remember("points-service", applied(*ids[::2]))

    found = await prefilter.known("points-service", ids)

    assert found == applied(*ids[::2])
    assert prefilter.counters.errors == 0
