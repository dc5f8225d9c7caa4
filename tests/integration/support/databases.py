"""Throw-away databases: one uniquely named database per test, dropped afterwards.

The servers are the ones CI starts (PostgreSQL on 5432, MariaDB on 3306);
``EO_TEST_POSTGRES_URL`` and ``EO_TEST_MARIADB_URL`` point elsewhere.
"""

from __future__ import annotations

import os
import uuid
import warnings
from pathlib import Path

import aiomysql
import asyncpg
from sqlalchemy.engine import make_url

BACKENDS = ("sqlite", "postgresql", "mariadb")

POSTGRES_SERVER = os.environ.get("EO_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432")
MARIADB_SERVER = os.environ.get("EO_TEST_MARIADB_URL", "mysql://root@127.0.0.1:3306")
CONNECT_TIMEOUT_SECONDS = 5


class ServiceUnavailable(Exception):
    """The database server for a backend does not answer."""


class Databases:
    """Creates databases on demand and drops every one it created in ``drop_all``."""

    def __init__(self, sqlite_dir: Path) -> None:
        self._sqlite_dir = sqlite_dir
        self._created: list[tuple[str, str]] = []

    async def create(self, backend: str) -> str:
        """A fresh, empty database on ``backend``; returns its async SQLAlchemy URL."""
        name = f"eo_test_{uuid.uuid4().hex[:12]}"
        if backend == "sqlite":
            return f"sqlite+aiosqlite:///{(self._sqlite_dir / f'{name}.db').resolve()}"
        if backend == "postgresql":
            await _postgres(f'CREATE DATABASE "{name}"')
            self._created.append((backend, name))
            server = make_url(POSTGRES_SERVER)
            return str(server.set(drivername="postgresql+asyncpg", database=name))
        if backend == "mariadb":
            await mariadb_execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
            self._created.append((backend, name))
            server = make_url(MARIADB_SERVER)
            return str(server.set(drivername="mysql+aiomysql", database=name))
        raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")

    async def drop_all(self) -> None:
        """Drop every database ``create`` made (SQLite files go with the test's tmp_path)."""
        while self._created:
            backend, name = self._created.pop()
            if backend == "postgresql":
                # FORCE: a worker killed a moment ago may still hold a connection.
                await _postgres(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            else:
                await mariadb_execute(f"DROP DATABASE IF EXISTS `{name}`")


async def _postgres(statement: str) -> None:
    server = make_url(POSTGRES_SERVER)
    try:
        conn = await asyncpg.connect(
            host=server.host,
            port=server.port or 5432,
            user=server.username,
            password=server.password,
            database="postgres",
            timeout=CONNECT_TIMEOUT_SECONDS,
        )
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise ServiceUnavailable(f"PostgreSQL at {server.host}:{server.port}: {exc!r}") from exc
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def mariadb_execute(statement: str) -> None:
    """Run ``statement`` on the MariaDB server as its admin (the server's notes, such as
    ``IF EXISTS`` finding nothing, are not warnings); ``ServiceUnavailable`` if it does not
    answer."""
    server = make_url(MARIADB_SERVER)
    try:
        conn = await aiomysql.connect(
            host=server.host,
            port=server.port or 3306,
            user=server.username,
            password=server.password or "",
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
        )
    except (OSError, TimeoutError, aiomysql.Error) as exc:
        raise ServiceUnavailable(f"MariaDB at {server.host}:{server.port}: {exc!r}") from exc
    try:
        async with conn.cursor() as cursor:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await cursor.execute(statement)
    finally:
        conn.close()
