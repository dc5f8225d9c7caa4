"""A handler that never returns, or that tries to stop the process, fails only its event.

Contract: a handler's calls run within ``handler_timeout`` (``HANDLER_TIMEOUT_SECONDS``);
past it they are cancelled and the event is retried (reason ``retryable``, exception
``HandlerTimedOut``), while the batch's other events apply: in a batch's first pass
the limit covers a handler's calls for a wave's events of one type, and the batch then
runs event by event, each call with the limit of its own, so only the event that hangs
is routed. A handler that raises ``SystemExit`` or ``KeyboardInterrupt`` fails its
event for good (the DLT, exception ``HandlerExited``); the worker goes on.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from dlq import headers as h
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, Outbox, kinds, write_effect

LIMIT = 0.3


def register(registry: Registry) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        if event.event_id == "hangs":
            await asyncio.sleep(3600)  # an outside call without a timeout of its own
        if event.event_id == "exits":
            raise SystemExit(3)
        if event.event_id == "interrupts":
            raise KeyboardInterrupt
        await write_effect(event, ctx)


def batch(records: Records, bad: str) -> list:  # type: ignore[type-arg]
    return [
        records.event("e1", aggregate_id="o-1"),
        records.event(bad, aggregate_id="o-2"),
        records.event("e3", aggregate_id="o-3"),
    ]


async def test_a_handler_that_never_returns_is_cut_off_and_its_event_retried(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, outbox: Outbox
) -> None:
    register(registry)
    started = time.monotonic()

    outcomes = await make_processor(handler_timeout=LIMIT).process(batch(records, "hangs"))

    assert time.monotonic() - started < 10 * LIMIT + 5
    assert kinds(outcomes) == [("e1", Kind.APPLIED), ("hangs", Kind.RETRIED), ("e3", Kind.APPLIED)]
    assert sorted(await db.effects()) == ["e1", "e3"]
    [retry] = await outbox.records()
    assert dict(retry.headers)[h.RETRY_CONSUMER_GROUP] == b"points"
    [failure] = await db.failed("points")
    assert failure["exception_type"] == "app.errors.HandlerTimedOut"
    assert "ran past HANDLER_TIMEOUT_SECONDS (0.3s)" in failure["exception_message"]


@pytest.mark.parametrize("bad", ["exits", "interrupts"])
async def test_a_handler_that_would_stop_the_worker_fails_its_event_for_good(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db, bad: str
) -> None:
    register(registry)

    outcomes = await make_processor(handler_timeout=LIMIT).process(batch(records, bad))

    assert kinds(outcomes) == [
        ("e1", Kind.APPLIED),
        (bad, Kind.DEAD_LETTERED),
        ("e3", Kind.APPLIED),
    ]
    assert sorted(await db.effects()) == ["e1", "e3"]
    [failure] = await db.failed("points")
    assert failure["exception_type"] == "app.errors.HandlerExited"
    assert failure["reason"] == "non-retryable"
    assert "a handler may not stop the worker" in failure["exception_message"]
