"""The soak's own MariaDB: a ``mariadbd`` of its own on port 3307 with its own data directory.

The data directory is made once (``mariadb-install-db``, root without a password on
loopback, as the shared server has) under the soak's home and kept for the next
run; the server runs as a child of the soak and is stopped when the soak ends. As
root, it runs as the ``mysql`` user, which then owns the directory.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

import aiomysql

from chaos.commands import kill_leftover, listening, run, wait_for_port
from chaos.database import ServerUnavailable

PORT = 3307
USER = "root"
CONNECT_TIMEOUT_SECONDS = 5
STOP_TIMEOUT_SECONDS = 30


class ChaosMariaDB:
    """A ``mariadbd`` on ``PORT`` whose files live in ``home``."""

    backend = "mariadb"
    port = PORT

    def __init__(self, home: Path) -> None:
        self.home = home
        self.datadir = home / "data"
        self.pidfile = home / "mariadbd.pid"
        self._process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        """Make the data directory if missing, then start the server."""
        for tool in ("mariadbd", "mariadb-install-db"):
            if shutil.which(tool) is None:
                raise ServerUnavailable(f"{tool} not found (Debian's mariadb-server)")
        kill_leftover(self.pidfile, "mariadbd")
        if listening(PORT):
            raise ServerUnavailable(f"port {PORT} is taken by another process")
        self.home.mkdir(parents=True, exist_ok=True)
        self._own(self.home)
        if not (self.datadir / "mysql").is_dir():
            await run(
                "mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}",
                *self._user_option(), "--auth-root-authentication-method=normal",
                "--skip-test-db",
            )  # fmt: skip
        await self.start_again()

    async def create_database(self, name: str) -> None:
        """``CREATE DATABASE name CHARACTER SET utf8mb4``."""
        await self._execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")

    def url(self, name: str, port: int | None = None) -> str:
        """``mysql+aiomysql://root@127.0.0.1:<port>/<name>``."""
        return f"mysql+aiomysql://{USER}@127.0.0.1:{port or PORT}/{name}"

    async def terminate(self, client_ports: Iterable[int]) -> int:
        """``KILL CONNECTION`` of every session whose client port is one of ``client_ports``."""
        hosts = {f"127.0.0.1:{port}" for port in client_ports}
        if not hosts:
            return 0
        conn = await self._connect()
        ended = 0
        try:
            async with conn.cursor() as cursor:
                await cursor.execute("SELECT ID, HOST FROM information_schema.PROCESSLIST")
                for session_id, host in await cursor.fetchall():
                    if host in hosts:
                        try:
                            await cursor.execute(f"KILL CONNECTION {int(session_id)}")
                            ended += 1
                        except aiomysql.Error:
                            pass  # it ended by itself meanwhile
        finally:
            conn.close()
        return ended

    async def crash(self) -> None:
        """SIGKILL the server: InnoDB recovers at the next start."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            await asyncio.to_thread(process.wait)
        self.pidfile.unlink(missing_ok=True)

    async def start_again(self) -> None:
        """Start the server; return once it accepts sessions."""
        self._process = await asyncio.to_thread(self._spawn)
        await wait_for_port(PORT, "mariadbd")
        for _ in range(50):
            try:
                await self._execute("SELECT 1")
                return
            except (OSError, aiomysql.Error):  # listening, not yet serving
                await asyncio.sleep(0.2)
        raise ServerUnavailable(f"mariadbd on port {PORT} does not accept sessions")

    def _spawn(self) -> subprocess.Popen[bytes]:
        with open(self.home / "mariadbd.log", "ab") as log:
            return subprocess.Popen(
                [
                    "mariadbd", "--no-defaults", f"--datadir={self.datadir}",
                    f"--port={PORT}", "--bind-address=127.0.0.1", "--skip-name-resolve",
                    f"--socket={self.home / 'mariadbd.sock'}", f"--pid-file={self.pidfile}",
                    "--innodb-buffer-pool-size=256M", "--max-connections=500",
                    *self._user_option(),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    async def drop_database(self, name: str) -> None:
        """``DROP DATABASE`` (sessions still on it are killed first)."""
        await self._execute(f"DROP DATABASE IF EXISTS `{name}`")

    async def stop(self) -> None:
        """SIGTERM the server and wait for its clean shutdown."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)

    def _user_option(self) -> list[str]:
        return ["--user=mysql"] if os.geteuid() == 0 else []

    def _own(self, path: Path) -> None:
        """As root, hand ``path`` to the ``mysql`` user the server runs as."""
        if os.geteuid() != 0:
            return
        try:
            mysql = pwd.getpwnam("mysql")
        except KeyError:
            raise ServerUnavailable("running as root, but there is no mysql user") from None
        os.chown(path, mysql.pw_uid, mysql.pw_gid)

    async def _connect(self) -> aiomysql.Connection:
        return await aiomysql.connect(
            host="127.0.0.1", port=PORT, user=USER, password="",
            connect_timeout=CONNECT_TIMEOUT_SECONDS, autocommit=True,
        )  # fmt: skip

    async def _execute(self, statement: str) -> None:
        conn = await self._connect()
        try:
            async with conn.cursor() as cursor:
                await cursor.execute(statement)
        finally:
            conn.close()
