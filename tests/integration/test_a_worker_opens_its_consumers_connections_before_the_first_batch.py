"""A worker opens its consumers' connections, and runs their batch reads, before the first batch.

Contract (``app.runtime.services.open_ahead``, ``app.pipeline.warm``):

- on PostgreSQL, with three consumers that run side by side, the start leaves three open
  connections in the pool, each of which has run the batch's reads, and the first
  batch opens no connection of its own;
- nothing is written: on MySQL and SQLite the version read creates the missing version
  row, and the start's transaction is rolled back;
- a database that does not answer is one warning line, with no traceback and no
  password, and the start goes on.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.db.engine import create_engine, session_factory
from app.db.tables import aggregate_version, consumed_event, failed_event, parked_event
from app.pipeline.outcomes import Kind
from app.pipeline.processor import BatchProcessor
from app.pipeline.route import FailureRouter
from app.registry import Registry, handler
from app.runtime import services
from dlq.policy import RetryPolicy
from schemas.envelope import Event
from tests.pipeline.events import TOPIC, Records
from tests.sent_statements import sent

pytestmark = pytest.mark.integration

CONSUMERS = ("points", "inventory", "notification")


def _processor(engine: AsyncEngine, concurrent: bool = True) -> BatchProcessor:
    registry = Registry()
    for consumer in CONSUMERS:

        @handler("OrderPaid", consumer=consumer, registry=registry)
        async def noop(event: Event, ctx: HandlerContext) -> None:
            return None

    return BatchProcessor(
        session_factory(engine),
        registry,
        FailureRouter(RetryPolicy(TOPIC, (1.0,))),
        concurrent_consumers=concurrent,
    )


def _connects(engine: AsyncEngine) -> list[Any]:
    opened: list[Any] = []
    event.listen(engine.sync_engine, "connect", lambda conn, _record: opened.append(conn))
    return opened


async def _rows(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        total = 0
        for table in (aggregate_version, consumed_event, parked_event, failed_event):
            total += (await conn.execute(select(func.count()).select_from(table))).scalar_one()
        return total


async def test_the_first_batch_finds_its_connections_open(engine: AsyncEngine) -> None:
    opened = _connects(engine)
    processor = _processor(engine)

    with sent(engine.sync_engine) as statements:
        await services.open_ahead(processor)

    assert engine.pool.checkedin() == len(CONSUMERS)  # type: ignore[attr-defined]
    reads = [s for s, _ in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(reads) == 3 * len(CONSUMERS), [s for s, _ in statements]
    assert await _rows(engine) == 0

    opened.clear()
    records = Records()
    outcomes = await processor.process(
        [records.event(f"o-{i}-1", aggregate_id=f"o-{i}", version=1) for i in range(5)]
    )
    assert [o.kind for o in outcomes] == [Kind.APPLIED] * 5 * len(CONSUMERS)
    assert opened == []


@pytest.mark.parametrize("backend", ["mariadb", "sqlite"])
async def test_the_start_writes_nothing_where_the_version_read_inserts(
    engine: AsyncEngine, backend: str
) -> None:
    processor = _processor(engine, concurrent=backend != "sqlite")

    with sent(engine.sync_engine) as statements:
        await services.open_ahead(processor)

    inserts = [s for s, _ in statements if s.lstrip().upper().startswith("INSERT")]
    assert inserts, "the version read inserts the missing row on this backend"
    assert await _rows(engine) == 0


async def test_a_database_that_does_not_answer_is_one_line(
    caplog: pytest.LogCaptureFixture, unused_tcp_port: int
) -> None:
    url = f"postgresql+asyncpg://app:s3cret-pw@127.0.0.1:{unused_tcp_port}/nowhere"
    engine = create_engine(url)
    try:
        with caplog.at_level(logging.WARNING, logger="effectively_once.worker"):
            await services.open_ahead(_processor(engine))
    finally:
        await engine.dispose()

    lines = [r for r in caplog.records if r.name == "effectively_once.worker"]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    message = lines[0].getMessage()
    assert "not opened ahead of the first batch" in message
    assert lines[0].exc_info is None
    assert "s3cret-pw" not in caplog.text
