"""A PostgreSQL cluster of the test's own that speaks TLS only, for the database TLS tests.

``initdb`` makes it in a home of its own (``own_servers``); it listens on 127.0.0.1 on a
free port with ``ssl=on`` and a server certificate of the run's CA naming ``localhost``
only (so ``127.0.0.1`` is a name it does not hold), and its ``pg_hba.conf`` takes
``hostssl`` connections alone: a client that got in spoke TLS. ``postgres`` logs in
without a password; any other role with its password (``scram-sha-256``).
"""

from __future__ import annotations

import glob
import ssl
import subprocess
from dataclasses import dataclass, field

import asyncpg

from app.demo.certificates import CertificateAuthority
from tests.integration.support.own_servers import (
    ServerHome,
    ServerMissing,
    free_port,
    program,
    retried,
    stop,
    wait_listening,
)

USER = "postgres"
SERVER_NAME = "localhost"  # the only name in the server's certificate


def _bin(name: str) -> str:
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    return program(name, *reversed(folders))


@dataclass
class TlsPostgres:
    """The cluster; ``url(database, query)`` names one of its databases."""

    home: ServerHome
    ca: CertificateAuthority
    port: int = field(default_factory=free_port)
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> TlsPostgres:
        """initdb, write the certificate and the configuration, start; return once it listens."""
        initdb, postgres = _bin("initdb"), _bin("postgres")
        data = self.home.path / "data"
        self.home.run([initdb, "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8"])
        issued = self.ca.issue("postgres-server", (SERVER_NAME,))
        cert, key = data / "server.crt", data / "server.key"
        cert.write_bytes(issued.cert.read_bytes())
        key.write_bytes(issued.key.read_bytes())
        self.home.own(cert, key)
        hba = data / "pg_hba.conf"
        hba.write_text(
            "local all all trust\n"
            "hostssl all postgres 127.0.0.1/32 trust\n"
            "hostssl all all 127.0.0.1/32 scram-sha-256\n"
            "host all all 127.0.0.1/32 reject\n"
        )
        self._process = self.home.spawn(
            [
                postgres, "-D", str(data), "-p", str(self.port), "-k", str(self.home.path),
                "-c", "listen_addresses=127.0.0.1", "-c", "ssl=on",
                "-c", "ssl_cert_file=server.crt", "-c", "ssl_key_file=server.key",
                "-c", "fsync=off", "-c", "max_connections=100",
            ],
            "postgres.log",
        )  # fmt: skip
        wait_listening(self.port, self._process, "the TLS PostgreSQL")
        return self

    async def create_database(self, name: str) -> None:
        """``CREATE DATABASE name``, over TLS (the only way in)."""
        await self.execute(f'CREATE DATABASE "{name}"')

    async def execute(self, statement: str) -> None:
        """Run ``statement`` as ``postgres`` in database ``postgres``, over TLS."""
        context = ssl.create_default_context(cafile=str(self.ca.cert))
        conn = await retried(
            lambda: asyncpg.connect(
                host=SERVER_NAME, port=self.port, user=USER, database="postgres", ssl=context
            )
        )
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    def url(self, database: str, query: str, host: str = SERVER_NAME) -> str:
        """``postgresql://postgres@<host>:<port>/<database>?<query>``."""
        return f"postgresql://{USER}@{host}:{self.port}/{database}?{query}"

    def log(self) -> str:
        """The server's log so far."""
        return self.home.read("postgres.log")

    def stop(self) -> None:
        """Stop the server and remove its home."""
        stop(self._process)
        self.home.remove()


__all__ = ["ServerMissing", "TlsPostgres"]
