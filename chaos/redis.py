"""The soak's own Redis: a ``redis-server`` child on port 6380, no persistence.

The soak flushes it and kills it; it comes back empty, as a Redis without
persistence does after a crash. The shared Redis on 6379 is never touched.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

from redis.asyncio import Redis

from chaos.commands import kill_leftover, listening, wait_for_port
from chaos.database import ServerUnavailable

PORT = 6380


class ChaosRedis:
    """``redis-server`` on ``PORT``; its pid file and log under ``home``."""

    def __init__(self, home: Path, log_path: Path) -> None:
        self.pidfile = home / "redis.pid"
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``REDIS_URL`` for the workers."""
        return f"redis://127.0.0.1:{PORT}/0"

    async def start(self) -> None:
        """Start the server (again); return once it answers."""
        if shutil.which("redis-server") is None:
            raise ServerUnavailable("redis-server not found")
        kill_leftover(self.pidfile, "redis-server")
        if listening(PORT):
            raise ServerUnavailable(f"port {PORT} is taken by another process")
        self._process = await asyncio.to_thread(self._spawn)
        await wait_for_port(PORT, "redis-server", within=20)

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.pidfile.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(
                [
                    "redis-server", "--port", str(PORT), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--daemonize", "no",
                    "--pidfile", str(self.pidfile),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    async def flush(self) -> int:
        """``FLUSHALL``; how many keys were forgotten."""
        client = Redis.from_url(self.url, socket_connect_timeout=2, socket_timeout=5)
        try:
            keys = int(await client.dbsize())
            await client.flushall()
        finally:
            await client.aclose()
        return keys

    async def kill(self) -> None:
        """SIGKILL the server."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            await asyncio.to_thread(process.wait)
        self.pidfile.unlink(missing_ok=True)

    async def stop(self) -> None:
        """Stop the server for good (nothing in it is worth a clean shutdown)."""
        await self.kill()
