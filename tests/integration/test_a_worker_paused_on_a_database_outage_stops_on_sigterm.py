"""A worker paused on a database outage stops on SIGTERM, with nothing of the outage acked.

Contract: a real worker reaches PostgreSQL through a TCP proxy; the proxy refuses new
connections and resets the open ones while events arrive, so the worker's batch pauses
and retries in place (pauses of ``PAUSE`` seconds here). SIGTERM (a deploy during the
outage) then stops the worker within ``STOPS_WITHIN`` seconds, well inside one pause,
with exit code 0: the paused batch is given up between its attempts, not acked. Its
events wait on the broker, and once the database is back a new worker applies every one
of them exactly once. Before, the worker waited for the database to come back (faust
lets a stop go on only once every batch it delivered is acked), until it was killed.
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
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

TALLY = "handlers,tests.integration.support.tally"
PAUSE = 20.0
LONG_PAUSES = {
    "CONSUMERS": "tally",
    "INFRA_RETRY_INITIAL_SECONDS": str(PAUSE),
    "INFRA_RETRY_MAX_SECONDS": str(PAUSE),
    "INFRA_RETRY_JITTER": "0",
}
PAUSED = "infrastructure failure during"
STOPS_WITHIN = 12.0


async def test_a_worker_paused_on_an_outage_stops_on_sigterm_and_acks_nothing_of_it(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, proxy: TcpProxy
) -> None:
    worker = workers.start(through(database_url, proxy), handler_modules=TALLY, env=LONG_PAUSES)
    before, during = created_and_paid(10), created_and_paid(10)
    await topic.send(before)
    await topic.drained(workers=[worker], within=60)

    proxy.refuse()
    proxy.reset()
    try:
        await topic.send(during)
        await eventually(
            lambda: asyncio.to_thread(worker.log),
            lambda log: PAUSED in log,
            what="the batch paused on the outage",
            within=60,
            workers=[worker],
        )
        started = time.monotonic()
        code = worker.stop(timeout=PAUSE * 2)
        took = time.monotonic() - started
        assert code == 0, worker.tail(40)
        assert took < STOPS_WITHIN, f"stopped {took:.1f} s after SIGTERM:\n{worker.tail(40)}"
        assert await topic.lag(), "an event of the outage was acked"
    finally:
        proxy.heal()

    again = workers.start(database_url, handler_modules=TALLY, env={"CONSUMERS": "tally"})
    await topic.drained(workers=[again], within=60)
    tallies = await db.tallies()
    assert len(tallies) == len(before) + len(during)
    assert set(tallies.values()) == {1}
    assert await db.failures() == []
