"""Run the server tools (``pg_ctlcluster``, ``mariadb-install-db``, ...) and wait for ports."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from pathlib import Path


class CommandFailed(RuntimeError):
    """A tool exited with a non-zero code; the message holds its output."""


async def run(*args: str, within: float = 120.0) -> str:
    """Run ``args`` and return its stdout; raise ``CommandFailed`` on a non-zero exit."""
    process = await asyncio.create_subprocess_exec(
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(within):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise CommandFailed(f"{' '.join(args)}: no exit within {within:.0f} s") from None
    if process.returncode != 0:
        text = (err or out).decode(errors="replace").strip()
        raise CommandFailed(f"{' '.join(args)} exited with {process.returncode}: {text}")
    return out.decode(errors="replace")


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


async def wait_for_port(port: int, what: str, within: float = 60.0) -> None:
    """Return once ``port`` accepts connections; ``TimeoutError`` naming ``what`` otherwise."""
    deadline = time.monotonic() + within
    while not await asyncio.to_thread(listening, port):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not listen on port {port} within {within:.0f} s")
        await asyncio.sleep(0.2)


def kill_leftover(pidfile: Path, program: str) -> None:
    """SIGKILL the process ``pidfile`` names if it is still ``program`` (an earlier run that
    did not get to clean up); remove the file."""
    try:
        pid = int(pidfile.read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        pidfile.unlink(missing_ok=True)
        return
    if program.encode() in cmdline:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _wait_gone(pid)
    pidfile.unlink(missing_ok=True)


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
