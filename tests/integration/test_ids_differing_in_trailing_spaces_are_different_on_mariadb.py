"""On MariaDB, ids that differ only by trailing spaces are different ids, as they are to Python.

Contract, through the batch processor on MariaDB: ``utf8mb4_bin`` is a PAD SPACE
collation (``'e1' = 'e1 '``), so every id and type column of the framework's
tables uses a NO PAD binary one (``utf8mb4_nopad_bin``; ``utf8mb4_0900_bin`` on
MySQL). An event ``e1 `` after ``e1`` applies once, as another event, without
the batch running again; an aggregate ``A `` at version 1 while ``A`` is at 3
keeps a version row of its own, and ``A``'s version 4 then applies, nothing
parked. A database built up to revision 0004 is upgraded to the NO PAD
collation with its rows kept, and ``E-1 `` can then be recorded beside ``E-1``;
downgrading restores ``utf8mb4_bin``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.context import HandlerContext
from app.db.engine import create_engine
from app.db.migrate import alembic_config, migration_lock, upgrade_to_head
from app.db.tables import aggregate_version, consumed_event
from app.metrics import REGISTRY
from app.pipeline.outcomes import Kind
from app.pipeline.pause import Backoff
from app.pipeline.processor import BatchProcessor
from app.registry import Registry, handler
from schemas.envelope import Event
from tests.pipeline.events import Records
from tests.pipeline.support import Db, kinds, sequential_processor, write_effect

pytestmark = pytest.mark.integration

NO_PAD = "utf8mb4_nopad_bin"
# A processor that loops on the same batch fails the test instead of hanging it.
WITHIN_SECONDS = 20
ID_COLUMNS = {
    "consumed_event": {
        "event_id", "consumer_group", "event_type", "aggregate_type", "aggregate_id"
    },
    "aggregate_version": {"aggregate_id", "aggregate_type", "consumer_group"},
    "parked_event": {
        "event_id", "consumer_group", "aggregate_type", "aggregate_id", "event_type", "topic"
    },
    "failed_event": {
        "consumer_group", "topic", "event_id", "event_type", "aggregate_type", "aggregate_id"
    },
    "outbox_event": {"event_id", "aggregate_type", "aggregate_id", "topic", "event_key"},
}  # fmt: skip


@pytest.fixture
def backend() -> str:
    return "mariadb"


def processor_over(engine: AsyncEngine, registry: Registry) -> BatchProcessor:
    return sequential_processor(
        engine, registry, (1.0,), backoff=Backoff(initial=0.001, maximum=0.001, jitter=0.0)
    )


def points_registry() -> Registry:
    registry = Registry()

    @handler("OrderPaid", consumer="points", registry=registry)
    async def points(event: Event, ctx: HandlerContext) -> None:
        await write_effect(event, ctx)

    return registry


async def versions(engine: AsyncEngine) -> dict[str, int | None]:
    """Every version row of ``points``, read as Python compares ids."""
    t = aggregate_version
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(t.c.aggregate_id, t.c.last_version).where(t.c.consumer_group == "points")
        )
        return {agg_id: last for agg_id, last in rows}


def conflict_reruns() -> float:
    """Batches of ``points`` run again after a conflict, in this process."""
    sample = REGISTRY.get_sample_value(
        "effectively_once_batch_reruns_total", {"consumer": "points", "reason": "conflict"}
    )
    return sample or 0.0


async def test_an_event_id_with_a_trailing_space_is_another_event(engine: AsyncEngine) -> None:
    registry, records, db = points_registry(), Records(), Db(engine)
    processor = processor_over(engine, registry)

    first = await processor.process([records.event("e1", aggregate_id="o-1")])
    reruns = conflict_reruns()
    second = await asyncio.wait_for(
        processor.process([records.event("e1 ", aggregate_id="o-2")]), WITHIN_SECONDS
    )

    assert kinds(first + second) == [("e1", Kind.APPLIED), ("e1 ", Kind.APPLIED)]
    assert conflict_reruns() == reruns
    assert sorted(await db.effects("points")) == ["e1", "e1 "]
    assert await db.consumed("points") == ["e1", "e1 "]
    assert await db.failed() == []


async def test_an_aggregate_with_a_trailing_space_keeps_its_own_version(
    engine: AsyncEngine,
) -> None:
    registry, records, db = points_registry(), Records(), Db(engine)
    processor = processor_over(engine, registry)

    await processor.process(
        [records.event(f"a-{v}", aggregate_id="A", version=v) for v in (1, 2, 3)]
    )
    spaced = await processor.process([records.event("a-space-1", aggregate_id="A ", version=1)])
    fourth = await processor.process([records.event("a-4", aggregate_id="A", version=4)])

    assert kinds(spaced + fourth) == [("a-space-1", Kind.APPLIED), ("a-4", Kind.APPLIED)]
    assert await versions(engine) == {"A": 4, "A ": 1}
    assert await db.parked("points") == []


async def test_a_database_built_before_is_upgraded_to_no_pad_ids(
    make_database: Callable[[str], Awaitable[str]],
) -> None:
    url = await make_database("mariadb")
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn, migration_lock(conn):
            await conn.run_sync(lambda sync: command.upgrade(_config(sync), "0004"))
        assert await collations(engine) == {"utf8mb4_bin"}
        async with engine.begin() as conn:
            await conn.execute(insert(consumed_event).values(row("E-1")))

        await upgrade_to_head(url)

        assert await collations(engine) == {NO_PAD}
        async with engine.begin() as conn:
            await conn.execute(insert(consumed_event).values(row("E-1 ")))
        async with engine.connect() as conn:
            ids = (await conn.scalars(select(consumed_event.c.event_id))).all()
            matching = await conn.scalars(
                select(consumed_event.c.event_id).where(consumed_event.c.event_id == "E-1")
            )
            assert sorted(ids) == ["E-1", "E-1 "]
            assert matching.all() == ["E-1"]

        async with engine.begin() as conn:
            await conn.execute(text("DELETE FROM consumed_event WHERE event_id = 'E-1 '"))
        async with engine.begin() as conn, migration_lock(conn):
            await conn.run_sync(lambda sync: command.downgrade(_config(sync), "0004"))
        assert await collations(engine) == {"utf8mb4_bin"}
        async with engine.connect() as conn:
            assert (await conn.scalars(select(consumed_event.c.event_id))).all() == ["E-1"]
    finally:
        await engine.dispose()


def _config(connection: Connection) -> Config:
    config = alembic_config()
    config.attributes["connection"] = connection
    return config


def row(event_id: str) -> dict[str, object]:
    return {
        "event_id": event_id,
        "consumer_group": "points",
        "event_type": "OrderPaid",
        "aggregate_type": "Order",
        "aggregate_id": "o-1",
        "aggregate_version": 1,
        "applied_at": datetime.now(UTC),
    }


async def collations(engine: AsyncEngine) -> set[str]:
    """The collations of every id and type column of the framework's tables."""
    query = text(
        "SELECT table_name, column_name, collation_name FROM information_schema.columns "
        "WHERE table_schema = DATABASE()"
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    found = {(table, column): collation for table, column, collation in rows}
    return {found[(table, column)] for table, columns in ID_COLUMNS.items() for column in columns}
