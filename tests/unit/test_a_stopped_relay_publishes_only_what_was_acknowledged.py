"""A relay that stops marks a row published only once the broker acknowledged its record.

Contract (``Relay.stop``, ``Relay.finish``; SQLite and a fake broker that answers for
each record only when the test says): a row whose record is acknowledged within the
stop's grace is ``PUBLISHED``. One still unacknowledged when the grace runs out is
neither published nor handed back: it stays ``PROCESSING`` under the relay's lease
while the producer holds its record, ``run`` returns, the rows never sent go back to
``PENDING``, and nothing counts as published (``Relay.published``, the
``effectively_once_relay_published_total`` metric). ``finish``, once the producer
closed, writes what became of it: acknowledged, ``PUBLISHED`` and counted; failed
(never sent), ``PENDING`` with no lease and no attempt counted; still unanswered, left
``PROCESSING`` under the lease for whoever takes it over to look for on the topic. A
stop that comes while the relay waits for acknowledgements ends that wait at the end
of the grace, not at the next lease renewal.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from aiokafka.errors import KafkaConnectionError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import tables
from app.db.engine import session_factory
from app.metrics import REGISTRY
from app.outbox import NewEvent, add_events
from app.outbox.message import Message
from app.outbox.relay import Relay, RelayConfig
from tests.one_by_one import one_by_one

GRACE = 0.2


class AnsweringBroker:
    """Sends nothing on its own: every record waits until the test ``ack``s it, or
    ``close`` answers for those still held. ``sent`` lists the eventIds in send order."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.futures: dict[str, asyncio.Future[Any]] = {}
        self.something_sent = asyncio.Event()

    async def missing_topics(self, topics: set[str]) -> set[str]:
        return set()

    async def already_sent(self, wanted: dict[int, tuple[Message, Any]]) -> set[int]:
        return set()

    async def renew(self) -> None:
        self.renewed = getattr(self, "renewed", 0) + 1

    async def send_many(self, messages: Sequence[Message]) -> list[asyncio.Future[Any] | Exception]:
        return await one_by_one(self.send, messages)

    async def send(self, message: Message) -> asyncio.Future[Any]:
        event_id = dict(message.headers)["id"].decode()
        self.sent.append(event_id)
        self.futures[event_id] = asyncio.get_running_loop().create_future()
        self.something_sent.set()
        return self.futures[event_id]

    def ack(self, event_id: str) -> None:
        self.futures[event_id].set_result(None)

    def close(self, *, delivered: bool) -> None:
        """The producer closes: it delivers what it held, or gives up on it unsent."""
        for future in self.futures.values():
            if not future.done():
                if delivered:
                    future.set_result(None)
                else:
                    future.set_exception(KafkaConnectionError("producer closed"))


async def write(engine: AsyncEngine, *rows: tuple[str, str]) -> None:
    """``(event id, aggregate)`` pairs, in this order."""
    async with session_factory(engine)() as session, session.begin():
        await add_events(
            session,
            [NewEvent("orders", "E", "Order", agg, {}, event_id=eid) for eid, agg in rows],
        )


async def state(engine: AsyncEngine) -> dict[str, tuple[str, bool, int]]:
    """eventId -> (status, held under a lease, attempts counted)."""
    t = tables.outbox_event
    async with engine.connect() as conn:
        found = await conn.execute(
            select(t.c.event_id, t.c.status, t.c.lease_owner, t.c.retry_count)
        )
        return {eid: (status, owner is not None, count) for eid, status, owner, count in found}


def published_total() -> float:
    return REGISTRY.get_sample_value("effectively_once_relay_published_total") or 0.0


async def stopped_while_waiting(
    engine: AsyncEngine, broker: AnsweringBroker, lease_seconds: float = 60.0
) -> tuple[Relay, asyncio.Task[None]]:
    """A relay running until its first send, then told to stop."""
    relay = Relay(
        session_factory(engine), broker, RelayConfig(stop_grace=GRACE, lease_seconds=lease_seconds)
    )
    running = asyncio.create_task(relay.run())
    await asyncio.wait_for(broker.something_sent.wait(), 5)
    relay.stop()
    return relay, running


async def test_a_record_acknowledged_within_the_grace_is_published(engine: AsyncEngine) -> None:
    await write(engine, ("a1", "a"))
    broker, before = AnsweringBroker(), published_total()
    relay, running = await stopped_while_waiting(engine, broker)
    broker.ack("a1")
    await asyncio.wait_for(running, 5)
    await relay.finish()
    assert await state(engine) == {"a1": ("PUBLISHED", False, 0)}
    assert relay.published == 1
    assert published_total() == before + 1


async def test_unacknowledged_when_the_grace_runs_out_is_neither_published_nor_handed_back(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("a1", "a"), ("b1", "b"), ("a2", "a"))
    broker, before = AnsweringBroker(), published_total()
    relay, running = await stopped_while_waiting(engine, broker)
    broker.ack("b1")
    await asyncio.wait_for(running, 5)  # the grace ran out with a1 unanswered
    assert broker.sent == ["a1", "b1"]  # a2 waits for a1: never sent
    assert await state(engine) == {
        "a1": ("PROCESSING", True, 0),  # the producer still holds its record
        "b1": ("PUBLISHED", False, 0),
        "a2": ("PENDING", False, 0),
    }
    assert relay.published == 1
    assert published_total() == before + 1


async def test_what_the_producer_gives_up_on_at_close_goes_back_to_pending(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("a1", "a"))
    broker, before = AnsweringBroker(), published_total()
    relay, running = await stopped_while_waiting(engine, broker)
    await asyncio.wait_for(running, 5)
    broker.close(delivered=False)
    await relay.finish()
    assert await state(engine) == {"a1": ("PENDING", False, 0)}  # no lease, no attempt
    assert relay.published == 0
    assert published_total() == before


async def test_what_the_producer_delivers_at_close_is_published(engine: AsyncEngine) -> None:
    await write(engine, ("a1", "a"))
    broker, before = AnsweringBroker(), published_total()
    relay, running = await stopped_while_waiting(engine, broker)
    await asyncio.wait_for(running, 5)
    assert await state(engine) == {"a1": ("PROCESSING", True, 0)}
    broker.close(delivered=True)
    await relay.finish()
    assert await state(engine) == {"a1": ("PUBLISHED", False, 0)}
    assert relay.published == 1
    assert published_total() == before + 1


async def test_a_record_never_answered_leaves_its_row_under_the_lease(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("a1", "a"))
    broker, before = AnsweringBroker(), published_total()
    relay, running = await stopped_while_waiting(engine, broker)
    await asyncio.wait_for(running, 5)
    await relay.finish()  # the producer closed without an answer for a1
    assert await state(engine) == {"a1": ("PROCESSING", True, 0)}
    assert relay.published == 0
    assert published_total() == before


async def test_a_stop_ends_the_wait_for_acknowledgements_after_the_grace(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("a1", "a"))
    broker = AnsweringBroker()
    # The lease is renewed every 20 s while the relay waits: the stop must not wait for that.
    _, running = await stopped_while_waiting(engine, broker, lease_seconds=60.0)
    stopped = time.monotonic()
    await asyncio.wait({running}, timeout=GRACE + 2)
    assert running.done(), "the stop waits for the next lease renewal, 20 s away"
    assert time.monotonic() - stopped < GRACE + 1
