"""A relay stopped with SIGTERM in the middle of a claim leaves every row whole.

Contract: a ``python -m app relay`` process holds one large claim (a few aggregates'
long chains, sent wave after acknowledged wave) when it is sent SIGTERM; it keeps
sending for its grace (``RELAY_STOP_GRACE_SECONDS``), and meanwhile the broker stops
answering (a proxy holds what is sent), so that the grace runs out with records sent
and unacknowledged. Their rows are then neither ``PUBLISHED`` nor ``PENDING``: they
stay ``PROCESSING`` while the producer holds their records. Once what the proxy held
reaches the broker, the relay exits 0, and every row is either ``PUBLISHED`` and on
the topic, or ``PENDING`` (no lease) and not on it: none is marked published whose
record the broker never acknowledged, none is handed back whose record still reached
the topic (the relay claiming it next would send a second copy). No record is on the
topic twice; each aggregate's are in order. On SQLite, PostgreSQL and MariaDB, one
broker for all three.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from app.db.migrate import upgrade_to_head
from tests.integration.support.brokers import OwnBroker, own_broker
from tests.integration.support.databases import BACKENDS
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.outbox import (
    copies,
    out_of_order,
    rows,
    shipped,
    statuses,
    versions_of,
    write,
)
from tests.integration.support.relays import Relays
from tests.integration.support.waiting import eventually

pytestmark = pytest.mark.integration

AGGREGATES = 3
VERSIONS = 1_500  # waves: far more than the relay sends before the broker is cut off
GRACE_SECONDS = 1.0
RELAY = {
    "RELAY_BATCH_SIZE": str(AGGREGATES * VERSIONS),
    "RELAY_STOP_GRACE_SECONDS": str(GRACE_SECONDS),
}


async def test_a_relay_stopped_mid_claim_leaves_every_row_published_or_unsent(
    make_database: Callable[[str], Awaitable[str]], tmp_path: Path, subtests: pytest.Subtests
) -> None:
    async with own_broker(tmp_path) as broker, OrderTopic(broker.stream):
        for backend in BACKENDS:
            with subtests.test(backend=backend):  # each database reported on its own
                url = await make_database(backend)
                await upgrade_to_head(url)
                await stop_mid_claim(url, backend, broker, Relays(tmp_path / backend))


async def stop_mid_claim(url: str, backend: str, broker: OwnBroker, relays: Relays) -> None:
    """Claim every row, SIGTERM, cut the broker off within the grace, read the rows once
    the grace ran out, deliver what the proxy held, check every row."""
    stream = broker.stream
    events = versions_of(stream.topic, AGGREGATES, VERSIONS, prefix=backend)
    await write(url, events, per_transaction=1_500)
    try:
        relay = relays.start(url, stream.broker_url, RELAY)
        await eventually(
            lambda: statuses(url),
            lambda found: found.get("PROCESSING") == len(events),
            what=f"{backend}: the whole outbox claimed at once",
            within=30,
        )
        await asyncio.sleep(0.3)  # a few waves out, most still to go
        relay.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(GRACE_SECONDS / 3)  # it keeps sending in its grace
        broker.cut_off()
        await eventually(
            lambda: statuses(url),
            lambda found: "PENDING" in found,
            what=f"{backend}: the grace ran out and the relay handed back what it never sent",
            within=GRACE_SECONDS + 10,
        )
        at_grace_end = await rows(url, "event_id", "status")
        assert relay.alive, relay.describe()  # its producer still holds the wave in flight
        broker.deliver_held()
        code = await asyncio.to_thread(relay.process.wait, 30)
    finally:
        relays.kill_all()
        broker.deliver_held()
    assert code == 0, relay.describe()
    on_topic = [
        e for e in await shipped(stream, stream.topic) if e["aggregateId"].startswith(backend)
    ]
    final = await rows(url, "event_id", "status", "lease_owner")
    sent = {env["eventId"] for env in on_topic}
    published, pending = by_status(final, "PUBLISHED"), by_status(final, "PENDING")
    assert sorted(published - sent) == [], "marked PUBLISHED, never on the topic"
    assert sorted(pending & sent) == [], "handed back PENDING, yet on the topic"
    assert published | pending == {row["event_id"] for row in final}
    assert published and pending  # the stop cut the claim
    assert [row["id"] for row in final if row["lease_owner"] is not None] == []
    assert copies(on_topic) == {}
    assert out_of_order(on_topic) == []
    # When the grace ran out, the rows whose records were in flight were still held: the
    # ones published later, and only those.
    unanswered = by_status(at_grace_end, "PROCESSING")
    assert unanswered, "no row held awaiting its acknowledgement when the grace ran out"
    assert by_status(at_grace_end, "PUBLISHED") | unanswered == published


def by_status(found: list[dict[str, Any]], status: str) -> set[str]:
    """The eventIds of the rows in ``status``."""
    return {row["event_id"] for row in found if row["status"] == status}
