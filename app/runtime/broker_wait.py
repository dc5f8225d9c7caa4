"""A worker that starts while the broker cannot be reached waits for it.

faust's producer and consumer connect once as the worker starts, and a broker that is
down then (a restart during a broker outage, a deployment that comes up before the
cluster) ends the worker with a traceback: ``Unable to bootstrap``. Under a process
supervisor that is a crash loop, each start failing the same way. ``wait_for_broker``
runs first instead: it connects as faust's clients will, and while no bootstrap server
answers it waits (the pause doubling up to ``MAX_PAUSE_SECONDS``) and says so, as the
worker waits for any dependency that is down at run time. A broker that answers but
refuses the worker's settings is a mistake, not an outage: the start checks that first
(``app.runtime.entry``), and here it is raised. The broker may still go away between
that wait and faust's clients' own first connection (a cut, a restart):
``until_connected`` starts each of them again, the same way, until it connects.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from aiokafka.errors import KafkaConnectionError

from app.errors import BrokerUnreachable
from app.kafka_clients import CONNECT_TIMEOUT_SECONDS, KafkaClients

FIRST_PAUSE_SECONDS = 0.5
MAX_PAUSE_SECONDS = 5.0
log = logging.getLogger("effectively_once.worker")


async def wait_for_broker(
    clients: KafkaClients,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Return once a bootstrap server of ``clients`` takes a connection."""
    pause = FIRST_PAUSE_SECONDS
    since: float | None = None
    while True:
        try:
            await clients.check(CONNECT_TIMEOUT_SECONDS)
        except BrokerUnreachable as exc:
            if since is None:
                since = clock()
            log.warning("%s: the worker waits for the broker before it starts", exc)
            await sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_SECONDS)
            continue
        if since is not None:
            log.info("the broker answers after %.0f s: the worker starts", clock() - since)
        return


async def until_connected(
    connect: Callable[[], Awaitable[None]],
    what: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Run ``connect`` (a client's start, which cleans up after itself when it fails) until
    it does not fail for want of a broker; ``what`` names the client in the log."""
    pause = FIRST_PAUSE_SECONDS
    while True:
        try:
            await connect()
            return
        except KafkaConnectionError as exc:
            log.warning("the worker's %s cannot reach the broker (%s); trying again", what, exc)
        await sleep(pause)
        pause = min(pause * 2, MAX_PAUSE_SECONDS)
