"""For the servers a test starts for itself (a TLS PostgreSQL, a TLS MariaDB, PgBouncer):
a home folder the server's user may write, the process run as that user, and the wait
until it listens.

PostgreSQL, MariaDB and PgBouncer refuse to run as root; as root, each runs as its
Debian user (``postgres``, ``mysql``), and its home is then a folder of its own under
the system's temporary folder (pytest's, ``/tmp/pytest-of-root``, is closed to other
users), removed by ``ServerHome.remove``. As anyone else, the home is under the test's
``tmp_path``.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from app.demo.broker import free_port as free_port

START_TIMEOUT_SECONDS = 60
T = TypeVar("T")


class ServerMissing(Exception):
    """The server's program, or the user it runs as, is not on this machine."""


@dataclass(frozen=True)
class ServerHome:
    """A folder a server's process owns, and the user it runs as (None: this process's)."""

    path: Path
    user: str | None

    @classmethod
    def make(cls, under: Path, user: str) -> ServerHome:
        """A new home for a server that runs as ``user`` when this process is root."""
        if os.geteuid() != 0:
            path = under / f"{user}-home"
            path.mkdir(parents=True)
            return cls(path, None)
        try:
            account = pwd.getpwnam(user)
        except KeyError:
            raise ServerMissing(f"running as root, but there is no {user} user") from None
        path = Path(tempfile.mkdtemp(prefix=f"eo-test-{user}-"))
        os.chown(path, account.pw_uid, account.pw_gid)
        return cls(path, user)

    def own(self, *paths: Path, mode: int = 0o600) -> None:
        """Hand ``paths`` (files the server must read, its private key) to its user."""
        for path in paths:
            path.chmod(mode)
            if self.user is not None:
                account = pwd.getpwnam(self.user)
                os.chown(path, account.pw_uid, account.pw_gid)

    def run(self, args: Sequence[str]) -> str:
        """Run a tool to its end as the server's user; its output, or ``RuntimeError``."""
        done = subprocess.run(
            args, **self._as_user(), capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} exited with {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def spawn(self, args: Sequence[str], log_name: str) -> subprocess.Popen[bytes]:
        """Start the server as its user, its output in ``log_name`` in the home."""
        with open(self.path / log_name, "ab") as log:
            if self.user is not None:
                self.own(self.path / log_name)
            return subprocess.Popen(
                args,
                **self._as_user(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _as_user(self) -> dict[str, Any]:
        if self.user is None:
            return {}
        account = pwd.getpwnam(self.user)
        return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}

    def read(self, name: str) -> str:
        """The file ``name`` of the home (a server's log), empty while it does not exist."""
        path = self.path / name
        return path.read_text(errors="replace") if path.exists() else ""

    def remove(self) -> None:
        """Delete the home (root's only: a home under ``tmp_path`` goes with it)."""
        if self.user is not None:
            shutil.rmtree(self.path, ignore_errors=True)


def program(name: str, *folders: str) -> str:
    """The path of ``name``, on PATH or in one of ``folders``; ``ServerMissing`` otherwise."""
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(folders))
    if found is None:
        raise ServerMissing(f"{name} not found")
    return found


def wait_listening(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    """Return once ``port`` on 127.0.0.1 accepts connections; ``RuntimeError`` if ``process``
    exits or ``START_TIMEOUT_SECONDS`` pass first."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before it listened")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on port {port} within {START_TIMEOUT_SECONDS} s")


async def retried(connect: Callable[[], Awaitable[T]]) -> T:
    """``connect()``, again while the server just started still refuses (up to 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return await connect()
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def stop(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM ``process`` and wait for it (SIGKILL after 30 s)."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
