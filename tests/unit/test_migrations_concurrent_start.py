"""Workers that migrate at start may start together, and may start again.

Contract: several processes running the migrations against one empty SQLite
file at the same moment all succeed and leave both the framework's history and
the example package's (``HANDLER_MODULES=handlers``) at head; upgrades of
several databases awaited at once in one event loop do not disturb each
other; upgrading a database already at head changes nothing; and the sync
wrapper works where no event loop runs.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from sqlalchemy import insert, inspect, select, text

from app.db.engine import create_engine
from app.db.migrate import VERSION_TABLE, upgrade_to_head, upgrade_to_head_sync
from handlers.tables import user_points

PROCESSES = 4
EXAMPLE_VERSION_TABLE = "effectively_once_version_handlers"


async def version_and_tables(url: str, table: str = VERSION_TABLE) -> tuple[str, set[str]]:
    """The revision recorded in ``table`` and every table name of the database at ``url``."""
    engine = create_engine(url)
    async with engine.connect() as connection:
        version = await connection.scalar(text(f"SELECT version_num FROM {table}"))
        tables = await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
    await engine.dispose()
    return str(version), tables


async def test_processes_starting_at_once_all_migrate_successfully(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    env = {**os.environ, "DATABASE_URL": url, "HANDLER_MODULES": "handlers"}
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.db.migrate", env=env, stderr=asyncio.subprocess.PIPE
        )
        for _ in range(PROCESSES)
    ]
    errors = [(await p.communicate())[1].decode() for p in processes]

    assert [p.returncode for p in processes] == [0] * PROCESSES, errors
    version, tables = await version_and_tables(url)
    assert version == "0008"
    assert {"consumed_event", "user_points", "notification"} <= tables
    assert (await version_and_tables(url, EXAMPLE_VERSION_TABLE))[0] == "0003"


async def test_upgrades_awaited_together_in_one_loop_all_succeed(tmp_path: Path) -> None:
    urls = [f"sqlite+aiosqlite:///{tmp_path / name}.db" for name in ("a", "b", "a", "c")]

    await asyncio.gather(*(upgrade_to_head(url, ["handlers"]) for url in urls))

    assert [(await version_and_tables(url))[0] for url in urls] == ["0008"] * len(urls)


async def test_upgrade_at_head_changes_nothing(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'again.db'}"
    await upgrade_to_head(url, ["handlers"])
    engine = create_engine(url)
    async with engine.begin() as connection:
        await connection.execute(insert(user_points).values(user_id="u-1", balance=7))

    await upgrade_to_head(url, ["handlers"])

    async with engine.connect() as connection:
        rows = (await connection.execute(select(user_points))).all()
    await engine.dispose()
    assert [tuple(row) for row in rows] == [("u-1", 7)]


def test_sync_wrapper_migrates_without_a_running_loop(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sync.db'}"  # a plain URL gets its async driver

    upgrade_to_head_sync(url)

    version, _ = asyncio.run(version_and_tables(f"sqlite+aiosqlite:///{tmp_path / 'sync.db'}"))
    assert version == "0008"
