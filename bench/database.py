"""The bench's PostgreSQL database: create, migrate, empty between scenarios, count transactions.

Transactions are counted from ``pg_stat_database.xact_commit``, read over a
connection to the server's ``postgres`` database so that the reads themselves
do not count. PostgreSQL backends report their counts lazily (at most once a
second, and at exit), so a count is taken only once the worker has stopped and
every backend it had on the bench's database is gone.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from sqlalchemy.engine import URL, make_url

from app.db.migrate import upgrade_to_head
from app.db.tables import metadata
from handlers.tables import example_metadata

CONNECT_TIMEOUT_SECONDS = 5
_TABLES = [t.name for t in (*metadata.sorted_tables, *example_metadata.sorted_tables)]
IDLE_TIMEOUT_SECONDS = 20.0


class DatabaseError(RuntimeError):
    """The bench's database could not be prepared or read."""


@dataclass
class BenchDatabase:
    """One PostgreSQL database; ``owned`` when the bench created it (and so drops it)."""

    url: URL
    owned: bool

    @classmethod
    async def create(cls, server: str) -> BenchDatabase:
        """A fresh database ``eo_bench_<random>`` on ``server``."""
        name = f"eo_bench_{uuid.uuid4().hex[:10]}"
        base = make_url(server)
        await _execute(base, f'CREATE DATABASE "{name}"')
        return cls(base.set(drivername="postgresql+asyncpg", database=name), owned=True)

    @classmethod
    def existing(cls, url: str) -> BenchDatabase:
        """The database at ``url``; only PostgreSQL has the statistics the bench reads."""
        parsed = make_url(url)
        if parsed.get_backend_name() != "postgresql":
            raise DatabaseError(f"the bench needs PostgreSQL, got {parsed.get_backend_name()!r}")
        return cls(parsed.set(drivername="postgresql+asyncpg"), owned=False)

    @property
    def name(self) -> str:
        """The database's name."""
        return str(self.url.database)

    @property
    def sqlalchemy_url(self) -> str:
        """``DATABASE_URL`` for a worker, password included."""
        return self.url.render_as_string(hide_password=False)

    async def migrate(self) -> None:
        """Create the framework's and the example consumers' tables."""
        await upgrade_to_head(self.sqlalchemy_url, ["handlers"])

    async def empty(self) -> None:
        """Delete every row of the framework's and the example consumers' tables, then
        ``settle``. Their planner statistics stay (``TRUNCATE`` keeps ``pg_statistic``).
        """
        await _execute(self.url, f"TRUNCATE {', '.join(_TABLES)}")
        await self.settle()

    async def settle(self) -> None:
        """``CHECKPOINT``: the next scenario starts with the write-ahead log of the last one
        flushed, so that it does not pay for a checkpoint the last one's writes requested
        (the server's log showed one starting mid-row). Skipped without the privilege."""
        try:
            await _execute(self.url, "CHECKPOINT")
        except asyncpg.InsufficientPrivilegeError:
            pass

    async def analyze(self) -> None:
        """Collect planner statistics on the framework's and the example consumers' tables,
        then ``settle``."""
        await _execute(self.url, f"ANALYZE {', '.join(_TABLES)}")
        await self.settle()

    async def transactions(self) -> int:
        """Committed transactions on this database so far, once no backend is connected to it."""
        deadline = time.monotonic() + IDLE_TIMEOUT_SECONDS
        conn = await _connect(self.url.set(database="postgres"))
        try:
            while True:
                busy = await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", self.name
                )
                if busy == 0 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            # A backend leaves pg_stat_activity a moment before it reports its last
            # counts: read until two reads a moment apart agree.
            value, previous = await self._xact_commit(conn), -1
            while value != previous and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                value, previous = await self._xact_commit(conn), value
        finally:
            await conn.close()
        if busy:
            raise DatabaseError(f"{busy} connections still open on {self.name} after the worker")
        return value

    async def _xact_commit(self, conn: asyncpg.Connection) -> int:
        value = await conn.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", self.name
        )
        return int(value)

    async def fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        """The rows of ``sql`` on the bench's database."""
        conn = await _connect(self.url)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def applied_at(self) -> list[tuple[str, str, datetime]]:
        """Every ``consumed_event`` row as ``(consumer, event_id, applied_at)``."""
        conn = await _connect(self.url)
        try:
            rows = await conn.fetch(
                "SELECT consumer_group, event_id, applied_at FROM consumed_event"
            )
        finally:
            await conn.close()
        return [(row[0], row[1], row[2]) for row in rows]

    async def drop(self) -> None:
        """Drop the database if the bench created it; a database it was given stays."""
        if self.owned:
            await _execute(
                self.url.set(database="postgres"),
                f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)',
            )


async def _connect(url: URL) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(
            host=url.host or "127.0.0.1",
            port=url.port or 5432,
            user=url.username,
            password=url.password,
            database=url.database or "postgres",
            timeout=CONNECT_TIMEOUT_SECONDS,
        )
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise DatabaseError(f"PostgreSQL at {url.host}:{url.port or 5432}: {exc!r}") from exc


async def _execute(url: URL, statement: str) -> None:
    conn = await _connect(url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()
