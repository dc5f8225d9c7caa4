"""SIGTERM stops a worker cleanly.

Contract: a worker that was consuming and is sent SIGTERM (a deploy, a scale-down,
``docker stop``) shuts down with exit code 0 and logs no crash: an orchestrator
must be able to tell a stop it asked for from a crash, and alerts on crash lines
must not fire on every deploy. Its work is committed: the events it consumed
took effect. With its broker gone, or silent (no FIN, no RST) while offsets of batches
it applied wait for their commit, it still exits within seconds, well inside an
orchestrator's grace (Kubernetes' is 30 s): it waited for the silent broker's return.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.integration.support.brokers import OwnBroker, own_broker
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order, created_and_paid, messages
from tests.integration.support.state import Database, every_consumer
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import WorkerProcess, Workers

pytestmark = pytest.mark.integration

BROKER_GONE_SECONDS = 8.0  # the worker's fetches and heartbeats fail meanwhile
GONE_STOP_SECONDS = 20.0
SILENT_STOP_SECONDS = 25.0  # the batches' commit (5 s) and the close (10 s) wait in vain


async def test_sigterm_exits_zero_without_a_crash(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    dave = Order("dave", 4_200, (("SKU-D", 2),))
    await topic.send(messages(dave.created(), dave.paid()))
    worker = workers.start(database_url)
    await topic.drained(workers=[worker])

    code = worker.stop()

    assert code == 0, worker.tail(40)
    loud = [line for line in worker.log().splitlines() if "[ERROR]" in line or "[CRITICAL]" in line]
    assert loud == [], worker.tail(40)
    assert await db.balances() == {"dave": 42}
    assert await db.consumed_counts() == every_consumer(2)


@asynccontextmanager
async def worker_on_its_own_broker(
    tmp_path: Path, database_url: str
) -> AsyncIterator[tuple[OwnBroker, OrderTopic, WorkerProcess]]:
    """A worker on a broker of this test's own, which applied three orders and committed
    their offsets; killed, with the broker's connections restored, at the end."""
    async with own_broker(tmp_path) as broker, OrderTopic(broker.stream) as topic:
        workers = Workers(broker.stream, tmp_path / "workers")
        try:
            worker = workers.start(database_url)
            await topic.send(created_and_paid(3))
            await topic.drained(workers=[worker], within=90)
            yield broker, topic, worker
        finally:
            broker.restore()
            workers.kill_all()


def stopped(worker: WorkerProcess, timeout: float) -> tuple[int | None, float]:
    """SIGTERM ``worker``: its exit code, and the seconds it took."""
    started = time.monotonic()
    code = worker.stop(timeout=timeout)
    return code, time.monotonic() - started


async def test_sigterm_with_the_broker_gone_exits_within_seconds(
    tmp_path: Path, database_url: str
) -> None:
    """With its broker gone (a proxy resets every connection and refuses new ones), a
    worker sent SIGTERM exits 0 within ``GONE_STOP_SECONDS``, no thread ended by an
    exception on the way. (aiokafka's close let a cancellation escape: the consumer thread
    died with a traceback logged as a hundred lines, and the worker waited 60 s for it.)"""
    async with worker_on_its_own_broker(tmp_path, database_url) as (broker, _, worker):
        broker.take_down()
        await asyncio.sleep(BROKER_GONE_SECONDS)

        code, took = stopped(worker, timeout=90)

        assert code == 0, worker.tail(40)
        assert took < GONE_STOP_SECONDS, f"{took:.1f}s\n{worker.tail(60)}"
        assert "Exception in thread" not in worker.log(), worker.tail(60)
        assert "Error while stopping child" not in worker.log(), worker.tail(60)


async def test_sigterm_with_the_broker_silent_exits_within_seconds(
    tmp_path: Path, database_url: str, db: Database
) -> None:
    """The broker goes silent right after the worker applied a batch, before faust's
    periodic commit (every 2.8 s) took its offsets: on SIGTERM, faust's wait for the
    batches in hand commits them, and that commit is never answered."""
    async with worker_on_its_own_broker(tmp_path, database_url) as (broker, topic, worker):
        await topic.send(created_and_paid(3))
        await eventually(
            db.consumed_counts,
            lambda counts: counts == every_consumer(12),
            what="the second batch applied",
            within=60,
            workers=[worker],
        )
        broker.cut_off()

        code, took = stopped(worker, timeout=120)

        assert code == 0, worker.tail(40)
        assert took < SILENT_STOP_SECONDS, f"{took:.1f}s\n{worker.tail(60)}"
