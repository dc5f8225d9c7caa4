"""An outage is said while the worker has nothing to do, not when a batch meets it.

Contract (``app.monitoring.watch``): a real worker, idle (every record applied),
reaches PostgreSQL and the broker's bootstrap address each through a TCP proxy. When the
database goes silent (no byte forwarded, nothing closed), and then the broker's address
does, the worker says so within ``SAID_WITHIN`` seconds, though no batch is running to
meet the outage: one ERROR line naming the dependency, ``effectively_once_paused`` 1 and
a pause counted under that dependency; once the proxy forwards again, one line says it
answers again and ``effectively_once_paused`` is 0. Before, a silent broker left no line
and no pause (the consumer reconnects quietly) and a silent database was counted only
when a batch's statement met its 35 s deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from chaos.proxy import TcpProxy
from tests.integration.support.http import sample
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import created_and_paid
from tests.integration.support.proxies import through
from tests.integration.support.session_broker import SharedBroker
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import WorkerProcess, Workers

pytestmark = pytest.mark.integration

SAID_WITHIN = 20.0
PAUSES = "effectively_once_infrastructure_pauses_total"


@pytest.fixture
def broker_proxy(broker: SharedBroker) -> Iterator[TcpProxy]:
    host, port = broker.bootstrap.split(",")[0].rsplit(":", 1)
    with TcpProxy(host, int(port)) as front:
        yield front


async def said(worker: WorkerProcess, text: str, paused: float) -> None:
    async def state() -> tuple[str, float | None]:
        return await asyncio.to_thread(worker.log), await sample(worker, "effectively_once_paused")

    await eventually(
        state,
        lambda found: text in found[0] and found[1] == paused,
        what=f"{text!r} logged and effectively_once_paused {paused}",
        within=SAID_WITHIN,
        workers=[worker],
    )


@pytest.mark.parametrize("dependency", ["database", "broker"])
async def test_a_silent_dependency_is_said_counted_and_its_return_said(
    topic: OrderTopic,
    workers: Workers,
    database_url: str,
    proxy: TcpProxy,
    broker_proxy: TcpProxy,
    dependency: str,
) -> None:
    worker = workers.start(
        through(database_url, proxy), env={"BROKER_URL": f"kafka://{broker_proxy.address}"}
    )
    await topic.send(created_and_paid(5))
    await topic.drained(workers=[worker], within=60)
    silent = proxy if dependency == "database" else broker_proxy
    counted = await sample(worker, PAUSES, dependency=dependency) or 0.0

    silent.blackhole()
    try:
        await said(worker, f"the {dependency} does not answer", paused=1)
        assert await sample(worker, PAUSES, dependency=dependency) == counted + 1
    finally:
        silent.heal()
        silent.reset()  # the connections that went silent: their clients connect anew
    await said(worker, f"the {dependency} answers again", paused=0)
