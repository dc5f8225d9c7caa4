"""What the soak needs of the database server it owns, whichever it is.

The soak never touches the shared servers (PostgreSQL 5432, MariaDB 3306): it runs
a server of its own (``chaos.postgres``, ``chaos.mariadb``), which it may crash,
restart and cut connections of, with one fresh database per run.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol


class ServerUnavailable(RuntimeError):
    """The soak's own server cannot be created or started here (a tool or privilege missing)."""


class ChaosDatabase(Protocol):
    """A database server owned by the soak; ``backend`` is ``postgresql`` or ``mariadb``."""

    backend: str
    port: int

    async def start(self) -> None:
        """Create (if needed) and start the server; return once it answers."""
        ...

    async def create_database(self, name: str) -> None:
        """A fresh, empty database ``name``."""
        ...

    def url(self, name: str, port: int | None = None) -> str:
        """``DATABASE_URL`` of ``name``, through ``port`` (a proxy) when given."""
        ...

    async def terminate(self, client_ports: Iterable[int]) -> int:
        """End the server sessions whose client is one of ``client_ports``; how many ended."""
        ...

    async def crash(self) -> None:
        """Stop the server at once, as a crash would (no clean shutdown)."""
        ...

    async def start_again(self) -> None:
        """Start the server after ``crash``; return once it answers."""
        ...

    async def drop_database(self, name: str) -> None:
        """Drop ``name`` (its sessions are ended first)."""
        ...

    async def stop(self) -> None:
        """Leave the server as the soak found it (stopped if the soak started it)."""
        ...


def server(backend: str, home: Path) -> ChaosDatabase:
    """The soak's own server for ``backend``, its files under ``home``."""
    if backend == "postgresql":
        from chaos.postgres import ChaosPostgres

        return ChaosPostgres()
    if backend == "mariadb":
        from chaos.mariadb import ChaosMariaDB

        return ChaosMariaDB(home / "mariadb")
    raise ValueError(f"unknown backend {backend!r}: postgresql or mariadb")
