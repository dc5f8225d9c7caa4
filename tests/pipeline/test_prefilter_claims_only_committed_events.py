"""With a Redis prefilter, Redis only ever learns events the database committed.

Contract: the processor tells the prefilter which events a consumer applied only
after that consumer's transaction committed. So a transaction that rolled back
(a handler failed, the commit itself failed) leaves nothing in Redis, and the
same event delivered again reaches the database, which decides: it takes effect once,
or, its failure routed already, is a duplicate of that attempt. An
event Redis no longer knows (its key expired, Redis was flushed or restarted
empty) is caught by the database's dedup: a duplicate, never a second effect.

The prefilter here is a fake Redis that, whenever it is told of applied events,
looks in the database (through an engine of its own that only reads, so it sees
only what was committed and never waits for a writer) and notes every event it
was told of that is not committed there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import Session

from app.context import HandlerContext
from app.db.engine import session_factory
from app.errors import RetryableError
from app.pipeline.decode import EventOf
from app.pipeline.outcomes import Kind, Outcome
from app.prefilter.stage import SKIPPED
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds, write_effect

CONSUMER = "points"


@pytest.fixture
async def redis(engine: AsyncEngine) -> AsyncIterator[CommitCheckingRedis]:
    """The fake Redis, reading the test database through an engine of its own."""
    reader = create_async_engine(engine.url)
    yield CommitCheckingRedis(Db(reader))
    await reader.dispose()


class CommitCheckingRedis:
    """A prefilter whose keys never expire unless ``forget`` is called; checks each write."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.keys: dict[tuple[str, str], EventOf] = {}
        self.told: list[str] = []
        self.uncommitted: list[str] = []

    async def known(self, consumer: str, event_ids: Sequence[str]) -> dict[str, EventOf]:
        return {i: self.keys[consumer, i] for i in event_ids if (consumer, i) in self.keys}

    async def remember(self, consumer: str, applied: Mapping[str, EventOf]) -> None:
        committed = set(await self.db.consumed(consumer))
        self.uncommitted += [i for i in applied if i not in committed]
        self.told += applied
        self.keys.update(((consumer, i), event) for i, event in applied.items())

    def forget(self) -> None:
        """Every key gone: expired, or Redis flushed or restarted empty."""
        self.keys.clear()


class FailingCommits:
    """Sessions whose commit raises a lost-connection error the first ``times`` times."""

    def __init__(self, engine: AsyncEngine, times: int) -> None:
        self.left = times
        self.failed = 0

        class FailingSession(Session):
            pass

        event.listen(FailingSession, "before_commit", self._maybe_fail)
        # The framework's own sessions, but for the commit.
        self.sessions = session_factory(engine)
        self.sessions.configure(sync_session_class=FailingSession)

    def _maybe_fail(self, _session: Any) -> None:
        if self.left:
            self.left -= 1
            self.failed += 1
            raise OperationalError("COMMIT", {}, Exception("server closed the connection"))


@pytest.fixture
def calls(registry: Registry) -> list[str]:
    """The eventIds the consumer's handler was called with; ``bad...`` ones fail."""
    seen: list[str] = []

    @handler("OrderPaid", consumer=CONSUMER, registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        seen.append(event.event_id)
        await write_effect(event, ctx)
        if event.event_id.startswith("bad"):
            raise RetryableError(f"{event.event_id} is not ready")

    return seen


def details(outcomes: list[Outcome]) -> list[tuple[str | None, Kind, str | None]]:
    return [(o.event_id, o.kind, o.detail) for o in outcomes]


async def test_a_failed_commit_leaves_no_key_and_the_event_applies_once_when_redelivered(
    make_processor: MakeProcessor,
    calls: list[str],
    records: Records,
    db: Db,
    engine: AsyncEngine,
    redis: CommitCheckingRedis,
) -> None:
    batch = [records.event("e1", version=1), records.event("e2", version=2)]
    failing = FailingCommits(engine, times=1_000)
    paused = asyncio.Event()
    stopping = make_processor(prefilter=redis, on_pause=lambda *_: paused.set())
    first = replace(stopping, sessions=failing.sessions).process(batch)

    # Every commit fails; the worker stops (a rebalance, a shutdown) while it waits.
    task = asyncio.ensure_future(first)
    await asyncio.wait_for(paused.wait(), 5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task

    assert failing.failed >= 1
    assert redis.keys == {}
    assert await db.consumed(CONSUMER) == []

    # The partition's next owner reads the same records: the database has not got
    # them, so neither has Redis, and they take effect.
    outcomes = await make_processor(prefilter=redis).process(batch)

    assert kinds(outcomes) == [("e1", Kind.APPLIED), ("e2", Kind.APPLIED)]
    assert await db.effects() == ["e1", "e2"]
    assert redis.told == ["e1", "e2"]
    assert redis.uncommitted == []


async def test_a_commit_that_fails_then_succeeds_is_told_to_redis_only_after_it_succeeded(
    make_processor: MakeProcessor,
    calls: list[str],
    records: Records,
    db: Db,
    engine: AsyncEngine,
    redis: CommitCheckingRedis,
) -> None:
    failing = FailingCommits(engine, times=2)

    processor = replace(make_processor(prefilter=redis), sessions=failing.sessions)
    outcomes = await processor.process([records.event("e1", version=1)])

    assert failing.failed == 2
    assert kinds(outcomes) == [("e1", Kind.APPLIED)]
    assert calls == ["e1", "e1", "e1"]  # two rolled-back attempts, one committed
    assert await db.effects() == ["e1"]
    assert redis.told == ["e1"]
    assert redis.uncommitted == []


async def test_an_event_whose_handler_failed_is_not_told_and_reaches_the_database_again(
    make_processor: MakeProcessor,
    calls: list[str],
    records: Records,
    db: Db,
    redis: CommitCheckingRedis,
) -> None:
    batch = [
        records.event("good", aggregate_id="o-1", version=None),
        records.event("bad", aggregate_id="o-2", version=None),
    ]

    outcomes = await make_processor(prefilter=redis).process(batch)

    assert kinds(outcomes) == [("good", Kind.APPLIED), ("bad", Kind.RETRIED)]
    assert redis.told == ["good"]
    assert redis.uncommitted == []

    # Delivered again (say the offsets did not move): Redis answers for "good" alone,
    # and "bad" goes to the database, which knows its failure was routed: not run again.
    calls.clear()
    again = await make_processor(prefilter=redis).process(batch)

    assert details(again)[0] == ("good", Kind.DUPLICATE, SKIPPED)
    assert kinds(again)[1] == ("bad", Kind.DUPLICATE)
    assert calls == []
    assert await db.effects() == ["good"]


async def test_an_event_redis_forgot_is_a_duplicate_in_the_database(
    make_processor: MakeProcessor,
    calls: list[str],
    records: Records,
    db: Db,
    redis: CommitCheckingRedis,
) -> None:
    batch = [records.event("e1", version=1), records.event("e2", version=2)]
    await make_processor(prefilter=redis).process(batch)

    known = await make_processor(prefilter=redis).process(batch)
    redis.forget()  # the TTL ran out, or Redis was flushed or restarted empty
    forgotten = await make_processor(prefilter=redis).process(batch)

    assert details(known) == [
        ("e1", Kind.DUPLICATE, SKIPPED),
        ("e2", Kind.DUPLICATE, SKIPPED),
    ]
    assert kinds(forgotten) == [("e1", Kind.DUPLICATE), ("e2", Kind.DUPLICATE)]
    assert all(o.detail != SKIPPED for o in forgotten)  # the database said so
    assert calls == ["e1", "e2"]
    assert await db.effects() == ["e1", "e2"]
    assert await db.version(CONSUMER) == 2
    assert redis.uncommitted == []
