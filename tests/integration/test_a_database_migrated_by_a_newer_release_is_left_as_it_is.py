"""A database a newer release migrated is left as it is, with a warning; the rest migrates.

Contract (``app.db.revisions``): when a history's version table records a revision this
code does not hold (a rollback, or an older replica restarting during a rolling
deploy), ``python -m app.db.migrate`` (and a worker's ``MIGRATE_ON_START``) leaves that
history's tables alone, says so in one warning line naming the version table and the
revision, exits 0, and still migrates the histories it does know. Before, Alembic's
``Can't locate revision`` ended the command in a traceback, and the worker too.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from sqlalchemy import inspect, text

from app.db.engine import create_engine
from app.db.histories import VERSION_TABLE
from app.db.migrate import upgrade_to_head

pytestmark = pytest.mark.integration

FUTURE = "f00dfacefeed"
EXAMPLE_VERSION_TABLE = f"{VERSION_TABLE}_handlers"


async def _read(url: str, query: str) -> list[tuple[object, ...]]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return [tuple(row) for row in await conn.execute(text(query))]
    finally:
        await engine.dispose()


async def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return set(await conn.run_sync(lambda sync: inspect(sync).get_table_names()))
    finally:
        await engine.dispose()


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
async def test_a_newer_revision_is_left_alone_and_the_known_histories_migrate(
    database_url: str, backend: str
) -> None:
    await upgrade_to_head(database_url)  # the framework's tables only
    engine = create_engine(database_url)
    async with engine.begin() as conn:
        await conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '{FUTURE}'"))
    await engine.dispose()

    migrated = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "app.db.migrate"],
        env={**os.environ, "DATABASE_URL": database_url, "HANDLER_MODULES": "handlers"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert migrated.returncode == 0, migrated.stderr
    assert "Traceback" not in migrated.stderr
    warning = [line for line in migrated.stderr.splitlines() if FUTURE in line]
    assert len(warning) == 1, migrated.stderr
    assert VERSION_TABLE in warning[0]
    assert "left as they are" in warning[0]
    assert await _read(database_url, f"SELECT version_num FROM {VERSION_TABLE}") == [(FUTURE,)]
    assert await _read(database_url, f"SELECT count(*) FROM {EXAMPLE_VERSION_TABLE}") == [(1,)]
    assert "user_points" in await _tables(database_url)
