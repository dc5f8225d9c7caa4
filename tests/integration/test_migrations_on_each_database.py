"""The migrations build the whole schema on each database, even from workers starting together.

Contract: on a fresh PostgreSQL, MariaDB and SQLite database, several
processes running ``python -m app.db.migrate`` with ``HANDLER_MODULES=handlers``
at the same moment all succeed (the migration lock serialises them), the
framework's and the example's histories both end at their head revision,
and the schema is what ``app.db.tables.metadata`` and
``handlers.example_metadata`` declare (autogenerate does not compare
collations: ``test_migrations_upgrade_a_database_built_before`` checks
MariaDB's binary ids). A missing server skips the test locally and fails it
under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, inspect, text

from app.db.engine import create_engine
from app.db.histories import VERSION_TABLE
from app.db.tables import metadata
from handlers import example_metadata
from tests.integration.support.databases import BACKENDS

pytestmark = pytest.mark.integration

PROCESSES = 3
EXAMPLE_VERSION_TABLE = f"{VERSION_TABLE}_handlers"
VERSION_TABLES = {VERSION_TABLE, EXAMPLE_VERSION_TABLE}
EVERY_TABLE = set(metadata.tables) | set(example_metadata.tables) | VERSION_TABLES


def schema(connection: Connection) -> tuple[set[str], list[Any]]:
    """Table names, and autogenerate's differences from the declared tables."""
    context = MigrationContext.configure(
        connection, opts={"include_name": lambda name, *_: name not in VERSION_TABLES}
    )
    diffs = compare_metadata(context, [metadata, example_metadata])  # type: ignore[arg-type]
    return set(inspect(connection).get_table_names()), list(diffs)


async def migrate_in_processes(url: str, count: int) -> list[tuple[int | None, str]]:
    """Start ``count`` migration processes at once; their exit codes and stderr."""
    env = {**os.environ, "DATABASE_URL": url, "HANDLER_MODULES": "handlers"}
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.db.migrate", env=env, stderr=asyncio.subprocess.PIPE
        )
        for _ in range(count)
    ]
    errors = [(await p.communicate())[1].decode() for p in processes]
    return [(p.returncode, err) for p, err in zip(processes, errors, strict=True)]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_workers_migrating_at_once_build_the_declared_schema(
    backend: str, make_database: Callable[[str], Awaitable[str]]
) -> None:
    url = await make_database(backend)

    outcomes = await migrate_in_processes(url, PROCESSES)

    assert [code for code, _ in outcomes] == [0] * PROCESSES, outcomes
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as connection:
            versions = [
                await connection.scalar(text(f"SELECT version_num FROM {table}"))
                for table in (VERSION_TABLE, EXAMPLE_VERSION_TABLE)
            ]
            tables, diffs = await connection.run_sync(schema)
    finally:
        await engine.dispose()
    assert versions == ["0008", "0003"]
    assert tables == EVERY_TABLE
    assert diffs == []
