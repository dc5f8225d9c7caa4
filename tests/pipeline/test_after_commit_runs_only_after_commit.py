"""``ctx.after_commit`` callbacks run after their transaction committed, and only then.

Contract: a callback registered by a handler runs once, after the consumer's transaction
committed (so it sees the committed effects and dedup row from any other connection), in
registration order. It never runs for an event whose handler failed (that event's
savepoint rolled back, or the batch's first attempt), nor for an attempt that an
infrastructure failure rolled back; it runs once for the attempt that finally commits (a
retry tier's, for an event that failed). A callback that raises does not undo the commit
and does not stop the callbacks after it (one that raises ``SystemExit`` too: it may not
stop the worker). A plain (not ``async``) callback is called, without an error. An
``async`` one that runs past the limit (``after_commit_limit``, 30 s by default) is
abandoned with an ERROR naming it, and the callbacks after it run: one that never
returns (an HTTP call without a timeout) held its batch's offsets, and the worker, for
ever.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, FrozenClock, MakeProcessor, Outbox, kinds, write_effect


async def test_a_callback_sees_the_committed_effects_from_another_connection(
    make_processor: MakeProcessor, registry: Registry, records: Records, engine: AsyncEngine
) -> None:
    observed: list[tuple[str, list[str], list[str]]] = []
    outside = Db(engine)

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

        async def send_email() -> None:
            observed.append(
                (event.event_id, await outside.effects(), await outside.consumed(ctx.consumer))
            )

        ctx.after_commit(send_email)

    await make_processor().process([records.event("e1", version=1)])

    assert observed == [("e1", ["e1"], ["e1"])]


async def test_callbacks_run_in_registration_order_and_never_for_a_failed_event(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    sent: list[str] = []

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        async def send() -> None:
            sent.append(event.event_id)

        ctx.after_commit(send)
        if event.event_id == "bad":
            raise ValueError("template missing")

    outcomes = await make_processor().process(
        [
            records.event("first", aggregate_id="o-1"),
            records.event("bad", aggregate_id="o-2"),
            records.event("last", aggregate_id="o-3"),
        ]
    )

    assert kinds(outcomes) == [
        ("first", Kind.APPLIED),
        ("bad", Kind.RETRIED),
        ("last", Kind.APPLIED),
    ]
    assert sent == ["first", "last"]


async def test_a_callback_of_a_failed_attempt_never_runs_and_its_retry_runs_it_once(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    outbox: Outbox,
    clock: FrozenClock,
) -> None:
    sent: list[str] = []
    outages = [ConnectionError("smtp relay unreachable")]

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        async def send() -> None:
            sent.append(event.event_id)

        ctx.after_commit(send)
        if outages:
            raise outages.pop()

    outcomes = await make_processor().process([records.event("e1")])

    assert kinds(outcomes) == [("e1", Kind.RETRIED)]
    assert sent == []
    [retry] = await outbox.records()
    clock.advance(1)
    again = await make_processor().process([records.delivered(retry)])
    assert kinds(again) == [("e1", Kind.APPLIED)]
    assert sent == ["e1"]


async def test_no_callback_runs_for_a_duplicate(
    make_processor: MakeProcessor, registry: Registry, records: Records
) -> None:
    sent: list[str] = []

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        async def send() -> None:
            sent.append(event.event_id)

        ctx.after_commit(send)

    first = records.event("e1")
    await make_processor().process([first, records.again(first)])
    await make_processor().process([records.again(first)])

    assert sent == ["e1"]


@pytest.mark.parametrize("failure", [RuntimeError("smtp said no"), SystemExit(3)])
async def test_a_failing_callback_keeps_the_commit_and_the_callbacks_after_it(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    db: Db,
    failure: BaseException,
) -> None:
    sent: list[str] = []

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

        async def send() -> None:
            if event.event_id == "e1":
                raise failure
            sent.append(event.event_id)

        ctx.after_commit(send)

    outcomes = await make_processor().process(
        [records.event("e1", version=1), records.event("e2", version=2)]
    )

    assert kinds(outcomes) == [("e1", Kind.APPLIED), ("e2", Kind.APPLIED)]
    assert sent == ["e2"]
    assert await db.effects() == ["e1", "e2"]
    assert await db.consumed("notification") == ["e1", "e2"]


async def test_a_plain_callback_is_called(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent: list[str] = []

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        ctx.after_commit(lambda: sent.append(event.event_id))

    with caplog.at_level(logging.ERROR):
        outcomes = await make_processor().process([records.event("e1")])

    assert kinds(outcomes) == [("e1", Kind.APPLIED)]
    assert sent == ["e1"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_callback_that_never_returns_is_abandoned_at_the_limit(
    make_processor: MakeProcessor,
    registry: Registry,
    records: Records,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent: list[str] = []

    @handler("OrderPaid", consumer="notification", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        async def call_without_timeout() -> None:
            await asyncio.Event().wait()

        async def send() -> None:
            sent.append(event.event_id)

        ctx.after_commit(call_without_timeout)
        ctx.after_commit(send)

    with caplog.at_level(logging.ERROR):
        outcomes = await asyncio.wait_for(
            make_processor(after_commit_limit=0.2).process([records.event("e1")]), 10
        )

    assert kinds(outcomes) == [("e1", Kind.APPLIED)]
    assert sent == ["e1"]
    [said] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert "call_without_timeout did not finish within 0.2s and was abandoned" in said
