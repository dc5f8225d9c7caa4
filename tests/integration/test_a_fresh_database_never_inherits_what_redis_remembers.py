"""What Redis remembers of one database never makes a worker skip events in another.

Contract: the Redis prefilter's keys are namespaced by the database's identity
(a random id the migrations store in ``database_identity``), not by ``APP_ID``
alone. A worker pointed at a fresh database, behind the same ``APP_ID`` and the
same Redis as a worker that applied a stream of events, applies the same events
again when they come again, each exactly once (the ``tally`` consumer's
counters), where it used to skip every one of them as known. The identity is
read once, made if the table is empty, and ``--new-identity`` (for a database
restored from a backup) replaces it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from redis.asyncio import Redis

from app.db.engine import create_engine
from app.db.identity import read_identity, renew_identity
from app.db.migrate import upgrade_to_head
from app.demo.envelopes import Message, encode
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import Database
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

TALLY = "handlers,tests.integration.support.tally"  # the example brings user_points


@pytest.fixture
async def key_prefix(redis_url: str) -> AsyncIterator[str]:
    """A prefix of this test's own on the shared Redis; its keys are deleted afterwards."""
    prefix = f"eo-test-identity:{uuid.uuid4().hex[:10]}"
    yield prefix
    client = Redis.from_url(redis_url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1_000)]
        if keys:
            await client.unlink(*keys)
    finally:
        await client.aclose()


def orders(count: int) -> list[Message]:
    messages = []
    for n in range(count):
        order = Order(user_id=f"u-{n % 5}", amount_cents=500 + n)
        messages += [encode(order.created()), encode(order.paid())]
    return messages


async def test_a_fresh_database_behind_the_same_app_id_and_redis_applies_the_events_again(
    topic: OrderTopic,
    workers: Workers,
    make_database: Callable[[str], Awaitable[str]],
    redis_url: str,
    key_prefix: str,
) -> None:
    env = {
        "REDIS_URL": redis_url,
        "PREFILTER_KEY_PREFIX": key_prefix,
        "PREFILTER_TTL_SECONDS": "600",
        "CONSUMERS": "tally",
    }
    messages = orders(15)
    first_url, second_url = await make_database("postgresql"), await make_database("postgresql")
    first, second = Database(first_url), Database(second_url)
    try:
        worker = workers.start(first_url, handler_modules=TALLY, env=env)
        await topic.send(messages)
        await topic.drained(workers=[worker], within=60)
        applied = await first.tallies()
        assert len(applied) == len(messages) and set(applied.values()) == {1}
        assert worker.stop() == 0

        # Same APP_ID, same Redis, a database that has applied nothing; the events again.
        worker = workers.start(second_url, handler_modules=TALLY, env=env)
        await topic.send(messages)
        await topic.drained(workers=[worker], within=60)

        assert await second.tallies() == applied
        assert await first.tallies() == applied
    finally:
        await first.dispose()
        await second.dispose()


async def test_the_identity_is_kept_made_when_missing_and_renewed_on_request(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'identity.db'}"
    await upgrade_to_head(url)
    engine = create_engine(url)
    try:
        migrated = await read_identity(engine)
        assert len(migrated) == 32
        assert await read_identity(engine) == migrated

        renewed = await renew_identity(engine)
        assert renewed != migrated
        assert await read_identity(engine) == renewed
    finally:
        await engine.dispose()
