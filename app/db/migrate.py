"""Bring a database's schema to the newest Alembic revisions, safely from several workers at once.

Two kinds of history (``app.db.histories``): the framework's own revisions in
``app/db/migrations/versions`` (shipped as package data), then those each
handler package ships in its ``migrations`` folder, for the modules of
``HANDLER_MODULES`` only. There is no alembic.ini, the configuration is built
here. Every worker may run ``upgrade_to_head`` at start (``MIGRATE_ON_START``,
on by default): the first one takes a database-wide lock and migrates every
history, the others wait for the lock and then find nothing left to do.

- PostgreSQL: ``pg_advisory_xact_lock``, released when the upgrade's
  transaction ends (PostgreSQL runs DDL in that transaction, all or nothing).
- MySQL/MariaDB: ``GET_LOCK`` on the session, released explicitly (MySQL
  commits each DDL statement on its own).
- SQLite: ``BEGIN IMMEDIATE`` takes the file's write lock up front, so a
  second process waits (busy timeout) until the first one commits.

A history whose version table records a revision this code does not hold (a newer
release migrated the database) is left as it is, with a warning (``revisions``).

Command line: ``python -m app.db.migrate`` upgrades ``DATABASE_URL`` for
``HANDLER_MODULES``; ``--new-identity`` then renews the database's identity
(``app.db.identity``).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import zlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NoReturn
from weakref import WeakKeyDictionary

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import revisions
from app.db.engine import create_engine
from app.db.histories import FRAMEWORK, History, histories
from app.db.histories import VERSION_TABLE as VERSION_TABLE
from app.db.timeouts import MIGRATION_TIMEOUTS
from app.db.urls import normalise_database_url, shown
from app.errors import ConfigurationError, raised_at
from app.pipeline.classify import is_infrastructure

MIGRATIONS_DIR = FRAMEWORK.versions.parent
log = logging.getLogger("effectively_once.migrate")

# Any constant works as long as every worker uses the same one.
_PG_LOCK_KEY = zlib.crc32(b"effectively-once migrations")
_MYSQL_LOCK_NAME = "effectively_once_migrations"
MYSQL_LOCK_TIMEOUT_SECONDS = 300

_ALEMBIC_LOCKS: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = WeakKeyDictionary()


def alembic_config(history: History = FRAMEWORK) -> Config:
    """The Alembic configuration of ``history``, without any ini file.

    Every history runs through our ``env.py``, with its own version table.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    config.set_main_option("version_locations", str(history.versions))
    config.attributes["version_table"] = history.version_table
    return config


async def upgrade_to_head(database_url: str, handler_modules: Sequence[str] = ()) -> None:
    """Create or upgrade the framework's tables at ``database_url``, then those of the
    migrations folders of ``handler_modules`` (``handlers``: the example consumers').

    Safe to await from a running event loop (Alembic runs in
    ``AsyncConnection.run_sync``) and from several processes at once. A module
    that cannot be found raises ``ConfigurationError`` before any connection.
    """
    await upgrade(database_url, histories(handler_modules))


async def upgrade(database_url: str, chain: Sequence[History]) -> None:
    """Bring each history of ``chain`` to its heads, in order, under one migration lock."""
    engine = create_engine(
        normalise_database_url(database_url), pool_size=1, timeouts=MIGRATION_TIMEOUTS
    )
    try:
        async with (
            _alembic_lock(),
            engine.begin() as connection,
            migration_lock(connection),
        ):
            for history in chain:
                try:
                    await connection.run_sync(_upgrade, history, "heads")
                except DBAPIError as exc:
                    if is_infrastructure(exc):
                        raise  # waited for and tried again, as any outage
                    raise ConfigurationError(_failed(history, exc)) from None
    finally:
        await engine.dispose()


def upgrade_to_head_sync(database_url: str, handler_modules: Sequence[str] = ()) -> None:
    """``upgrade_to_head`` for code that has no event loop running."""
    asyncio.run(upgrade_to_head(database_url, handler_modules))


def _alembic_lock() -> asyncio.Lock:
    """One Alembic run at a time per event loop, whatever the database.

    Alembic keeps the running migration's context in a module global, and
    ``run_sync`` lets other coroutines run at every database call: two
    upgrades interleaved in one process (two databases, say) would mix up
    their contexts.
    """
    loop = asyncio.get_running_loop()
    return _ALEMBIC_LOCKS.setdefault(loop, asyncio.Lock())


def _upgrade(connection: Connection, history: History, revision: str) -> None:
    config = alembic_config(history)
    config.attributes["connection"] = connection
    unknown = revisions.unknown_revisions(connection, history, config)
    if unknown:  # migrated by a newer release: see ``revisions``
        log.warning(revisions.describe(history, unknown))
        return
    try:
        command.upgrade(config, revision)
    except CommandError as exc:  # a history Alembic cannot follow (a revision file missing)
        raise ConfigurationError(f"cannot migrate with {history.versions}: {exc}") from None


def _failed(history: History, exc: DBAPIError) -> str:
    """A revision the database refuses (a mistake in it, not an outage): which one, where,
    and the database's reason, in one line."""
    folder = history.versions.resolve()
    where = raised_at(exc, lambda filename: Path(filename).resolve().parent == folder)
    where = where or str(history.versions)
    lines = str(exc.orig or exc).strip().splitlines()
    reason = lines[0] if lines else type(exc.orig or exc).__name__
    return f"the database refused the migration at {where}: {reason}"


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


def main(argv: list[str] | None = None) -> None:
    """Upgrade the database named by the settings (``DATABASE_URL``, ``HANDLER_MODULES``);
    with ``--new-identity``, then give it a new identity (after restoring it from a backup:
    the Redis prefilter's keys of the old one are never read again). A mistake in the
    settings or a database that cannot be reached is one line on stderr and exit code 2."""
    import argparse

    from pydantic import ValidationError
    from sqlalchemy.exc import SQLAlchemyError

    from app.settings import Settings, describe

    parser = argparse.ArgumentParser(prog="python -m app.db.migrate", description=main.__doc__)
    parser.add_argument("--new-identity", action="store_true", help="renew the database's id")
    options = parser.parse_args(argv)
    try:
        settings = Settings()
    except ValidationError as exc:
        _exit(f"invalid settings: {'; '.join(describe(exc))}")
    url = settings.database_url
    try:
        upgrade_to_head_sync(url, settings.handler_module_names)
        if "handler_modules" not in settings.model_fields_set:
            print(
                "effectively-once migrate: HANDLER_MODULES is not set: the bundled example "
                f"consumers' tables (package {settings.handler_modules!r}) were migrated too; "
                "set HANDLER_MODULES to your own package",
                file=sys.stderr,
            )
        if options.new_identity:
            print(f"{shown(url)}: new identity {asyncio.run(_renew(url))}")
    except ConfigurationError as exc:
        print(f"effectively-once: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except (SQLAlchemyError, OSError) as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        _exit(f"cannot migrate {shown(url)}: {reason[0] if reason else type(exc).__name__}")


async def _renew(url: str) -> str:
    from app.db.identity import renew_identity

    engine = create_engine(url, pool_size=1)
    try:
        return await renew_identity(engine)
    finally:
        await engine.dispose()


def _exit(message: str) -> NoReturn:
    print(f"effectively-once migrate: {message}", file=sys.stderr)
    raise SystemExit(2)


if __name__ == "__main__":
    main()
