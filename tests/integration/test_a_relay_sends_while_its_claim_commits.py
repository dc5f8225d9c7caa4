"""A relay sends nothing of a claim before the claim commits; nobody else takes its rows.

Contract (``Relay._claimed``, PostgreSQL and MariaDB): a claim's rows are locked in its
transaction, and their marking as ``PROCESSING`` commits in the background (a claim made
ahead commits while the cycle in hand publishes); no row of the claim goes out before
that commit, and its settlement waits for it too. Until it commits, the locks alone keep
every other claim from those rows and from their aggregates' later rows. A claim that
fails to commit sends nothing at all: its rows stay ``PENDING`` (no attempt counted) and
the next claim, this relay's or another's, sends each of them once, in order. (When the
heads went out while the claim committed, a lost commit left them on the topic with
their rows ``PENDING``, and the next claim sent them a second time: the chaos soak found a
dead-letter record twice on its DLT.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

import app.outbox.relay as relay_module
from app.db.engine import create_engine, session_factory
from app.outbox import NewEvent
from app.outbox.claim import claim
from app.outbox.message import Message
from app.outbox.relay import Relay, RelayConfig
from app.pipeline.pause import Backoff
from tests.integration.support.outbox import rows, write
from tests.one_by_one import one_by_one

pytestmark = pytest.mark.integration

WITHIN = 10.0
QUICK = Backoff(0.001, 0.001)


class GatedBroker:
    """Keeps every record sent (its eventId) and acknowledges them once ``acks`` is set;
    ``first_wave`` is set once ``wave`` records went out."""

    def __init__(self, wave: int) -> None:
        self.sent: list[str] = []
        self.searched: set[int] = set()  # rows looked for on the topic
        self.acks = asyncio.Event()
        self.first_wave = asyncio.Event()
        self._wave = wave
        self._later: list[asyncio.Future[None]] = []

    async def missing_topics(self, topics: set[str]) -> set[str]:
        return set()

    async def already_sent(self, wanted: Any) -> set[int]:
        """The rows whose record went out before (its eventId among those sent)."""
        self.searched.update(wanted)
        return {
            row_id
            for row_id, (message, _) in wanted.items()
            if dict(message.headers)["id"].decode() in self.sent
        }

    async def renew(self) -> None:
        return None

    async def send_many(self, messages: Sequence[Message]) -> list[asyncio.Future[Any] | Exception]:
        return await one_by_one(self.send, messages)

    async def send(self, message: Message) -> asyncio.Future[Any]:
        self.sent.append(dict(message.headers)["id"].decode())
        if len(self.sent) >= self._wave:
            self.first_wave.set()
        acknowledged: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def acknowledge() -> None:
            await self.acks.wait()
            acknowledged.set_result(None)

        self._later.append(asyncio.ensure_future(acknowledge()))
        return acknowledged


class WatchedRelay(Relay):
    """Its claims' commits wait for ``commit`` (when given); ``locked`` once a claim's rows
    are locked, ``marked_twice`` once two claims' commits ended."""

    def __init__(self, database_url: str, broker: GatedBroker, commit: asyncio.Event | None):
        self.engine = create_engine(database_url, pool_size=3)
        # Claims of ten: a claim is made ahead only after a claim of ten rows.
        config = RelayConfig(batch_size=10, attempt_backoff=QUICK, pause_backoff=QUICK)
        super().__init__(session_factory(self.engine), broker, config)
        self.commit = commit
        self.locked = asyncio.Event()
        self.marked_twice = asyncio.Event()
        self._marked = 0

    async def _mark(self, *args: Any) -> None:
        self.locked.set()
        if self.commit is not None:
            await self.commit.wait()
        await super()._mark(*args)
        self._marked += 1
        if self._marked == 2:
            self.marked_twice.set()


def events(*pairs: tuple[str, str]) -> list[NewEvent]:
    """``(eventId, aggregate)`` pairs, in this order."""
    return [NewEvent("orders", "E", "Order", agg, {}, event_id=eid) for eid, agg in pairs]


async def statuses(database_url: str) -> dict[str, tuple[str, int]]:
    found = await rows(database_url, "event_id", "status", "retry_count")
    return {row["event_id"]: (row["status"], row["retry_count"]) for row in found}


async def another_claim(database_url: str) -> list[str]:
    """What a second relay's claim takes now (committed as its own)."""
    engine = create_engine(database_url, pool_size=1)
    try:
        async with session_factory(engine)() as session, session.begin():
            now = datetime.now(UTC)
            taken = await claim(session, "relay-2", now, now + timedelta(minutes=1), 10)
        return [row["event_id"] for row in taken]
    finally:
        await engine.dispose()


def in_order(sent: Sequence[str], *chain: str) -> bool:
    """Whether every record of ``chain`` first went out after the one before it."""
    firsts = [sent.index(eid) for eid in chain]
    return firsts == sorted(firsts)


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
async def test_nothing_goes_out_before_the_claim_commits_and_nobody_takes_its_rows(
    migrated_database: str,
) -> None:
    pairs = [("a1", "a"), ("b1", "b"), ("a2", "a")]
    await write(migrated_database, events(*pairs), per_transaction=len(pairs))
    broker = GatedBroker(wave=2)
    broker.acks.set()
    commit = asyncio.Event()
    relay = WatchedRelay(migrated_database, broker, commit)
    step = asyncio.ensure_future(relay.step())  # claims a1, b1 and a2
    try:
        await asyncio.wait_for(relay.locked.wait(), WITHIN)
        later = [("a3", "a"), ("c1", "c")]
        await write(migrated_database, events(*later), per_transaction=len(later))
        # Locked, not committed: a3 waits behind a1 and a2 as it would behind PROCESSING.
        assert await another_claim(migrated_database) == ["c1"]
        await asyncio.sleep(0.3)  # time for a send that did not wait for the commit

        assert broker.sent == []
        assert not step.done()
        assert {s for s, _ in (await statuses(migrated_database)).values()} == {
            "PENDING",
            "PROCESSING",  # c1, the other relay's
        }

        commit.set()
        assert await asyncio.wait_for(step, WITHIN) == 3
        await asyncio.wait_for(relay._settled(), WITHIN)
    finally:
        commit.set()
        await asyncio.wait([step], timeout=WITHIN)
        await relay.engine.dispose()

    assert broker.sent == ["a1", "b1", "a2"]
    assert await statuses(migrated_database) == {
        "a1": ("PUBLISHED", 0),
        "b1": ("PUBLISHED", 0),
        "a2": ("PUBLISHED", 0),
        "a3": ("PENDING", 0),
        "c1": ("PROCESSING", 0),
    }


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
async def test_a_claim_made_ahead_commits_while_the_cycle_in_hand_publishes(
    migrated_database: str,
) -> None:
    pairs = [(f"e{i}", f"agg-{i}") for i in range(20)]  # two full claims of ten
    await write(migrated_database, events(*pairs), per_transaction=len(pairs))
    broker = GatedBroker(wave=10)
    relay = WatchedRelay(migrated_database, broker, commit=None)
    try:
        first = asyncio.ensure_future(relay.step())
        await asyncio.wait_for(broker.first_wave.wait(), WITHIN)  # the first ten sent
        # Their acknowledgements wait: the claim made ahead commits meanwhile.
        await asyncio.wait_for(relay.marked_twice.wait(), WITHIN)
        assert len(broker.sent) == 10
        broker.acks.set()
        assert await asyncio.wait_for(first, WITHIN) == 10
        assert await asyncio.wait_for(relay.step(), WITHIN) == 10
        await asyncio.wait_for(relay._settled(), WITHIN)
    finally:
        broker.acks.set()
        await relay.engine.dispose()

    assert sorted(broker.sent) == sorted(e for e, _ in pairs)
    assert await statuses(migrated_database) == {e: ("PUBLISHED", 0) for e, _ in pairs}


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
async def test_a_claim_that_does_not_commit_sends_nothing_and_its_rows_go_out_once(
    migrated_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = [("a1", "a"), ("b1", "b"), ("a2", "a")]
    await write(migrated_database, events(*pairs), per_transaction=len(pairs))
    broker = GatedBroker(wave=2)
    broker.acks.set()
    relay = WatchedRelay(migrated_database, broker, commit=None)
    marking = relay_module.mark_processing

    async def cut_once(*args: Any) -> None:
        monkeypatch.setattr(relay_module, "mark_processing", marking)
        await asyncio.sleep(0.3)  # time for a send that did not wait for the commit
        raise OperationalError("UPDATE outbox_event", {}, ConnectionResetError("cut"))

    monkeypatch.setattr(relay_module, "mark_processing", cut_once)
    try:
        assert await asyncio.wait_for(relay.step(), WITHIN) == 3
        await asyncio.wait_for(relay._settled(), WITHIN)

        assert broker.sent == []
        assert await statuses(migrated_database) == {e: ("PENDING", 0) for e, _ in pairs}
        # Another relay's claim takes them now, as any PENDING rows.
        assert await another_claim(migrated_database) == ["a1", "b1", "a2"]
    finally:
        await relay.engine.dispose()
    assert broker.searched == set()


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
async def test_a_claim_whose_commit_was_cancelled_sends_nothing(
    migrated_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = [("a1", "a"), ("b1", "b")]
    await write(migrated_database, events(*pairs), per_transaction=len(pairs))
    broker = GatedBroker(wave=2)
    broker.acks.set()
    relay = WatchedRelay(migrated_database, broker, commit=None)
    marking = asyncio.Event()

    async def never_ends(*args: Any) -> None:
        marking.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(relay_module, "mark_processing", never_ends)
    try:
        cycle = await asyncio.wait_for(relay._claimed(), WITHIN)
        assert cycle is not None and cycle.marking is not None
        await asyncio.wait_for(marking.wait(), WITHIN)
        cycle.marking.cancel()  # the transaction rolls back: the rows were never marked
        await asyncio.wait_for(relay._publish_cycle(cycle), WITHIN)
        await asyncio.wait_for(relay._end(cycle), WITHIN)
    finally:
        await relay.engine.dispose()

    assert broker.sent == []
    assert await statuses(migrated_database) == {e: ("PENDING", 0) for e, _ in pairs}
