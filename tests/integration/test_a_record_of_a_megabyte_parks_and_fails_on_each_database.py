"""A record as large as Kafka takes parks and fails whole, on every database.

Contract, through the batch processor on PostgreSQL, MariaDB and SQLite migrated to the
head revision: an event of about a megabyte (Kafka's default record size) that arrives
ahead of its version parks, and one whose handler fails is dead-lettered, each row
keeping the record's bytes exactly. Before revision 0008, MariaDB's ``parked_event`` and
``failed_event`` held 64 KB (``BLOB``): the batch's insert failed with "Data too long",
the worker crashed, and crashed again on the same record at every start.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy import select

from app import PermanentError
from app.context import HandlerContext
from app.db.engine import create_engine
from app.db.migrate import upgrade_to_head
from app.db.tables import failed_event, parked_event
from app.pipeline.outcomes import Kind
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.integration.support.databases import BACKENDS
from tests.pipeline.events import Records
from tests.pipeline.support import sequential_processor, test_metadata, write_effect

pytestmark = pytest.mark.integration

# About a megabyte of payload: far beyond the 64 KB a MySQL BLOB holds.
PAD = "x" * 1_000_000


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_megabyte_record_parks_and_is_dead_lettered_whole(
    backend: str, make_database: Callable[[str], Awaitable[str]]
) -> None:
    url = await make_database(backend)
    await upgrade_to_head(url)
    engine = create_engine(url, pool_size=2)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(test_metadata.create_all)
        registry, records = Registry(), Records()

        @handler("OrderPaid", consumer="points", registry=registry)
        async def points(event: Event, ctx: HandlerContext) -> None:
            if event.event_id == "refused":
                raise PermanentError("refused on purpose")
            await write_effect(event, ctx)

        processor = sequential_processor(engine, registry)
        ahead = records.event("ahead", aggregate_id="o-1", version=2, pad=PAD)
        refused = records.event("refused", aggregate_id="o-2", version=1, pad=PAD)

        outcomes = await processor.process([ahead, refused])

        assert sorted((o.event_id, o.kind) for o in outcomes) == [
            ("ahead", Kind.PARKED),
            ("refused", Kind.DEAD_LETTERED),
        ]
        async with engine.connect() as conn:
            parked = (await conn.execute(select(parked_event.c.record_value))).scalars().all()
            failed = (await conn.execute(select(failed_event.c.record_value))).scalars().all()
        assert [bytes(value) for value in parked] == [ahead.value]
        assert [bytes(value) for value in failed] == [refused.value]
        assert len(ahead.value) > 1_000_000
    finally:
        await engine.dispose()
