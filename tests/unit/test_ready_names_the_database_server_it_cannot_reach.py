"""``/ready``'s database check names the server it could not use.

Contract: when ``SELECT 1`` fails, or gets no answer in time, the check's detail ends
with ``(at host:port)`` of the engine's URL (a driver's error may not name it: a host
that does not resolve was only ``gaierror: [Errno -2] Name or service not known``); a
database without a server (SQLite) adds nothing.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from sqlalchemy.engine import make_url

from app.monitoring import readiness


class _Engine:
    def __init__(self, url: str, error: BaseException | None) -> None:
        self.url = make_url(url)
        self.error = error

    def connect(self) -> Any:
        if self.error is not None:
            raise self.error
        return _Silent()


class _Silent:
    async def __aenter__(self) -> Any:
        await asyncio.sleep(60)

    async def __aexit__(self, *exc: object) -> None: ...


async def test_an_unresolvable_host_is_named() -> None:
    gone = socket.gaierror(-2, "Name or service not known")
    engine: Any = _Engine("postgresql+asyncpg://app@db.internal:5433/orders", gone)

    check = await readiness.database(engine, within=1.0)

    assert not check.ok
    assert check.detail == "gaierror: [Errno -2] Name or service not known (at db.internal:5433)"


async def test_a_silent_server_is_named() -> None:
    engine: Any = _Engine("mysql+aiomysql://root@db.internal/orders", None)

    check = await readiness.database(engine, within=0.1)

    assert check.detail == "no answer to SELECT 1 within 0.1s (at db.internal)"


async def test_sqlite_has_no_server_to_name() -> None:
    engine: Any = _Engine("sqlite+aiosqlite:///x.db", OSError("disk I/O error"))

    check = await readiness.database(engine, within=1.0)

    assert check.detail == "OSError: disk I/O error"
