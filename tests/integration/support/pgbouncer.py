"""A PgBouncer of the test's own in transaction mode, in front of the shared PostgreSQL.

Debian's ``pgbouncer`` (``.ci/services`` installs it), on a free port of 127.0.0.1,
``pool_mode = transaction`` and a few server connections per database and user, fewer
than its clients hold: server connections are shared between clients from one
transaction to the next. Trust authentication, as the server behind it has.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

import asyncpg
from sqlalchemy.engine import make_url

from tests.integration.support.databases import POSTGRES_SERVER
from tests.integration.support.own_servers import (
    ServerHome,
    free_port,
    program,
    stop,
    wait_listening,
)

POOL_SIZE = 3


@dataclass
class PgBouncer:
    """The pooler; ``url(database)`` names a database of the shared server through it."""

    home: ServerHome
    port: int = field(default_factory=free_port)
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> PgBouncer:
        """Write its configuration, start it; return once it listens."""
        server = make_url(POSTGRES_SERVER)
        users = self.home.path / "users.txt"
        users.write_text(f'"{server.username}" ""\n')
        config = self.home.path / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = host={server.host} port={server.port or 5432}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {users}\n"
            f"admin_users = {server.username}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {POOL_SIZE}\nmax_client_conn = 500\n"
            f"pidfile = {self.home.path / 'pgbouncer.pid'}\n"
        )
        self.home.own(users, config)
        self._process = self.home.spawn(
            [program("pgbouncer", "/usr/sbin"), str(config)], "pgbouncer.log"
        )
        wait_listening(self.port, self._process, "PgBouncer")
        return self

    def url(self, database: str) -> str:
        """``postgresql://postgres@127.0.0.1:<port>/<database>?pgbouncer=true``."""
        user = make_url(POSTGRES_SERVER).username
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}?pgbouncer=true"

    def admin(self, command: str) -> list[dict[str, str]]:
        """A ``SHOW`` of PgBouncer's admin console (``SHOW POOLS``), one dict per row. By
        ``psql``: the console speaks only the simple query protocol."""
        done = subprocess.run(
            [
                program("psql"), "-h", "127.0.0.1", "-p", str(self.port),
                "-U", str(make_url(POSTGRES_SERVER).username), "-d", "pgbouncer",
                "--no-align", "--field-separator=\t", "--pset=footer=off", "-c", command,
            ],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        header, *rows = done.stdout.splitlines()
        return [dict(zip(header.split("\t"), row.split("\t"), strict=True)) for row in rows]

    async def connect(self, database: str) -> asyncpg.Connection:
        """A plain asyncpg connection through the pooler, caching no statement."""
        return await asyncpg.connect(
            host="127.0.0.1",
            port=self.port,
            user=make_url(POSTGRES_SERVER).username,
            database=database,
            statement_cache_size=0,
        )

    def log(self) -> str:
        """The pooler's log so far."""
        return self.home.read("pgbouncer.log")

    def stop(self) -> None:
        """Stop it and remove its home."""
        stop(self._process)
        self.home.remove()
