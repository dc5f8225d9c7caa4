"""On MariaDB, ids that differ only in case or accents are different ids, as they are to Python.

Contract: a real worker on MariaDB consuming ``ORDER-A``, ``order-a`` and
``órder-a`` (with event ids that differ only in case too) keeps three aggregates,
each at its own last version, applies every event exactly once (the ``tally``
consumer's counters), parks nothing and fails nothing; the default
``utf8mb4_general_ci`` collation made them one aggregate and moved a version
backwards. A database created before revision 0004 is upgraded: every id and
type column of the framework's tables then uses a binary collation (NO PAD,
``utf8mb4_nopad_bin``, since revision 0005), its rows are kept, and ``E-1`` and
``e-1`` can both be recorded; downgrading restores the tables' own collation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.db.migrate import alembic_config, migration_lock, upgrade_to_head
from app.db.tables import consumed_event
from app.demo.envelopes import Message, encode
from tests.integration.support.kafka import OrderTopic
from tests.integration.support.orders import Order
from tests.integration.support.state import Database
from tests.integration.support.workers import Workers

pytestmark = pytest.mark.integration

TALLY = "handlers,tests.integration.support.tally"  # the example brings user_points
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
}  # fmt: skip


@pytest.fixture
def backend() -> str:
    return "mariadb"


def events(order: Order, versions: range, id_prefix: str) -> list[Message]:
    return [encode(order.paid(version=v, eventId=f"{id_prefix}-{v}")) for v in versions]


async def test_three_spellings_of_one_id_are_three_aggregates_end_to_end(
    topic: OrderTopic, workers: Workers, database_url: str, db: Database
) -> None:
    upper, lower, accented = (
        Order(user_id="u-1", amount_cents=100, order_id=order_id)
        for order_id in ("ORDER-A", "order-a", "órder-a")
    )
    worker = workers.start(database_url, handler_modules=TALLY, env={"CONSUMERS": "tally"})
    await topic.send(events(upper, range(1, 3), "EVT-A"))
    await topic.drained(workers=[worker], within=60)
    await topic.send(
        events(lower, range(1, 3), "evt-a")
        + events(accented, range(1, 2), "évt-a")
        + events(upper, range(3, 4), "EVT-A")
    )
    await topic.drained(workers=[worker], within=60)

    assert await db.tallies() == {
        "EVT-A-1": 1, "EVT-A-2": 1, "EVT-A-3": 1, "evt-a-1": 1, "evt-a-2": 1, "évt-a-1": 1
    }  # fmt: skip
    assert await db.all_versions() == {
        ("tally", "ORDER-A"): 3,
        ("tally", "order-a"): 2,
        ("tally", "órder-a"): 1,
    }
    assert await db.parked_count() == 0
    assert await db.failures() == []


async def test_an_existing_database_is_upgraded_to_binary_ids(
    make_database: Callable[[str], Awaitable[str]],
) -> None:
    url = await make_database("mariadb")
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn, migration_lock(conn):
            await conn.run_sync(lambda sync: command.upgrade(_config(sync), "0002"))
        assert await collations(engine) == {"utf8mb4_general_ci"}
        async with engine.begin() as conn:
            await conn.execute(insert(consumed_event).values(row("E-1")))

        await upgrade_to_head(url)

        assert await collations(engine) == {"utf8mb4_nopad_bin"}
        async with engine.begin() as conn:
            await conn.execute(insert(consumed_event).values(row("e-1")))
        async with engine.connect() as conn:
            ids = (await conn.scalars(select(consumed_event.c.event_id))).all()
            matching = await conn.scalars(
                select(consumed_event.c.event_id).where(consumed_event.c.event_id == "e-1")
            )
            assert sorted(ids) == ["E-1", "e-1"]
            assert matching.all() == ["e-1"]

        async with engine.begin() as conn:
            await conn.execute(text("DELETE FROM consumed_event WHERE event_id = 'e-1'"))
        async with engine.begin() as conn, migration_lock(conn):
            await conn.run_sync(lambda sync: command.downgrade(_config(sync), "0002"))
        assert await collations(engine) == {"utf8mb4_general_ci"}
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
