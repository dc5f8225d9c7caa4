"""Bring a database's schema to the newest Alembic revision, safely from several workers at once.

The revisions live in ``app/db/migrations/versions`` (shipped as package data);
there is no alembic.ini, the configuration is built here. Every worker may run
``upgrade_to_head`` at start (``MIGRATE_ON_START``, on by default): the first
one takes a database-wide lock and migrates, the others wait for the lock and
then find nothing left to do.

- PostgreSQL: ``pg_advisory_xact_lock``, released when the upgrade's
  transaction ends (PostgreSQL runs DDL in that transaction, all or nothing).
- MySQL/MariaDB: ``GET_LOCK`` on the session, released explicitly (MySQL
  commits each DDL statement on its own).
- SQLite: ``BEGIN IMMEDIATE`` takes the file's write lock up front, so a
  second process waits (busy timeout) until the first one commits.

Command line: ``python -m app.db.migrate`` upgrades ``DATABASE_URL``.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from weakref import WeakKeyDictionary

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.engine import create_engine
from app.db.urls import normalise_database_url

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# Not Alembic's default ``alembic_version``: the application may keep its own
# Alembic history in the same database.
VERSION_TABLE = "effectively_once_version"

# Any constant works as long as every worker uses the same one.
_PG_LOCK_KEY = zlib.crc32(b"effectively-once migrations")
_MYSQL_LOCK_NAME = "effectively_once_migrations"
MYSQL_LOCK_TIMEOUT_SECONDS = 300

_ALEMBIC_LOCKS: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = WeakKeyDictionary()


def alembic_config() -> Config:
    """The Alembic configuration of our migrations, without any ini file."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    return config


async def upgrade_to_head(database_url: str) -> None:
    """Create or upgrade every framework and example table at ``database_url``.

    Safe to await from a running event loop (Alembic runs in
    ``AsyncConnection.run_sync``) and from several processes at once.
    """
    engine = create_engine(normalise_database_url(database_url), pool_size=1)
    try:
        async with (
            _alembic_lock(),
            engine.begin() as connection,
            migration_lock(connection),
        ):
            await connection.run_sync(_upgrade, "head")
    finally:
        await engine.dispose()


def upgrade_to_head_sync(database_url: str) -> None:
    """``upgrade_to_head`` for code that has no event loop running."""
    asyncio.run(upgrade_to_head(database_url))


def _alembic_lock() -> asyncio.Lock:
    """One Alembic run at a time per event loop, whatever the database.

    Alembic keeps the running migration's context in a module global, and
    ``run_sync`` lets other coroutines run at every database call: two
    upgrades interleaved in one process (two databases, say) would mix up
    their contexts.
    """
    loop = asyncio.get_running_loop()
    return _ALEMBIC_LOCKS.setdefault(loop, asyncio.Lock())


def _upgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


@asynccontextmanager
async def migration_lock(connection: AsyncConnection) -> AsyncIterator[None]:
    """Hold the database-wide migration lock on ``connection`` for the block.

    ``connection`` must be in a transaction that ends after the block.
    """
    backend = connection.dialect.name
    if backend == "postgresql":
        await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        yield
    elif backend in ("mysql", "mariadb"):
        params = {"name": _MYSQL_LOCK_NAME, "timeout": MYSQL_LOCK_TIMEOUT_SECONDS}
        got = await connection.scalar(text("SELECT GET_LOCK(:name, :timeout)"), params)
        if got != 1:
            raise TimeoutError(
                f"another worker held the migration lock for {MYSQL_LOCK_TIMEOUT_SECONDS} s"
            )
        try:
            yield
        finally:
            await connection.execute(text("SELECT RELEASE_LOCK(:name)"), params)
    elif backend == "sqlite":
        # BEGIN IMMEDIATE takes the write lock now, not at the first write, so a
        # second process waits here; the engine may already begin that way.
        driver = (await connection.get_raw_connection()).driver_connection
        if driver is not None and not driver.in_transaction:
            await connection.exec_driver_sql("BEGIN IMMEDIATE")
        yield
    else:
        raise ValueError(f"unsupported database dialect {backend!r}")


def main() -> None:
    """Upgrade the database named by the settings (``DATABASE_URL``)."""
    from app.settings import get_settings

    upgrade_to_head_sync(get_settings().database_url)


if __name__ == "__main__":
    main()
