"""Create the async engine with the options each database needs."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

SQLITE_BUSY_TIMEOUT_MS = 30_000
CUSTOM_PLANS = "SET plan_cache_mode = force_custom_plan"

log = logging.getLogger("effectively_once.db")


def dialect_name(url: str) -> str:
    """``postgresql``, ``mysql`` or ``sqlite``."""
    return make_url(url).get_backend_name()


def create_engine(url: str, pool_size: int = 5) -> AsyncEngine:
    """An async engine for ``url``.

    PostgreSQL and MySQL run at READ COMMITTED so that a statement issued after
    a row lock was granted sees what the lock holder before us committed.
    PostgreSQL plans every statement for its parameters (see ``_postgresql_connect``).
    SQLite runs in WAL mode with a busy timeout so that several worker
    processes can share one file.
    """
    backend = dialect_name(url)
    options: dict[str, Any] = {"pool_pre_ping": True}
    if backend == "sqlite":
        options = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}}
    else:
        options.update(
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_recycle=1800,
            isolation_level="READ COMMITTED",
        )
    engine = create_async_engine(url, **options)
    if backend == "postgresql":
        event.listen(engine.sync_engine, "connect", _postgresql_connect)
    if backend == "sqlite":
        event.listen(engine.sync_engine, "connect", _sqlite_connect)
        event.listen(engine.sync_engine, "begin", _sqlite_begin)
    return engine


def _postgresql_connect(dbapi_connection: Any, _record: Any) -> None:
    # The driver prepares each statement once per connection, and after five runs the
    # server may switch it to a generic plan, chosen from the table sizes of that moment
    # and kept for the connection's life. A plan chosen while a table was nearly empty
    # (a new deployment, the first minutes of a new consumer) can scan it in full, and
    # a dedup lookup then took seconds per batch once the table had grown to 60k rows.
    # A custom plan per run costs a little planning and always sees the table it reads.
    # A server without the setting (before PostgreSQL 12, some compatible databases)
    # still serves: a warning, and the connection is used as it is.
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(CUSTOM_PLANS)
    except Exception as exc:  # the driver's own error class; the connection is still fine
        dbapi_connection.rollback()
        log.warning(
            "the database refused %r (%s); statements use its plan cache", CUSTOM_PLANS, exc
        )
    else:
        dbapi_connection.commit()  # the driver ran it in a transaction: a rollback undoes it
    finally:
        cursor.close()


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # The driver's own implicit BEGIN would make a leading SAVEPOINT start (and its
    # RELEASE commit) the transaction; SQLAlchemy's documented fix is to emit BEGIN
    # ourselves (see ``_sqlite_begin``).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_begin(connection: Any) -> None:
    # IMMEDIATE takes the write lock up front: concurrent writers wait (busy timeout)
    # instead of failing when a read lock would have to be upgraded.
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep objects usable after commit (the framework owns commits)."""
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=True)
