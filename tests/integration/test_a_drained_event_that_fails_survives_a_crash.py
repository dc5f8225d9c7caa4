"""A parked event that fails when its gap closes survives a crash before its retry is published.

Contract: version 3 of an order waits in ``parked_event``; version 2 arrives, the
drain takes version 3 out of ``parked_event`` and its handler fails. The
transaction that deletes the parked row and marks the failure ``retrying`` also
holds the retry record (an outbox row), so when the worker is SIGKILLed before the
broker acknowledged that record (cut off by a proxy that drops what it held), nothing
is lost: the
restarted worker's relay ships the record, the retry tier applies version 3 once,
and the aggregate reaches version 3 for that consumer. (Published from memory after
the commit, the record died with the worker: version 3 was in no table and no
topic, its offset long committed, and the aggregate stuck at version 2 for good.)

The timing is deterministic: the test-only consumer ``drain-probe`` signals when
its handler runs on version 3 and fails it only when the test says so, after the
broker is cut off.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.db.tables import failed_event, outbox_event
from tests.integration.support.brokers import OwnBroker, own_broker
from tests.integration.support.databases import BACKENDS
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order, messages
from tests.integration.support.state import Database
from tests.integration.support.waiting import eventually, path_appears
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

PROBE = "drain-probe"
MODULES = "handlers,tests.integration.support.drain_probe"  # handlers: user_points


async def failure_status(db: Database, event_id: str) -> str | None:
    rows = await db._rows(
        select(failed_event.c.status).where(
            failed_event.c.consumer_group == PROBE, failed_event.c.event_id == event_id
        )
    )
    return rows[0][0] if rows else None


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_retry_of_a_drained_event_outlives_a_sigkill_before_it_was_published(
    database_url: str, db: Database, tmp_path: Path
) -> None:
    order = Order("user-1", 4_250)
    v1, v2, v3 = order.created(), order.paid(), order.paid(version=3)
    files = {name: tmp_path / name for name in ("marker", "go", "fixed")}
    env = {
        "DRAIN_PROBE_EVENT_ID": v3["eventId"],
        "DRAIN_PROBE_MARKER": str(files["marker"]),
        "DRAIN_PROBE_GO": str(files["go"]),
        "DRAIN_PROBE_FIXED": str(files["fixed"]),
        "CONSUMERS": PROBE,  # not the example consumers
        "RETRY_DELAYS": "1",
        "RELAY_LEASE_SECONDS": "2",
    }
    async with own_broker(tmp_path) as broker, OrderTopic(broker.stream) as topic:
        workers = Workers(broker.stream, tmp_path / "workers")
        try:
            await run(topic, workers, database_url, db, env, files, broker, (v1, v2, v3))
        finally:
            workers.kill_all()


async def run(
    topic: OrderTopic,
    workers: Workers,
    database_url: str,
    db: Database,
    env: dict[str, str],
    files: dict[str, Path],
    broker: OwnBroker,
    events: tuple[dict[str, Any], ...],
) -> None:
    v1, v2, v3 = events
    order_id = v1["aggregateId"]
    doomed = workers.start(database_url, handler_modules=MODULES, env=env)
    await topic.send(messages(v1, v3))
    await eventually(
        db.parked_count, lambda n: n == 1, what="version 3 parked", within=60, workers=[doomed]
    )
    await topic.drained(workers=[doomed])  # version 3's offset is committed: never read again

    await topic.send(messages(v2))
    await path_appears(files["marker"], within=30, workers=[doomed])
    broker.cut_off()  # nothing the worker sends from now on reaches the broker
    files["go"].touch()
    await eventually(
        lambda: failure_status(db, v3["eventId"]),
        lambda status: status == "retrying",
        what="the failure of version 3 committed",
        within=30,
        workers=[doomed],
    )
    assert await db.parked_count() == 0  # version 3 left parked_event with that commit
    await asyncio.sleep(1)  # the worker tries to publish the retry record, and hangs
    doomed.kill()
    broker.restore()

    files["fixed"].touch()
    restarted = workers.start(database_url, handler_modules=MODULES, env=env)
    await eventually(
        lambda: db.versions(order_id),
        lambda versions: versions.get(PROBE) == 3,
        what="the order at version 3 for drain-probe",
        within=60,
        workers=[restarted],
    )
    assert await db.tallies() == {v2["eventId"]: 1, v3["eventId"]: 1}
    assert await failure_status(db, v3["eventId"]) == "resolved"
    shipped = await db._rows(select(outbox_event.c.status, outbox_event.c.topic))
    assert shipped == [("PUBLISHED", f"{topic.stream.topic}.retry.1s")]
