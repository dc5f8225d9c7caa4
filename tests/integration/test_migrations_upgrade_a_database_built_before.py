"""A database the framework built before the example tables moved out upgrades with nothing lost.

Contract: on PostgreSQL, MariaDB and SQLite, a database built by the old
revisions (``0001`` and the ``0002`` that created the example consumers'
tables in every database, kept verbatim in ``support/legacy_revisions``) and
holding rows:

- upgraded for other handler modules than ``handlers``, gets the framework's
  later revisions (``0003``: the outbox; ``0004``: binary ids on MariaDB,
  ``database_identity``; ``0005``: NO PAD binary ids on MariaDB; ``0006``: the
  outbox's scan indexes partial on PostgreSQL; ``0007``: the outbox's status spelt
  exactly) with its
  example tables and every row untouched, and
  gets no version table of the example's;
- upgraded with ``handlers`` among the handler modules, keeps every row;
  the example's history takes the tables over (its version table at its
  head), the schema is what ``handlers.example_metadata`` declares, and ids
  differing only in case are two ids (MariaDB: ``utf8mb4_bin``), as on a
  fresh database, and so are ids differing only by trailing spaces (MariaDB:
  ``utf8mb4_nopad_bin``, the example's ``0003``).

A database with a ``notification`` table of its own is not touched by the
framework's migrations; with ``handlers`` among the modules the upgrade stops
with a ``ConfigurationError`` naming the table, which keeps its rows.
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, insert, inspect, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.db.histories import FRAMEWORK, VERSION_TABLE, History
from app.db.migrate import upgrade, upgrade_to_head
from app.db.tables import consumed_event, metadata
from app.errors import ConfigurationError
from handlers.tables import example_metadata, points_award, user_points
from tests.integration.support.databases import BACKENDS

pytestmark = pytest.mark.integration

LEGACY = Path(__file__).parent / "support" / "legacy_revisions"
EXAMPLE_VERSION_TABLE = f"{VERSION_TABLE}_handlers"
VERSION_TABLES = {VERSION_TABLE, EXAMPLE_VERSION_TABLE}
WHEN = "2026-01-02 03:04:05"


def old_history(versions: Path) -> History:
    """The framework's ``0001`` and the old ``0002``, as a worker used to run them."""
    versions.mkdir()
    shutil.copy(FRAMEWORK.versions / "0001_framework_tables.py", versions)
    shutil.copy(LEGACY / "0002_example_tables.py", versions)
    return History(versions, VERSION_TABLE)


async def fill(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(insert(user_points).values(user_id="u-1", balance=12))
        await conn.execute(
            insert(points_award).values(order_id="order-a", user_id="u-1", points=12)
        )
        await conn.execute(
            text(
                "INSERT INTO consumed_event (event_id, consumer_group, event_type, "
                "aggregate_type, aggregate_id, aggregate_version, applied_at) "
                f"VALUES ('e-1', 'points-service', 'OrderPaid', 'Order', 'order-a', 2, '{WHEN}')"
            )
        )


async def rows(engine: AsyncEngine) -> dict[str, list[tuple[Any, ...]]]:
    queries = {
        "user_points": select(user_points),
        "points_award": select(points_award),
        "consumed_event": select(consumed_event.c.event_id, consumed_event.c.aggregate_id),
    }
    async with engine.connect() as conn:
        return {
            name: [tuple(row) for row in (await conn.execute(query)).all()]
            for name, query in queries.items()
        }


async def versions(engine: AsyncEngine) -> dict[str, str | None]:
    async with engine.connect() as conn:
        present = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
        return {
            table: await conn.scalar(text(f"SELECT version_num FROM {table}"))
            for table in sorted(VERSION_TABLES & present)
        }


def schema(connection: Connection) -> tuple[set[str], list[Any]]:
    context = MigrationContext.configure(
        connection, opts={"include_name": lambda name, *_: name not in VERSION_TABLES}
    )
    diffs = compare_metadata(context, [metadata, example_metadata])  # type: ignore[arg-type]
    return set(inspect(connection).get_table_names()), list(diffs)


async def award_in_other_case(engine: AsyncEngine) -> list[str]:
    """Award ``ORDER-A`` beside ``order-a``: two orders wherever ids compare as in Python."""
    async with engine.begin() as conn:
        await conn.execute(insert(points_award).values(order_id="ORDER-A", user_id="u-1", points=1))
    async with engine.connect() as conn:
        return sorted((await conn.execute(select(points_award.c.order_id))).scalars())


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_old_database_is_left_alone_without_the_examples_and_taken_over_with_them(
    backend: str, make_database: Callable[[str], Awaitable[str]], tmp_path: Path
) -> None:
    url = await make_database(backend)
    await upgrade(url, [old_history(tmp_path / "old-versions")])
    engine = create_engine(url, pool_size=1)
    try:
        await fill(engine)
        before = await rows(engine)
        async with engine.connect() as conn:
            old_tables, _ = await conn.run_sync(schema)
        assert await versions(engine) == {VERSION_TABLE: "0002"}

        await upgrade_to_head(url, ["schemas"])  # a module without migrations of its own

        async with engine.connect() as conn:
            added = {"database_identity", "outbox_event"}
            assert (await conn.run_sync(schema))[0] == old_tables | added
        assert await versions(engine) == {VERSION_TABLE: "0008"}
        assert await rows(engine) == before

        await upgrade_to_head(url, ["handlers"])

        assert await versions(engine) == {VERSION_TABLE: "0008", EXAMPLE_VERSION_TABLE: "0003"}
        assert await rows(engine) == before
        async with engine.connect() as conn:
            tables, diffs = await conn.run_sync(schema)
        assert tables == old_tables | {EXAMPLE_VERSION_TABLE, "database_identity", "outbox_event"}
        assert diffs == []
        assert await award_in_other_case(engine) == ["ORDER-A", "order-a"]
    finally:
        await engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_fresh_database_tells_ids_apart_by_case_and_trailing_spaces(
    backend: str, make_database: Callable[[str], Awaitable[str]]
) -> None:
    url = await make_database(backend)
    await upgrade_to_head(url, ["handlers"])
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                insert(points_award).values(order_id="order-a", user_id="u-1", points=1)
            )
        assert await award_in_other_case(engine) == ["ORDER-A", "order-a"]
        async with engine.begin() as conn:
            for user_id in ("u-1", "u-1 "):
                await conn.execute(insert(user_points).values(user_id=user_id, balance=1))
        async with engine.connect() as conn:
            found = await conn.scalars(
                select(user_points.c.user_id).where(user_points.c.user_id == "u-1")
            )
            assert found.all() == ["u-1"]
            everyone = await conn.scalars(select(user_points.c.user_id))
            assert sorted(everyone.all()) == ["u-1", "u-1 "]
    finally:
        await engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_notification_table_of_ones_own_is_never_touched(
    backend: str, make_database: Callable[[str], Awaitable[str]]
) -> None:
    url = await make_database(backend)
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text("CREATE TABLE notification (id INTEGER PRIMARY KEY, body VARCHAR(200))")
            )
            await conn.execute(text("INSERT INTO notification VALUES (1, 'hello')"))

        async def mine() -> tuple[list[str], list[tuple[Any, ...]]]:
            async with engine.connect() as conn:
                columns = await conn.run_sync(
                    lambda sync: [c["name"] for c in inspect(sync).get_columns("notification")]
                )
                found = (await conn.execute(text("SELECT id, body FROM notification"))).all()
            return columns, [tuple(row) for row in found]

        await upgrade_to_head(url)

        assert await mine() == (["id", "body"], [(1, "hello")])
        assert await versions(engine) == {VERSION_TABLE: "0008"}

        with pytest.raises(ConfigurationError, match=r"'notification'.*columns body, id"):
            await upgrade_to_head(url, ["handlers"])

        assert await mine() == (["id", "body"], [(1, "hello")])
    finally:
        await engine.dispose()
