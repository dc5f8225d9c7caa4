"""A database connection that hangs (no FIN, no RST) pauses the worker loudly; it never stalls.

Contract: with a TCP proxy between a real worker and PostgreSQL that stops
forwarding in both directions without closing anything (a crashed host, a
failover, an expired NAT entry), the worker gives up on the silent connection
within its deadlines, counts a database pause on ``/metrics`` and answers 503
on ``/ready`` naming the ``progress`` check (no batch completed for
``READY_STALL_SECONDS`` while records wait), and keeps running. Once the proxy
forwards again the worker resumes on its own: every event sent before and
during the blackhole takes effect exactly once (the ``tally`` consumer's
counters), nothing is routed, and ``/ready`` answers 200 again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from app.demo.envelopes import Message, encode
from chaos.proxy import TcpProxy
from tests.integration.support.http import metric_families, readiness_is, ready
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import WorkerProcess, Workers

pytestmark = pytest.mark.integration

TALLY = "handlers,tests.integration.support.tally"  # the example brings user_points
TIGHT = {
    "CONSUMERS": "tally",
    "DB_CONNECT_TIMEOUT_SECONDS": "2",
    "DB_STATEMENT_TIMEOUT_SECONDS": "1",
    "DB_RESPONSE_TIMEOUT_SECONDS": "2",
    "READY_STALL_SECONDS": "3",
    "INFRA_RETRY_INITIAL_SECONDS": "0.2",
    "INFRA_RETRY_MAX_SECONDS": "1",
}
BLACKHOLE_AT_LEAST_SECONDS = 6


@pytest.fixture
def proxy(database_url: str) -> Iterator[TcpProxy]:
    url = make_url(database_url)
    with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as running:
        yield running


def orders(count: int) -> list[Message]:
    messages = []
    for n in range(count):
        order = Order(user_id=f"u-{n % 7}", amount_cents=1_000 + n)
        messages += [encode(order.created()), encode(order.paid())]
    return messages


async def database_pauses(worker: WorkerProcess) -> float:
    for family in await metric_families(worker):
        for sample in family.samples:
            if (
                sample.name == "effectively_once_infrastructure_pauses_total"
                and sample.labels.get("dependency") == "database"
            ):
                return sample.value
    return 0.0


async def test_the_worker_gives_up_on_a_silent_connection_says_so_and_resumes(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database, proxy: TcpProxy
) -> None:
    through = make_url(database_url).set(host="127.0.0.1", port=proxy.port)
    worker = workers.start(
        through.render_as_string(hide_password=False), handler_modules=TALLY, env=TIGHT
    )
    before, during = orders(20), orders(20)
    await topic.send(before)
    await topic.drained(workers=[worker], within=60)
    await ready(worker, within=30)
    pauses_before = await database_pauses(worker)

    proxy.blackhole()
    blackholed_at = time.monotonic()
    try:
        await topic.send(during)
        await eventually(
            lambda: database_pauses(worker),
            lambda pauses: pauses > pauses_before,
            what="the worker to pause on the silent database",
            within=20,
            workers=[worker],
        )
        body = await readiness_is(worker, 503, within=20)
        assert "progress" in body["failed"], body
        assert await topic.lag(), "nothing may be committed while the database is silent"
        await eventually(
            lambda: database_pauses(worker),
            lambda pauses: pauses >= pauses_before + 2,
            what="the worker to keep trying",
            within=BLACKHOLE_AT_LEAST_SECONDS + 10,
            workers=[worker],
        )
        # Long enough for new connections to meet the blackhole too (connect deadline 2 s).
        await asyncio.sleep(max(0.0, blackholed_at + BLACKHOLE_AT_LEAST_SECONDS - time.monotonic()))
        assert worker.alive
    finally:
        proxy.heal()

    await topic.drained(workers=[worker], within=60)
    tallies = await db.tallies()
    assert len(tallies) == len(before) + len(during)
    assert set(tallies.values()) == {1}
    assert await db.failures() == []
    await ready(worker, within=30)
