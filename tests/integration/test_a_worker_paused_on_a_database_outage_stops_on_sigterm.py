"""A worker paused on a database outage stops on SIGTERM, with nothing of the outage acked.

Contract: a real worker reaches PostgreSQL through a TCP proxy. Either the proxy refuses
new connections and resets the open ones while events arrive, so the worker's batch
pauses and retries in place (pauses of ``PAUSE`` seconds here); or it goes silent (no
byte forwarded, nothing closed), so the batch's attempt waits on its connection (the
default deadlines: 35 s for an answer, 10 s for a new connection). SIGTERM (a deploy
during the outage) then stops the worker within ``STOPS_WITHIN`` seconds, well inside
one pause and those deadlines, with exit code 0: the paused batch is given up between
its attempts, the waiting attempt is cut short, and neither is acked; the worker's
relay, whose claim waits on the silent database too, is cut short as well, and its
connections are closed without waiting for the silent server (one warning line, no
traceback). The events wait on the broker, and once the database is back a new worker
applies every one of them exactly once. Before, the worker waited for the database to
come back, or for the deadlines (faust lets a stop go on only once every batch it
delivered is acked), and was killed first.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from chaos.proxy import TcpProxy
from tests.integration.support.http import sample
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import created_and_paid
from tests.integration.support.proxies import through
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import WorkerProcess, Workers

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
STOPS_WITHIN = 15.0
IN_FLIGHT = "effectively_once_oldest_unprocessed_age_seconds"
# A batch in flight this long on a silent database waits on its connection.
WAITING_SECONDS = 2.0


async def paused(worker: WorkerProcess) -> None:
    await eventually(
        lambda: asyncio.to_thread(worker.log),
        lambda log: PAUSED in log,
        what="the batch paused on the outage",
        within=60,
        workers=[worker],
    )


async def waiting(worker: WorkerProcess) -> None:
    await eventually(
        lambda: sample(worker, IN_FLIGHT),
        lambda age: age is not None and age >= WAITING_SECONDS,
        what="the batch waiting on its silent connection",
        within=60,
        workers=[worker],
    )


@pytest.mark.parametrize("outage", ["refused", "silent"])
async def test_a_worker_paused_on_an_outage_stops_on_sigterm_and_acks_nothing_of_it(
    topic: OrderTopic,
    workers: Workers,
    database_url: str,
    db: Database,
    proxy: TcpProxy,
    outage: str,
) -> None:
    worker = workers.start(through(database_url, proxy), handler_modules=TALLY, env=LONG_PAUSES)
    before, during = created_and_paid(10), created_and_paid(10)
    await topic.send(before)
    await topic.drained(workers=[worker], within=60)

    if outage == "refused":
        proxy.refuse()
        proxy.reset()
    else:
        proxy.blackhole()
    try:
        await topic.send(during)
        await (paused(worker) if outage == "refused" else waiting(worker))
        started = time.monotonic()
        code = worker.stop(timeout=PAUSE * 2)
        took = time.monotonic() - started
        assert code == 0, worker.tail(40)
        assert took < STOPS_WITHIN, f"stopped {took:.1f} s after SIGTERM:\n{worker.tail(40)}"
        assert await topic.lag(), "an event of the outage was acked"
        # A close cut short is one warning line, not the pool's traceback.
        assert "Exception closing connection" not in worker.log(), worker.tail(40)
    finally:
        proxy.heal()

    again = workers.start(database_url, handler_modules=TALLY, env={"CONSUMERS": "tally"})
    await topic.drained(workers=[again], within=60)
    tallies = await db.tallies()
    assert len(tallies) == len(before) + len(during)
    assert set(tallies.values()) == {1}
    assert await db.failures() == []
