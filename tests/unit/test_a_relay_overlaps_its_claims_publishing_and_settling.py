"""A relay claims, publishes and settles three cycles at once, in aggregate order.

Contract (``Relay.step``, over SQLite and a fake broker): a cycle's settlement (marking
its rows ``PUBLISHED``) runs in the background while the next cycle claims and
publishes; after a full claim the next claim is made while the cycle publishes. Until a
cycle's settlement commits, a claim takes none of its rows nor any later row of their
aggregates, and the other aggregates' rows go out meanwhile. At most one settlement and
one claim ahead are in flight: the next step waits for the settlement before it hands
over its own. A relay never claims its own rows whose settlement waits, even once their
lease has expired meanwhile (it would send them again). ``run`` waits for the last
settlement before it returns, so a stopped relay leaves no row it published unmarked,
and hands a claim made ahead back (``PENDING``, never sent).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
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


class SlowAckBroker(FakeBroker):
    """Sends at once and acknowledges once ``acks`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.acks = asyncio.Event()
        self._later: list[asyncio.Future[None]] = []

    async def send(self, message: Any) -> asyncio.Future[Any]:
        sent = await super().send(message)
        held: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def acknowledge() -> None:
            await self.acks.wait()
            held.set_result(sent.result())

        self._later.append(asyncio.ensure_future(acknowledge()))
        return held


class QuickRelay(Relay):
    """A relay over ``engine`` with quick back-offs, on a clock of the test's (``now``)."""

    def __init__(self, engine: AsyncEngine, broker: FakeBroker, batch_size: int) -> None:
        config = RelayConfig(batch_size=batch_size, attempt_backoff=QUICK, pause_backoff=QUICK)
        self.now = datetime.now(UTC)
        super().__init__(session_factory(engine), broker, config, clock=lambda: self.now)


class ClaimsRelay(QuickRelay):
    """Keeps each claim's event ids; ``second_claim`` once two were made."""

    def __init__(self, engine: AsyncEngine, broker: FakeBroker, batch_size: int) -> None:
        super().__init__(engine, broker, batch_size)
        self.claims: list[list[str]] = []
        self.second_claim = asyncio.Event()

    async def _claimed(self) -> Any:
        cycle = await super()._claimed()
        self.claims.append([row["event_id"] for row in cycle.rows] if cycle else [])
        if len(self.claims) == 2:
            self.second_claim.set()
        return cycle


class HeldRelay(QuickRelay):
    """Each settlement waits for ``release`` before it writes anything."""

    def __init__(self, engine: AsyncEngine, broker: FakeBroker, batch_size: int) -> None:
        super().__init__(engine, broker, batch_size)
        self.release = asyncio.Event()
        self.settling = asyncio.Event()

    async def _settle(self, cycle: Any) -> None:
        self.settling.set()
        await self.release.wait()
        await super()._settle(cycle)


async def ship_what_is_left(relay: Relay) -> None:
    """Step until a cycle claims something (a claim made ahead while a1 and a2 were still
    unmarked found nothing), then wait for its settlement."""
    for _ in range(3):
        if await asyncio.wait_for(relay.step(), WITHIN):
            break
    await relay._settled()


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
    await ship_what_is_left(relay)
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


async def test_after_a_full_claim_the_next_is_made_while_the_cycle_publishes(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("a1", "a"), ("a2", "a"), ("b1", "b"), ("a3", "a"), ("b2", "b"))
    broker = SlowAckBroker()
    relay = ClaimsRelay(engine, broker, batch_size=2)
    first = asyncio.ensure_future(relay.step())
    await asyncio.wait_for(relay.second_claim.wait(), WITHIN)

    assert broker.sent == ["a1"]  # its acknowledgement is held: a2 waits for it
    assert relay.claims == [["a1", "a2"], ["b1", "b2"]]  # not a3: a1 and a2 come first
    assert not first.done()

    broker.acks.set()
    assert await asyncio.wait_for(first, WITHIN) == 2
    assert await asyncio.wait_for(relay.step(), WITHIN) == 2  # the claim made ahead
    await ship_what_is_left(relay)
    assert broker.sent == ["a1", "a2", "b1", "b2", "a3"]
    assert {s for s, _, _ in (await state(engine)).values()} == {"PUBLISHED"}


async def test_a_stopped_run_hands_back_the_claim_it_made_ahead(engine: AsyncEngine) -> None:
    await write(engine, ("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b"))
    broker = SlowAckBroker()
    relay = ClaimsRelay(engine, broker, batch_size=2)
    running = asyncio.ensure_future(relay.run())
    await asyncio.wait_for(relay.second_claim.wait(), WITHIN)

    relay.stop()
    broker.acks.set()
    await asyncio.wait_for(running, WITHIN)

    assert broker.sent == ["a1", "a2"]
    assert {eid: s for eid, (s, _, _) in (await state(engine)).items()} == {
        "a1": "PUBLISHED",
        "a2": "PUBLISHED",
        "b1": "PENDING",
        "b2": "PENDING",
    }


async def test_a_relay_never_takes_its_own_rows_whose_settlement_waits(
    engine: AsyncEngine,
) -> None:
    await write(engine, ("a1", "a"), ("b1", "b"))
    broker = FakeBroker()
    relay = HeldRelay(engine, broker, batch_size=10)
    assert await asyncio.wait_for(relay.step(), WITHIN) == 2
    await asyncio.wait_for(relay.settling.wait(), WITHIN)

    relay.now += timedelta(seconds=relay.config.lease_seconds * 2)  # the lease ran out
    assert await asyncio.wait_for(relay._claimed(), WITHIN) is None  # neither a1 nor b1 again

    relay.release.set()
    await asyncio.wait_for(relay._settled(), WITHIN)
    assert broker.sent == ["a1", "b1"]  # once each
    assert {s for s, _, _ in (await state(engine)).values()} == {"PUBLISHED"}


async def test_an_empty_claim_whose_close_fails_is_no_crash(engine: AsyncEngine) -> None:
    """An empty claim closes its transaction; a connection lost just then (the database
    dropped, a failover) ends that close with an error. Nothing was locked or written: the
    claim is empty, and the next one pauses on the outage as any claim does. (The error
    escaped the relay's run and stopped it: ``/ready`` red until the worker restarted.)"""

    class LostAsItCloses(QuickRelay):
        async def _db_open(self, what: str, work: Any) -> Any:
            session, rows, tx = await super()._db_open(what, work)

            async def lost() -> None:
                raise ConnectionResetError("connection was closed in the middle of operation")

            tx.push_async_callback(lost)
            return session, rows, tx

    relay = LostAsItCloses(engine, FakeBroker(), batch_size=10)

    assert await asyncio.wait_for(relay._claimed(), WITHIN) is None
