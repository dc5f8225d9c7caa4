"""Create the async engine with the options each database needs."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from app.db import connect_options, pgbouncer
from app.db.liveness import SessionWatch
from app.db.ping import ping_when_idle
from app.db.sockets import keep_alive, socket_of
from app.db.timeouts import (
    DEFAULT_TIMEOUTS,
    DbTimeouts,
    connect_args,
    mysql_statement_timeouts,
    postgresql_statement_timeout,
)

SQLITE_BUSY_TIMEOUT_MS = 30_000
# The driver prepares each statement once per connection, and after five runs the server
# may switch it to a generic plan, chosen from the table sizes of that moment and kept for
# the connection's life. A plan chosen while a table was nearly empty (a new deployment,
# the first minutes of a new consumer) can scan it in full, and a dedup lookup then took
# seconds per batch once the table had grown to 60k rows. A custom plan per run costs a
# little planning and always sees the table it reads. (A server without the setting,
# before PostgreSQL 12 or some compatible databases, gets a warning and serves as it is.)
CUSTOM_PLANS = "SET plan_cache_mode = force_custom_plan"

# How long closing an engine's connections may wait for the server (a stop during an
# outage would otherwise wait for each silent connection's response deadline).
CLOSE_WITHIN_SECONDS = 2.0

log = logging.getLogger("effectively_once.db")


def dialect_name(url: str) -> str:
    """``postgresql``, ``mysql`` or ``sqlite``."""
    return make_url(url).get_backend_name()


def create_engine(
    url: str, pool_size: int = 5, timeouts: DbTimeouts = DEFAULT_TIMEOUTS
) -> AsyncEngine:
    """An async engine for ``url``.

    PostgreSQL and MySQL run at READ COMMITTED so that a statement issued after
    a row lock was granted sees what the lock holder before us committed.
    Every connection is bounded by ``timeouts`` (see ``timeouts``): a connection
    that stops answering is dropped, not waited on; its socket has TCP keepalive, and one
    whose session the server freed is dropped as soon as a probe finds out (``liveness``;
    not behind PgBouncer, where the session is the pooler's). No SQL error shows the
    bound parameters (``hide_parameters``): the handlers' statements run here too.
    PostgreSQL plans every statement for its parameters (see ``_postgresql_session``).
    The URL's TLS parameters and ``pgbouncer=true`` are the framework's to read
    (``connect_options``): they become the driver's connect arguments.
    SQLite runs in WAL mode with a busy timeout so that several worker
    processes can share one file.
    """
    backend = dialect_name(url)
    asked = connect_options.read(url)
    # A SQL error never carries the statement's parameters: they are the data (an e-mail
    # address, a card number), and the error goes to logs and dead letters.
    options: dict[str, Any] = {"hide_parameters": True}
    if backend == "sqlite":
        options["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
    else:
        options.update(
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_recycle=1800,
            isolation_level="READ COMMITTED",
            connect_args=connect_args(backend, timeouts) | asked.connect_args(),
        )
    engine = create_async_engine(asked.url, **options)
    if backend != "sqlite":
        event.listen(engine.sync_engine, "handle_error", _silent_retires_the_pool)
        event.listen(engine.sync_engine, "connect", _keep_alive)
        ping_when_idle(engine)  # not at every checkout: see ``ping``
    if backend != "sqlite" and timeouts.probe_after and not asked.pgbouncer:
        SessionWatch(asked.url, backend, timeouts, asked.connect_args()).listen(engine)
    if backend == "postgresql" and asked.pgbouncer:
        pgbouncer.per_transaction(engine, timeouts)  # no session state: see ``pgbouncer``
    elif backend == "postgresql":
        event.listen(engine.sync_engine, "connect", _postgresql_session(timeouts))
    if backend == "mysql":
        event.listen(engine.sync_engine, "connect", _mysql_session(timeouts))
    if backend == "sqlite":
        event.listen(engine.sync_engine, "connect", _sqlite_connect)
        event.listen(engine.sync_engine, "begin", _sqlite_begin)
    return engine


def _silent_retires_the_pool(context: ExceptionContext) -> None:
    """A statement that met its response deadline (``TimeoutError``) was on a connection
    that went silent, and whatever silenced it (a failover, a blackhole, an expired NAT
    entry) silenced the pool's other connections of that time too. Taken as a
    disconnect, SQLAlchemy drops this connection and every pooled one made before it
    (each is replaced at its next checkout); otherwise each would be pinged at
    checkout (``ping``) and cost a deadline of its own, one after another."""
    if isinstance(context.original_exception, TimeoutError):
        context.is_disconnect = True
        context.invalidate_pool_on_disconnect = True


def _keep_alive(dbapi_connection: Any, _record: Any) -> None:
    sock = socket_of(dbapi_connection.driver_connection)
    if sock is not None:
        keep_alive(sock)


def _postgresql_session(timeouts: DbTimeouts) -> Any:
    statements = [postgresql_statement_timeout(timeouts), CUSTOM_PLANS]

    def connect(dbapi_connection: Any, _record: Any) -> None:
        for statement in filter(None, statements):
            _set(dbapi_connection, statement)

    return connect


def _mysql_session(timeouts: DbTimeouts) -> Any:
    # MariaDB's variable first; MySQL knows only its own (for reads), MariaDB only its own.
    candidates = mysql_statement_timeouts(timeouts)

    def connect(dbapi_connection: Any, _record: Any) -> None:
        for statement in candidates:
            if _set(dbapi_connection, statement, warn=statement is candidates[-1]):
                return

    return connect


def _set(dbapi_connection: Any, statement: str, warn: bool = True) -> bool:
    """Run one session ``SET``; True if the server took it.

    A server that refuses it (a version without the setting, a compatible database)
    still serves: a warning, and the connection is used as it is.
    """
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(statement)
    except Exception as exc:  # the driver's own error class; the connection is still fine
        dbapi_connection.rollback()
        if warn:
            log.warning("the database refused %r (%s); connections go without it", statement, exc)
        return False
    else:
        dbapi_connection.commit()  # the driver ran it in a transaction: a rollback undoes it
        return True
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


async def dispose(engine: AsyncEngine, within: float = CLOSE_WITHIN_SECONDS) -> None:
    """Close ``engine``'s pooled connections, each with a goodbye to the server, for at most
    ``within`` seconds; what is left then is dropped unclosed (a server that did not answer
    in time frees its sessions when their sockets close, at the process's end at last)."""
    pool_log = _logger_of(engine)
    pool_log.addFilter(_cut_close)
    try:
        async with asyncio.timeout(within):
            await engine.dispose()
    except TimeoutError:
        log.warning(
            "the database did not answer while its connections closed (%gs): the rest are dropped",
            within,
        )
        await engine.dispose(close=False)
    finally:
        pool_log.removeFilter(_cut_close)


def _logger_of(engine: AsyncEngine) -> logging.Logger:
    """The pool's own logger (SQLAlchemy wraps it when the pool echoes)."""
    found = engine.sync_engine.pool.logger
    return found if isinstance(found, logging.Logger) else found.logger


def _cut_close(record: logging.LogRecord) -> bool:
    """Leave out the pool's traceback for a close that ``dispose`` cut short (its warning
    says so); any other failure to close is logged."""
    cancelled = record.exc_info is not None and record.exc_info[0] is asyncio.CancelledError
    return not (cancelled and record.getMessage().startswith("Exception closing connection"))
