"""An infrastructure failure pauses the batch and retries it in place; nothing is dead-lettered.

Contract: when a handler (or the framework's own database work) fails because
a dependency is down (SQLAlchemy ``OperationalError``, an ``OSError`` or ``TimeoutError``
raised through SQLAlchemy or the driver, any ``InfrastructureError``), the consumer's
transaction rolls back, ``on_pause``
is told, the processor backs off and runs the same batch again until it
succeeds. Nothing lands in ``failed_event``, and when the dependency recovers
every effect of the batch is applied exactly once. Consumers that already
committed are not run again. An ``OSError`` or ``TimeoutError`` of the handler's own (an
HTTP call that timed out, a file it could not open: not raised through the database)
is the event's failure: it goes to the first retry tier, or straight to the DLT when the
handler declares it ``non_retryable``, and the batch does not pause.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.context import HandlerContext
from app.errors import InfrastructureError, RetryableError
from app.pipeline.outcomes import Kind
from app.pipeline.processor import BatchProcessor
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, database_down, kinds, write_effect


class Pauses:
    """An ``on_pause`` callback that remembers what it was told."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, BaseException, float]] = []

    def __call__(self, what: str, exc: BaseException, delay: float) -> None:
        self.seen.append((what, exc, delay))


class FailTimes:
    """Raises ``error()`` the first ``times`` calls, then lets them through."""

    def __init__(self, times: int, error: Any) -> None:
        self.left = times
        self.error = error

    def __call__(self) -> None:
        if self.left:
            self.left -= 1
            raise self.error()


def operational_error() -> OperationalError:
    return OperationalError("UPDATE points", {}, Exception("database is locked"))


async def test_a_handler_failing_on_oserror_is_retried_until_it_applies_once(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    outage = FailTimes(2, lambda: database_down(ConnectionRefusedError("points-db:5432 refused")))
    calls: list[str] = []

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        calls.append(event.event_id)
        await write_effect(event, ctx)
        outage()

    pauses = Pauses()
    outcomes = await make_processor(on_pause=pauses).process([records.event("e1")])

    assert kinds(outcomes) == [("e1", Kind.APPLIED)]
    assert calls == ["e1", "e1", "e1"]
    assert await db.effects() == ["e1"]
    assert await db.consumed("points") == ["e1"]
    assert await db.version("points") == 1
    assert await db.failed() == []
    assert len(pauses.seen) == 2
    what, exc, delay = pauses.seen[0]
    assert "points" in what
    assert isinstance(exc, InfrastructureError)
    assert isinstance(exc.__cause__, OperationalError)
    assert isinstance(exc.__cause__.orig, ConnectionRefusedError)
    assert delay == 0.001


async def test_an_operational_error_mid_batch_rolls_back_the_attempt_and_applies_each_once(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    outage = FailTimes(3, operational_error)

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)
        if event.event_id == "e2":
            outage()

    pauses = Pauses()
    batch = [records.event(f"e{v}", version=v) for v in (1, 2, 3)]

    outcomes = await make_processor(on_pause=pauses).process(batch)

    assert kinds(outcomes) == [("e1", Kind.APPLIED), ("e2", Kind.APPLIED), ("e3", Kind.APPLIED)]
    assert len(pauses.seen) == 3
    assert await db.effects() == ["e1", "e2", "e3"]
    assert await db.consumed("points") == ["e1", "e2", "e3"]
    assert await db.version("points") == 3
    assert await db.failed() == []


async def test_an_outage_in_a_batch_that_also_has_a_failing_event_applies_each_effect_once(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    # The failing event makes the processor re-run the batch one savepoint per event;
    # the outage then hits that re-run after the first event's savepoint was released.
    outage = FailTimes(1, lambda: database_down(OSError("network is unreachable")))

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)
        if event.event_id == "bad":
            raise RetryableError("bad is bad")
        if event.event_id == "flaky":
            outage()

    batch = [
        records.event("good", aggregate_id="o-1", version=None),
        records.event("bad", aggregate_id="o-2", version=None),
        records.event("flaky", aggregate_id="o-3", version=None),
    ]

    outcomes = await make_processor().process(batch)

    assert kinds(outcomes) == [
        ("good", Kind.APPLIED),
        ("bad", Kind.RETRIED),
        ("flaky", Kind.APPLIED),
    ]
    assert await db.consumed("points") == ["flaky", "good"]
    assert sorted(await db.effects()) == ["flaky", "good"]


async def test_an_outage_in_one_consumer_does_not_run_a_committed_consumer_again(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    outage = FailTimes(2, lambda: database_down(TimeoutError("notification-db timed out")))
    calls: list[str] = []

    @handler("OrderPaid", consumer="a-points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        calls.append(ctx.consumer)
        await write_effect(event, ctx)

    @handler("OrderPaid", consumer="b-notification", registry=registry)
    async def notify(event: Event, ctx: HandlerContext) -> None:
        calls.append(ctx.consumer)
        await write_effect(event, ctx)
        outage()

    outcomes = await make_processor().process([records.event("e1")])

    assert [(o.consumer, o.kind) for o in outcomes] == [
        ("a-points", Kind.APPLIED),
        ("b-notification", Kind.APPLIED),
    ]
    assert calls.count("a-points") == 1
    assert calls.count("b-notification") == 3
    assert await db.effects("a-points") == ["e1"]
    assert await db.effects("b-notification") == ["e1"]
    assert await db.failed() == []


class FlakySessions:
    """A session factory whose first ``failures`` sessions cannot connect."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], failures: int) -> None:
        self.sessions = sessions
        self.failures = failures

    def __call__(self) -> AsyncSession:
        if self.failures:
            self.failures -= 1
            raise ConnectionResetError("database connection reset")
        return self.sessions()


async def test_recording_poison_while_the_database_is_down_waits_for_it_and_records_once(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    pauses = Pauses()
    healthy: BatchProcessor = make_processor()
    processor = replace(
        healthy, sessions=FlakySessions(healthy.sessions, failures=2), on_pause=pauses
    )

    outcomes = await processor.process([records.raw(b"not json"), records.event("e1")])

    assert [o.kind for o in outcomes] == [Kind.POISON, Kind.APPLIED]
    assert [what for what, _, _ in pauses.seen] == ["recording poison", "recording poison"]
    assert [r["reason"] for r in await db.failed()] == ["undecodable"]
    assert await db.effects() == ["e1"]


async def test_an_oserror_raised_inside_the_database_call_pauses(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, engine: Any
) -> None:
    outage = FailTimes(2, lambda: ConnectionResetError("connection reset by peer"))

    def reset(*_args: Any) -> None:
        outage()  # called by SQLAlchemy as it executes: raised through it, as a driver does

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await ctx.session.execute(text("SELECT 1"))
        await write_effect(event, ctx)

    pauses = Pauses()
    event.listen(engine.sync_engine, "before_cursor_execute", reset)
    try:
        outcomes = await make_processor(on_pause=pauses).process([records.event("e1")])
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", reset)

    assert kinds(outcomes) == [("e1", Kind.APPLIED)]
    assert len(pauses.seen) == 2
    assert await db.effects() == ["e1"]
    assert await db.failed() == []


@pytest.mark.parametrize(
    "error",
    [
        TimeoutError("payment API timed out"),
        ConnectionRefusedError("mail relay refused"),
        FileNotFoundError("templates/receipt.html"),
    ],
    ids=["timeout", "refused", "missing-file"],
)
async def test_a_handlers_own_oserror_is_the_events_failure(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, error: OSError
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)
        raise error

    @handler("OrderPaid", consumer="strict", registry=registry, non_retryable=(OSError,))
    async def strict(event: Event, ctx: HandlerContext) -> None:
        raise error

    pauses = Pauses()
    outcomes = await asyncio.wait_for(
        make_processor(on_pause=pauses).process([records.event("e1")]), 30
    )

    assert sorted((o.consumer, o.kind) for o in outcomes) == [
        ("points", Kind.RETRIED),
        ("strict", Kind.DEAD_LETTERED),
    ]
    assert pauses.seen == []
    assert await db.effects() == []
