"""A relay keeps its lease through every wait, and sends nothing it no longer holds.

Contract (``app.outbox.relay`` with ``app.outbox.lease``, over SQLite and a fake
broker): while a relay waits between tries of a send the broker refused, longer than
its whole lease, its lease is renewed, so a second relay claims none of its rows and
every record reaches the topic once, in aggregate order. When another relay took a
row over all the same (the first was frozen past its lease), the first relay sends
neither that row again nor any later row of its aggregate, and marks nothing: the
topic never shows an aggregate going backwards (``x1, x2, x1``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import tables
from app.db.engine import create_engine, session_factory
from app.outbox import NewEvent, add_events
from app.outbox.message import Message
from app.outbox.relay import Relay, RelayConfig
from app.pipeline.pause import Backoff
from tests.one_by_one import one_by_one

LEASE = 0.6


class Broker:
    """Refuses every send while ``down`` is set (then ``on_refuse`` runs), else takes it."""

    def __init__(self) -> None:
        self.down = False
        self.sent: list[str] = []
        self.refused = 0
        self.on_refuse: Any = None

    async def already_sent(self, wanted: dict[int, tuple[Message, Any]]) -> set[int]:
        found = set()
        for row_id, (message, _) in wanted.items():
            if dict(message.headers)["id"].decode() in self.sent:
                found.add(row_id)
        return found

    async def renew(self) -> None:
        self.renewed = getattr(self, "renewed", 0) + 1

    async def missing_topics(self, topics: set[str]) -> set[str]:
        return set()

    async def send_many(self, messages: Sequence[Message]) -> list[asyncio.Future[Any] | Exception]:
        return await one_by_one(self.send, messages)

    async def send(self, message: Message) -> asyncio.Future[Any]:
        if self.down:
            self.refused += 1
            if self.on_refuse is not None:
                await self.on_refuse()
            raise KafkaConnectionError("broker gone")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.sent.append(dict(message.headers)["id"].decode())
        future.set_result(None)
        return future


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'outbox.db'}")
    async with eng.begin() as conn:
        await conn.run_sync(tables.metadata.create_all)
    async with session_factory(eng)() as session, session.begin():
        await add_events(
            session,
            [
                NewEvent("orders", "E", "Order", agg, {}, event_id=eid)
                for eid, agg in (("x1", "x"), ("y1", "y"), ("x2", "x"), ("y2", "y"))
            ],
        )
    yield eng
    await eng.dispose()


def relay(engine: AsyncEngine, broker: Broker, pause: float) -> Relay:
    config = RelayConfig(
        lease_seconds=LEASE,
        pause_backoff=Backoff(pause, pause, 0.0),
        attempt_backoff=Backoff(0.01, 0.01),
    )
    return Relay(session_factory(engine), broker, config)


async def test_a_relay_waiting_on_a_refusing_broker_keeps_its_lease(engine: AsyncEngine) -> None:
    broker = Broker()
    broker.down = True
    first = relay(engine, broker, pause=0.3)
    second = relay(engine, broker, pause=0.3)
    cycle = asyncio.ensure_future(first.run_once())
    await asyncio.sleep(LEASE * 2.5)  # several tries, each refused, past the lease

    try:
        claimed = await asyncio.wait_for(second.run_once(), LEASE * 3)
    except TimeoutError:
        claimed = -1  # it claimed rows and is stuck sending them into the refusing broker
    assert claimed == 0, "the second relay claimed rows the first still held"
    broker.down = False
    assert await cycle == 4
    assert broker.refused >= 3
    assert broker.sent in (["x1", "y1", "x2", "y2"], ["y1", "x1", "y2", "x2"])


async def test_a_relay_whose_rows_were_taken_over_sends_none_of_them(
    engine: AsyncEngine,
) -> None:
    broker = Broker()
    broker.down = True
    t = tables.outbox_event

    async def taken_over() -> None:
        # What another relay does after this one was frozen past its lease: claims the
        # rows of aggregate x (and ships them, once the broker is back).
        async with engine.begin() as conn:
            await conn.execute(
                update(t).where(t.c.aggregate_id == "x").values(lease_owner="another relay")
            )
        broker.on_refuse = None
        broker.down = False

    broker.on_refuse = taken_over
    first = relay(engine, broker, pause=LEASE)

    await asyncio.wait_for(first.run_once(), 10)

    assert "x1" not in broker.sent and "x2" not in broker.sent, broker.sent
    assert broker.sent == ["y1", "y2"]
    assert first.published == 2
