"""Drop a connection whose server session is gone, without waiting out its response deadline.

A failover, or an outage the server outlived, can leave a connection whose session the
server has freed while the client hears nothing, ever (no FIN, no RST: the path still
acknowledges the bytes, so keepalive sees nothing either). A statement on it waited its
whole response deadline (``timeouts``), and a worker stalled that long.

So each engine watches its connections (``SessionWatch``). Once a second it asks the
kernel which of them sent a request and have heard nothing since (``sockets``); once one
has waited ``probe_after`` seconds it asks the server, on a short-lived connection of its
own (``PROBE_DEADLINE_SECONDS`` for connecting and asking), what its connections'
sessions are doing (PostgreSQL ``pg_stat_activity``, MySQL/MariaDB ``PROCESSLIST``), and
again every second while one waits:

- a session the server no longer has: the connection is dead, waiting or not; its
  transport is aborted, the statement fails at once as a lost connection (SQLAlchemy
  invalidates it and the pool's older ones), and the pipeline pauses and retries in place;
- a waiting connection whose session was idle at two probes ``IDLE_CONFIRM_SECONDS``
  apart, and idle all the while: its request never arrived or its answer was lost: the same;
- a busy session (running our statement, waiting for a lock): left alone, however long;
  the statement timeout and the response deadline still bound it;
- a probe that cannot connect or answer in time (the outage goes on): nothing concluded.

The session id is the one the server gave at connect (asyncpg's ``get_server_pid``,
aiomysql's thread id), checked once against ``pg_backend_pid()`` / ``CONNECTION_ID()``: a
pooler between (PgBouncer, ProxySQL) hands out ids of its own, and such a connection is
not watched rather than dropped for a session nobody has.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, event, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from app.db.sockets import last_traffic, socket_of, transport_of
from app.db.timeouts import DbTimeouts, connect_args

LOOK_EVERY_SECONDS = 1.0
PROBE_DEADLINE_SECONDS = 3.0
IDLE_CONFIRM_SECONDS = 2.0
IDLE_SLACK_SECONDS = 1.0  # MySQL's idle time is in whole seconds
_SAME_INSTANT_SECONDS = 0.1  # the kernel's times are in jiffies

log = logging.getLogger("effectively_once.db")
# Said once per engine on PostgreSQL, where a pooler's transaction mode breaks statements.
_PGBOUNCER_HINT = (
    " (PgBouncer?). In its transaction mode add pgbouncer=true to DATABASE_URL, or "
    "statements fail ('prepared statement ... does not exist'); its sessions are not probed"
)

_SESSIONS = {
    "postgresql": "SELECT pid, state IN ('idle', 'idle in transaction', "
    "'idle in transaction (aborted)'), EXTRACT(EPOCH FROM clock_timestamp() - state_change) "
    "FROM pg_stat_activity WHERE pid IN :ids",
    "mysql": "SELECT ID, COMMAND = 'Sleep', TIME FROM information_schema.PROCESSLIST "
    "WHERE ID IN :ids",
}
_OWN_ID = {"postgresql": "SELECT pg_backend_pid()", "mysql": "SELECT CONNECTION_ID()"}


@dataclass(frozen=True, slots=True)
class Seen:
    """A session as the server described it: idle (and for how long) or busy."""

    idle: bool
    idle_seconds: float = 0.0


def is_dead(seen: Seen | None, idle_from: float | None, now: float) -> bool:
    """Whether a waiting connection is dead, from its session as a probe found it ``now``
    (None: the server has no such session) and when an earlier probe of the same wait found
    it idle (``idle_from``; None: none did)."""
    if seen is None:
        return True
    if not seen.idle or idle_from is None:
        return False
    gap = now - idle_from
    return gap >= IDLE_CONFIRM_SECONDS and seen.idle_seconds >= gap - IDLE_SLACK_SECONDS


@dataclass(slots=True)
class _Connection:
    session: int
    transport: Any
    sock: Any
    checked_out_at: float | None = None
    heard_at: float | None = None  # the kernel's last receipt of data, as last seen
    waiting_since: float | None = None  # when it sent after that receipt
    idle_from: float | None = None

    def silent_for(self, now: float) -> tuple[float, bool]:
        """How long this connection may have waited for an answer (0: it is not waiting),
        and whether it surely waits.

        The kernel's times are in jiffies (4 ms): a request sent within one of the last
        answer (asyncpg's execute right after its prepare) cannot be told from a quick
        answer. Such a connection counts as waiting only while checked out, and is never
        dropped for an idle session, only for a gone one.
        """
        traffic = last_traffic(self.sock)
        if traffic is None:
            return 0.0, False
        sent_ago, heard_ago = traffic
        heard_at = now - heard_ago
        if self.heard_at is None or abs(heard_at - self.heard_at) > _SAME_INSTANT_SECONDS:
            self.heard_at, self.waiting_since, self.idle_from = heard_at, None, None
        if sent_ago < heard_ago - _SAME_INSTANT_SECONDS:
            if self.waiting_since is None:
                self.waiting_since = now - sent_ago
            return now - self.waiting_since, True
        if self.checked_out_at is not None and sent_ago <= heard_ago + _SAME_INSTANT_SECONDS:
            return min(heard_ago, now - self.checked_out_at), False
        return 0.0, False


class SessionWatch:
    """Watches one engine's connections (``listen`` hooks it to the pool's events) and drops
    those whose session is gone."""

    def __init__(
        self,
        url: str,
        backend: str,
        timeouts: DbTimeouts,
        tls: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self._pooler_said = False  # a pooler found and said once: PostgreSQL's hint
        self._tls = dict(tls or {})  # the URL's TLS, as the driver's connect arguments
        self.after = timeouts.probe_after
        self._url = url
        self._deadline = min(PROBE_DEADLINE_SECONDS, timeouts.connect)
        self._clock = clock
        self._connections: dict[int, _Connection] = {}
        self._task: asyncio.Task[None] | None = None
        self._probe_engine: AsyncEngine | None = None

    def listen(self, engine: AsyncEngine) -> None:
        """Watch every connection ``engine`` makes."""
        pool_events: dict[str, Callable[..., None]] = {
            "connect": self.connected,
            "checkout": self.checked_out,
            "checkin": self.checked_in,
            "close": self.closed,
            "close_detached": self.closed,
        }
        for name, listener in pool_events.items():
            event.listen(engine.sync_engine, name, listener)
        # A connection idle in the pool is pinged at checkout (``ping``) before this watch's
        # ``checkout`` listener runs; a ping sent within a jiffy of the connection's last
        # answer would otherwise not count as waiting, and one sent into an outage waited its
        # whole deadline.
        dialect = engine.sync_engine.dialect
        ping = dialect.do_ping

        def do_ping(dbapi_connection: Any) -> bool:
            self.checked_out(dbapi_connection, None, None)
            return bool(ping(dbapi_connection))

        dialect.do_ping = do_ping  # type: ignore[method-assign]

    def connected(self, dbapi_connection: Any, _record: Any) -> None:
        """Watch a new connection (``connect`` event), if its session id is the server's."""
        driver = dbapi_connection.driver_connection
        transport, sock = transport_of(driver), socket_of(driver)
        if transport is None or sock is None or last_traffic(sock) is None:
            return
        reported = _reported_session(driver)
        actual = _ask(dbapi_connection, _OWN_ID[self.backend])
        if reported is None or reported != actual:
            hint = self.backend == "postgresql" and not self._pooler_said
            self._pooler_said = self._pooler_said or hint
            log.log(
                logging.WARNING if hint else logging.INFO,
                "the database connection's session id (%s) is not the server's (%s): a "
                "pooler in between%s",
                reported,
                actual,
                _PGBOUNCER_HINT if hint else "? Its session is not probed",
            )
            return
        self._connections[id(dbapi_connection)] = _Connection(reported, transport, sock)
        self._keep_watching()

    def _keep_watching(self) -> None:
        """Have a watch running on this loop for the connections there are. One that is
        being cancelled (``closed`` took the last connection away, and this one came in
        before the cancellation landed) is about to end: another one starts, or no
        connection made from then on would ever be probed."""
        loop = asyncio.get_running_loop()
        task = self._task
        if task is None or task.done() or task.cancelling() or task.get_loop() is not loop:
            self._task = loop.create_task(self._run(), name="database session watch")

    def checked_out(self, dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        """Note when the pool handed a connection out: it may now wait on a statement."""
        connection = self._connections.get(id(dbapi_connection))
        if connection is not None:
            connection.checked_out_at = self._clock()

    def checked_in(self, dbapi_connection: Any, _record: Any) -> None:
        """Note a connection back in the pool: idle, unless it surely waits."""
        connection = self._connections.get(id(dbapi_connection))
        if connection is not None:
            connection.checked_out_at = None

    def closed(self, dbapi_connection: Any, _record: Any) -> None:
        """Stop watching a connection the pool closed (``close`` events)."""
        self._connections.pop(id(dbapi_connection), None)
        task = self._task
        if not self._connections and task is not None and _in_loop_of(task):
            task.cancel()

    async def _run(self) -> None:
        while self._connections:
            await asyncio.sleep(LOOK_EVERY_SECONDS)
            now = self._clock()
            waiting = {}
            for key, connection in list(self._connections.items()):
                if connection.transport.is_closing():
                    del self._connections[key]
                    continue
                waited, surely = connection.silent_for(now)
                if waited >= self.after:
                    waiting[key] = (waited, surely)
            if waiting:
                await self._probe(waiting)

    async def _probe(self, waiting: dict[int, tuple[float, bool]]) -> None:
        watched = dict(self._connections)
        seen = await self._sessions([c.session for c in watched.values()])
        if seen is None:
            return
        now = self._clock()
        for key, connection in watched.items():
            state = seen.get(connection.session)
            if key not in waiting:
                if state is None:
                    self._drop(key, connection, "is gone")
                continue
            waited, surely = waiting[key]
            if is_dead(state, connection.idle_from if surely else None, now):
                why = "is gone" if state is None else "was idle throughout"
                self._drop(key, connection, f"{why} while a statement waited {waited:.0f} s")
                continue
            assert state is not None
            if state.idle and surely and connection.idle_from is None:
                connection.idle_from = now
            log.debug(
                "database session %s %s after %.1f s without an answer",
                connection.session,
                "idle" if state.idle else "busy",
                waited,
            )

    def _drop(self, key: int, connection: _Connection, why: str) -> None:
        log.warning("database session %s %s: its connection is dropped", connection.session, why)
        self._connections.pop(key, None)
        connection.transport.abort()

    async def _sessions(self, ids: list[int]) -> dict[int, Seen] | None:
        """The state of each session in ``ids`` the server has (None: it could not be asked)."""
        statement = text(_SESSIONS[self.backend]).bindparams(bindparam("ids", expanding=True))
        try:
            async with asyncio.timeout(self._deadline):
                async with self._engine().connect() as conn:
                    rows = (await conn.execute(statement, {"ids": ids})).all()
        except Exception as exc:  # the outage goes on (timeout, refused, reset): wait on
            log.debug("the database session probe failed: %r", exc)
            return None
        return {int(row[0]): Seen(bool(row[1]), float(row[2] or 0)) for row in rows}

    def _engine(self) -> AsyncEngine:
        if self._probe_engine is None:
            bounds = DbTimeouts(connect=self._deadline, statement=0, response=self._deadline)
            self._probe_engine = create_async_engine(
                self._url,
                poolclass=NullPool,
                connect_args=connect_args(self.backend, bounds) | self._tls,
            )
        return self._probe_engine


def _reported_session(driver: Any) -> int | None:
    """The session id the server announced at connect (asyncpg: its pid; aiomysql: the
    thread id of the handshake, a one-tuple)."""
    if hasattr(driver, "get_server_pid"):
        return int(driver.get_server_pid())
    thread = getattr(driver, "server_thread_id", None)
    if isinstance(thread, tuple):
        thread = thread[0] if thread else None
    return None if thread is None else int(thread)


def _ask(dbapi_connection: Any, statement: str) -> int | None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(statement)
        row = cursor.fetchone()
        dbapi_connection.rollback()  # leave no transaction open on the new connection
    finally:
        cursor.close()
    return None if row is None else int(row[0])


def _in_loop_of(task: asyncio.Task[None]) -> bool:
    try:
        return asyncio.get_running_loop() is task.get_loop()
    except RuntimeError:
        return False
