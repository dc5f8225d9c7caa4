"""A relay claims and publishes its next cycle while the last one settles, in aggregate order.

Contract (``Relay.step``, over SQLite and a fake broker): a cycle's settlement (marking
its rows ``PUBLISHED``) runs in the background while the next cycle claims and
publishes; until it commits, the next claim takes none of its rows nor any later row of
their aggregates, and the other aggregates' rows go out meanwhile. At most one
settlement is in flight: the next step waits for it before it hands over its own.
``run`` waits for the last one before it returns, so a stopped relay leaves no row it
published unmarked.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import session_factory
from app.outbox.relay import Relay, RelayConfig
from tests.unit.test_relay_publishes_each_aggregate_in_waves import (
    QUICK,
    FakeBroker,
    state,
    write,
)

WITHIN = 5.0


class CountingBroker(FakeBroker):
    """Sets ``four_sent`` once four records went out."""

    def __init__(self) -> None:
        super().__init__()
        self.four_sent = asyncio.Event()

    async def send(self, message: Any) -> asyncio.Future[Any]:
        future = await super().send(message)
        if len(self.sent) >= 4:
            self.four_sent.set()
        return future


class HeldRelay(Relay):
    """Each settlement waits for ``release`` before it writes anything."""

    def __init__(self, engine: AsyncEngine, broker: FakeBroker, batch_size: int) -> None:
        config = RelayConfig(batch_size=batch_size, attempt_backoff=QUICK, pause_backoff=QUICK)
        super().__init__(session_factory(engine), broker, config)
        self.release = asyncio.Event()
        self.settling = asyncio.Event()

    async def _settle(self, cycle: Any) -> None:
        self.settling.set()
        await self.release.wait()
        await super()._settle(cycle)


async def test_the_next_cycle_goes_out_while_the_last_one_settles(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("a1", "a"), ("a2", "a"), ("b1", "b"), ("a3", "a"), ("b2", "b"))
    broker = CountingBroker()
    relay = HeldRelay(engine, broker, batch_size=2)

    assert await asyncio.wait_for(relay.step(), WITHIN) == 2  # a1, a2; their settlement waits
    await asyncio.wait_for(relay.settling.wait(), WITHIN)
    second = asyncio.ensure_future(relay.step())
    await asyncio.wait_for(broker.four_sent.wait(), WITHIN)

    assert broker.sent == ["a1", "a2", "b1", "b2"]  # a3 waits for a1 and a2 to be marked
    assert not second.done()  # it waits for the first settlement before handing its own
    assert {eid: s for eid, (s, _, _) in (await state(engine)).items()} == {
        "a1": "PROCESSING",
        "a2": "PROCESSING",
        "b1": "PROCESSING",
        "b2": "PROCESSING",
        "a3": "PENDING",
    }

    relay.release.set()
    assert await asyncio.wait_for(second, WITHIN) == 2
    assert await relay.step() == 1
    await relay._settled()
    assert broker.sent == ["a1", "a2", "b1", "b2", "a3"]
    assert {s for s, _, _ in (await state(engine)).values()} == {"PUBLISHED"}


async def test_a_stopped_run_waits_for_the_settlement_in_flight(engine: AsyncEngine) -> None:
    await write(engine, ("a1", "a"), ("b1", "b"))
    broker = FakeBroker()
    relay = HeldRelay(engine, broker, batch_size=10)
    running = asyncio.ensure_future(relay.run())
    await asyncio.wait_for(relay.settling.wait(), WITHIN)

    relay.stop()
    await asyncio.sleep(0.05)
    assert not running.done()  # the rows it published are not marked yet

    relay.release.set()
    await asyncio.wait_for(running, WITHIN)
    assert {s for s, _, _ in (await state(engine)).values()} == {"PUBLISHED"}
