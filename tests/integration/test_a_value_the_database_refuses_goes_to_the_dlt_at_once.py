"""A handler's value that its column can never hold is non-retryable: the DLT at once.

Contract, through the batch processor on PostgreSQL, MariaDB and SQLite: a handler
whose statement writes a value that no attempt will store (NULL into a NOT NULL column;
on PostgreSQL and MariaDB also a text longer than its column) has its event
dead-lettered as ``non-retryable`` on its first failure, with the database's error in
the DLT record, instead of going through every retry tier (minutes) while its
aggregate's later versions wait. A key already taken (another writer's race) stays
retryable, as do errors that rest on other rows (a CHECK, a number out of range: see
``tests/pipeline/test_an_error_that_always_recurs_is_not_retried_forever.py``). The
good events of the batch apply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from dlq.topics import dlt_topic
from schemas.envelope import Event
from tests.integration.support.databases import BACKENDS
from tests.pipeline.events import TOPIC, Records
from tests.pipeline.support import (
    Outbox,
    effect,
    header_map,
    sequential_processor,
    write_effect,
)

pytestmark = pytest.mark.integration

Write = Callable[[Event, HandlerContext], Awaitable[None]]


async def null_consumer(event: Event, ctx: HandlerContext) -> None:
    await ctx.session.execute(
        insert(effect).values(consumer=None, event_id=event.event_id, aggregate_id="a")
    )


async def too_long(event: Event, ctx: HandlerContext) -> None:
    await ctx.session.execute(
        insert(effect).values(consumer="x" * 101, event_id=event.event_id, aggregate_id="a")
    )


async def taken_key(event: Event, ctx: HandlerContext) -> None:
    for _ in range(2):
        await ctx.session.execute(
            insert(effect).values(id=1000, consumer="c", event_id=event.event_id, aggregate_id="a")
        )


CASES = [
    *(
        pytest.param(backend, null_consumer, Kind.DEAD_LETTERED, id=f"not-null-{backend}")
        for backend in BACKENDS
    ),
    *(
        pytest.param(backend, too_long, Kind.DEAD_LETTERED, id=f"too-long-{backend}")
        for backend in ("postgresql", "mariadb")  # SQLite checks no length
    ),
    *(
        pytest.param(backend, taken_key, Kind.RETRIED, id=f"key-taken-stays-retryable-{backend}")
        for backend in BACKENDS
    ),
]


@pytest.mark.parametrize(("backend", "write", "kind"), CASES)
async def test_a_refused_value_is_dead_lettered_on_its_first_failure(
    engine: AsyncEngine, backend: str, write: Write, kind: Kind
) -> None:
    registry, records, outbox = Registry(), Records(), Outbox(engine)

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        if event.event_id == "bad":
            await write(event, ctx)
        else:
            await write_effect(event, ctx)

    processor = sequential_processor(engine, registry)
    batch = [
        records.event("first", aggregate_id="o-1", version=1),
        records.event("bad", aggregate_id="o-2", version=1),
    ]

    outcomes = await processor.process(batch)

    assert sorted((o.event_id, o.kind) for o in outcomes) == [
        ("bad", kind),
        ("first", Kind.APPLIED),
    ]
    if kind is Kind.DEAD_LETTERED:
        [dead] = await outbox.to(dlt_topic(TOPIC))
        headers = header_map(dead)
        assert headers["dlt-reason"] == "non-retryable"
        assert headers["dlt-attempts"] == "1"
        assert headers["dlt-exception-type"].startswith("sqlalchemy.exc.")
