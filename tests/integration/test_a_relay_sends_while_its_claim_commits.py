"""A relay sends a claim's chain heads while the claim commits; nobody else takes its rows.

Contract (``Relay._claimed``, PostgreSQL and MariaDB): a claim's rows are locked in its
transaction, and their marking as ``PROCESSING`` commits in the background while the
cycle's first wave (each chain's head) goes out; the rows behind a head wait for the
commit, and so does the settlement. Until it commits, the locks alone keep every other
claim from those rows and from their aggregates' later rows. A claim that fails to
commit sends nothing more of its rows: those already sent stay ``PENDING`` (no attempt
counted); the relay's next claim of them looks for their records on the topic first, and
sends only those it does not find (before, each went out a second time), each aggregate
still in order.
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
    """Its claims' commits wait for ``commit`` (when given); ``marked`` once one ended."""

    def __init__(self, database_url: str, broker: GatedBroker, commit: asyncio.Event | None):
        self.engine = create_engine(database_url, pool_size=3)
        # Never a full claim: no claim is made ahead while a cycle publishes.
        config = RelayConfig(batch_size=10, attempt_backoff=QUICK, pause_backoff=QUICK)
        super().__init__(session_factory(self.engine), broker, config)
        self.commit = commit
        self.marked = asyncio.Event()

    async def _mark(self, *args: Any) -> None:
        if self.commit is not None:
            await self.commit.wait()
        await super()._mark(*args)
        self.marked.set()


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
async def test_the_heads_go_out_before_the_claim_commits_and_nobody_takes_its_rows(
    migrated_database: str,
) -> None:
    pairs = [("a1", "a"), ("b1", "b"), ("a2", "a")]
    await write(migrated_database, events(*pairs), per_transaction=len(pairs))
    broker = GatedBroker(wave=2)
    commit = asyncio.Event()
    relay = WatchedRelay(migrated_database, broker, commit)
    step = asyncio.ensure_future(relay.step())  # claims a1, b1 and a2
    try:
        await asyncio.wait_for(broker.first_wave.wait(), WITHIN)
        later = [("a3", "a"), ("c1", "c")]
        await write(migrated_database, events(*later), per_transaction=len(later))

        assert broker.sent == ["a1", "b1"]
        assert {s for s, _ in (await statuses(migrated_database)).values()} == {"PENDING"}
        # Locked, not committed: a3 waits behind a1 and a2 as it would behind PROCESSING.
        assert await another_claim(migrated_database) == ["c1"]
        broker.acks.set()
        await asyncio.sleep(0.3)
        assert broker.sent == ["a1", "b1"]  # a2, behind a1, waits for the commit

        commit.set()
        assert await asyncio.wait_for(step, WITHIN) == 3
        await asyncio.wait_for(relay._settled(), WITHIN)
    finally:
        commit.set()
        broker.acks.set()
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
async def test_a_cycle_settles_only_once_its_claim_committed(migrated_database: str) -> None:
    pairs = [("a1", "a"), ("b1", "b")]  # one wave: nothing waits for the commit but this
    await write(migrated_database, events(*pairs), per_transaction=len(pairs))
    broker = GatedBroker(wave=2)
    broker.acks.set()
    commit = asyncio.Event()
    relay = WatchedRelay(migrated_database, broker, commit)
    try:
        assert await asyncio.wait_for(relay.step(), WITHIN) == 2
        await asyncio.sleep(0.3)  # time for a settlement that did not wait to run
        assert {s for s, _ in (await statuses(migrated_database)).values()} == {"PENDING"}
        commit.set()
        await asyncio.wait_for(relay._settled(), WITHIN)
    finally:
        commit.set()
        await relay.engine.dispose()

    assert broker.sent == ["a1", "b1"]
    assert await statuses(migrated_database) == {e: ("PUBLISHED", 0) for e, _ in pairs}


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
async def test_a_claim_that_does_not_commit_sends_no_more_and_its_rows_go_out_again(
    migrated_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = [("a1", "a"), ("b1", "b"), ("a2", "a")]
    await write(migrated_database, events(*pairs), per_transaction=len(pairs))
    broker = GatedBroker(wave=2)
    relay = WatchedRelay(migrated_database, broker, commit=None)
    step = asyncio.ensure_future(asyncio.sleep(0))
    marking = relay_module.mark_processing

    async def cut_once(*args: Any) -> None:
        monkeypatch.setattr(relay_module, "mark_processing", marking)
        await asyncio.wait_for(broker.first_wave.wait(), WITHIN)
        raise OperationalError("UPDATE outbox_event", {}, ConnectionResetError("cut"))

    monkeypatch.setattr(relay_module, "mark_processing", cut_once)
    try:
        step = asyncio.ensure_future(relay.step())
        await asyncio.wait_for(relay.marked.wait(), WITHIN)
        broker.acks.set()
        await asyncio.wait_for(step, WITHIN)
        await asyncio.wait_for(relay._settled(), WITHIN)

        assert broker.sent == ["a1", "b1"]  # a2 not: the claim never held it
        assert await statuses(migrated_database) == {e: ("PENDING", 0) for e, _ in pairs}

        relay.marked.clear()
        assert await asyncio.wait_for(relay.step(), WITHIN) == 3
        await asyncio.wait_for(relay._settled(), WITHIN)
    finally:
        broker.acks.set()
        await asyncio.wait([step], timeout=WITHIN)
        await relay.engine.dispose()

    assert broker.sent == ["a1", "b1", "a2"]  # the heads found on the topic, not sent again
    assert len(broker.searched) == 3  # every row of the claim that did not commit
    assert await statuses(migrated_database) == {e: ("PUBLISHED", 0) for e, _ in pairs}
