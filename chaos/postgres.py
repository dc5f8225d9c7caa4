"""The soak's own PostgreSQL: cluster ``chaos`` on port 5434, made with Debian's cluster tools.

Created on first use (``pg_createcluster``, trust authentication on loopback, as the
shared server has), started if it is down, and stopped at the end only if the soak
started it. Every command names the version and the cluster ``chaos``, and the
port is checked before anything is stopped: the shared cluster on 5432 is never
touched.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterable
from pathlib import Path

import asyncpg

from chaos.commands import CommandFailed, run, wait_for_port
from chaos.database import ServerUnavailable

CLUSTER = "chaos"
PORT = 5434
USER = "postgres"
CONNECT_TIMEOUT_SECONDS = 5


class ChaosPostgres:
    """Cluster ``chaos`` of the newest installed PostgreSQL, on ``PORT``."""

    backend = "postgresql"
    port = PORT

    def __init__(self) -> None:
        self._version = ""
        self._started_by_us = False

    async def start(self) -> None:
        """Create the cluster if it does not exist, start it if it is down."""
        for tool in ("pg_lsclusters", "pg_createcluster", "pg_ctlcluster"):
            if shutil.which(tool) is None:
                raise ServerUnavailable(f"{tool} not found (Debian's postgresql-common)")
        self._version = _newest_version()
        cluster = await self._cluster()
        if cluster is None:
            await run(
                "pg_createcluster", self._version, CLUSTER, "--port", str(PORT),
                "--", "--auth=trust",
            )  # fmt: skip
            cluster = await self._cluster()
        if cluster is None or cluster[0] != str(PORT):
            raise ServerUnavailable(
                f"cluster {self._version}/{CLUSTER} is not on port {PORT}: {cluster}"
            )
        if cluster[1] != "online":
            await self._ctl("start")
            self._started_by_us = True
        await self._wait_ready()

    async def create_database(self, name: str) -> None:
        """``CREATE DATABASE name``."""
        await self._execute(f'CREATE DATABASE "{name}"')

    def url(self, name: str, port: int | None = None) -> str:
        """``postgresql+asyncpg://postgres@127.0.0.1:<port>/<name>``."""
        return f"postgresql+asyncpg://{USER}@127.0.0.1:{port or PORT}/{name}"

    async def terminate(self, client_ports: Iterable[int]) -> int:
        """``pg_terminate_backend`` of the sessions whose client port is in ``client_ports``."""
        ports = sorted(set(client_ports))
        if not ports:
            return 0
        conn = await self._connect()
        try:
            # Chosen first, terminated after: in one WHERE the server may call the function
            # before it filters, on every session, its own included.
            pids = await conn.fetchval(
                "SELECT array_agg(pid) FROM pg_stat_activity "
                "WHERE client_port = ANY($1::int[]) AND pid <> pg_backend_pid()",
                ports,
            )
            ended = await conn.fetchval(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) "
                "FROM unnest($1::int[]) AS pid",
                list(pids or []),
            )
        finally:
            await conn.close()
        return int(ended or 0)

    async def crash(self) -> None:
        """``pg_ctlcluster ... stop -m immediate``: every backend killed, recovery at next start."""
        await self._ctl("stop", "-m", "immediate")

    async def start_again(self) -> None:
        """Start the cluster after ``crash``."""
        await self._ctl("start")
        await self._wait_ready()

    async def drop_database(self, name: str) -> None:
        """``DROP DATABASE ... WITH (FORCE)``."""
        await self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    async def stop(self) -> None:
        """Stop the cluster if the soak started it."""
        if self._started_by_us:
            await self._ctl("stop", "-m", "fast")
            self._started_by_us = False

    async def _cluster(self) -> tuple[str, str] | None:
        """(port, status) of cluster ``chaos`` of our version, or None if it does not exist."""
        for line in (await run("pg_lsclusters", "--no-header")).splitlines():
            fields = line.split()
            if len(fields) >= 4 and fields[0] == self._version and fields[1] == CLUSTER:
                return fields[2], fields[3]
        return None

    async def _ctl(self, action: str, *options: str) -> None:
        cluster = await self._cluster()
        if cluster is None or cluster[0] != str(PORT):  # never act on another cluster
            raise ServerUnavailable(f"cluster {self._version}/{CLUSTER} is not on port {PORT}")
        try:
            await run(
                "pg_ctlcluster", "--skip-systemctl-redirect", self._version, CLUSTER, action,
                *options,
            )  # fmt: skip
        except CommandFailed as exc:
            if action == "stop" and "not running" in str(exc):
                return
            raise

    async def _wait_ready(self) -> None:
        await wait_for_port(PORT, f"PostgreSQL cluster {CLUSTER}")
        for _ in range(100):
            try:
                conn = await self._connect()
            except (OSError, asyncpg.PostgresError):  # starting up, or in recovery
                await asyncio.sleep(0.2)
                continue
            await conn.close()
            return
        raise ServerUnavailable(f"PostgreSQL cluster {CLUSTER} does not accept sessions")

    async def _connect(self) -> asyncpg.Connection:
        return await asyncpg.connect(
            host="127.0.0.1",
            port=PORT,
            user=USER,
            database="postgres",
            timeout=CONNECT_TIMEOUT_SECONDS,
        )

    async def _execute(self, statement: str) -> None:
        conn = await self._connect()
        try:
            await conn.execute(statement)
        finally:
            await conn.close()


def _newest_version() -> str:
    root = Path("/usr/lib/postgresql")
    installed = [p.name for p in root.glob("*") if (p / "bin" / "postgres").exists()]
    versions = sorted(installed, key=lambda v: [int(n) for n in v.split(".") if n.isdigit()])
    if not versions:
        raise ServerUnavailable("no PostgreSQL server installed under /usr/lib/postgresql")
    return versions[-1]
