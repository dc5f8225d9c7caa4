"""Every database call is bounded: a connection that stops answering is dropped, not waited on.

A connection whose peer vanished without a FIN or an RST (a crashed host, a
failover, an expired NAT entry, a proxy that stopped forwarding) leaves a
query waiting forever, and TCP keepalive cannot see it while the path's own
kernel still acknowledges the bytes. So each connection gets, once, when it
is made:

- a connect deadline (``connect``): the TCP connection and the whole handshake;
- a server-side statement timeout (``statement``; 0: none): the server cancels
  a statement that runs longer (PostgreSQL ``statement_timeout``, SQLSTATE
  57014; MariaDB ``max_statement_time``, 1969; MySQL ``max_execution_time``,
  3024, for reads). The server answered: the pipeline pauses, and escalates a
  batch that keeps meeting it (``pipeline.classify``, ``STATEMENT``);
- a client-side response deadline (``response``, longer than ``statement``):
  the worker stops waiting for an answer that does not come. asyncpg applies its
  ``command_timeout`` to every call; aiomysql has no such option, so its two
  "read the server's answer" steps are bounded (``mysql_connection``; one timer
  per statement, not per row). The driver's ``TimeoutError`` makes SQLAlchemy invalidate the
  connection (it is closed, never returned to the pool), and the pipeline
  pauses and retries in place on a new one.

Two detectors end the wait sooner when the peer is gone: TCP keepalive with
``TCP_USER_TIMEOUT`` on every connection's socket (``sockets``; a real network), and,
for a statement unanswered ``probe_after`` seconds (0: never), a look at its session
on a second connection (``liveness``): a session the server freed drops the
connection at once, a busy one is left to the deadlines above.

SQLite has no network: its busy timeout (``engine.SQLITE_BUSY_TIMEOUT_MS``) is
its bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class DbTimeouts:
    """The bounds of a connection, in seconds (``statement`` 0: no server-side timeout;
    ``probe_after`` 0: no session probe)."""

    connect: float = 10.0
    statement: float = 30.0
    response: float = 35.0
    probe_after: float = 5.0


DEFAULT_TIMEOUTS = DbTimeouts()
# Migrations may rewrite a large table and wait for another worker's migration lock: they
# keep the connect deadline only.
MIGRATION_TIMEOUTS = DbTimeouts(statement=0.0, response=0.0)


def connect_args(backend: str, timeouts: DbTimeouts) -> dict[str, Any]:
    """The driver's connect arguments that apply ``timeouts`` (not the server-side one)."""
    if backend == "postgresql":
        return {"timeout": timeouts.connect, "command_timeout": timeouts.response or None}
    if backend == "mysql":
        from app.db.mysql_connection import bounded_connect  # aiomysql is optional

        return {"async_creator_fn": bounded_connect(timeouts.connect, timeouts.response)}
    return {}


def postgresql_statement_timeout(timeouts: DbTimeouts) -> str | None:
    """The ``SET`` that gives a PostgreSQL session its statement timeout (None: none)."""
    if not timeouts.statement:
        return None
    return f"SET statement_timeout = {round(timeouts.statement * 1000)}"


def mysql_statement_timeouts(timeouts: DbTimeouts) -> list[str]:
    """MariaDB's ``SET``, then MySQL's (reads only): the first the server accepts is used."""
    if not timeouts.statement:
        return []
    return [
        f"SET SESSION max_statement_time = {timeouts.statement:g}",
        f"SET SESSION max_execution_time = {round(timeouts.statement * 1000)}",
    ]
