"""An error that will always recur is routed, not retried in place forever.

Contract: a handler error that is the data's fault, though the driver raises it
as ``OperationalError`` (a MySQL CHECK violation, a trigger's SIGNAL, a value
out of range), is routed at once like any handler failure, without a pause. A
statement the database cancels (a statement timeout, PostgreSQL 57014) pauses
the batch like an infrastructure failure; once the same cancellation has
paused it ``escalate_after`` times in a row, the batch runs event by event
(one savepoint each): the event whose handler meets it again goes to the retry
tier, the others commit, and the processor returns. A cancellation that stops
before that applies everything, and connection failures are never escalated,
however often they repeat: nothing is routed for them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, MakeProcessor, kinds, write_effect

# A processor that loops forever fails the test instead of hanging it.
WITHIN_SECONDS = 10


class PgError(Exception):
    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class MySQLError(Exception):
    """What pymysql raises: the error number first."""


def cancelled() -> OperationalError:
    return OperationalError(
        "UPDATE points", {}, PgError("57014", "canceling statement due to statement timeout")
    )


class Pauses:
    def __init__(self) -> None:
        self.seen: list[BaseException] = []

    def __call__(self, what: str, exc: BaseException, delay: float) -> None:
        self.seen.append(exc)


def batch_of_three(records: Records, middle: str) -> list[Any]:
    return [
        records.event("good-1", aggregate_id="o-1"),
        records.event(middle, aggregate_id="o-2"),
        records.event("good-2", aggregate_id="o-3"),
    ]


@pytest.mark.parametrize(
    "error",
    [
        MySQLError(3819, "Check constraint 'balance_ge_0' is violated."),
        MySQLError(1644, "order o-2 is closed"),
        MySQLError(1690, "BIGINT UNSIGNED value is out of range"),
    ],
    ids=["check-3819", "signal-1644", "out-of-range-1690"],
)
async def test_a_constraint_the_data_breaks_is_routed_at_once(
    error: Exception, make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        if event.event_id == "bad":
            raise OperationalError("UPDATE points", {}, error)
        await write_effect(event, ctx)

    pauses = Pauses()
    processor = make_processor(on_pause=pauses)

    outcomes = await asyncio.wait_for(
        processor.process(batch_of_three(records, "bad")), WITHIN_SECONDS
    )

    assert kinds(outcomes) == [
        ("good-1", Kind.APPLIED),
        ("bad", Kind.RETRIED),
        ("good-2", Kind.APPLIED),
    ]
    assert pauses.seen == []
    assert await db.effects() == ["good-1", "good-2"]


async def test_a_statement_cancelled_every_time_is_routed_after_escalate_after_pauses(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)
        if event.event_id == "slow":
            raise cancelled()

    pauses = Pauses()
    processor = make_processor(on_pause=pauses, escalate_after=3)

    outcomes = await asyncio.wait_for(
        processor.process(batch_of_three(records, "slow")), WITHIN_SECONDS
    )

    assert kinds(outcomes) == [
        ("good-1", Kind.APPLIED),
        ("slow", Kind.RETRIED),
        ("good-2", Kind.APPLIED),
    ]
    assert len(pauses.seen) == 3
    assert await db.effects() == ["good-1", "good-2"]
    assert await db.consumed("points") == ["good-1", "good-2"]
    [failed] = await db.failed("points")
    assert failed["event_id"] == "slow"
    assert "statement timeout" in failed["exception_message"]


async def test_a_cancellation_that_stops_in_time_applies_everything(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    left = 2

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        nonlocal left
        await write_effect(event, ctx)
        if event.event_id == "slow" and left:
            left -= 1
            raise cancelled()

    processor = make_processor(escalate_after=3)

    outcomes = await asyncio.wait_for(
        processor.process(batch_of_three(records, "slow")), WITHIN_SECONDS
    )

    assert {kind for _, kind in kinds(outcomes)} == {Kind.APPLIED}
    assert await db.failed() == []


async def test_a_connection_failing_again_and_again_is_never_blamed_on_an_event(
    make_processor: MakeProcessor, registry: Registry, records: Records, db: Db
) -> None:
    left = 12

    @handler("OrderPaid", consumer="points", registry=registry)
    async def on_paid(event: Event, ctx: HandlerContext) -> None:
        nonlocal left
        await write_effect(event, ctx)
        if event.event_id == "unlucky" and left:
            left -= 1
            raise OperationalError("UPDATE points", {}, MySQLError(2013, "Lost connection"))

    pauses = Pauses()
    processor = make_processor(on_pause=pauses, escalate_after=3)

    outcomes = await asyncio.wait_for(
        processor.process(batch_of_three(records, "unlucky")), WITHIN_SECONDS
    )

    assert {kind for _, kind in kinds(outcomes)} == {Kind.APPLIED}
    assert len(pauses.seen) == 12
    assert await db.failed() == []
    assert await db.effects() == ["good-1", "unlucky", "good-2"]
