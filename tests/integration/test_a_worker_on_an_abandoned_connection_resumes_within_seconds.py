"""A worker whose database connections were abandoned resumes within seconds, not a deadline.

Contract: with a TCP proxy between a real worker and PostgreSQL and the default
deadlines (statement timeout 30 s, response deadline 35 s), the proxy blackholes the
connections while events arrive, then abandons them as a failover does (the server
frees the sessions, the worker hears nothing, ever) and new connections work. The
worker gives up on the abandoned connections within seconds of the abandon (its
session probe finds their sessions gone), and every event sent before and during
the outage takes effect exactly once within ``RESUMES_WITHIN`` seconds of it.
Before the probe the worker waited out its 35 s response deadline first.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from chaos.proxy import TcpProxy
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import created_and_paid
from tests.integration.support.proxies import through
from tests.integration.support.state import Database
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

TALLY = "handlers,tests.integration.support.tally"  # the example brings user_points
QUICK_RETRIES = {
    "CONSUMERS": "tally",
    "INFRA_RETRY_INITIAL_SECONDS": "0.2",
    "INFRA_RETRY_MAX_SECONDS": "1",
}
BLACKHOLE_SECONDS = 3.0
# The probe's first look (5 s into the wait), a new connection, the batch again, and the
# offset commit (every few seconds); well under the 35 s response deadline.
RESUMES_WITHIN = 20.0


async def test_the_worker_drops_abandoned_connections_and_resumes_at_once(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, proxy: TcpProxy
) -> None:
    worker = workers.start(through(database_url, proxy), handler_modules=TALLY, env=QUICK_RETRIES)
    before, during = created_and_paid(20), created_and_paid(20)
    await topic.send(before)
    await topic.drained(workers=[worker], within=60)

    proxy.blackhole()
    try:
        await topic.send(during)
        await asyncio.sleep(BLACKHOLE_SECONDS)
        assert await topic.lag(), "nothing may be committed while the database is silent"
        await asyncio.to_thread(proxy.abandon)
    finally:
        proxy.heal()
    abandoned_at = time.monotonic()

    await topic.drained(workers=[worker], within=60)
    took = time.monotonic() - abandoned_at
    tallies = await db.tallies()
    assert len(tallies) == len(before) + len(during)
    assert set(tallies.values()) == {1}
    assert await db.failures() == []
    assert took < RESUMES_WITHIN, f"caught up {took:.1f} s after the abandon"
    assert worker.alive
