"""A MariaDB of the test's own that speaks TLS only, for the database TLS tests.

``mariadb-install-db`` makes its data directory in a home of its own (``own_servers``);
``mariadbd`` listens on 127.0.0.1 on a free port with a server certificate of the run's
CA and ``require_secure_transport``: a client that got in spoke TLS. ``root`` has no
password, as on the shared server.
"""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass, field

import aiomysql

from app.demo.certificates import CertificateAuthority
from tests.integration.support.own_servers import (
    ServerHome,
    free_port,
    program,
    retried,
    stop,
    wait_listening,
)

USER = "root"


@dataclass
class TlsMariaDB:
    """The server; ``url(database, query)`` names one of its databases."""

    home: ServerHome
    ca: CertificateAuthority
    port: int = field(default_factory=free_port)
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> TlsMariaDB:
        """Make the data directory, write the certificate, start; return once it listens."""
        install, mariadbd = program("mariadb-install-db"), program("mariadbd", "/usr/sbin")
        data = self.home.path / "data"
        user = [f"--user={self.home.user}"] if self.home.user else []
        self.home.run(
            [
                install, "--no-defaults", f"--datadir={data}", *user,
                "--auth-root-authentication-method=normal", "--skip-test-db",
            ]
        )  # fmt: skip
        issued = self.ca.issue("mariadb-server", ("localhost", "127.0.0.1"))
        cert, key, ca = (self.home.path / n for n in ("server.crt", "server.key", "ca.pem"))
        cert.write_bytes(issued.cert.read_bytes())
        key.write_bytes(issued.key.read_bytes())
        ca.write_bytes(self.ca.cert.read_bytes())
        self.home.own(cert, key, ca)
        self._process = self.home.spawn(
            [
                mariadbd, "--no-defaults", f"--datadir={data}", f"--port={self.port}",
                "--bind-address=127.0.0.1", "--skip-name-resolve",
                f"--socket={self.home.path / 'mariadbd.sock'}",
                f"--pid-file={self.home.path / 'mariadbd.pid'}",
                f"--ssl-cert={cert}", f"--ssl-key={key}", f"--ssl-ca={ca}",
                "--require-secure-transport=ON", "--innodb-buffer-pool-size=64M", *user,
            ],
            "mariadbd.log",
        )  # fmt: skip
        wait_listening(self.port, self._process, "the TLS MariaDB")
        return self

    async def create_database(self, name: str) -> None:
        """``CREATE DATABASE name``, over TLS (the only way in)."""
        context = ssl.create_default_context(cafile=str(self.ca.cert))
        context.check_hostname = False
        conn = await retried(
            lambda: aiomysql.connect(
                host="127.0.0.1", port=self.port, user=USER, password="", ssl=context
            )
        )
        try:
            async with conn.cursor() as cursor:
                await cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        finally:
            conn.close()

    def url(self, database: str, query: str) -> str:
        """``mysql://root@127.0.0.1:<port>/<database>?<query>``."""
        return f"mysql://{USER}@127.0.0.1:{self.port}/{database}?{query}"

    def log(self) -> str:
        """The server's log so far."""
        return self.home.read("mariadbd.log")

    def stop(self) -> None:
        """Stop the server and remove its home."""
        stop(self._process)
        self.home.remove()
